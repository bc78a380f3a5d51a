// Shared by the tensor tests: a float64 reference tensor (plain row-major std::vector),
// random inputs, input layouts that make kiln's kernels take their strided paths, and
// the comparison of a kiln result with a reference.
#pragma once
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "kiln.h"

namespace kiln_test {

using kiln::Shape;
using kiln::Tensor;

// The reference: values in row-major order, computed in double by the tests' own loops.
struct Ref {
    Shape shape;
    std::vector<double> v;
};

inline std::string str(const Shape& s) {
    std::ostringstream os;
    kiln::operator<<(os, s);
    return os.str();
}

inline int64_t numel(const Shape& s) {
    int64_t n = 1;
    for (int64_t d : s) n *= d;
    return n;
}

// Row-major multi-index of a flat position, and back.
inline std::vector<int64_t> unravel(int64_t flat, const Shape& s) {
    std::vector<int64_t> idx(s.size());
    for (int64_t d = int64_t(s.size()) - 1; d >= 0; --d) {
        idx[d] = s[d] ? flat % s[d] : 0;
        flat = s[d] ? flat / s[d] : 0;
    }
    return idx;
}
// Flat position in `s` of the index `idx` of a (right-aligned) broadcast shape.
inline int64_t ravel_broadcast(const std::vector<int64_t>& idx, const Shape& s) {
    int64_t flat = 0, lead = int64_t(idx.size()) - int64_t(s.size());
    for (size_t d = 0; d < s.size(); ++d) flat = flat * s[d] + (s[d] == 1 ? 0 : idx[lead + d]);
    return flat;
}
inline Shape broadcast(const Shape& a, const Shape& b) {
    size_t n = std::max(a.size(), b.size());
    Shape out(n);
    for (size_t i = 0; i < n; ++i) {
        int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
        int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
        out[i] = da == 1 ? db : da;
    }
    return out;
}

// out[i] = f(a[i'], b[i'']) with NumPy broadcasting.
inline Ref zip(const Ref& a, const Ref& b, const std::function<double(double, double)>& f) {
    Ref out{broadcast(a.shape, b.shape), {}};
    for (int64_t i = 0; i < numel(out.shape); ++i) {
        auto idx = unravel(i, out.shape);
        out.v.push_back(f(a.v[ravel_broadcast(idx, a.shape)], b.v[ravel_broadcast(idx, b.shape)]));
    }
    return out;
}
inline Ref map(const Ref& a, const std::function<double(double)>& f) {
    Ref out{a.shape, {}};
    for (double x : a.v) out.v.push_back(f(x));
    return out;
}

inline std::mt19937_64& rng() {
    static std::mt19937_64 engine(20240601);
    return engine;
}
// Uniform values in [lo, hi], rounded to float so that float32 inputs hold them exactly.
inline Ref random_ref(const Shape& shape, double lo, double hi) {
    std::uniform_real_distribution<double> u(lo, hi);
    Ref r{shape, {}};
    for (int64_t i = 0; i < numel(shape); ++i) r.v.push_back(double(float(u(rng()))));
    return r;
}
inline Ref random_ints(const Shape& shape, int64_t lo, int64_t hi) {
    std::uniform_int_distribution<int64_t> u(lo, hi);
    Ref r{shape, {}};
    for (int64_t i = 0; i < numel(shape); ++i) r.v.push_back(double(u(rng())));
    return r;
}

inline Tensor make(const Ref& r, kiln::DType dt = kiln::float32) {
    return kiln::tensor(r.v, r.shape.empty() ? Shape{} : r.shape, {.dtype = dt});
}

// The same values in a layout that is not plainly contiguous.
enum class Layout { contiguous, transposed, strided, offset };
inline const char* layout_name(Layout l) {
    switch (l) {
        case Layout::contiguous: return "contiguous";
        case Layout::transposed: return "transposed";
        case Layout::strided: return "strided";
        case Layout::offset: return "offset";
    }
    return "?";
}
inline Tensor make(const Ref& r, Layout layout, kiln::DType dt = kiln::float32) {
    int64_t rank = int64_t(r.shape.size());
    if (layout == Layout::contiguous || rank == 0) return make(r, dt);
    if (layout == Layout::transposed && rank >= 2) {
        // Store the last two dims swapped, then view them swapped back.
        Ref t{r.shape, std::vector<double>(r.v.size())};
        std::swap(t.shape[rank - 1], t.shape[rank - 2]);
        for (int64_t i = 0; i < numel(r.shape); ++i) {
            auto idx = unravel(i, r.shape);
            std::swap(idx[rank - 1], idx[rank - 2]);
            t.v[ravel_broadcast(idx, t.shape)] = r.v[i];
        }
        return make(t, dt).transpose(-1, -2);
    }
    if (layout == Layout::strided || layout == Layout::transposed) {
        // Every other element of a last dim twice as long; the gaps hold junk.
        Ref big{r.shape, {}};
        big.shape.back() *= 2;
        for (double x : r.v) big.v.insert(big.v.end(), {x, 999.0});
        return make(big, dt).slice(-1, 0, big.shape.back(), 2);
    }
    // offset: rows 1.. of a tensor with one junk row in front.
    Ref big{r.shape, std::vector<double>(size_t(numel(r.shape) / std::max<int64_t>(r.shape[0], 1)), -999.0)};
    big.shape[0] += 1;
    big.v.insert(big.v.end(), r.v.begin(), r.v.end());
    return make(big, dt).slice(0, 1, big.shape[0]);
}

// Elementwise |got - want| <= atol + rtol * |want|; NaN matches NaN, inf matches inf.
inline void check_close(const Tensor& got, const Ref& want, double rtol, double atol, const std::string& what) {
    BOOST_TEST_CONTEXT(what) {
        BOOST_TEST(str(got.shape()) == str(want.shape));
        if (got.shape() != want.shape) return;
        std::vector<double> g = got.to(kiln::float64).to_vector<double>();
        int64_t bad = 0, first = -1;
        for (size_t i = 0; i < g.size(); ++i) {
            double w = want.v[i];
            bool ok = std::isnan(w) ? std::isnan(g[i])
                    : std::isinf(w) ? g[i] == w
                                    : std::abs(g[i] - w) <= atol + rtol * std::abs(w);
            if (!ok && bad++ == 0) first = int64_t(i);
        }
        BOOST_TEST(bad == 0, bad << " of " << g.size() << " elements differ; first at flat index " << first << ": got "
                                 << (first >= 0 ? g[first] : 0) << ", want " << (first >= 0 ? want.v[first] : 0));
    }
}
// Exact comparison, for integer and bool results.
inline void check_equal(const Tensor& got, const Ref& want, const std::string& what) { check_close(got, want, 0, 0, what); }

}  // namespace kiln_test
