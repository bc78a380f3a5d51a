// Compiled code holds intermediates only while it needs them: the graph runners and the
// interpreter drop each value after its last reader (codegen::detail::release_plan,
// jit::release_plan). Measured with the CPU pool's live bytes, against eager on the same
// function: a chain of matmuls (each output a stored buffer) forward, and a training step.
#include <boost/test/unit_test.hpp>

#include <iostream>

#include "kiln.h"
#include "jit/aot/aot.h"
#include "jit/backends.h"
#include "tensor/storage.h"

using namespace kiln;

namespace {

// The most CPU bytes live at once while `f` runs, above what was live before it.
template <class F>
size_t peak_bytes_of(F&& f) {
    size_t before = pool_stats().live_bytes;
    pool_reset_peak();
    f();
    return pool_stats().peak_live_bytes - before;
}

Tensor chain(Tensor x, Tensor w) {
    for (int i = 0; i < 8; ++i) x = tanh(matmul(x, w));  // 8 stored [256, 256] values, 256 KiB each
    return x.sum();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(memory)

BOOST_AUTO_TEST_CASE(compiled_forward_holds_no_more_than_eager) {
    Tensor x = randn({256, 256}) * 0.1, w = randn({256, 256}) * 0.1;
    size_t eager = peak_bytes_of([&] { (void)chain(x, w); });
    BOOST_TEST(eager > 0u);
    for (const char* backend : {"eager", "aot_eager", "inductor"}) {
        BOOST_TEST_CONTEXT(backend) {
            auto f = compile(chain, {.backend = backend});
            (void)f(x, w);  // record and compile outside the measurement
            size_t compiled = peak_bytes_of([&] { (void)f(x, w); });
            // Eager keeps about two [256, 256] values at once; keeping all eight would be 4x.
            BOOST_TEST(compiled <= eager + 256 * 256 * 4, "compiled " << compiled << " bytes, eager " << eager);
        }
    }
}

BOOST_AUTO_TEST_CASE(a_compiled_training_step_holds_no_more_than_eager) {
    Tensor x = randn({256, 256}) * 0.1;
    Tensor w = (randn({256, 256}) * 0.1).requires_grad_();
    auto step = [&](auto& f) {
        w.zero_grad();
        f(x, w).backward();
    };
    auto eager_fn = [](Tensor a, Tensor b) { return chain(a, b); };
    size_t eager = peak_bytes_of([&] { step(eager_fn); });
    for (const char* backend : {"aot_eager", "inductor"}) {
        BOOST_TEST_CONTEXT(backend) {
            auto f = compile(chain, {.backend = backend});
            step(f);
            size_t compiled = peak_bytes_of([&] { step(f); });
            // The backward graph recomputes what the forward did not save just before its
            // first reader (aot::backward_order), and the scheduler does not pull it into an
            // earlier kernel it shares nothing with; recomputing all up front held 2x eager.
            BOOST_TEST(compiled <= eager + 256 * 256 * 4, "compiled " << compiled << " bytes, eager " << eager);
            std::cout << "memory: " << backend << " training step peak " << compiled << " bytes, eager " << eager << "\n";
        }
    }
}

// A compiled backward returns every parameter's gradient at once. A leaf without a .grad
// takes the gradient's buffer when nothing else holds it (autograd/node.cpp, can_take), as
// PyTorch's AccumulateGrad does; cloning each held two copies of all gradients at the end of
// backward. A gradient that something else holds (saved state, the caller's tensor) is copied.
BOOST_AUTO_TEST_CASE(leaves_take_gradients_nothing_else_holds_and_copy_the_others) {
    // Parameters dominate, as in a ResNet at 32x32: 8 [512, 512] weights (1 MiB each).
    std::vector<Tensor> ws;
    for (int i = 0; i < 8; ++i) ws.push_back((randn({512, 512}) * 0.05).requires_grad_());
    Tensor x = randn({4, 512});
    auto net = [](Tensor h, std::vector<Tensor> weights) {
        for (const Tensor& w : weights) h = tanh(matmul(h, w));
        return h.sum();
    };
    const size_t grads_bytes = 8 * 512 * 512 * 4;
    for (const char* backend : {"eager", "aot_eager", "inductor"}) {
        BOOST_TEST_CONTEXT(backend) {
            auto f = compile(net, {.backend = backend});
            for (Tensor& w : ws) w.zero_grad();
            f(x, ws).backward();  // record and compile outside the measurement
            for (Tensor& w : ws) w.zero_grad();
            Tensor loss = f(x, ws);
            size_t peak = peak_bytes_of([&] { loss.backward(); });
            // One copy of the gradients, plus small activations; two copies would be 16 MiB.
            BOOST_TEST(peak < grads_bytes + grads_bytes / 4, "backward peak " << peak << " bytes, gradients " << grads_bytes);
            for (const Tensor& w : ws) BOOST_TEST(w.grad().defined());
        }
    }
    // A gradient held elsewhere is copied: y = x + 1 passes the caller's tangent through, and
    // writing the leaf's .grad afterwards must not change the tangent.
    Tensor leaf = randn({3}).requires_grad_();
    Tensor tangent = ones({3});
    (leaf + 1.0).backward(tangent);
    leaf.grad().add_(ones({3}));
    BOOST_TEST(allclose(tangent, ones({3})));
    // A second backward accumulates into the taken buffer.
    Tensor w = randn({3}).requires_grad_();
    (w * 2.0).sum().backward();
    (w * 2.0).sum().backward();
    BOOST_TEST(allclose(w.grad(), full({3}, 4.0)));
}

// Taking a gradient must never alias two leaves' .grad, or a .grad and the caller's tangent:
// x + y passes the tangent to both (the same tensor), (x + y) * 2 gives both one new tensor,
// across backends, sizes that change (dynamic entries) and a graph break.
BOOST_AUTO_TEST_CASE(taken_gradients_never_alias_each_other_or_the_tangent) {
    auto pass = [](Tensor x, Tensor y) { return x + y; };
    auto doubled = [](Tensor x, Tensor y) {
        Tensor s = (x + y) * 2.0;
        return s.sum() > 0 ? s : s * 1.0;  // a break on the data
    };
    for (const char* backend : {"eager", "aot_eager", "inductor"}) {
        auto f = compile(pass, {.backend = backend});
        auto g = compile(doubled, {.backend = backend});
        for (int64_t n : {4, 6, 9}) {
            BOOST_TEST_CONTEXT(backend << ", n = " << n) {
                Tensor x = randn({n}).requires_grad_(), y = randn({n}).requires_grad_();
                Tensor tangent = ones({n});
                f(x, y).backward(tangent);
                x.grad().add_(ones({n}));
                BOOST_TEST(allclose(y.grad(), ones({n})));
                BOOST_TEST(allclose(tangent, ones({n})));
                Tensor u = randn({n}).requires_grad_(), v = randn({n}).requires_grad_();
                g(u, v).backward(tangent);
                u.grad().add_(ones({n}));
                BOOST_TEST(allclose(v.grad(), full({n}, 2.0)));
                BOOST_TEST(allclose(u.grad(), full({n}, 3.0)));
            }
        }
    }
}

// Without retain_graph the AOT node hands its saved tensors to the compiled backward
// (jit::InputHandOver), whose runner moves them into its own table and frees each after its
// last reader; with retain_graph it keeps them for a second backward.
BOOST_AUTO_TEST_CASE(the_compiled_backward_takes_the_saved_tensors_unless_the_graph_is_retained) {
    Tensor x = randn({64, 64}) * 0.1;
    Tensor w = (randn({64, 64}) * 0.1).requires_grad_();
    std::vector<size_t> offered;  // per backward call: how many inputs were handed over
    auto spy = [&](const jit::Graph& graph, std::span<const Tensor>) -> jit::CompiledFn {
        auto g = std::make_shared<jit::Graph>(graph);
        return jit::aot::aot_compile(g, {}, [&](std::shared_ptr<const jit::Graph> half, std::span<const Tensor>) -> jit::CompiledFn {
            return [&, half](std::span<const Tensor> in) {
                bool backward_half = half->nodes()[half->num_inputs() - 1].source == "tangent";
                if (backward_half) offered.push_back(jit::take_handed_over(in).size());
                return jit::interpret(*half, in);
            };
        });
    };
    auto f = compile(chain, {.backend = jit::Backend(spy)});
    Tensor eager_grad = [&] {
        Tensor v = w.detach().requires_grad_();
        chain(x, v).backward();
        return v.grad();
    }();
    Tensor loss = f(x, w);
    loss.backward(Tensor(), /*retain_graph=*/true);
    loss.backward();
    BOOST_TEST_REQUIRE(offered.size() == 2u);
    BOOST_TEST(offered[0] == 0u);  // retained: nothing handed over
    BOOST_TEST(offered[1] > 0u);   // the last backward: the saved tensors and the tangent
    BOOST_TEST(allclose(w.grad(), eager_grad * 2.0, 1e-4, 1e-5));
    BOOST_CHECK_THROW(loss.backward(), Error);  // now they are gone

    // Through the real backends: a retained graph backs twice, equal to eager twice over.
    for (const char* backend : {"aot_eager", "inductor"}) {
        auto g = compile(chain, {.backend = backend});
        w.zero_grad();
        Tensor l = g(x, w);
        l.backward(Tensor(), /*retain_graph=*/true);
        l.backward();
        BOOST_TEST(allclose(w.grad(), eager_grad * 2.0, 1e-4, 1e-5), backend);
        BOOST_CHECK_THROW(l.backward(), Error);
    }

    // The runners take what was handed over and leave other calls' inputs alone.
    jit::GraphBuilder gb;
    jit::ValueMeta meta{{64, 64}, {-1, -1}};
    int a = gb.placeholder("a", meta, "argument");
    int s = gb.call(OpId::sin, {}, {a}, meta, false);
    std::shared_ptr<const jit::Graph> graph = gb.build({s});
    auto plan = jit::release_plan(*graph);
    auto compiled = jit::backend_compile("inductor", graph, std::vector<Tensor>{x});
    for (int runner = 0; runner < 2; ++runner) {
        auto run = [&](std::span<const Tensor> in) { return runner == 0 ? jit::interpret(*graph, in, &plan) : compiled(in); };
        std::vector<Tensor> kept = {x.clone()};
        Tensor want = run(kept)[0];
        BOOST_TEST(kept[0].defined());
        std::vector<Tensor> given = {x.clone()};
        Tensor got;
        {
            jit::InputHandOver hand_over(given);
            got = run(given)[0];
        }
        BOOST_TEST(!given[0].defined(), "runner " << runner << " did not take its input");
        BOOST_TEST(allclose(got, want));
    }
}

BOOST_AUTO_TEST_CASE(dropped_values_are_dead_across_views_in_place_breaks_new_sizes_and_backward) {
    // What release_plan drops must never be read again: an intermediate read later through a
    // view (by a matmul), a view of an intermediate returned, an argument written in place, a
    // data-dependent branch (two graphs), sizes that change (a dynamic entry), and backward.
    auto fn = [](Tensor x, Tensor w, Tensor acc) {
        Tensor a = tanh(x * 2.0);
        Tensor v = a.t();           // a view of an intermediate
        Tensor h = matmul(v, w);    // read through the view by a host kernel
        acc.add_(a.sum({0}));       // an argument written in place
        Tensor out = h.sum() > 0 ? h * 2.0 : h - 1.0;  // a graph break
        return std::vector<Tensor>{out, v.narrow(0, 1, 2)};  // a view of the intermediate returned
    };
    for (const char* backend : {"eager", "aot_eager", "inductor"}) {
        BOOST_TEST_CONTEXT(backend) {
            auto f = compile(fn, {.backend = backend});
            int call = 0;
            for (int64_t n : {5, 7, 9, 5, 12}) {
                for (double sign : {1.0, -1.0}) {  // both branches
                    Tensor x = randn({n, 3}) * sign, w = randn({n, 4}).abs() * sign, acc = randn({3});
                    Tensor xe = x.clone().requires_grad_(), we = w.clone().requires_grad_(), acc_e = acc.clone();
                    Tensor xc = x.clone().requires_grad_(), wc = w.clone().requires_grad_(), acc_c = acc.clone();
                    std::vector<Tensor> want = fn(xe, we, acc_e), got = f(xc, wc, acc_c);
                    BOOST_TEST_CONTEXT("call " << call++ << ", n = " << n) {
                        BOOST_REQUIRE(got.size() == 2u);
                        BOOST_TEST(allclose(got[0], want[0], 1e-5, 1e-5));
                        BOOST_TEST(allclose(got[1], want[1], 1e-5, 1e-5));
                        BOOST_TEST(allclose(acc_c, acc_e, 1e-5, 1e-6));
                        (want[0].sum() + want[1].sum() * 3.0).backward();
                        (got[0].sum() + got[1].sum() * 3.0).backward();
                        BOOST_TEST(allclose(xc.grad(), xe.grad(), 1e-4, 1e-5));
                        BOOST_TEST(allclose(wc.grad(), we.grad(), 1e-4, 1e-5));
                    }
                }
            }
        }
    }
}

BOOST_AUTO_TEST_SUITE_END()
