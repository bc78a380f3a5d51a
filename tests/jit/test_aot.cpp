// AOT autograd: joint graphs, the min-cut partition and compiled backward (docs/aot.md).
#include <boost/test/unit_test.hpp>

#include "jit/aot/aot.h"
#include "jit/fake.h"
#include "kiln.h"

using namespace kiln;

namespace {


Tensor cos_cos(Tensor x) { return cos(cos(x)); }
Tensor gelu_chain(Tensor x) { return 0.5 * x * (1.0 + tanh(0.7978845608 * (x + 0.044715 * x * x * x))); }

bool grads_equal(const Tensor& a, const Tensor& b) { return allclose(a, b, 1e-5, 1e-6); }

// Calls after the first run the compiled halves (the first does too: the case below).
template <class F, class... A>
void warm_up(F& f, A... args) {
    f(args...);
    BOOST_TEST(f(args...).grad_fn()->name() == "CompiledFunctionBackward");
}

}  // namespace

BOOST_AUTO_TEST_SUITE(aot)

// out = compiled cos_cos(x): its gradient comes from the compiled backward node and equals
// eager's.
void check_compiled_cos_cos_gradient(const Tensor& out, Tensor& x) {
    BOOST_TEST(out.grad_fn()->name() == "CompiledFunctionBackward");
    out.sum().backward();
    Tensor compiled_grad = x.grad();
    x.zero_grad();
    cos_cos(x).sum().backward();
    BOOST_TEST(grads_equal(compiled_grad, x.grad()));
}

// The first call records (on fake tensors by default, on real ones with KILN_FAKE_TRACE=0),
// compiles, and runs the compiled halves: its output's gradient comes from the compiled
// backward node already, not from an eager tape of the recording, and equals eager's.
BOOST_AUTO_TEST_CASE(the_first_call_runs_the_compiled_halves_both_ways) {
    for (bool fake : {true, false}) {
        jit::FakeTraceScope scope(fake);
        for (const char* backend : {"aot_eager", "inductor"}) {
            BOOST_TEST_CONTEXT(backend << (fake ? ", shape-only" : ", real tensors")) {
                jit::reset();
                auto f = compile(cos_cos, {.backend = backend});
                Tensor x = randn({5, 5, 5}, {.requires_grad = true});
                Tensor out = f(x);
                BOOST_REQUIRE(out.grad_fn());
                check_compiled_cos_cos_gradient(out, x);
            }
        }
    }
}

BOOST_AUTO_TEST_CASE(cos_cos_saves_one_tensor_and_matches_eager_gradients) {
    auto f = compile(cos_cos, {.backend = "aot_eager"});
    Tensor x = randn({5, 5, 5}, {.requires_grad = true});
    f(x);
    Tensor out = f(x);
    check_compiled_cos_cos_gradient(out, x);
    jit::aot::MemoryReport m = jit::aot::latest_memory_report();
    BOOST_TEST(m.eager.size() == 2u);
    BOOST_TEST(m.compiled.size() == 1u);
    BOOST_TEST(m.compiled_bytes() == 5u * 5 * 5 * 4);
    BOOST_TEST(out.grad_fn()->saved_tensors().size() == 0u);  // freed by backward
}

BOOST_AUTO_TEST_CASE(gelu_chain_saves_at_most_half_of_eager) {
    auto f = compile(gelu_chain, {.backend = "aot_eager"});
    Tensor x = randn({1000}, {.requires_grad = true});
    warm_up(f, x);
    f(x).sum().backward();
    Tensor g = x.grad();
    x.zero_grad();
    gelu_chain(x).sum().backward();
    BOOST_TEST(grads_equal(g, x.grad()));
    jit::aot::MemoryReport m = jit::aot::latest_memory_report();
    BOOST_TEST(m.compiled.size() >= 1u);
    BOOST_TEST(m.compiled_bytes() * 2 <= m.eager_bytes());
}

BOOST_AUTO_TEST_CASE(every_differentiable_op_matches_eager_gradients) {
    // Unary and binary ops of the table, one compiled function each.
#define KILN_UNARY(name, ...)                                                                 \
    {                                                                                          \
        auto fn = [](Tensor x) { return kiln::name(x) * x; };                                  \
        auto f = compile(fn, {.backend = "aot_eager"});                                        \
        Tensor x = (rand({4, 3}) + 0.5).requires_grad_();                                      \
        warm_up(f, x);                                                                         \
        f(x).sum().backward();                                                                 \
        Tensor g = x.grad();                                                                   \
        x.zero_grad();                                                                         \
        fn(x).sum().backward();                                                                \
        BOOST_TEST(grads_equal(g, x.grad()), #name);                                           \
    }
#define KILN_BINARY(name, ...)                                                                 \
    {                                                                                          \
        auto fn = [](Tensor x, Tensor y) { return kiln::name(x, y) + kiln::name(x, 2.0); };    \
        auto f = compile(fn, {.backend = "aot_eager"});                                        \
        Tensor x = (rand({4, 3}) + 0.5).requires_grad_();                                      \
        Tensor y = (rand({3}) + 0.5).requires_grad_();                                         \
        warm_up(f, x, y);                                                                      \
        f(x, y).sum().backward();                                                              \
        Tensor gx = x.grad(), gy = y.grad();                                                   \
        x.zero_grad();                                                                         \
        y.zero_grad();                                                                         \
        fn(x, y).sum().backward();                                                             \
        BOOST_TEST(grads_equal(gx, x.grad()), #name);                                          \
        BOOST_TEST(grads_equal(gy, y.grad()), #name);                                          \
    }
#include "tensor/ops.def"
}

BOOST_AUTO_TEST_CASE(mlp_saves_matmul_inputs_and_updates_parameters_like_eager) {
    Tensor w1 = (randn({8, 16}) * 0.3).requires_grad_(), w2 = (randn({16, 4}) * 0.3).requires_grad_();
    Tensor b1 = zeros({16}, {.requires_grad = true});
    auto mlp = [&](Tensor x) { return matmul(relu(matmul(x, w1) + b1), w2).softmax(1).sum({0}); };
    auto f = compile(mlp, {.backend = "aot_eager"});
    Tensor x = randn({32, 8});
    warm_up(f, x);
    f(x).sum().backward();
    std::vector<Tensor> compiled = {w1.grad(), w2.grad(), b1.grad()};
    for (Tensor* p : {&w1, &w2, &b1}) p->zero_grad();
    mlp(x).sum().backward();
    BOOST_TEST(grads_equal(compiled[0], w1.grad()));
    BOOST_TEST(grads_equal(compiled[1], w2.grad()));
    BOOST_TEST(grads_equal(compiled[2], b1.grad()));
    jit::aot::MemoryReport m = jit::aot::latest_memory_report();
    BOOST_TEST(m.compiled_bytes() <= m.eager_bytes());
    bool saves_x = false;
    for (const auto& s : m.compiled) saves_x = saves_x || s.shape == Shape{32, 8};
    BOOST_TEST(saves_x);  // the matmul input is saved, not recomputed
}

BOOST_AUTO_TEST_SUITE_END()

namespace {

Tensor walk_through(std::map<std::string, Tensor> inputs) {
    Tensor x = inputs["x"], y = inputs["y"];
    x = x.cos().cos();
    if (x.mean() > 0.5) x = x / 1.1;
    return x * y;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(aot_integration)

BOOST_AUTO_TEST_CASE(walk_through_with_a_break_matches_eager_forward_and_gradients) {
    auto f = compile(walk_through, {.backend = "aot_eager"});
    for (double shift : {0.0, 3.0}) {  // both outcomes of the branch
        Tensor x = (randn({10}) + shift).requires_grad_(), y = randn({10}, {.requires_grad = true});
        for (int call = 0; call < 2; ++call) {
            Tensor out = f({{"x", x}, {"y", y}});
            out.sum().backward();
            Tensor gx = x.grad(), gy = y.grad();
            x.zero_grad();
            y.zero_grad();
            Tensor ref = walk_through({{"x", x}, {"y", y}});
            ref.sum().backward();
            BOOST_TEST(allclose(out, ref));
            BOOST_TEST(grads_equal(gx, x.grad()));
            BOOST_TEST(grads_equal(gy, y.grad()));
            x.zero_grad();
            y.zero_grad();
        }
    }
    BOOST_TEST(jit::explain_compiled(f).graph_count >= 2);
}

BOOST_AUTO_TEST_CASE(module_parameters_get_gradients_and_sgd_step_matches_eager) {
    manual_seed(7);
    nn::Linear compiled_layer(6, 3), eager_layer(6, 3);
    {
        NoGradGuard no_grad;  // in-place on leaves that require grad: as in PyTorch
        eager_layer.weight.copy_(compiled_layer.weight);
        eager_layer.bias.copy_(compiled_layer.bias);
    }
    auto loss_fn = [](nn::Linear& layer, Tensor x) { return (relu(layer(x)) * 2.0).sum(); };
    auto f = compile(loss_fn, {.backend = "aot_eager"});
    optim::SGD opt_c(compiled_layer.parameters(), 0.1, 0.9), opt_e(eager_layer.parameters(), 0.1, 0.9);
    for (int step = 0; step < 3; ++step) {
        Tensor x = randn({4, 6});
        opt_c.zero_grad();
        opt_e.zero_grad();
        Tensor lc = f(compiled_layer, x);
        Tensor le = loss_fn(eager_layer, x);
        lc.backward();
        le.backward();
        if (step > 0) BOOST_TEST(lc.grad_fn()->name() == "CompiledFunctionBackward");
        BOOST_TEST(allclose(lc, le, 1e-5, 1e-6));
        BOOST_TEST(grads_equal(compiled_layer.weight.grad(), eager_layer.weight.grad()));
        BOOST_TEST(grads_equal(compiled_layer.bias.grad(), eager_layer.bias.grad()));
        opt_c.step();
        opt_e.step();
        BOOST_TEST(allclose(compiled_layer.weight, eager_layer.weight, 1e-5, 1e-6));
    }
}

BOOST_AUTO_TEST_CASE(explain_shows_saved_tensors_eager_vs_compiled) {
    auto f = compile(cos_cos, {.backend = "aot_eager"});
    Tensor x = randn({5, 5, 5}, {.requires_grad = true});
    f(x);
    f(x).sum().backward();
    std::ostringstream os;
    os << jit::explain_compiled(f);
    BOOST_TEST(os.str().find("saved for backward, eager: 2 tensors, 1000 bytes") != std::string::npos, os.str());
    BOOST_TEST(os.str().find("saved for backward, compiled: 1 tensors, 500 bytes") != std::string::npos);
}

// Explain's saved-tensor report and the backend's notes are kept beside the graph; a graph
// that dies and a new one allocated at its address must not share them. Seen on the GPU
// machine's host: a seed's explain printed an earlier function's saved tensors.
BOOST_AUTO_TEST_CASE(explain_never_shows_a_dead_graphs_saved_tensors) {
    Tensor x = randn({5, 5}, {.requires_grad = true}), y = randn({5, 5});
    for (int i = 0; i < 20; ++i) {
        {
            auto trained = compile(cos_cos, {.backend = "aot_eager"});
            trained(x).sum().backward();
            std::ostringstream os;
            os << jit::explain_compiled(trained);
            BOOST_TEST_REQUIRE(os.str().find("Saved for backward") != std::string::npos);
        }
        auto plain = compile(cos_cos, {.backend = "aot_eager"});
        plain(y);  // no input needs a gradient: nothing is saved
        std::ostringstream os;
        os << jit::explain_compiled(plain);
        BOOST_TEST_REQUIRE(os.str().find("Saved for backward") == std::string::npos, "round " << i << ":\n" << os.str());
    }
}

BOOST_AUTO_TEST_SUITE_END()
