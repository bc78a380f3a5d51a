// The compile contract against classes an independent fuzzer found (random streams across
// breaks, a wrong gradient, wrong values, returned arguments): every draw and the
// generator's state after each call equal eager's; outputs that alias an argument stay
// views of it. Each case runs under every backend and checks eager on the same inputs.
#include <boost/test/unit_test.hpp>

#include "kiln.h"

using namespace kiln;

namespace {

const char* const kBackends[] = {"eager", "aot_eager", "inductor"};

bool same(const Tensor& a, const Tensor& b) {
    return a.shape() == b.shape() && a.dtype() == b.dtype() && allclose(a, b, 1e-5, 1e-6);
}

Tensor copy_of(const Tensor& t) {
    Tensor c = t.detach().clone();
    return t.requires_grad() ? c.requires_grad_() : c;
}

// Runs `f` eagerly and compiled on the same inputs from the same generator state; checks
// results, the generator's offset after the call, and (when x needs grad) x's gradient.
template <class F, class C>
void check_call(F& f, C& c, const Tensor& x0, const char* what) {
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

}  // namespace

BOOST_AUTO_TEST_SUITE(jit_soundness_streams)

// Class 1a: a call that takes a new branch outcome replays fn; the random ops before the
// break must not draw twice (the hit's partial run is undone).
BOOST_AUTO_TEST_CASE(random_ops_before_a_new_branch_outcome_draw_once) {
    auto f = [](Tensor x) {
        Tensor r = randn_like(x);
        if ((x + r * 0).sum() > 0) return x + r;
        return x - r * 2;
    };
    for (const char* backend : kBackends) {
        jit::reset();
        manual_seed(7);
        auto c = compile(f, {.backend = backend});
        check_call(f, c, ones({6}), (std::string(backend) + " record").c_str());
        check_call(f, c, -ones({6}), (std::string(backend) + " new outcome").c_str());
        check_call(f, c, ones({6}), (std::string(backend) + " hit").c_str());
        check_call(f, c, -ones({6}), (std::string(backend) + " hit other").c_str());
    }
}

// Class 1b: a recording call whose input needs grad draws once under every backend.
BOOST_AUTO_TEST_CASE(random_ops_with_grad_draw_once_on_the_recording_call) {
    auto f = [](Tensor x) { return (x * randn_like(x)).sin() + rand({5}); };
    for (const char* backend : kBackends) {
        jit::reset();
        manual_seed(11);
        auto c = compile(f, {.backend = backend});
        for (int i = 0; i < 3; ++i)
            check_call(f, c, randn({5}, {.requires_grad = true}), (std::string(backend) + " call " + std::to_string(i)).c_str());
    }
}

// Class 1c: a random op whose result is unused still advances the stream, before and
// after a break, on hits too.
BOOST_AUTO_TEST_CASE(unused_random_results_still_draw) {
    auto f = [](Tensor x) {
        Tensor unused = randn({7}) * x.sum();
        Tensor y = x * 2;
        if (y.sum() > 0) y = y + 1;
        Tensor unused2 = rand({3, 3});
        return y + randn_like(x);
    };
    for (const char* backend : kBackends) {
        jit::reset();
        manual_seed(3);
        auto c = compile(f, {.backend = backend});
        for (int i = 0; i < 3; ++i)
            for (bool grad : {false, true})
                check_call(f, c, (ones({4}) * (i == 1 ? -1.0 : 1.0)).requires_grad_(grad),
                           (std::string(backend) + " call " + std::to_string(i) + (grad ? " grad" : "")).c_str());
    }
}

// Class 4: fn mutates an argument and returns it, or a view of it: the result is the
// argument (a view of it), so a later write to the argument shows in the result.
BOOST_AUTO_TEST_CASE(outputs_that_alias_arguments_stay_aliases) {
    auto returns_arg = [](Tensor x) {
        x.add_(ones_like(x));
        return x;
    };
    auto returns_view = [](Tensor x) {
        x.mul_(2);
        return x.slice(0, 1, 3);
    };
    auto returns_view_unmutated = [](Tensor x) { return x.transpose(0, 1); };
    for (const char* backend : kBackends) {
        jit::reset();
        auto c1 = compile(returns_arg, {.backend = backend});
        auto c2 = compile(returns_view, {.backend = backend});
        auto c3 = compile(returns_view_unmutated, {.backend = backend});
        for (int call = 0; call < 3; ++call) {
            BOOST_TEST_CONTEXT(backend << " call " << call) {
                Tensor x = randn({4, 3});
                Tensor r1 = c1(x);
                BOOST_CHECK(r1.same(x));
                Tensor y = randn({4, 3});
                Tensor r2 = c2(y);
                y.fill_(5);
                BOOST_CHECK(same(r2, full({2, 3}, 5)));
                Tensor z = randn({4, 3});
                Tensor r3 = c3(z);
                z.fill_(-2);
                BOOST_CHECK(same(r3, full({3, 4}, -2)));
            }
        }
    }
}

// Class 2: an int64 cast carries no gradient (PyTorch never lets an integer tensor require
// grad), so a float result rebuilt from it adds nothing to x's gradient, eager or compiled.
BOOST_AUTO_TEST_CASE(int_casts_carry_no_gradient_beside_a_broadcast_where) {
    auto f = [](Tensor x) {
        Tensor i = x.to(int64);
        return where(i > 0.0, x, x.sum({0}, true)) + i.to(float64);
    };
    auto reference = [](Tensor x) {  // the same function with the cast's values as constants
        Tensor i = x.detach().to(int64);
        return where(i > 0.0, x, x.sum({0}, true)) + i.to(float64);
    };
    for (const char* backend : kBackends) {
        jit::reset();
        auto c = compile(f, {.backend = backend});
        for (int call = 0; call < 3; ++call) {
            Tensor v = (randn({4, 5}) * 3).to(float64);
            Tensor xr = v.clone().requires_grad_(), xe = v.clone().requires_grad_(), xc = v.clone().requires_grad_();
            BOOST_TEST_CONTEXT(backend << " call " << call) {
                BOOST_CHECK(!xe.to(int64).requires_grad());
                reference(xr).sum().backward();
                f(xe).sum().backward();
                c(xc).sum().backward();
                BOOST_CHECK(same(xe.grad(), xr.grad()));
                BOOST_CHECK(same(xc.grad(), xr.grad()));
            }
        }
    }
}

BOOST_AUTO_TEST_SUITE_END()
