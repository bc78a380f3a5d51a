// The compile contract against classes an independent fuzzer found (random streams across
// breaks, a wrong gradient, returned arguments), as checks that take the device and the
// compile options: tests/jit/test_soundness_streams.cpp runs them on the CPU under every
// backend, tests/cuda/test_cuda_soundness.cpp on the GPU, reduce-overhead included.
#pragma once
#include <boost/test/unit_test.hpp>

#include <string>

#include "kiln.h"

namespace kiln_test::streams {

using namespace kiln;

inline bool same(const Tensor& a, const Tensor& b) {
    return a.shape() == b.shape() && a.dtype() == b.dtype() && allclose(a.cpu(), b.cpu(), 1e-5, 1e-6);
}

inline Tensor copy_of(const Tensor& t) {
    Tensor c = t.detach().clone();
    return t.requires_grad() ? c.requires_grad_() : c;
}

// Runs `f` eagerly and compiled on the same inputs from the same generator state; checks
// results, the generator's offset after the call, and (when x needs grad) x's gradient.
template <class F, class C>
void check_call(F& f, C& c, const Tensor& x0, const std::string& what) {
    Tensor xe = copy_of(x0), xc = copy_of(x0);
    RngState start = get_rng_state();
    Tensor want = f(xe);
    RngState after_eager = get_rng_state();
    set_rng_state(start);
    Tensor got = c(xc);
    RngState after_compiled = get_rng_state();
    BOOST_TEST_CONTEXT(what) {
        BOOST_CHECK(same(got, want));
        BOOST_CHECK_EQUAL(after_compiled.offset, after_eager.offset);
        BOOST_CHECK_EQUAL(got.requires_grad(), want.requires_grad());
        if (x0.requires_grad()) {
            want.sum().backward();
            got.sum().backward();
            BOOST_CHECK(same(xc.grad(), xe.grad()));
        }
    }
    set_rng_state(after_eager);
}

inline std::string label(const CompileOptions& o, const std::string& what) { return o.backend.name + "/" + o.mode + " " + what; }

// Class 1a: a call that takes a new branch outcome replays fn; the random ops before the
// break must not draw twice (the hit's partial run is undone).
inline void random_ops_before_a_new_branch_outcome_draw_once(Device dev, const CompileOptions& options) {
    auto f = [](Tensor x) {
        Tensor r = randn_like(x);
        if ((x + r * 0).sum() > 0) return x + r;
        return x - r * 2;
    };
    jit::reset();
    manual_seed(7);
    auto c = compile(f, options);
    Tensor one = ones({6}).to(dev);
    check_call(f, c, one, label(options, "record"));
    check_call(f, c, -one, label(options, "new outcome"));
    check_call(f, c, one, label(options, "hit"));
    check_call(f, c, -one, label(options, "hit other"));
}

// Class 1b: a recording call whose input needs grad draws once.
inline void random_ops_with_grad_draw_once_on_the_recording_call(Device dev, const CompileOptions& options) {
    auto f = [](Tensor x) { return (x * randn_like(x)).sin() + rand({5}, {.device = x.device()}); };
    jit::reset();
    manual_seed(11);
    auto c = compile(f, options);
    for (int i = 0; i < 3; ++i) check_call(f, c, randn({5}).to(dev).requires_grad_(), label(options, "call " + std::to_string(i)));
}

// Class 1c: a random op whose result is unused still advances the stream, before and
// after a break, on hits too, with and without grad.
inline void unused_random_results_still_draw(Device dev, const CompileOptions& options) {
    auto f = [](Tensor x) {
        Tensor unused = randn({7}, {.device = x.device()}) * x.sum();
        Tensor y = x * 2;
        if (y.sum() > 0) y = y + 1;
        Tensor unused2 = rand({3, 3}, {.device = x.device()});
        return y + randn_like(x);
    };
    jit::reset();
    manual_seed(3);
    auto c = compile(f, options);
    for (int i = 0; i < 3; ++i)
        for (bool grad : {false, true})
            check_call(f, c, (ones({4}) * (i == 1 ? -1.0 : 1.0)).to(dev).requires_grad_(grad),
                       label(options, "call " + std::to_string(i) + (grad ? " grad" : "")));
}

// Class 4: fn mutates an argument and returns it, or a view of it: the result is the
// argument (a view of it), so a later write to the argument shows in the result.
inline void outputs_that_alias_arguments_stay_aliases(Device dev, const CompileOptions& options) {
    auto returns_arg = [](Tensor x) {
        x.add_(ones_like(x));
        return x;
    };
    auto returns_view = [](Tensor x) {
        x.mul_(2);
        return x.slice(0, 1, 3);
    };
    auto returns_view_unmutated = [](Tensor x) { return x.transpose(0, 1); };
    jit::reset();
    auto c1 = compile(returns_arg, options);
    auto c2 = compile(returns_view, options);
    auto c3 = compile(returns_view_unmutated, options);
    for (int call = 0; call < 4; ++call) {
        BOOST_TEST_CONTEXT(label(options, "call " + std::to_string(call))) {
            Tensor x = randn({4, 3}).to(dev);
            Tensor r1 = c1(x);
            BOOST_CHECK(r1.same(x));
            Tensor y = randn({4, 3}).to(dev);
            Tensor r2 = c2(y);
            y.fill_(5);
            BOOST_CHECK(same(r2, full({2, 3}, 5)));
            Tensor z = randn({4, 3}).to(dev);
            Tensor r3 = c3(z);
            z.fill_(-2);
            BOOST_CHECK(same(r3, full({3, 4}, -2)));
        }
    }
}

// Class 4, harder: views returned across a break, of a captured tensor, from a re-run
// entry (item()), detached, and under dynamic sizes (the view's sizes are symbolic).
inline void aliased_outputs_across_breaks_captures_reruns_and_sizes(Device dev, const CompileOptions& options) {
    Tensor w = randn({3, 4}).to(dev);
    auto across_break = [](Tensor x) {
        Tensor v = x.transpose(0, 1);
        if (x.sum() > 0) x.add_(ones_like(x));
        return v;
    };
    auto of_capture = [w](Tensor x) { return std::make_tuple(w.slice(1, 1, 3), x * 2); };
    auto rerun = [](Tensor x) {
        double m = x.amax().item<double>();
        x.mul_(m > 0 ? 2.0 : 3.0);
        return x.slice(0, 0, 1);
    };
    auto detached = [](Tensor x) { return x.detach(); };
    auto reshaped = [](Tensor x) {
        x.add_(ones_like(x));
        return x.reshape({-1});
    };
    jit::reset();
    CompileOptions dynamic = options;
    dynamic.dynamic = jit::Dynamic::always;
    auto c1 = compile(across_break, options);
    auto c2 = compile(of_capture, options);
    auto c3 = compile(rerun, options);
    auto c4 = compile(detached, options);
    auto c5 = compile(reshaped, dynamic);
    for (int call = 0; call < 4; ++call) {
        BOOST_TEST_CONTEXT(label(options, "call " + std::to_string(call))) {
            double sign = call % 2 ? -1.0 : 1.0;
            Tensor x = (rand({3, 4}) + 0.5).to(dev) * sign, xe = x.clone();
            Tensor v = c1(x), ve = across_break(xe);
            BOOST_CHECK(same(v, ve) && same(x, xe));
            x.fill_(7);
            BOOST_CHECK(same(v, full({4, 3}, 7)));
            auto [wv, twice] = c2(x);
            w.fill_(call);
            BOOST_CHECK(same(wv, full({3, 2}, call)));
            Tensor y = (rand({2, 4}) + 0.5).to(dev) * sign, ye = y.clone();
            Tensor r = c3(y), re = rerun(ye);
            BOOST_CHECK(same(r, re) && same(y, ye));
            y.fill_(-1);
            BOOST_CHECK(same(r, full({1, 4}, -1)));
            Tensor d = c4(y);
            BOOST_CHECK(!d.requires_grad());
            y.fill_(4);
            BOOST_CHECK(same(d, full({2, 4}, 4)));
            Tensor z = randn({call + 2, 3}).to(dev), ze = z.clone();
            Tensor flat = c5(z), flat_e = reshaped(ze);
            BOOST_CHECK(same(flat, flat_e));
            z.fill_(9);
            BOOST_CHECK(same(flat, full({(call + 2) * 3}, 9)));
        }
    }
}

// Class 2: an int64 cast carries no gradient (PyTorch never lets an integer tensor require
// grad), so a float result rebuilt from it adds nothing to x's gradient, eager or compiled.
inline void int_casts_carry_no_gradient_beside_a_broadcast_where(Device dev, const CompileOptions& options) {
    auto f = [](Tensor x) {
        Tensor i = x.to(int64);
        return where(i > 0.0, x, x.sum({0}, true)) + i.to(float64);
    };
    auto reference = [](Tensor x) {  // the same function with the cast's values as constants
        Tensor i = x.detach().to(int64);
        return where(i > 0.0, x, x.sum({0}, true)) + i.to(float64);
    };
    jit::reset();
    auto c = compile(f, options);
    for (int call = 0; call < 3; ++call) {
        Tensor v = (randn({4, 5}) * 3).to(float64).to(dev);
        Tensor xr = v.clone().requires_grad_(), xe = v.clone().requires_grad_(), xc = v.clone().requires_grad_();
        BOOST_TEST_CONTEXT(label(options, "call " + std::to_string(call))) {
            BOOST_CHECK(!xe.to(int64).requires_grad());
            reference(xr).sum().backward();
            f(xe).sum().backward();
            c(xc).sum().backward();
            BOOST_CHECK(same(xe.grad(), xr.grad()));
            BOOST_CHECK(same(xc.grad(), xr.grad()));
        }
    }
}

// Class 2, the other half: an input whose only path to a float output goes through an
// int64/bool cast gets no gradient at all (undefined, as eager), not zeros.
inline void inputs_reaching_outputs_only_through_int_casts_get_no_gradient(Device dev, const CompileOptions& options) {
    auto f = [](Tensor x, Tensor y) {
        Tensor flag = ((x * 4.0).to(int64) + 1).to(boolean);
        return std::make_tuple(y * 2.0 + flag.to(float32) * 1.5, flag);
    };
    jit::reset();
    auto c = compile(f, options);
    for (int call = 0; call < 3; ++call) {
        BOOST_TEST_CONTEXT(label(options, "call " + std::to_string(call))) {
            Tensor xv = randn({3, 4}).to(dev), yv = randn({3, 4}).to(dev);
            Tensor xe = xv.clone().requires_grad_(), ye = yv.clone().requires_grad_();
            Tensor xc = xv.clone().requires_grad_(), yc = yv.clone().requires_grad_();
            auto [oe, fe] = f(xe, ye);
            auto [oc, fc] = c(xc, yc);
            BOOST_CHECK(same(oc, oe) && same(fc, fe));
            oe.sum().backward();
            oc.sum().backward();
            BOOST_CHECK(!xe.grad().defined());
            BOOST_CHECK(!xc.grad().defined());
            BOOST_CHECK(same(yc.grad(), ye.grad()));
        }
    }
}

}  // namespace kiln_test::streams

// Every check above, once: the CPU and CUDA test files expand it into their test cases.
#define KILN_STREAMS_CHECKS(X)                                 \
    X(random_ops_before_a_new_branch_outcome_draw_once)        \
    X(random_ops_with_grad_draw_once_on_the_recording_call)    \
    X(unused_random_results_still_draw)                        \
    X(outputs_that_alias_arguments_stay_aliases)               \
    X(aliased_outputs_across_breaks_captures_reruns_and_sizes) \
    X(int_casts_carry_no_gradient_beside_a_broadcast_where)     \
    X(inputs_reaching_outputs_only_through_int_casts_get_no_gradient)
