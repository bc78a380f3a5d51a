// autograd::Function: user-written forward/backward, ctx, saved tensors and the saved report.
#include <boost/test/unit_test.hpp>

#include <sstream>

#include "kiln.h"

using namespace kiln;

namespace {

// The seed example, as written in PyTorch's tutorial.
struct Cosine : autograd::Function<Cosine> {
    static Tensor forward(const Tensor& x0) { return cos(x0); }
    static void setup_context(autograd::Ctx& ctx, const std::vector<Tensor>& inputs, const Tensor&) {
        const Tensor& x = inputs[0];
        std::cout << "saving tensor of size " << x.shape() << "\n";
        ctx.save_for_backward(x);
    }
    static std::vector<Tensor> backward(autograd::Ctx& ctx, const Tensor& grad_output) {
        const Tensor& x = ctx.saved_tensors()[0];
        return {-sin(x) * grad_output};
    }
};

Tensor naive_two_cosine(const Tensor& x) { return Cosine::apply(Cosine::apply(x)); }

// Older style: forward takes the ctx; a non-tensor argument is kept for backward.
struct Scale : autograd::Function<Scale> {
    static Tensor forward(autograd::Ctx& ctx, const Tensor& x, double factor) {
        ctx.set_scalar("factor", factor);
        return x * factor;
    }
    static std::vector<Tensor> backward(autograd::Ctx& ctx, const Tensor& grad) {
        BOOST_TEST(ctx.arg<double>(1) == ctx.scalar("factor"));
        return {grad * ctx.scalar("factor")};
    }
};

// Two tensor inputs; backward returns a broadcast-shaped gradient for the second.
struct MulAdd : autograd::Function<MulAdd> {
    static Tensor forward(const Tensor& x, const Tensor& b, int64_t repeat) { return x * double(repeat) + b; }
    static void setup_context(autograd::Ctx& ctx, const std::vector<Tensor>&, const Tensor&) {
        BOOST_TEST(ctx.num_args() == 3u);
    }
    static std::vector<Tensor> backward(autograd::Ctx& ctx, const Tensor& grad) {
        return {grad * double(ctx.arg<int64_t>(2)), grad};
    }
};

struct WrongCount : autograd::Function<WrongCount> {
    static Tensor forward(const Tensor& x) { return x * 2.0; }
    static void setup_context(autograd::Ctx&, const std::vector<Tensor>&, const Tensor&) {}
    static std::vector<Tensor> backward(autograd::Ctx&, const Tensor& grad) { return {grad, grad}; }
};

struct AskWrongType : autograd::Function<AskWrongType> {
    static Tensor forward(const Tensor& x, double) { return x * 1.0; }
    static void setup_context(autograd::Ctx& ctx, const std::vector<Tensor>&, const Tensor&) { (void)ctx.arg<int64_t>(1); }
    static std::vector<Tensor> backward(autograd::Ctx&, const Tensor& grad) { return {grad}; }
};

struct Identity : autograd::Function<Identity> {
    static Tensor forward(const Tensor& x) { return x; }
    static void setup_context(autograd::Ctx&, const std::vector<Tensor>&, const Tensor&) {}
    static std::vector<Tensor> backward(autograd::Ctx&, const Tensor& grad) { return {grad * 3.0}; }
};

// Redirects std::cout into a string for the lifetime of the object.
struct CaptureCout {
    std::ostringstream text;
    std::streambuf* old = std::cout.rdbuf(text.rdbuf());
    ~CaptureCout() { std::cout.rdbuf(old); }
};

}  // namespace

BOOST_AUTO_TEST_CASE(cosine_prints_the_saved_shape_and_matches_builtin_grad) {
    Tensor x = randn({5, 5, 5}, {.requires_grad = true});
    Tensor y;
    {
        CaptureCout capture;
        y = Cosine::apply(x);
        BOOST_TEST(capture.text.str() == "saving tensor of size [5, 5, 5]\n");
    }
    BOOST_TEST(y.grad_fn()->name() == "CosineBackward");
    BOOST_TEST(y.grad_fn()->saved_tensors().size() == 1u);
    BOOST_TEST(y.grad_fn()->saved_bytes() == 125u * 4u);
    y.sum().backward();
    BOOST_TEST(allclose(x.grad(), -sin(x.detach())));
}

BOOST_AUTO_TEST_CASE(naive_two_cosine_saves_two_tensors_and_matches_cos_of_cos) {
    Tensor x = randn({5, 5, 5}, {.requires_grad = true});
    Tensor y;
    {
        CaptureCout capture;
        y = naive_two_cosine(x);
        BOOST_TEST(capture.text.str() == "saving tensor of size [5, 5, 5]\nsaving tensor of size [5, 5, 5]\n");
    }
    autograd::SavedReport report = autograd::saved_report(y);
    BOOST_TEST(report.nodes.size() == 2u);
    BOOST_TEST(report.total_tensors == 2u);
    BOOST_TEST(report.total_bytes == 2u * 125u * 4u);
    y.sum().backward();

    Tensor x2 = x.detach().clone().requires_grad_(true);
    cos(cos(x2)).sum().backward();
    BOOST_TEST(allclose(x.grad(), x2.grad(), 1e-5, 1e-6));
    BOOST_TEST(allclose(y, cos(cos(x.detach()))));
}

BOOST_AUTO_TEST_CASE(saved_report_counts_builtin_nodes_and_prints_one_line_each) {
    Tensor x = randn({4, 3}, {.requires_grad = true});
    Tensor y = (exp(x) * x).sum();  // sum saves nothing; mul saves both; exp saves out
    autograd::SavedReport r = autograd::saved_report(y);
    BOOST_TEST(r.nodes.size() == 3u);
    BOOST_TEST(r.nodes[0].node == "SumBackward0");
    BOOST_TEST(r.nodes[0].tensors == 0u);
    BOOST_TEST(r.nodes[1].node == "MulBackward0");
    BOOST_TEST(r.nodes[1].tensors == 2u);
    BOOST_TEST(r.nodes[1].bytes == 2u * 12u * 4u);
    BOOST_TEST(r.nodes[2].node == "ExpBackward0");
    BOOST_TEST(r.total_tensors == 3u);
    BOOST_TEST(r.total_bytes == 3u * 48u);
    std::ostringstream os;
    os << r;
    BOOST_TEST(os.str() ==
               "node          saved  bytes\n"
               "SumBackward0      0  0\n"
               "MulBackward0      2  96\n"
               "ExpBackward0      1  48\n"
               "total             3  144\n");
    BOOST_TEST(autograd::saved_report(x).nodes.empty());  // a leaf has no graph
}

BOOST_AUTO_TEST_CASE(saved_tensors_hook_sees_function_saves) {
    std::vector<Shape> seen;
    autograd::SavedTensorsHooks hooks([&](const Tensor& t) { seen.push_back(t.shape()); });
    Tensor x = randn({2, 3}, {.requires_grad = true});
    CaptureCout quiet;
    Cosine::apply(x);
    BOOST_TEST(seen.size() == 1u);
    BOOST_TEST(seen[0] == Shape({2, 3}));
}

BOOST_AUTO_TEST_CASE(ctx_forward_style_keeps_scalars_and_arguments) {
    Tensor x = randn({3}, {.requires_grad = true});
    Tensor y = Scale::apply(x, 2.5);
    BOOST_TEST(allclose(y, x.detach() * 2.5));
    y.sum().backward();
    BOOST_TEST(allclose(x.grad(), full({3}, 2.5)));
}

BOOST_AUTO_TEST_CASE(two_inputs_and_broadcast_gradient) {
    Tensor x = randn({2, 3}, {.requires_grad = true});
    Tensor b = randn({3}, {.requires_grad = true});
    Tensor y = MulAdd::apply(x, b, int64_t(4));
    BOOST_TEST(y.grad_fn()->next.size() == 2u);
    y.sum().backward();
    BOOST_TEST(allclose(x.grad(), full({2, 3}, 4.0)));
    BOOST_TEST(allclose(b.grad(), full({3}, 2.0)));  // summed back from [2, 3]
}

BOOST_AUTO_TEST_CASE(no_node_without_grad) {
    Tensor x = randn({5, 5, 5});
    CaptureCout capture;
    Tensor y = Cosine::apply(x);
    BOOST_TEST(!y.grad_fn());
    BOOST_TEST(!y.requires_grad());
    Tensor z = randn({2}, {.requires_grad = true});
    {
        NoGradGuard no_grad;
        BOOST_TEST(!Cosine::apply(z).requires_grad());
    }
    BOOST_TEST(capture.text.str().find("[5, 5, 5]") != std::string::npos);  // setup_context still runs
}

BOOST_AUTO_TEST_CASE(function_gradients_pass_gradcheck) {
    CaptureCout quiet;
    Tensor x = randn({3, 4});
    BOOST_TEST(gradcheck([](const std::vector<Tensor>& in) { return naive_two_cosine(in[0]); }, {x}));
    BOOST_TEST(gradcheck([](const std::vector<Tensor>& in) { return Scale::apply(in[0], -1.5); }, {x}));
}

BOOST_AUTO_TEST_CASE(errors_explain_bad_backward_and_second_backward) {
    Tensor x = randn({3}, {.requires_grad = true});
    Tensor y = WrongCount::apply(x);
    BOOST_CHECK_EXCEPTION(y.sum().backward(), Error, [](const Error& e) {
        return std::string(e.what()).find("WrongCountBackward: backward returned 2 gradients, expected 1") != std::string::npos;
    });
    CaptureCout quiet;
    Tensor z = Cosine::apply(x).sum();
    z.backward();
    BOOST_CHECK_EXCEPTION(z.backward(), Error, [](const Error& e) {
        return std::string(e.what()).find("retain_graph=true") != std::string::npos;
    });
    BOOST_CHECK_EXCEPTION(AskWrongType::apply(x, 2.0), Error, [](const Error& e) {
        return std::string(e.what()).find("AskWrongType: argument 1 has type double") != std::string::npos;
    });
}

BOOST_AUTO_TEST_CASE(returning_an_input_does_not_rewire_it) {
    Tensor x = randn({3}, {.requires_grad = true});
    Tensor y = Identity::apply(x);
    BOOST_TEST(x.is_leaf());
    BOOST_TEST(!y.same(x));
    y.sum().backward();
    BOOST_TEST(allclose(x.grad(), full({3}, 3.0)));
}

namespace {

// A backward that is not forward's derivative: only the Function can give this gradient.
struct Weird : autograd::Function<Weird> {
    static int forwards;  // forward runs on every call, compiled or not
    static Tensor forward(const Tensor& x) {
        ++forwards;
        return x * 2.0;
    }
    static void setup_context(autograd::Ctx& ctx, const std::vector<Tensor>& inputs,
                              const Tensor&) {
        ctx.save_for_backward(inputs[0]);
    }
    static std::vector<Tensor> backward(autograd::Ctx& ctx, const Tensor& grad) {
        return {grad * 10.0 + ctx.saved_tensors()[0]};
    }
};
int Weird::forwards = 0;

Tensor weird_sum(const Tensor& x) { return Weird::apply(x).sum(); }
Tensor weird_between_ops(const Tensor& x) { return sin(Weird::apply(x * 3.0)).sum(); }

}  // namespace

BOOST_AUTO_TEST_CASE(compiled_function_gives_the_functions_gradient_under_every_backend) {
    for (const char* backend : {"eager", "aot_eager", "inductor"}) {
        BOOST_TEST_CONTEXT(backend) {
            for (Tensor (*fn)(const Tensor&) : {weird_sum, weird_between_ops}) {
                jit::reset();
                Tensor x = randn({4}, {.requires_grad = true});
                Tensor want = fn(x);
                want.backward();
                Tensor want_grad = x.grad();
                auto compiled = compile(fn, {.backend = backend});
                for (int call = 0; call < 3; ++call) {  // recording, then cache hits
                    x.zero_grad();
                    int before = Weird::forwards;
                    Tensor got = compiled(x);
                    BOOST_TEST(Weird::forwards == before + 1);
                    BOOST_TEST(got.requires_grad());
                    BOOST_REQUIRE(got.grad_fn());
                    BOOST_TEST(allclose(got, want));
                    got.backward();
                    BOOST_TEST(allclose(x.grad(), want_grad, 1e-5, 1e-6));
                }
                jit::ExplainOutput e = jit::explain_compiled(compiled);
                BOOST_TEST(e.graph_break_count == 1);
                BOOST_TEST(e.break_reasons[0].reason.find("autograd Function") !=
                           std::string::npos);
            }
            Tensor plain = randn({4});  // no input needs grad: forward's ops stay in one graph
            auto compiled = compile(weird_sum, {.backend = backend});
            BOOST_TEST(allclose(compiled(plain), weird_sum(plain)));
            BOOST_TEST(jit::explain_compiled(compiled).graph_break_count == 0);
        }
    }
}

BOOST_AUTO_TEST_CASE(export_refuses_a_function_that_needs_grad) {
    Tensor x = randn({4}, {.requires_grad = true});
    BOOST_CHECK_EXCEPTION(jit::export_graph(weird_sum, x), Error, [](const Error& e) {
        return std::string(e.what()).find("autograd Function apply()") != std::string::npos;
    });
}
