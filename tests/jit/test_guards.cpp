// Guards: what makes a call hit an entry, and what makes it record a new one.
#include <boost/test/unit_test.hpp>

#include "autograd/node.h"
#include "jit/compile.h"
#include "jit/explain.h"
#include "nn/layers.h"

using namespace kiln;

namespace {

Tensor twice_plus(Tensor x, Tensor y) { return x * 2 + y; }

std::string joined(const std::vector<std::string>& lines) {
    std::string s;
    for (const auto& l : lines) s += l + "\n";
    return s;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(jit_guards)

BOOST_AUTO_TEST_CASE(dtype_rank_requires_grad_and_grad_mode_each_recompile) {
    jit::reset();
    auto f = compile(twice_plus, {.backend = "eager", .dynamic = jit::Dynamic::never});
    Tensor x = randn({4}), y = randn({4});
    f(x, y);
    f(x, y);
    BOOST_CHECK_EQUAL(jit::counters().compiles, 1);
    Tensor xd = x.to(float64), yd = y.to(float64);
    BOOST_CHECK(allclose(f(xd, yd), twice_plus(xd, yd)));  // dtype
    BOOST_CHECK_EQUAL(jit::counters().compiles, 2);
    Tensor x2 = randn({2, 4});
    BOOST_CHECK(allclose(f(x2, y), twice_plus(x2, y)));  // rank
    BOOST_CHECK_EQUAL(jit::counters().compiles, 3);
    Tensor xg = randn({4}, {.requires_grad = true});
    f(xg, y);  // requires_grad
    BOOST_CHECK_EQUAL(jit::counters().compiles, 4);
    {
        NoGradGuard no_grad;
        f(x, y);  // grad mode
    }
    BOOST_CHECK_EQUAL(jit::counters().compiles, 5);
    BOOST_CHECK_EQUAL(jit::counters().recompiles, 4);
    BOOST_CHECK(jit::counters().recompile_reasons.back().find("grad mode") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(guards_print_readably) {
    jit::reset();
    auto f = compile(twice_plus, {.backend = "eager", .arg_names = {"x", "y"}});
    f(randn({3}, {.requires_grad = true}), randn({3}));
    auto e = jit::explain_compiled(f);
    std::string g = joined(e.guards.at(0));
    BOOST_CHECK(g.find("x: float32[3] cpu requires_grad") != std::string::npos);
    BOOST_CHECK(g.find("y: float32[3] cpu\n") != std::string::npos);
    BOOST_CHECK(g.find("grad_mode: enabled") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(aliased_arguments_are_guarded) {
    jit::reset();
    auto f = compile(twice_plus, {.backend = "eager"});
    Tensor x = randn({4}), y = randn({4});
    BOOST_CHECK(allclose(f(x, x), twice_plus(x, x)));
    BOOST_CHECK(allclose(f(x, y), twice_plus(x, y)));  // not the same tensor any more
    BOOST_CHECK_EQUAL(jit::counters().compiles, 2);
}

BOOST_AUTO_TEST_CASE(closures_are_lifted_to_graph_inputs) {
    jit::reset();
    Tensor w = randn({3});
    std::string graph;
    auto f = compile([&w](Tensor x) { return x * w + 1; },
                     {.backend = jit::BackendFn([&](const jit::Graph& g, std::span<const Tensor> ex) -> jit::CompiledFn {
                          graph = g.tabular();
                          BOOST_CHECK_EQUAL(ex.size(), 2u);  // x and the lifted w
                          return [&g](std::span<const Tensor> in) { return jit::interpret(g, in); };
                      })});
    Tensor x = randn({3});
    BOOST_CHECK(allclose(f(x), x * w + 1));
    BOOST_CHECK(graph.find("lifted") != std::string::npos);
    w.mul_(2);  // in-place updates (an optimizer step) are seen by the lifted input
    BOOST_CHECK(allclose(f(x), x * w + 1));
}

BOOST_AUTO_TEST_CASE(module_parameters_lifted_and_module_identity_guarded) {
    jit::reset();
    nn::Linear a(4, 3), b(4, 3);
    auto f = compile([](nn::Linear& m, Tensor x) { return relu(m.forward(x)); }, {.backend = "eager"});
    Tensor x = randn({2, 4});
    BOOST_CHECK(allclose(f(a, x), relu(a.forward(x))));
    BOOST_CHECK(allclose(f(b, x), relu(b.forward(x))));  // another module: another entry
    BOOST_CHECK(allclose(f(a, x), relu(a.forward(x))));
    BOOST_CHECK_EQUAL(jit::counters().compiles, 2);
    BOOST_CHECK(jit::counters().recompile_reasons.back().find("different object") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(compile_module_forward_and_backward) {
    jit::reset();
    auto model = nn::sequential(nn::Linear(4, 8), nn::ReLU(), nn::Linear(8, 2));
    auto f = compile(*model, {.backend = "eager"});
    for (int i = 0; i < 2; ++i) {
        Tensor x = randn({5, 4});
        Tensor out = f(x);
        BOOST_CHECK(allclose(out, model->forward(x)));
        for (Tensor p : model->parameters()) p.zero_grad();
        out.sum().backward();
        std::vector<Tensor> compiled_grads;
        for (Tensor p : model->parameters()) compiled_grads.push_back(p.grad()), p.zero_grad();
        model->forward(x).sum().backward();
        auto params = model->parameters();
        for (size_t k = 0; k < params.size(); ++k) BOOST_CHECK(allclose(compiled_grads[k], params[k].grad(), 1e-5, 1e-6));
    }
    BOOST_CHECK_EQUAL(jit::counters().compiles, 1);
}

BOOST_AUTO_TEST_CASE(cache_size_limit_falls_back_to_eager_with_one_warning) {
    jit::reset();
    auto f = compile(twice_plus, {.backend = "eager", .dynamic = jit::Dynamic::never, .cache_size_limit = 2});
    std::ostringstream captured;
    std::streambuf* old = std::cerr.rdbuf(captured.rdbuf());
    for (int64_t n : {2, 3, 4, 5, 6, 4, 5}) {
        Tensor x = randn({n}), y = randn({n});
        BOOST_CHECK(allclose(f(x, y), twice_plus(x, y)));
    }
    Tensor x = randn({2}), y = randn({2});
    BOOST_CHECK(allclose(f(x, y), twice_plus(x, y)));  // old entries are kept
    std::cerr.rdbuf(old);
    std::string log = captured.str();
    size_t warnings = 0;
    for (size_t p = log.find("kiln: warning"); p != std::string::npos; p = log.find("kiln: warning", p + 1)) ++warnings;
    BOOST_CHECK_EQUAL(warnings, 1u);
    BOOST_CHECK_EQUAL(jit::counters().compiles, 2);
    BOOST_CHECK_EQUAL(jit::counters().eager_fallbacks, 5);
    BOOST_CHECK_EQUAL(jit::counters().cache_hits, 1);
}

BOOST_AUTO_TEST_CASE(dynamic_always_and_never) {
    jit::reset();
    auto always = compile(twice_plus, {.backend = "eager", .dynamic = jit::Dynamic::always});
    for (int64_t n : {3, 7, 11}) {
        Tensor x = randn({n, 2}), y = randn({n, 2});
        BOOST_CHECK(allclose(always(x, y), twice_plus(x, y)));
    }
    BOOST_CHECK_EQUAL(jit::counters().compiles, 1);
    jit::reset();
    auto never = compile(twice_plus, {.backend = "eager", .dynamic = jit::Dynamic::never});
    for (int64_t n : {3, 7, 11}) never(randn({n}), randn({n}));
    BOOST_CHECK_EQUAL(jit::counters().compiles, 3);
}

BOOST_AUTO_TEST_CASE(sizes_zero_and_one_stay_specialized) {
    jit::reset();
    auto f = compile(twice_plus, {.backend = "eager"});
    f(randn({5}), randn({5}));
    f(randn({6}), randn({6}));  // now symbolic
    BOOST_CHECK_EQUAL(jit::counters().compiles, 2);
    Tensor x1 = randn({1}), y1 = randn({1});
    BOOST_CHECK(allclose(f(x1, y1), twice_plus(x1, y1)));  // 1 does not hit s0
    BOOST_CHECK_EQUAL(jit::counters().compiles, 3);
    f(randn({9}), randn({9}));
    BOOST_CHECK_EQUAL(jit::counters().compiles, 3);
}

BOOST_AUTO_TEST_CASE(symbolic_reshape_and_mean_follow_the_sizes) {
    // Composites say where the sizes in their attributes come from (mean's 1/n, the
    // reshape of unsqueeze): one symbolic entry serves every size.
    jit::reset();
    auto f = compile([](Tensor x) { return x.mean() + x.sum({1}).unsqueeze(1) + x.reshape({-1, 3}); }, {.backend = "eager"});
    for (int64_t n : {4, 6, 9, 13}) {
        Tensor x = randn({n, 3});
        BOOST_CHECK(allclose(f(x), x.mean() + x.sum({1}).unsqueeze(1) + x, 1e-5, 1e-6));
    }
    BOOST_CHECK_EQUAL(jit::counters().compiles, 2);
    // Sizes read as numbers pin their symbol: still exact, one recording per size.
    jit::reset();
    auto g = compile([](Tensor x) { return x.reshape({x.numel()}).mean() + x.sum({1}).reshape({x.size(0), 1}); },
                     {.backend = "eager"});
    for (int64_t n : {4, 6, 9, 13}) {
        Tensor x = randn({n, 3});
        BOOST_CHECK(allclose(g(x), x.reshape({x.numel()}).mean() + x.sum({1}).reshape({n, 1}), 1e-5, 1e-6));
    }
    BOOST_CHECK_EQUAL(jit::counters().compiles, 4);
}

BOOST_AUTO_TEST_CASE(reset_numbers_entries_from_one_again) {
    auto f = compile([](Tensor x) { return x * x.sum().item<float>(); }, {.backend = "eager"});
    f(randn({3}));
    f(randn({3}, {.dtype = float64}));  // a second entry
    jit::reset();
    f(randn({3}));
    jit::ExplainOutput e = jit::explain_compiled(f);
    BOOST_TEST_REQUIRE(e.rerun_reasons.size() == 1u);
    BOOST_TEST(e.rerun_reasons[0].rfind("entry 1:", 0) == 0u, e.rerun_reasons[0]);
}

BOOST_AUTO_TEST_SUITE_END()
