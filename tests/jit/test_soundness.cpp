// The compile contract (docs/jit.md, "What compile guarantees"): a compiled call produces
// eager's values, gradients and caller-visible mutations, on the recording call and on
// every hit, under every backend — or raises. One test per class of issue 9.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <functional>
#include <cstdio>
#include <unistd.h>

#include "jit/explain.h"
#include "jit/export.h"
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

}  // namespace

BOOST_AUTO_TEST_SUITE(jit_soundness)

// Class 1: in-place ops are recorded and functionalized, on the first call and on hits.
BOOST_AUTO_TEST_CASE(in_place_on_intermediates_and_arguments) {
    auto chain = [](Tensor x) {
        Tensor y = x * 2;
        y.add_(ones_like(y));
        y.mul_(3);
        return y;
    };
    auto writes_arg = [](Tensor x) {
        Tensor y = x.sin();
        x.fill_(3);
        return y;
    };
    auto reads_after_write = [](Tensor x, Tensor z) {
        x.add_(z, 0.5);
        Tensor y = x * z;  // reads the new x
        x.mul_(2);
        return y + x;
    };
    for (const char* backend : kBackends) {
        jit::reset();
        auto c1 = compile(chain, {.backend = backend});
        auto c2 = compile(writes_arg, {.backend = backend});
        auto c3 = compile(reads_after_write, {.backend = backend});
        for (int call = 0; call < 3; ++call) {
            Tensor x = randn({4, 5});
            BOOST_TEST_CONTEXT(backend << " call " << call) {
                BOOST_CHECK(same(c1(x), chain(x)));
                Tensor xe = copy_of(x), xc = copy_of(x);
                BOOST_CHECK(same(c2(xc), writes_arg(xe)));
                BOOST_CHECK(same(xc, xe));  // the caller sees the write
                Tensor z = randn({4, 5});
                Tensor ye = copy_of(x), yc = copy_of(x);
                BOOST_CHECK(same(c3(yc, z), reads_after_write(ye, z)));
                BOOST_CHECK(same(yc, ye));
            }
        }
        BOOST_CHECK_EQUAL(jit::counters().eager_runs, 0);  // all functionalized
    }
}

BOOST_AUTO_TEST_CASE(in_place_on_captured_tensors_happens_every_call) {
    for (const char* backend : kBackends) {
        jit::reset();
        Tensor counter = zeros({1});
        auto f = compile([&](Tensor x) {
            counter.add_(ones({1}));
            return x + counter;
        }, {.backend = backend});
        Tensor x = zeros({3});
        for (int call = 1; call <= 4; ++call) {
            Tensor out = f(x);
            BOOST_TEST_CONTEXT(backend << " call " << call) {
                BOOST_CHECK_EQUAL(counter.item<float>(), float(call));
                BOOST_CHECK_EQUAL(out.to_vector<float>()[0], float(call));
            }
        }
        BOOST_CHECK_GE(jit::counters().cache_hits, 3);
    }
}

// A view of a mutated base (or a mutated view) can't be functionalized here: the entry
// runs eagerly, says so in explain, and the results and mutations are eager's.
BOOST_AUTO_TEST_CASE(in_place_through_views_falls_back_to_eager) {
    auto through_view = [](Tensor x) {
        Tensor head = x.slice(0, 0, 2);
        head.mul_(10);
        return x * 1;
    };
    auto view_then_base = [](Tensor x) {
        Tensor y = x * 1;
        Tensor v = y.reshape({-1});
        y.add_(ones_like(y));
        return v * 2;  // eager: v sees the write
    };
    for (const char* backend : kBackends) {
        jit::reset();
        auto c1 = compile(through_view, {.backend = backend});
        auto c2 = compile(view_then_base, {.backend = backend});
        for (int call = 0; call < 3; ++call) {
            Tensor x = randn({4, 3});
            Tensor xe = copy_of(x), xc = copy_of(x);
            BOOST_CHECK(same(c1(xc), through_view(xe)));
            BOOST_CHECK(same(xc, xe));
            BOOST_CHECK(same(c2(x), view_then_base(x)));
        }
        BOOST_CHECK_GE(jit::counters().eager_runs, 4);
        std::ostringstream os;
        os << jit::explain_compiled(c1);
        BOOST_CHECK(os.str().find("Runs eagerly") != std::string::npos);
    }
}

// Two arguments sharing storage where one is written: the functionalized entry must not
// be used (the graph would read the other before the write-back).
BOOST_AUTO_TEST_CASE(in_place_with_aliased_arguments) {
    auto f = [](Tensor a, Tensor b) {
        a.add_(ones_like(a));
        return b * 2;
    };
    for (const char* backend : kBackends) {
        jit::reset();
        auto c = compile(f, {.backend = backend});
        Tensor a = randn({6}), b = randn({6});
        BOOST_CHECK(same(c(a, b), b * 2));  // distinct: functionalized
        Tensor base = randn({6});
        Tensor alias = base.reshape({6});
        Tensor be = copy_of(base);
        Tensor want = f(be, be.reshape({6}));
        BOOST_CHECK(same(c(base, alias), want));
        BOOST_CHECK(same(base, be));
    }
}

BOOST_AUTO_TEST_CASE(in_place_with_autograd_matches_eager_gradients) {
    auto f = [](Tensor x) {
        Tensor y = x * 2;
        y.add_(ones_like(y));
        y.mul_(3);
        return (y * y).sum();
    };
    for (const char* backend : kBackends) {
        jit::reset();
        auto c = compile(f, {.backend = backend});
        for (int call = 0; call < 3; ++call) {
            Tensor x = randn({5}, {.requires_grad = true});
            Tensor xe = copy_of(x);
            c(x).backward();
            f(xe).backward();
            BOOST_TEST_CONTEXT(backend << " call " << call) BOOST_CHECK(same(x.grad(), xe.grad()));
        }
    }
}

BOOST_AUTO_TEST_CASE(in_place_leaf_that_requires_grad_raises_like_eager) {
    auto f = [](Tensor w) {
        w.add_(ones_like(w));
        return w;
    };
    Tensor w = randn({3}, {.requires_grad = true});
    BOOST_CHECK_THROW(f(w), Error);
    for (const char* backend : kBackends) {
        jit::reset();
        auto c = compile(f, {.backend = backend});
        BOOST_CHECK_THROW(c(w), Error);
    }
}

// Class 2: a whole training step compiled (zero_grad, forward, backward, step) trains
// exactly like eager, step for step.
template <class MakeOpt>
void check_training_step(const char* backend, MakeOpt make_opt) {
    manual_seed(7);
    nn::Linear eager_model(4, 3), compiled_model(4, 3);
    {
        NoGradGuard no_grad;
        auto pe = eager_model.parameters(), pc = compiled_model.parameters();
        for (size_t i = 0; i < pe.size(); ++i) pc[i].copy_(pe[i]);
    }
    auto opt_e = make_opt(eager_model.parameters());
    auto opt_c = make_opt(compiled_model.parameters());
    auto step = [](nn::Module& m, optim::Optimizer& opt, Tensor x, Tensor y) {
        opt.zero_grad();
        Tensor loss = nn::functional::mse_loss(m(x), y);
        loss.backward();
        opt.step();
        return loss.detach();
    };
    auto compiled_step = compile([&](Tensor x, Tensor y) { return step(compiled_model, *opt_c, x, y); }, {.backend = backend});
    int64_t graphs_after_warmup = 0;
    for (int i = 0; i < 20; ++i) {
        if (i == 3) graphs_after_warmup = jit::counters().graphs_compiled;
        Tensor x = randn({8, 4}), y = randn({8, 3});
        Tensor le = step(eager_model, *opt_e, x, y);
        Tensor lc = compiled_step(x, y);
        BOOST_TEST_CONTEXT(backend << " step " << i) {
            BOOST_CHECK(same(lc, le));
            auto pe = eager_model.parameters(), pc = compiled_model.parameters();
            for (size_t k = 0; k < pe.size(); ++k) BOOST_CHECK(same(pc[k], pe[k]));
        }
    }
    // After the first steps (state initialised) every step reuses the recorded graphs: the
    // step count is a tensor, so no new constant appears per step (Adam's 1 - beta^t).
    BOOST_TEST_CONTEXT(backend) { BOOST_CHECK_EQUAL(jit::counters().graphs_compiled, graphs_after_warmup); }
}

BOOST_AUTO_TEST_CASE(compiled_training_step_sgd_momentum_and_adam) {
    for (const char* backend : kBackends) {
        jit::reset();
        check_training_step(backend, [](std::vector<Tensor> p) { return std::make_unique<optim::SGD>(p, 0.05, 0.9); });
        jit::reset();
        check_training_step(backend, [](std::vector<Tensor> p) { return std::make_unique<optim::Adam>(p, 0.01); });
    }
}

// Class 3: outputs sharing an intermediate, and intermediates across a break, get the
// gradients eager gets on the first (recording) call too.
BOOST_AUTO_TEST_CASE(first_call_gradients_with_shared_outputs_and_breaks) {
    auto two = [](Tensor x) { return std::make_tuple(exp(x), exp(x) * 2); };
    auto across = [](Tensor x) {
        Tensor a = x.exp(), b = x.sin();
        if (a.sum() > 0) return a * b;
        return a - b;
    };
    for (const char* backend : kBackends) {
        jit::reset();
        auto c = compile(two, {.backend = backend});
        auto d = compile(across, {.backend = backend});
        for (int call = 0; call < 2; ++call) {
            Tensor x = ones({1}, {.requires_grad = true});
            auto [a, b] = c(x);
            (a * b).sum().backward();
            BOOST_TEST_CONTEXT(backend << " call " << call)
                BOOST_CHECK_CLOSE(x.grad().item<float>(), 4 * std::exp(2.0f), 1e-3);
            Tensor y = randn({5}, {.requires_grad = true}), ye = copy_of(y);
            d(y).sum().backward();
            across(ye).sum().backward();
            BOOST_CHECK(same(y.grad(), ye.grad()));
        }
    }
}

// Issue 32 item 5: int64 and bool results (casts, compares, argmax) never require grad, as
// in eager and PyTorch; float results next to them get eager's requires_grad and gradient.
BOOST_AUTO_TEST_CASE(int64_and_bool_outputs_never_require_grad) {
    auto f = [](Tensor x) {
        Tensor i = x.to(int64), b = x > 0.0;
        return std::vector<Tensor>{
            i, b, argmax(x, 1), i.to(float32) * 2.0, where(b, x, x * 3.0), b.to(float32) + i};
    };
    for (const char* backend : kBackends) {
        jit::reset();
        auto c = compile(f, {.backend = backend});
        for (int call = 0; call < 2; ++call) {
            Tensor x = randn({3, 4}, {.requires_grad = true}), xe = copy_of(x);
            std::vector<Tensor> got = c(x), want = f(xe);
            BOOST_TEST_REQUIRE(got.size() == want.size());
            for (size_t k = 0; k < got.size(); ++k) {
                BOOST_TEST_CONTEXT(backend << " call " << call << " output " << k) {
                    BOOST_TEST(got[k].requires_grad() == want[k].requires_grad());
                    BOOST_TEST(bool(got[k].grad_fn()) == bool(want[k].grad_fn()));
                    BOOST_TEST(same(got[k].detach(), want[k].detach()));
                }
            }
            BOOST_TEST(!want[0].requires_grad());
            BOOST_TEST(want[4].requires_grad());
            (got[3].sum() + got[4].sum()).backward();
            (want[3].sum() + want[4].sum()).backward();
            BOOST_TEST_CONTEXT(backend << " call " << call) BOOST_TEST(same(x.grad(), xe.grad()));
        }
    }
}

// Class 7: random ops draw what eager draws, call for call, from the same seed.
BOOST_AUTO_TEST_CASE(random_streams_match_eager_call_for_call) {
    auto f = [](Tensor x) { return x + rand({4}) + randn({4}); };
    for (const char* backend : kBackends) {
        jit::reset();
        auto c = compile(f, {.backend = backend});
        Tensor x = zeros({4});
        manual_seed(123);
        std::vector<Tensor> want;
        for (int i = 0; i < 3; ++i) want.push_back(f(x));
        manual_seed(123);
        for (int i = 0; i < 3; ++i) BOOST_TEST_CONTEXT(backend << " call " << i) BOOST_CHECK(same(c(x), want[i]));
    }
}


// Class 4: every leaf of an argument is guarded: containers element by element, integers
// exactly, NaN matching NaN; types kiln can't guard are refused at compile time.
BOOST_AUTO_TEST_CASE(containers_and_scalars_are_guarded_leaf_by_leaf) {
    auto weighted = [](const std::vector<Tensor>& xs, const std::vector<double>& w) {
        Tensor acc = xs[0] * w[0];
        for (size_t i = 1; i < xs.size(); ++i) acc = acc + xs[i] * w[i];
        return acc;
    };
    auto nested = [](std::tuple<Tensor, std::map<std::string, std::vector<double>>> arg) {
        auto& [x, table] = arg;
        return x * table.at("scale")[0] + table.at("shift").size();
    };
    auto by_int = [](Tensor x, int64_t n) { return x + double(n % 7); };
    auto by_float = [](Tensor x, double s) { return x * s; };
    for (const char* backend : kBackends) {
        jit::reset();
        auto c1 = compile(weighted, {.backend = backend});
        auto c2 = compile(nested, {.backend = backend});
        auto c3 = compile(by_int, {.backend = backend});
        auto c4 = compile(by_float, {.backend = backend});
        Tensor a = randn({3}), b = randn({3}), x = randn({3});
        for (std::vector<double> w : {std::vector<double>{1, 2}, {3, -1}, {0.5, 0.25}}) {
            BOOST_CHECK(same(c1({a, b}, w), weighted({a, b}, w)));
            BOOST_CHECK(same(c1({b, a, x}, w.size() == 2 ? std::vector<double>{w[0], w[1], 4} : w), weighted({b, a, x}, {w[0], w[1], 4})));
        }
        for (double scale : {2.0, -3.0}) {
            std::map<std::string, std::vector<double>> table{{"scale", {scale}}, {"shift", {1, 2, 3}}};
            BOOST_CHECK(same(c2({x, table}), nested({x, table})));
            table["shift"].push_back(9);
            BOOST_CHECK(same(c2({x, table}), nested({x, table})));
        }
        int64_t big = int64_t(1) << 53;
        BOOST_CHECK(same(c3(x, big), by_int(x, big)));
        BOOST_CHECK(same(c3(x, big + 1), by_int(x, big + 1)));  // one more: a new entry, not a hit
        double nan = std::nan("");
        c4(x, nan);
        int64_t compiles = jit::counters().compiles;
        BOOST_CHECK(c4(x, nan).to_vector<float>() != x.to_vector<float>());  // NaN * x stays NaN
        BOOST_CHECK_EQUAL(jit::counters().compiles, compiles);               // NaN hits its own entry
        BOOST_CHECK(same(c4(x, -0.0), by_float(x, -0.0)));
    }
    struct Plain {
        double scale;
    };
    static_assert(!jit::guardable<Plain>());
    static_assert(!jit::guardable<const Tensor*>());
    static_assert(jit::guardable<std::vector<std::pair<Tensor, int>>>());
    static_assert(jit::guardable<nn::Linear&>());
}

// Class 5: a module's training flag and registered state are guarded.
namespace {
struct Noisy : nn::Module {
    double scale = 2;
    Tensor forward(const Tensor& x) override { return is_training() ? x * scale : x - 1; }
};
// Issue 30 item 1: a forward that reads a plain member and never the training flag.
struct Scaled : nn::Module {
    double scale = 2;
    Tensor w = register_parameter("w", ones({4}) * 0.5);
    Tensor forward(const Tensor& x) override { return x * w * scale; }
};
}  // namespace

BOOST_AUTO_TEST_CASE(module_training_flag_and_state_are_guarded) {
    for (const char* backend : kBackends) {
        jit::reset();
        Noisy m;
        auto direct = compile(m, {.backend = backend});
        auto closure = compile([&](Tensor x) { return m(x) + 1; }, {.backend = backend});
        auto by_ref = compile([](Noisy& mod, Tensor x) { return mod(x); }, {.backend = backend});
        Tensor x = randn({4});
        for (bool training : {true, false, true}) {
            m.train(training);
            BOOST_TEST_CONTEXT(backend << " training " << training) {
                BOOST_CHECK(same(direct(x), m.forward(x)));
                BOOST_CHECK(same(closure(x), m.forward(x) + 1));
                BOOST_CHECK(same(by_ref(m, x), m.forward(x)));
            }
        }
        m.scale = 5;
        m.state_changed();  // a plain member read in forward: the module says it changed
        BOOST_CHECK(same(direct(x), x * 5));
    }
}

// The module's state is guarded whether or not forward reads is_training(): compile(m)
// and a module passed by reference re-record after state_changed(), also when fn calls
// forward directly (not m(x)).
BOOST_AUTO_TEST_CASE(a_plain_member_read_by_forward_is_guarded_without_the_training_flag) {
    for (const char* backend : kBackends) {
        BOOST_TEST_CONTEXT(backend) {
            jit::reset();
            Scaled m;
            auto direct = compile(m, {.backend = backend});
            auto by_ref = compile([](Scaled& mod, Tensor x) { return mod.forward(x) + 1; },
                                  {.backend = backend});
            Tensor x = randn({4});
            for (int call = 0; call < 2; ++call) {  // a recording, then a hit
                BOOST_CHECK(same(direct(x), x));
                BOOST_CHECK(same(by_ref(m, x), x + 1));
            }
            m.scale = -3;
            m.state_changed();
            for (int call = 0; call < 2; ++call) {
                BOOST_CHECK(same(direct(x), x * -1.5));
                BOOST_CHECK(same(by_ref(m, x), x * -1.5 + 1));
            }
        }
    }
}

// Class 6: sizes read as numbers under dynamic shapes. A size fn's code reads (size,
// shape, numel) pins its symbol with a guard; composites that take sizes as attributes
// (mean, *_like, fill_, flatten, squeeze) say where they came from and stay symbolic;
// nothing is matched by value. Sizes go static -> symbolic (the 2nd size) -> new ones.
BOOST_AUTO_TEST_CASE(sizes_read_as_numbers_pin_their_symbol) {
    using Fn = std::function<Tensor(Tensor)>;
    std::vector<std::pair<const char*, Fn>> fns = {
        {"x * x.size(0)", [](Tensor x) { return x * double(x.size(0)); }},
        {"x.sum() / x.size(0)", [](Tensor x) { return x.sum() / double(x.size(0)); }},
        {"slice to size/2", [](Tensor x) { return x.slice(0, 0, x.size(0) / 2) * 2; }},
        {"reshape({n/2, 2})", [](Tensor x) { int64_t n = x.size(0); return (x + 1).reshape({n / 2, 2 * x.size(1)}); }},
        {"host branch on a size", [](Tensor x) { return x.size(0) > 6 ? x * 2 : x * 3; }},
        {"numel as a number", [](Tensor x) { return x * double(x.numel()) + 1; }},
        {"shape() as a vector", [](Tensor x) { Shape s = x.shape(); return full({s[0] + 1}, 2.0) * double(s[1]); }},
        {"arange(size)", [](Tensor x) { return arange(double(x.size(0))) + x.sum(); }},
    };
    for (const char* backend : kBackends)
        for (auto& [name, fn] : fns) {
            jit::reset();
            auto c = compile(fn, {.backend = backend});
            for (int64_t n : {4, 6, 8, 10, 6, 4, 12}) {
                Tensor x = randn({n, 3});
                BOOST_TEST_CONTEXT(backend << " " << name << " n=" << n) { BOOST_CHECK(same(c(x), fn(x))); }
            }
            // One recording per size (cache limit 8): what a pinned symbol costs.
            BOOST_TEST_CONTEXT(backend << " " << name) { BOOST_CHECK_EQUAL(jit::counters().compiles, 5); }
        }
    // explain names the pin and the line that read the size.
    jit::reset();
    auto c = compile(fns[0].second, {.backend = "eager"});
    c(randn({4, 3}));
    c(randn({6, 3}));
    jit::ExplainOutput e = jit::explain_compiled(c);
    std::string guards;
    for (const auto& g : e.guards.back()) guards += g + "\n";
    BOOST_TEST_MESSAGE(guards);
    BOOST_CHECK(guards.find("s0 == 6  (pinned: size(0) of a [6, 3] tensor read at") != std::string::npos);
    BOOST_CHECK(guards.find("test_soundness.cpp") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(composites_that_take_sizes_stay_symbolic) {
    using Fn = std::function<Tensor(Tensor)>;
    std::vector<std::pair<const char*, Fn>> fns = {
        {"mean()", [](Tensor x) { return x.mean() + x; }},
        {"mean({0}) recorded at size 2", [](Tensor x) { return x.mean({0}) * 2; }},
        {"mean({0, 1}, keepdim)", [](Tensor x) { return x - x.mean({0, 1}, true); }},
        {"zeros_like / ones_like", [](Tensor x) { return zeros_like(x) + ones_like(x) * x; }},
        {"fill_", [](Tensor x) { Tensor y = x * 2; y.fill_(1.5); return y + x; }},
        {"copy_ of one element", [](Tensor x) { Tensor y = zeros_like(x); y.copy_(x.sum()); return y + x; }},
        {"unsqueeze/squeeze", [](Tensor x) { return x.unsqueeze(0).squeeze(0).unsqueeze(2).squeeze() * 3; }},
        {"reshape({-1, 3})", [](Tensor x) { return x.reshape({-1, 3}).sum({1}); }},
        {"softmax, log_softmax", [](Tensor x) { return x.softmax(0) + x.log_softmax(1); }},
        {"mse_loss", [](Tensor x) { return nn::functional::mse_loss(x, x * 0.5); }},
        {"transpose + matmul", [](Tensor x) { return x.transpose(0, 1).matmul(x); }},
    };
    for (const char* backend : kBackends)
        for (auto& [name, fn] : fns) {
            jit::reset();
            auto c = compile(fn, {.backend = backend});
            for (int64_t n : {2, 5, 7, 2, 9}) {
                Tensor x = randn({n, 3});
                BOOST_TEST_CONTEXT(backend << " " << name << " n=" << n) { BOOST_CHECK(same(c(x), fn(x))); }
            }
            BOOST_TEST_CONTEXT(backend << " " << name) { BOOST_CHECK_EQUAL(jit::counters().compiles, 2); }
        }
}

// Found by the differential fuzzer: an argument read only for its sizes (zeros_like(x),
// no op reads x's values) in a re-run entry (item) must still reach the graph on replay.
BOOST_AUTO_TEST_CASE(input_read_only_for_its_sizes_in_a_rerun_entry) {
    auto fn = [](Tensor x, Tensor y) {
        Tensor a = y - y.mean({0}, true) + zeros_like(x);
        float v = y.amax().item<float>();
        return a * (v > 0 ? 2.0 : -1.0);
    };
    for (const char* backend : kBackends) {
        jit::reset();
        auto c = compile(fn, {.backend = backend});
        for (int64_t n : {4, 5, 2, 7}) {
            Tensor x = randn({n, 5}), y = randn({n, 5}, {.requires_grad = true});
            Tensor y2 = copy_of(y);
            Tensor got = c(x, y), want = fn(x, y2);
            got.sum().backward();
            want.sum().backward();
            BOOST_TEST_CONTEXT(backend << " n=" << n) {
                BOOST_CHECK(same(got, want));
                BOOST_CHECK(same(y.grad(), y2.grad()));
            }
        }
    }
}

// Found by the differential fuzzer: a symbol pinned after a size-origin attribute was
// recorded; a later call replays to record the other branch and must still match.
BOOST_AUTO_TEST_CASE(pin_after_a_symbolic_attribute_then_a_new_branch) {
    auto fn = [](Tensor x, Tensor y) {
        Tensor t = x * 2;
        t.fill_(-1);
        Tensor u = t + y;
        if (u.sum() > 0) u = u * 3;
        else u = u - 1;
        return u * double(x.size(0));
    };
    for (const char* backend : kBackends) {
        jit::reset();
        auto c = compile(fn, {.backend = backend});
        for (auto [n, sign] : std::vector<std::pair<int64_t, double>>{{1, 1}, {6, 1}, {6, -1}, {6, 1}, {7, -1}}) {
            Tensor x = randn({n, 3}), y = ones({n, 3}) * (10 * sign);
            BOOST_TEST_CONTEXT(backend << " n=" << n << " sign=" << sign) { BOOST_CHECK(same(c(x, y), fn(x, y))); }
        }
    }
}

// The coincidences value matching fell for: a static dim's 1/4 taken for a symbolic dim's
// scale, a literal equal to a symbol taken for it.
BOOST_AUTO_TEST_CASE(constants_equal_to_a_symbol_are_not_taken_for_it) {
    using Fn = std::function<Tensor(Tensor)>;
    std::vector<std::pair<const char*, Fn>> fns = {
        {"mean over the static dim 4", [](Tensor x) { return x.mean({1}); }},
        {"reshape to a literal 2", [](Tensor x) { return x.reshape({2, -1}); }},
        {"x * 4", [](Tensor x) { return x * 4.0 + x.mean(); }},
        {"full({4})", [](Tensor x) { return full({4}, 1.0) + x.sum({0}); }},
        {"slice to a literal 4", [](Tensor x) { return x.slice(0, 0, 4) + 1; }},
    };
    for (const char* backend : kBackends)
        for (auto& [name, fn] : fns) {
            jit::reset();
            auto c = compile(fn, {.backend = backend});
            for (int64_t n : {2, 4, 6, 8}) {  // the symbolic entry is recorded at n = 4
                Tensor x = randn({n, 4});
                BOOST_TEST_CONTEXT(backend << " " << name << " n=" << n) { BOOST_CHECK(same(c(x), fn(x))); }
            }
        }
}

BOOST_AUTO_TEST_CASE(dynamic_always_keeps_shape_rules_exact) {
    // Every dim symbolic from the start; broadcasting a symbol against a static size and
    // a matmul whose inner sizes only agree today pin, and the results stay eager's.
    auto bcast = [](Tensor x, Tensor y) { return x * y; };  // [n, 3] * [3]
    auto mm = [](Tensor x, Tensor w) { return x.matmul(w).relu(); };
    auto cat2 = [](Tensor x, Tensor y) { return cat({x, y}, 0).sum({1}); };
    for (const char* backend : kBackends) {
        jit::reset();
        auto cb = compile(bcast, {.backend = backend, .dynamic = jit::Dynamic::always});
        auto cm = compile(mm, {.backend = backend, .dynamic = jit::Dynamic::always});
        auto cc = compile(cat2, {.backend = backend, .dynamic = jit::Dynamic::always});
        for (int64_t n : {3, 5, 3, 8}) {
            Tensor x = randn({n, 3}), y = randn({3}), w = randn({3, n}), z = randn({n + 1, 3});
            BOOST_TEST_CONTEXT(backend << " n=" << n) {
                BOOST_CHECK(same(cb(x, y), bcast(x, y)));
                BOOST_CHECK(same(cm(x, w), mm(x, w)));
                BOOST_CHECK(same(cc(x, z), cat2(x, z)));
            }
        }
    }
}

// An undefined tensor argument: the compiled call gives eager's result or eager's error.
BOOST_AUTO_TEST_CASE(undefined_tensor_arguments_run_as_eager) {
    auto uses = [](std::map<std::string, Tensor> in) { return in["x"] * in["z"]; };
    auto ignores = [](Tensor a, Tensor b) { return b.defined() ? a + b : a * 2; };
    std::map<std::string, Tensor> m{{"x", randn({3})}, {"z", Tensor()}};
    std::string want;
    try {
        uses(m);
    } catch (const Error& e) {
        want = e.what();
    }
    BOOST_TEST(want.find("mul: input 1 is an undefined tensor") != std::string::npos);
    for (const char* backend : kBackends) {
        jit::reset();
        auto c = compile(uses, {.backend = backend});
        BOOST_CHECK_EXCEPTION(c(m), Error, [&](const Error& e) { return std::string(e.what()) == want; });
        auto d = compile(ignores, {.backend = backend});
        Tensor a = randn({3});
        BOOST_CHECK(same(d(a, Tensor()), a * 2));
        BOOST_CHECK(same(d(a, a), a + a));  // defined again: compiled as usual
    }
}

// Class 8: export keeps int64 constants exact.
BOOST_AUTO_TEST_CASE(export_keeps_int64_constants_exact) {
    Tensor big = tensor(std::vector<int64_t>{(int64_t(1) << 53) + 1, -((int64_t(1) << 60) + 3)}, {2});
    auto f = [&](Tensor x) { return x + big; };
    Tensor x = tensor(std::vector<int64_t>{1, 2}, {2});
    auto exported = jit::export_graph(f, x);
    std::string path = "/tmp/kiln_export_int64_" + std::to_string(::getpid()) + ".txt";
    exported.save(path);
    auto loaded = jit::ExportedProgram::load(path);
    std::remove(path.c_str());
    BOOST_CHECK(loaded.run({x})[0].to_vector<int64_t>() == f(x).to_vector<int64_t>());
}

BOOST_AUTO_TEST_SUITE_END()
