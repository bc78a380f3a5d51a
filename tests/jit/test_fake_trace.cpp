// Shape-only tracing (jit/fake.h, docs/jit.md "Shape-only tracing"): recording a new
// entry with fake tensors gives the same graphs, guards and results as recording with
// real ones (KILN_FAKE_TRACE=0), and where it must stop it says so in explain.
#include <boost/test/unit_test.hpp>
#include <sstream>

#include "jit/explain.h"
#include "jit/fake.h"
#include "kiln.h"
#include "models/resnet.h"

using namespace kiln;

namespace {

const char* const kBackends[] = {"eager", "aot_eager", "inductor"};

bool same(const Tensor& a, const Tensor& b) {
    return a.shape() == b.shape() && a.dtype() == b.dtype() && allclose(a, b, 1e-5, 1e-6);
}

// What one recording left: explain's text minus the shape-only fallback lines, the
// results of each call, the gradients of the inputs, the inputs after the calls.
struct Run {
    std::string graphs, guards;
    std::vector<std::string> fallbacks;
    std::vector<Tensor> results, grads, inputs;
};

using Fn = std::function<Tensor(std::vector<Tensor>)>;
using Make = std::function<std::vector<Tensor>(int call)>;

Run record(bool fake, const Fn& fn, const Make& make, CompileOptions opt, int calls,
           bool backward) {
    jit::FakeTraceScope mode(fake);
    jit::reset();
    manual_seed(11);
    auto c = compile(fn, opt);
    Run r;
    for (int k = 0; k < calls; ++k) {
        std::vector<Tensor> in = make(k);
        Tensor out = c(in);
        r.results.push_back(out.detach().clone());
        if (backward && out.requires_grad()) {
            out.sum().backward();
            for (const Tensor& t : in)
                if (t.requires_grad()) r.grads.push_back(t.grad().clone());
        }
        for (const Tensor& t : in) r.inputs.push_back(t.detach().clone());
    }
    r.results.push_back(rand({4}));  // the generator's position after the calls
    jit::ExplainOutput e = jit::explain_compiled(c);
    for (const std::string& g : e.graphs) r.graphs += g + "\n";
    for (const auto& entry : e.guards)
        for (const std::string& g : entry) r.guards += g + "\n";
    r.fallbacks = e.fake_fallbacks;
    return r;
}

// fn recorded both ways (and run eagerly): same graphs, guards, values, gradients, inputs.
// Returns the shape-only recording's fallbacks.
std::vector<std::string> check_both_ways(const std::string& name, const Fn& fn, const Make& make,
                                         int calls = 3, bool backward = false,
                                         jit::Dynamic dynamic = jit::Dynamic::auto_) {
    std::vector<std::string> fallbacks;
    for (const char* backend : kBackends) {
        CompileOptions opt{.backend = backend, .dynamic = dynamic};
        Run real = record(false, fn, make, opt, calls, backward);
        Run fake = record(true, fn, make, opt, calls, backward);
        // eager, for the values
        manual_seed(11);
        std::vector<Tensor> want, want_grads, want_inputs;
        for (int k = 0; k < calls; ++k) {
            std::vector<Tensor> in = make(k);
            Tensor out = fn(in);
            want.push_back(out.detach().clone());
            if (backward && out.requires_grad()) {
                out.sum().backward();
                for (const Tensor& t : in)
                    if (t.requires_grad()) want_grads.push_back(t.grad().clone());
            }
            for (const Tensor& t : in) want_inputs.push_back(t.detach().clone());
        }
        want.push_back(rand({4}));
        BOOST_TEST_CONTEXT(name << " under " << backend) {
            BOOST_CHECK(real.fallbacks.empty());
            BOOST_CHECK_EQUAL(real.graphs, fake.graphs);
            BOOST_CHECK_EQUAL(real.guards, fake.guards);
            BOOST_REQUIRE_EQUAL(fake.results.size(), want.size());
            for (size_t i = 0; i < want.size(); ++i) {
                BOOST_CHECK(same(real.results[i], fake.results[i]));
                BOOST_CHECK(same(fake.results[i], want[i]));
            }
            BOOST_REQUIRE_EQUAL(fake.grads.size(), want_grads.size());
            BOOST_REQUIRE_EQUAL(real.grads.size(), want_grads.size());
            for (size_t i = 0; i < want_grads.size(); ++i) {
                BOOST_CHECK(same(real.grads[i], fake.grads[i]));
                BOOST_CHECK(same(fake.grads[i], want_grads[i]));
            }
            for (size_t i = 0; i < want_inputs.size(); ++i)
                BOOST_CHECK(same(fake.inputs[i], want_inputs[i]));
        }
        fallbacks = fake.fallbacks;
    }
    return fallbacks;
}

Make inputs(std::vector<Shape> shapes, bool grad = false) {
    return [shapes, grad](int call) {
        std::vector<Tensor> in;
        manual_seed(100 + call);
        for (const Shape& s : shapes) in.push_back(randn(s, {.requires_grad = grad}));
        return in;
    };
}

}  // namespace

BOOST_AUTO_TEST_SUITE(jit_fake_trace)

BOOST_AUTO_TEST_CASE(pointwise_reductions_and_views_record_the_same_graphs) {
    auto fs = check_both_ways(
        "pointwise", [](std::vector<Tensor> a) { return sin(a[0]) + cos(a[1]) * 2 - a[0] / 3; },
        inputs({{4, 5}, {5}}));
    BOOST_CHECK(fs.empty());
    fs = check_both_ways(
        "reductions",
        [](std::vector<Tensor> a) {
            return a[0].sum({1}, true) + a[0].amax({0}) - a[0].mean() + softmax(a[0], 1);
        },
        inputs({{6, 7}}));
    BOOST_CHECK(fs.empty());
    fs = check_both_ways(
        "views",
        [](std::vector<Tensor> a) {
            Tensor t = a[0].t();
            Tensor s = t.slice(0, 1, 4).reshape({-1});
            return s.unsqueeze(0).expand({3, s.size(0)}).contiguous() * 2 +
                   a[0].reshape({35}).slice(0, 0, 3 * 7, 7).sum();
        },
        inputs({{5, 7}}));
    BOOST_CHECK(fs.empty());
    fs = check_both_ways(
        "matmul and compares",
        [](std::vector<Tensor> a) {
            Tensor m = a[0].matmul(a[1]);
            return where(m > 0, m, a[2].to(DType::float64).to(DType::float32)) +
                   (m < 1).to(DType::float32);
        },
        inputs({{3, 4}, {4, 2}, {2}}));
    BOOST_CHECK(fs.empty());
}

BOOST_AUTO_TEST_CASE(in_place_ops_and_breaks_record_the_same_graphs) {
    auto fs = check_both_ways(
        "in-place on an argument and an intermediate",
        [](std::vector<Tensor> a) {
            a[0].add_(ones_like(a[0]));
            Tensor y = a[0] * 2;
            y.mul_(3);
            a[1].copy_(y.sum({0}));
            return y + a[1];
        },
        inputs({{3, 4}, {4}}));
    BOOST_CHECK(fs.empty());
    fs = check_both_ways(
        "a branch and an item()",
        [](std::vector<Tensor> a) {
            Tensor y = a[0].exp();
            Tensor z = y.sum() > 5 ? y * 2 : y - 1;
            float v = z.sum().item<float>();
            return z + v + y;
        },
        inputs({{3, 3}}));
    BOOST_CHECK(fs.empty());
}

BOOST_AUTO_TEST_CASE(dynamic_shapes_record_the_same_symbols_and_guards) {
    Make grow = [](int call) {
        manual_seed(200 + call);
        int64_t n = 3 + 2 * call;
        return std::vector<Tensor>{randn({n, 4}), randn({4})};
    };
    auto fs = check_both_ways(
        "dynamic",
        [](std::vector<Tensor> a) {
            Tensor y = a[0] * a[1] + a[0].sum({0});
            return cat({y, a[0].relu()}, 0).sum({1}) / y.size(0);
        },
        grow, 4, false, jit::Dynamic::auto_);
    BOOST_CHECK(fs.empty());
}

BOOST_AUTO_TEST_CASE(random_ops_keep_eager_streams) {
    auto fs = check_both_ways(
        "random",
        [](std::vector<Tensor> a) {
            Tensor noise = randn(a[0].shape());
            Tensor y = nn::functional::dropout(a[0] + noise, 0.5, true);
            return y * rand({1}) + randint(0, 5, {a[0].size(1)}).to(DType::float32);
        },
        inputs({{4, 6}}));
    BOOST_CHECK(fs.empty());
}

BOOST_AUTO_TEST_CASE(backward_through_the_joint_graph) {
    auto fs = check_both_ways(
        "joint graph",
        [](std::vector<Tensor> a) {
            Tensor h = (a[0].matmul(a[1]) + a[2]).tanh();
            return log_softmax(h, 1) * h.sigmoid() + h.amax({1}, true);
        },
        inputs({{5, 3}, {3, 4}, {4}}, true), 3, true);
    BOOST_CHECK(fs.empty());
}

// The attention op's shape rule (jit/fake.cpp): its result, and its recomputing gradient,
// recorded with fake tensors as with real ones; a batch that grows (symbolic), the heads-last
// form, and broadcast key batches (no rule: real tensors, said in explain).
BOOST_AUTO_TEST_CASE(the_attention_op_records_the_same_graphs) {
    Make grow = [](int call) {
        manual_seed(300 + call);
        int64_t n = 2 + call;
        return std::vector<Tensor>{randn({n, 2, 5, 4}, {.requires_grad = true}), randn({n, 2, 3, 4}),
                                   randn({n, 2, 3, 6})};
    };
    auto fs = check_both_ways(
        "attention",
        [](std::vector<Tensor> a) {
            Tensor out = attention(a[0] * 2.0, a[1], a[2], 0.5, true);
            Tensor heads_last = dispatch(OpId::attention, {a[0], a[1], a[2]}, {.scalar = 0.3, .keepdim = true});
            return out.transpose(1, 2) + heads_last.relu();
        },
        grow, 3, true);
    BOOST_CHECK(fs.empty());
    auto broadcast = check_both_ways(
        "attention over a broadcast key batch",
        [](std::vector<Tensor> a) { return attention(a[0], a[1], a[2], 0.5, false).sum({-1}); },
        inputs({{3, 5, 4}, {1, 6, 4}, {1, 6, 2}}));
    BOOST_CHECK(!broadcast.empty());
}

BOOST_AUTO_TEST_CASE(an_op_without_a_shape_rule_falls_back_to_real_tensors_and_says_so) {
    struct RuleOff {  // gather as an op with no shape rule
        RuleOff() { jit::set_fake_rule(OpId::gather, false); }
        ~RuleOff() { jit::set_fake_rule(OpId::gather, true); }
    } off;
    auto fs = check_both_ways(
        "gather",
        [](std::vector<Tensor> a) {
            Tensor y = a[0] * 2 + randn({3, 5});  // drawn before the fallback
            Tensor idx = argmax(y, 1, true);
            return gather(y, 1, idx) + arange(0, 3, 1).to(DType::float32) + y.sum({1}, true) +
                   rand({3, 1});  // drawn after it
        },
        inputs({{3, 5}}));
    BOOST_REQUIRE_EQUAL(fs.size(), 1u);
    BOOST_CHECK_MESSAGE(fs[0].find("has no shape rule") != std::string::npos, fs[0]);
    // explain prints it
    jit::FakeTraceScope on(true);
    std::ostringstream os;
    os << jit::explain(
        {}, [](Tensor x) { return gather(x * 2, 0, zeros({2}, {.dtype = DType::int64})); },
        randn({3}));
    BOOST_CHECK_MESSAGE(os.str().find("shape-only tracing stopped") != std::string::npos, os.str());
}

BOOST_AUTO_TEST_CASE(an_in_place_op_under_autograd_goes_eager_with_real_values) {
    auto fs = check_both_ways(
        "eager from an in-place op",
        [](std::vector<Tensor> a) {
            Tensor y = a[0] * 3 + rand({4});
            y.add_(ones_like(y));  // y requires grad: fn goes eager here
            return y.exp() + randn({4});
        },
        inputs({{4}}, true), 3, true);
    BOOST_REQUIRE_EQUAL(fs.size(), 1u);
}

BOOST_AUTO_TEST_CASE(a_fake_tensor_has_no_values_to_read) {
    Tensor t = jit::fake_empty({2, 3}, DType::float32, cpu);
    BOOST_CHECK(jit::is_fake(t));
    BOOST_CHECK_THROW(t.raw_data(), FakeTensorRead);
    BOOST_CHECK(!jit::is_fake(randn({2})));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(jit_fake_trace_state)

// Tensors fn keeps in host state without returning them (an optimizer's buffers) get their
// values on the recording call though no graph outputs them.
template <class Opt>
void check_training(const char* name) {
    for (bool fake : {false, true}) {
        jit::FakeTraceScope mode(fake);
        jit::reset();
        manual_seed(3);
        nn::Linear model(4, 3), eager_model(4, 3);
        {
            NoGradGuard no_grad;
            auto pe = eager_model.parameters(), pc = model.parameters();
            for (size_t i = 0; i < pe.size(); ++i) pc[i].copy_(pe[i]);
        }
        Opt opt(model.parameters()), opt_e(eager_model.parameters());
        auto step = [](nn::Module& m, optim::Optimizer& o, Tensor x, Tensor y) {
            o.zero_grad();
            Tensor loss = nn::functional::mse_loss(m(x), y);
            loss.backward();
            o.step();
            return loss.detach();
        };
        auto c = compile([&](Tensor x, Tensor y) { return step(model, opt, x, y); },
                         {.backend = "eager"});
        for (int i = 0; i < 4; ++i) {
            Tensor x = randn({8, 4}), y = randn({8, 3});
            Tensor le = step(eager_model, opt_e, x, y), lc = c(x, y);
            BOOST_TEST_CONTEXT(name << " fake " << fake << " step " << i) {
                BOOST_CHECK(same(lc, le));
                auto pe = eager_model.parameters(), pc = model.parameters();
                for (size_t k = 0; k < pe.size(); ++k) BOOST_CHECK(same(pc[k], pe[k]));
            }
        }
    }
}

struct Sgd : optim::SGD {
    explicit Sgd(std::vector<Tensor> p) : optim::SGD(std::move(p), 0.05, 0.9) {}
};
struct Adam : optim::Adam {
    explicit Adam(std::vector<Tensor> p) : optim::Adam(std::move(p), 0.01) {}
};

BOOST_AUTO_TEST_CASE(optimizer_buffers_kept_in_host_state_get_their_values) {
    check_training<Sgd>("sgd momentum");
    check_training<Adam>("adam");
}

// ResNet-18 (32x32, batch 2; BatchNorm's running statistics are functionalized writes):
// two compiled training steps with shape-only tracing equal those with real tracing and
// eager's, under aot_eager (the joint graph recorded shape-only too).
BOOST_AUTO_TEST_CASE(resnet18_training_steps_equal_both_ways) {
    auto make = [] {
        manual_seed(5);
        return std::make_shared<models::ResNet18>(10);
    };
    auto step = [](models::ResNet18& net, optim::SGD& opt, Tensor x, Tensor y) {
        opt.zero_grad();
        Tensor loss = nn::functional::cross_entropy(net.forward(x), y);
        loss.backward();
        opt.step();
        return loss.detach();
    };
    std::vector<std::vector<Tensor>> losses, params;
    for (int mode = 0; mode < 3; ++mode) {  // eager, real tracing, shape-only tracing
        jit::FakeTraceScope fake(mode == 2);
        jit::reset();
        auto net = make();
        optim::SGD opt(net->parameters(), 0.05, 0.9);
        auto c = compile([&](Tensor x, Tensor y) { return step(*net, opt, x, y); },
                         {.backend = "aot_eager"});
        losses.emplace_back();
        for (int i = 0; i < 2; ++i) {
            manual_seed(50 + i);
            Tensor x = randn({2, 3, 32, 32}), y = randint(0, 10, {2});
            losses.back().push_back(mode == 0 ? step(*net, opt, x, y) : c(x, y));
        }
        params.emplace_back();
        for (const Tensor& p : net->parameters()) params.back().push_back(p.detach().clone());
        for (const auto& [name, b] : net->named_buffers())
            params.back().push_back(b.detach().clone());
    }
    for (int mode = 1; mode < 3; ++mode) BOOST_TEST_CONTEXT("mode " << mode) {
            for (size_t i = 0; i < losses[0].size(); ++i)
                BOOST_CHECK(allclose(losses[mode][i], losses[0][i], 1e-4, 1e-5));
            BOOST_REQUIRE_EQUAL(params[mode].size(), params[0].size());
            for (size_t k = 0; k < params[0].size(); ++k)
                BOOST_CHECK(allclose(params[mode][k], params[0][k], 1e-4, 1e-5));
        }
    for (size_t k = 0; k < params[1].size(); ++k)  // the two recordings: the same graphs
        BOOST_CHECK(same(params[1][k], params[2][k]));
}

BOOST_AUTO_TEST_SUITE_END()
