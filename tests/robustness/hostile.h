// Shared by tests/robustness (each case runs in its own process, see cmake/tests.cmake):
// expect a kiln::Error that names the op and the values, and run one function eagerly and
// under every compile() backend.
#pragma once
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "kiln.h"

namespace hostile {

inline const std::vector<std::string> kBackends = {"eager", "aot_eager", "inductor"};

// Runs fn; passes only if it throws kiln::Error whose message holds every part.
template <class Fn>
void expect_error(Fn&& fn, std::initializer_list<std::string> parts) {
    try {
        fn();
    } catch (const kiln::Error& e) {
        std::string what = e.what();
        for (const std::string& part : parts)
            BOOST_TEST((what.find(part) != std::string::npos), "message \"" << what << "\" lacks \"" << part << "\"");
        return;
    }
    BOOST_FAIL("expected a kiln::Error mentioning \"" << *parts.begin() << "\", got none");
}

// Same shape, dtype and values (NaN where the other has NaN).
inline void expect_same(const kiln::Tensor& got, const kiln::Tensor& want, const std::string& where) {
    BOOST_TEST_CONTEXT(where) {
        BOOST_TEST(got.shape() == want.shape());
        BOOST_TEST(got.dtype() == want.dtype());
        if (got.shape() != want.shape()) return;
        std::vector<double> g = got.detach().to_vector<double>(), w = want.detach().to_vector<double>();
        for (size_t i = 0; i < g.size(); ++i) {
            if (std::isnan(w[i])) BOOST_TEST(std::isnan(g[i]), "element " << i << ": " << g[i] << " vs NaN");
            else if (std::isinf(w[i])) BOOST_TEST(g[i] == w[i], "element " << i << ": " << g[i] << " vs " << w[i]);
            else BOOST_TEST(std::abs(g[i] - w[i]) <= 1e-5 * (1 + std::abs(w[i])), "element " << i << ": " << g[i] << " vs " << w[i]);
        }
    }
}

// fn(x) under every backend, twice (recording, then the cached graph), matches eager fn(x).
inline void expect_compiled_matches(std::function<kiln::Tensor(kiln::Tensor)> fn, const kiln::Tensor& x) {
    kiln::Tensor want = fn(x);
    for (const std::string& backend : kBackends) {
        auto compiled = kiln::compile(fn, {.backend = backend});
        expect_same(compiled(x), want, backend + ", first call");
        expect_same(compiled(x), want, backend + ", second call");
    }
}

// fn(x) raises the same kiln::Error eagerly and under every backend, and a compiled
// function keeps working afterwards (the recording that failed left nothing behind).
inline void expect_compiled_error(std::function<kiln::Tensor(kiln::Tensor)> fn, const kiln::Tensor& x,
                                  std::initializer_list<std::string> parts) {
    expect_error([&] { fn(x); }, parts);
    for (const std::string& backend : kBackends) {
        BOOST_TEST_CONTEXT(backend) {
            auto compiled = kiln::compile(fn, {.backend = backend});
            expect_error([&] { compiled(x); }, parts);
            auto fine = kiln::compile([](kiln::Tensor t) { return t * 2.0; }, {.backend = backend});
            expect_same(fine(kiln::tensor({1.0, 2.0})), kiln::tensor({2.0, 4.0}), backend + " after an error");
        }
    }
}

}  // namespace hostile
