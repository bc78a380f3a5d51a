// The program tree: graph breaks, live intermediates, replay with verification, re-run
// entries, detach, threads.
#include <boost/test/unit_test.hpp>

#include <thread>

#include "jit/compile.h"
#include "jit/explain.h"

using namespace kiln;

namespace {

int g_host_calls = 0;

// Host code compares a value read with item(): a re-run function.
Tensor item_branch(Tensor x) {
    ++g_host_calls;
    float s = x.sum().item<float>();
    if (s > 0) return x * 2;
    return x * s;
}

int g_flip = 0;
Tensor not_deterministic(Tensor x) {
    Tensor y = (g_flip++ % 2) ? x + 2 : x * 2;
    if (y.sum() > 0) return y;
    return -y;
}

Tensor keeps_intermediates(Tensor x) {
    Tensor a = exp(x), b = a * 3, c = b + 1;
    if (c.sum() > 0) return a + b;  // a and b are still alive at the break
    return a - b;
}

Tensor with_softmax(Tensor x) { return x.softmax(0) * 2; }

}  // namespace

BOOST_AUTO_TEST_SUITE(jit_program)

BOOST_AUTO_TEST_CASE(live_intermediates_become_segment_outputs) {
    jit::reset();
    std::vector<size_t> outputs;
    auto f = compile(keeps_intermediates, {.backend = jit::BackendFn([&](const jit::Graph& g, std::span<const Tensor>) -> jit::CompiledFn {
                                               outputs.push_back(g.outputs().size());
                                               return [&g](std::span<const Tensor> in) { return jit::interpret(g, in); };
                                           })});
    Tensor x = randn({6});
    BOOST_CHECK(allclose(f(x), keeps_intermediates(x)));
    BOOST_CHECK(allclose(f(x), keeps_intermediates(x)));
    BOOST_REQUIRE_GE(outputs.size(), 2u);
    BOOST_CHECK_GE(outputs[0], 3u);  // a, b and the condition (at least)
}

BOOST_AUTO_TEST_CASE(item_makes_fn_rerun_and_stays_correct) {
    jit::reset();
    auto f = compile(item_branch, {.backend = "eager"});
    Tensor x = randn({8});
    g_host_calls = 0;
    for (int i = 0; i < 3; ++i) {
        BOOST_CHECK(allclose(f(x), item_branch(x)));
        BOOST_CHECK(allclose(f(-x), item_branch(-x)));
    }
    BOOST_CHECK_EQUAL(g_host_calls, 12);  // fn's host code runs on every call
    auto e = jit::explain_compiled(f);
    BOOST_CHECK(e.rerun);
    BOOST_CHECK_EQUAL(jit::counters().compiles, 1);
    BOOST_CHECK(e.break_reasons.at(0).location.find("test_program.cpp") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(replay_detects_a_function_that_is_not_deterministic) {
    jit::reset();
    auto f = compile(not_deterministic, {.backend = "eager", .name = "not_deterministic"});
    Tensor x = abs(randn({4})) + 1;
    g_flip = 0;
    f(x);  // records x * 2 and the branch y.sum() > 0
    BOOST_CHECK_EXCEPTION(f(-x), Error, [](const Error& e) {
        return std::string(e.what()).find("not deterministic") != std::string::npos;
    });
}

BOOST_AUTO_TEST_CASE(detach_inside_fn_is_recorded_not_lifted) {
    jit::reset();
    auto f = compile(with_softmax, {.backend = "eager"});
    for (int i = 0; i < 3; ++i) {
        Tensor x = randn({5});
        BOOST_CHECK(allclose(f(x), with_softmax(x)));
    }
    BOOST_CHECK_EQUAL(jit::counters().compiles, 1);
}

BOOST_AUTO_TEST_CASE(nested_compiled_functions_inline) {
    jit::reset();
    auto inner = compile([](Tensor x) { return sin(x) * 2; }, {.backend = "eager"});
    auto outer = compile([&inner](Tensor x) { return inner(x) + 1; }, {.backend = "eager"});
    Tensor x = randn({3});
    BOOST_CHECK(allclose(outer(x), sin(x) * 2 + 1));
    BOOST_CHECK(allclose(outer(x), sin(x) * 2 + 1));
    BOOST_CHECK_EQUAL(jit::counters().compiles, 1);  // inner was recorded into outer's graph
}

BOOST_AUTO_TEST_CASE(eight_threads_share_one_compiled_function) {
    jit::reset();
    auto f = compile([](Tensor x, Tensor y) {
        Tensor z = x * y + 1;
        if (z.sum() > 0) return z * 2;
        return z - 1;
    }, {.backend = "eager"});
    constexpr int kThreads = 8, kCalls = 50;
    std::vector<Tensor> xs, ys, expect;
    for (int t = 0; t < kThreads; ++t) {
        xs.push_back(randn({16}));
        ys.push_back(randn({16}));
        Tensor z = xs[t] * ys[t] + 1;
        expect.push_back(z.sum().item<float>() > 0 ? z * 2 : z - 1);
    }
    std::atomic<int> wrong = 0;
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
        threads.emplace_back([&, t] {
            for (int i = 0; i < kCalls; ++i)
                if (!allclose(f(xs[t], ys[t]), expect[t])) ++wrong;
        });
    for (auto& th : threads) th.join();
    BOOST_CHECK_EQUAL(wrong.load(), 0);
    BOOST_CHECK_EQUAL(jit::counters().compiles, 1);
    BOOST_CHECK_LE(jit::counters().graphs_compiled, 3);  // root + at most one child per outcome
}

BOOST_AUTO_TEST_SUITE_END()
