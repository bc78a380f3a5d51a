// cuda::GraphedStep (tensor/cuda_graph_step.h): a whole training step captured as one CUDA
// graph equals the same step run eagerly, step by step (loss, parameters, gradients), with
// SGD-momentum, Adam (its step count on the device), a compiled forward, dropout (the same
// draws as eager from the same seed, fresh ones each replay) and index kernels (their range
// checks after a replay); a step that reads a value on the host raises naming the read and
// leaves the model as it was; the graph keeps the blocks it writes. The API's misuse is
// checked without a GPU too.
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "codegen/cuda_backend.h"
#include "kiln.h"
#include "models/gpt.h"
#include "tensor/cuda.h"
#include "tensor/cuda_graph_step.h"
#include "tensor/cuda_optim.h"
#include "tensor/cuda_runtime.h"
#include "tests/codegen/compare.h"
#include "tests/cuda/needs_gpu.h"
#include "tests/scoped_env.h"

using namespace kiln;
using kiln_test::kCuda;
namespace utf = boost::unit_test;
namespace F = nn::functional;

namespace {

std::vector<Tensor> host_copies(const std::vector<Tensor>& ts) {
    std::vector<Tensor> out;
    for (const Tensor& t : ts) out.push_back(t.detach().cpu());
    return out;
}

// One model, its optimizer and its static inputs; `graphed` runs its step through a
// GraphedStep, the other eagerly. make_step(model) returns the step (it may compile).
struct Trainer {
    std::shared_ptr<nn::Module> net;
    std::unique_ptr<optim::Optimizer> opt;
    Tensor x, y;  // static inputs, refilled in place before each step
    std::function<std::vector<Tensor>()> step;
};

using MakeNet = std::function<std::shared_ptr<nn::Module>()>;
using MakeOpt = std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)>;
using Loss = std::function<Tensor(const Tensor& out, const Tensor& target)>;

Trainer make_trainer(const MakeNet& make_net, const MakeOpt& make_opt, const Loss& loss_fn,
                     Shape x_shape, Shape y_shape, DType y_dtype, bool compiled,
                     DType x_dtype = DType::float32) {
    Trainer t;
    manual_seed(11);
    t.net = make_net();
    t.net->to(kCuda);
    t.opt = make_opt(t.net->parameters());
    t.x = zeros(x_shape, {.dtype = x_dtype, .device = kCuda});
    t.y = zeros(y_shape, {.dtype = y_dtype, .device = kCuda});
    std::function<Tensor(const Tensor&)> forward = [net = t.net](const Tensor& in) {
        return (*net)(in);
    };
    if (compiled) {
        auto f = std::make_shared<decltype(compile(*t.net))>(compile(*t.net));
        forward = [f](const Tensor& in) { return (*f)(in); };
    }
    optim::Optimizer* opt = t.opt.get();  // owned by the trainer, which outlives its step
    Tensor x = t.x, y = t.y;
    t.step = [opt, forward, loss_fn, x, y] {
        opt->zero_grad();
        Tensor loss = loss_fn(forward(x), y);
        loss.backward();
        opt->step();
        return std::vector<Tensor>{loss};
    };
    return t;
}

struct Batches {
    std::vector<Tensor> xs, ys;
};

// Trains `steps` steps eagerly and through a GraphedStep (warm-up 2: two eager calls, the
// capture, then replays) from the same start on the same batches, seeding the generator
// alike before each step; after each, the losses, parameters and gradients agree within `tol`.
void check_graphed_equals_eager(const std::string& what, const MakeNet& make_net,
                                const MakeOpt& make_opt, const Loss& loss_fn, const Batches& b,
                                DType y_dtype, bool compiled, double tol) {
    BOOST_TEST_CONTEXT(what) {
        DType x_dtype = b.xs[0].dtype();
        Trainer eager = make_trainer(make_net, make_opt, loss_fn, b.xs[0].shape(), b.ys[0].shape(),
                                     y_dtype, false, x_dtype);
        Trainer graphed = make_trainer(make_net, make_opt, loss_fn, b.xs[0].shape(),
                                       b.ys[0].shape(), y_dtype, compiled, x_dtype);
        cuda::GraphedStep step(graphed.step, {.warmup = 2});
        for (size_t s = 0; s < b.xs.size(); ++s) {
            {
                NoGradGuard no_grad;
                eager.x.copy_(b.xs[s]), eager.y.copy_(b.ys[s]);
                graphed.x.copy_(b.xs[s]), graphed.y.copy_(b.ys[s]);
            }
            manual_seed(1000 + int64_t(s));
            Tensor want = eager.step()[0].detach().cpu();
            manual_seed(1000 + int64_t(s));
            int64_t ops = cuda::detail::operations_issued();
            Tensor got = step()[0];
            if (s > 2)
                BOOST_TEST(
                    cuda::detail::operations_issued() - ops <= 5,
                    "step " << s << ": a replay is one launch (and the random state's refill)");
            BOOST_TEST(kiln_test::relative_error(got.cpu(), want) <= tol, "loss, step " << s);
            auto pg = graphed.net->parameters(), pe = eager.net->parameters();
            for (size_t k = 0; k < pe.size(); ++k) {
                BOOST_TEST(
                    kiln_test::relative_error(pg[k].detach().cpu(), pe[k].detach().cpu()) <= tol,
                    "parameter " << k << ", step " << s << " (its gradient's largest |value| "
                                 << pe[k].grad().abs().amax().item<double>() << ")");
                BOOST_REQUIRE(pg[k].grad().defined());
                BOOST_TEST(kiln_test::relative_error(pg[k].grad().cpu(), pe[k].grad().cpu()) <= tol,
                           "gradient " << k << ", step " << s);
            }
        }
        BOOST_TEST(step.captured());
        BOOST_TEST(step.replays() == int64_t(b.xs.size()) - 2);
        BOOST_TEST(step.replays() >= 3);
    }
}

MakeNet mlp(double dropout = 0) {
    return [dropout]() -> std::shared_ptr<nn::Module> {
        if (dropout > 0)
            return nn::sequential(nn::Linear(20, 64), nn::ReLU(), nn::Dropout(dropout),
                                  nn::Linear(64, 4));
        return nn::sequential(nn::Linear(20, 64), nn::ReLU(), nn::Linear(64, 4));
    };
}

Batches regression_batches(int n) {
    manual_seed(7);
    Batches b;
    for (int i = 0; i < n; ++i)
        b.xs.push_back(randn({32, 20}).cuda()), b.ys.push_back(randn({32, 4}).cuda());
    return b;
}

Loss mse() {
    return [](const Tensor& out, const Tensor& t) { return F::mse_loss(out, t); };
}

MakeOpt sgd_momentum() {
    return [](std::vector<Tensor> p) { return std::make_unique<optim::SGD>(p, 0.05, 0.9, 1e-3); };
}

}  // namespace

BOOST_AUTO_TEST_SUITE(cuda_graph_step)

// Without a GPU the first call raises naming GraphedStep and what is missing, and the step
// function never ran; an empty function and warmup 0 are refused when made (any machine).
BOOST_AUTO_TEST_CASE(misuse_and_a_machine_without_gpu_raise_clear_errors) {
    BOOST_CHECK_EXCEPTION(cuda::GraphedStep(cuda::GraphedStep::Fn{}), Error, [](const Error& e) {
        return std::string(e.what()).find("GraphedStep: the step function is empty") !=
               std::string::npos;
    });
    auto loss = [] { return zeros({}, {.device = kCuda}); };
    BOOST_CHECK_EXCEPTION(cuda::GraphedStep(loss, {.warmup = 0}), Error, [](const Error& e) {
        std::string m = e.what();
        return m.find("warmup is 0") != std::string::npos &&
               m.find("at least 1") != std::string::npos;
    });
    int ran = 0;
    cuda::GraphedStep step([&] {
        ++ran;
        return std::vector<Tensor>{};
    });
    BOOST_TEST(!step.captured());
    if (cuda::is_available()) {
        std::cout << "cuda_graph_step: the no-GPU error is not checked on a machine with a GPU\n";
        return;
    }
    BOOST_CHECK_EXCEPTION(step(), Error, [](const Error& e) {
        std::string m = e.what();
        return m.find("GraphedStep") != std::string::npos &&
               m.find("CUDA is not available") != std::string::npos;
    });
    BOOST_TEST(ran == 0);
    BOOST_TEST(step.calls() == 0);
}

// An output on the CPU would be the capture's value forever: refused, naming the output.
// The ops whose work is being issued, as a capture's refusal names them (no GPU needed).
BOOST_AUTO_TEST_CASE(op_scopes_name_the_ops_in_flight) {
    BOOST_TEST(cuda::detail::current_ops() == "");
    {
        cuda::detail::OpScope outer("arange");
        BOOST_TEST(cuda::detail::current_ops() == "arange");
        {
            cuda::detail::OpScope inner("to_device");
            BOOST_TEST(cuda::detail::current_ops() == "arange > to_device");
        }
        BOOST_TEST(cuda::detail::current_ops() == "arange");
    }
    BOOST_TEST(cuda::detail::current_ops() == "");
}

BOOST_AUTO_TEST_CASE(a_cpu_output_is_refused,
                     *utf::precondition(kiln_test::NeedsGpu{"cuda_graph_step"})) {
    cuda::GraphedStep step([] {
        return std::vector<Tensor>{ones({2}, {.device = kCuda}), zeros({3})};
    });
    BOOST_CHECK_EXCEPTION(step(), Error, [](const Error& e) {
        return std::string(e.what()).find("output 1 of the step is on cpu") != std::string::npos;
    });
}

BOOST_AUTO_TEST_CASE(sgd_momentum_step_captured_equals_eager,
                     *utf::precondition(kiln_test::NeedsGpu{"cuda_graph_step"})) {
    check_graphed_equals_eager("MLP, SGD momentum + weight decay", mlp(), sgd_momentum(), mse(),
                               regression_batches(6), DType::float32, false, 1e-6);
}

// Adam's bias corrections change every step (1 - beta^t): a step count baked into the
// capture would make every replay's update differ from eager's.
BOOST_AUTO_TEST_CASE(adam_step_captured_equals_eager,
                     *utf::precondition(kiln_test::NeedsGpu{"cuda_graph_step"})) {
    MakeOpt adam = [](std::vector<Tensor> p) {
        return std::make_unique<optim::Adam>(p, 1e-2, std::pair{0.9, 0.999}, 1e-8, 1e-3);
    };
    check_graphed_equals_eager("MLP, Adam", mlp(), adam, mse(), regression_batches(6),
                               DType::float32, false, 1e-6);
    // A classifier: cross_entropy gathers by the targets (an index kernel with a range check
    // inside the capture).
    manual_seed(8);
    Batches cls;
    for (int i = 0; i < 6; ++i)
        cls.xs.push_back(randn({32, 20}).cuda()), cls.ys.push_back(randint(0, 4, {32}).cuda());
    check_graphed_equals_eager(
        "MLP classifier, Adam, cross_entropy", mlp(), adam,
        [](const Tensor& out, const Tensor& t) { return F::cross_entropy(out, t); }, cls,
        DType::int64, false, 1e-6);
}

// Adam's per-tensor path (the reference, KILN_FUSED_OPTIM=0) captured too: its step count
// lives on the GPU and is counted there, so the capture takes no copy from host memory.
BOOST_AUTO_TEST_CASE(adam_per_tensor_step_captured_equals_eager,
                     *utf::precondition(kiln_test::NeedsGpu{"cuda_graph_step"})) {
    kiln_test::ScopedEnv per_tensor("KILN_FUSED_OPTIM", "0");
    MakeOpt adam = [](std::vector<Tensor> p) {
        return std::make_unique<optim::Adam>(p, 1e-2, std::pair{0.9, 0.999}, 1e-8, 1e-3);
    };
    int64_t launches = cuda::fused_optim_launches();
    check_graphed_equals_eager("MLP, Adam, per-tensor", mlp(), adam, mse(), regression_batches(6),
                               DType::float32, false, 1e-6);
    BOOST_TEST(cuda::fused_optim_launches() == launches, "the per-tensor path ran");
}

// The layers of the benchmark models inside a captured step, each of which once made a
// copy from host memory or a host read per step: a CNN (conv2d, batch norm in training mode
// with its running statistics, max_pool2d, a class loss, whose classes come from arange) and
// a small GPT decoder (embedding, positions and the causal mask from arange, attention, layer
// norm, a class loss over every token), with SGD-momentum and Adam, eager and compiled.
// Adam takes eps = 1e-4 here: a parameter whose true gradient is 0 (a bias that a softmax over
// keys or a batch norm cancels) gets rounding noise as its gradient, which Adam with a tiny eps
// turns into +-lr steps in a direction the noise picks, so two equal runs with different
// rounding (atomics in scatter_add and cuDNN, compiled kernels) part by lr there. On the H100
// (commit 8fb194e, eps 1e-8) parameters 1 (the CNN's conv bias) and 5 and 17 (GPT's attention
// in_proj_bias: its key part) parted so from steps 0 and 1, the eager warm-up steps before any
// capture, their gradients all within tolerance. The convolution before the batch norm has no
// bias, as ResNet's.
BOOST_AUTO_TEST_CASE(cnn_and_gpt_steps_captured_equal_eager,
                     *utf::precondition(kiln_test::NeedsGpu{"cuda_graph_step"})) {
    MakeNet cnn = []() -> std::shared_ptr<nn::Module> {
        return nn::sequential(nn::Conv2d(3, 8, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, /*bias=*/false),
                              nn::BatchNorm2d(8), nn::ReLU(), nn::MaxPool2d({2, 2}), nn::Flatten(),
                              nn::Linear(8 * 4 * 4, 10));
    };
    manual_seed(12);
    Batches images;
    for (int i = 0; i < 6; ++i)
        images.xs.push_back(randn({8, 3, 8, 8}).cuda()),
            images.ys.push_back(randint(0, 10, {8}).cuda());
    Loss classes = [](const Tensor& out, const Tensor& t) { return F::cross_entropy(out, t); };
    MakeOpt adam = [](std::vector<Tensor> p) {
        return std::make_unique<optim::Adam>(p, 1e-2, std::pair{0.9, 0.999}, 1e-4);
    };
    check_graphed_equals_eager("CNN, SGD momentum", cnn, sgd_momentum(), classes, images,
                               DType::int64, false, 1e-5);
    check_graphed_equals_eager("CNN, Adam, compiled", cnn, adam, classes, images, DType::int64,
                               true, 1e-4);

    MakeNet gpt = []() -> std::shared_ptr<nn::Module> {
        return std::make_shared<models::Gpt>(models::GptConfig{
            .vocab_size = 64, .max_positions = 16, .layers = 2, .d_model = 32, .heads = 4});
    };
    Batches tokens;
    for (int i = 0; i < 6; ++i)
        tokens.xs.push_back(randint(0, 64, {4, 16}).cuda()),
            tokens.ys.push_back(randint(0, 64, {4 * 16}).cuda());
    Loss next_token = [](const Tensor& logits, const Tensor& t) {
        return F::cross_entropy(logits.reshape({t.size(0), logits.size(-1)}), t);
    };
    check_graphed_equals_eager("GPT, Adam", gpt, adam, next_token, tokens, DType::int64, false,
                               1e-5);
    check_graphed_equals_eager("GPT, SGD momentum, compiled", gpt, sgd_momentum(), next_token,
                               tokens, DType::int64, true, 1e-4);
}

// arange on the GPU fills on the device where its values are integers (a copy from host
// memory could not be captured), equal to the CPU's; other ranges still equal it.
BOOST_AUTO_TEST_CASE(arange_on_the_gpu_equals_the_cpu_and_integer_ranges_capture,
                     *utf::precondition(kiln_test::NeedsGpu{"cuda_graph_step"})) {
    for (DType dt : {DType::float32, DType::float64, DType::int64})
        for (auto [lo, hi, step] : {std::tuple{0.0, 128.0, 1.0},
                                    {5.0, -7.0, -3.0},
                                    {0.0, 1.0, 0.125},
                                    {-2.5, 3.0, 0.7}}) {
            if (dt == DType::int64 && step != std::floor(step)) continue;
            Tensor got = arange(lo, hi, step, {.dtype = dt, .device = kCuda}).cpu();
            Tensor want = arange(lo, hi, step, {.dtype = dt});
            BOOST_TEST(got.shape() == want.shape());
            BOOST_TEST(
                kiln_test::relative_error(got.to(DType::float64), want.to(DType::float64)) == 0.0,
                dtype_name(dt) << " [" << lo << ", " << hi << ") step " << step);
        }
    cuda::GraphedStep step(
        [] { return arange(0.0, 16.0, 1.0, {.dtype = DType::int64, .device = kCuda}) * 2; },
        {.warmup = 1});
    step();
    BOOST_TEST(kiln_test::relative_error(step()[0].cpu().to(DType::float64),
                                         arange(0.0, 32.0, 2.0, {.dtype = DType::float64})) == 0.0);
    // A fractional range still copies from host memory: under a capture that is refused,
    // naming the op.
    cuda::GraphedStep fractional([] { return arange(0.0, 1.0, 0.1, {.device = kCuda}); },
                                 {.warmup = 1});
    fractional();
    BOOST_CHECK_EXCEPTION(fractional(), Error, [](const Error& e) {
        std::string m = e.what();
        return m.find("copy from host memory") != std::string::npos &&
               m.find("in op `arange`") != std::string::npos;
    });
}

// A compiled forward (and its compiled backward) inside the captured step: the compiled
// graphs' launches go into the step's capture; under mode="reduce-overhead" they capture no
// graph of their own inside it.
BOOST_AUTO_TEST_CASE(a_compiled_forward_is_captured_in_the_step,
                     *utf::precondition(kiln_test::NeedsGpu{"cuda_graph_step"})) {
    check_graphed_equals_eager("MLP compiled, SGD momentum", mlp(), sgd_momentum(), mse(),
                               regression_batches(6), DType::float32, true, 1e-5);
    // reduce-overhead: a compiled loss whose own CudaGraphReplay is called inside the capture.
    auto loss_fn =
        compile([](const Tensor& out, const Tensor& t) { return ((out - t) * (out - t)).mean(); },
                {.mode = "reduce-overhead"});
    codegen::CudaGraphStats before = codegen::cuda_graph_stats();
    check_graphed_equals_eager(
        "MLP, reduce-overhead loss", mlp(), sgd_momentum(),
        [&](const Tensor& out, const Tensor& t) { return loss_fn(out, t); }, regression_batches(6),
        DType::float32, false, 1e-5);
    codegen::CudaGraphStats after = codegen::cuda_graph_stats();
    BOOST_TEST(after.inside_outer - before.inside_outer >= 1,
               "the compiled loss ran inside the step's capture");
    BOOST_TEST(after.not_captured == before.not_captured, after.last_not_captured.substr(0, 300));
}

// Gradients zeroed in place (not dropped) and accumulated over two micro-batches inside the
// step: the .grad buffers of the warm-up are the graph's static gradients, each replay zeroes
// and refills them; equal to the same step run eagerly.
BOOST_AUTO_TEST_CASE(zeroed_and_accumulated_gradients_in_a_captured_step_equal_eager,
                     *utf::precondition(kiln_test::NeedsGpu{"cuda_graph_step"})) {
    Batches b = regression_batches(6);
    auto run = [&](bool graphed) {
        manual_seed(11);
        std::shared_ptr<nn::Module> net = mlp()();
        net->to(kCuda);
        std::vector<Tensor> params = net->parameters();
        optim::SGD opt(params, 0.05, 0.9);
        Tensor x = zeros({32, 20}, {.device = kCuda}), y = zeros({32, 4}, {.device = kCuda});
        auto step = [&] {
            for (Tensor& p : params)
                if (p.grad().defined()) p.grad().fill_(0.0);
            Tensor total = zeros({}, {.device = kCuda});
            for (int half = 0; half < 2; ++half) {
                Tensor loss =
                    F::mse_loss((*net)(x.narrow(0, 16 * half, 16)), y.narrow(0, 16 * half, 16)) *
                    0.5;
                loss.backward();
                total = total + loss.detach();
            }
            opt.step();
            return std::vector<Tensor>{total};
        };
        cuda::GraphedStep graphed_step(step, {.warmup = 2});
        std::vector<Tensor> seen;  // per step: the loss, then each parameter and gradient
        for (size_t s = 0; s < b.xs.size(); ++s) {
            x.copy_(b.xs[s]), y.copy_(b.ys[s]);
            const void* grad0 = params[0].grad().defined() ? params[0].grad().raw_data() : nullptr;
            seen.push_back((graphed ? graphed_step() : step())[0].cpu());
            if (graphed && s >= 2)
                BOOST_TEST(params[0].grad().raw_data() == grad0,
                           "step " << s << ": the same buffer");
            for (const Tensor& p : params)
                seen.push_back(p.detach().cpu()), seen.push_back(p.grad().cpu());
        }
        if (graphed) BOOST_TEST(graphed_step.replays() == 4);
        return seen;
    };
    std::vector<Tensor> eager = run(false), graphed = run(true);
    BOOST_REQUIRE(eager.size() == graphed.size());
    for (size_t i = 0; i < eager.size(); ++i)
        BOOST_TEST(kiln_test::relative_error(graphed[i], eager[i]) <= 1e-6, "value " << i);
}

// Dropout inside the step: each replay draws fresh numbers, and from the same generator
// state as an eager step they are the same numbers (a replay takes its draws in one block,
// in the order the eager step takes them).
BOOST_AUTO_TEST_CASE(dropout_draws_fresh_numbers_each_replay_as_eager_does,
                     *utf::precondition(kiln_test::NeedsGpu{"cuda_graph_step"})) {
    check_graphed_equals_eager("MLP with dropout, SGD momentum", mlp(0.5), sgd_momentum(), mse(),
                               regression_batches(6), DType::float32, false, 1e-6);
    // The masks of consecutive replays differ, and equal eager's for the same seed.
    Tensor x = ones({4096}, {.device = kCuda});
    cuda::GraphedStep step([&] { return F::dropout(x, 0.5, true); }, {.warmup = 1});
    step();
    std::vector<Tensor> masks;
    for (int i = 0; i < 3; ++i) {
        manual_seed(50 + i);
        masks.push_back(step()[0].cpu());
    }
    BOOST_TEST(step.replays() == 3);
    for (int i = 0; i < 3; ++i) {
        manual_seed(50 + i);
        BOOST_TEST(
            kiln_test::relative_error(masks[size_t(i)], F::dropout(x, 0.5, true).cpu()) == 0.0,
            "replay " << i);
        double kept = (masks[size_t(i)] > 0.0).to(DType::float64).mean().item<double>();
        BOOST_TEST(std::abs(kept - 0.5) < 0.05, "replay " << i << " kept " << kept);
    }
    BOOST_TEST(kiln_test::relative_error(masks[0], masks[1]) > 0.0);
    BOOST_TEST(kiln_test::relative_error(masks[1], masks[2]) > 0.0);
}

// item() inside the step: the capture raises naming the read, every later call says the step
// could not be captured, the parameters keep their values, and eager training goes on.
BOOST_AUTO_TEST_CASE(a_host_read_in_the_step_raises_and_the_model_is_unharmed,
                     *utf::precondition(kiln_test::NeedsGpu{"cuda_graph_step"})) {
    Batches b = regression_batches(4);
    Trainer t =
        make_trainer(mlp(), sgd_momentum(), mse(), {32, 20}, {32, 4}, DType::float32, false);
    Trainer ref =
        make_trainer(mlp(), sgd_momentum(), mse(), {32, 20}, {32, 4}, DType::float32, false);
    double logged = 0;
    cuda::GraphedStep step(
        [&] {
            std::vector<Tensor> out = t.step();
            logged += out[0].item<double>();  // a host read: fine eagerly, not in a capture
            return out;
        },
        {.warmup = 1});
    t.x.copy_(b.xs[0]), t.y.copy_(b.ys[0]), ref.x.copy_(b.xs[0]), ref.y.copy_(b.ys[0]);
    step();
    ref.step();
    std::vector<Tensor> before = host_copies(t.net->parameters());
    t.x.copy_(b.xs[1]), t.y.copy_(b.ys[1]);
    BOOST_CHECK_EXCEPTION(step(), Error, [](const Error& e) {
        std::string m = e.what();
        std::cout << "cuda_graph_step: " << m.substr(0, 400) << "\n";
        return m.find("GraphedStep: the step cannot be captured") != std::string::npos &&
               m.find("item()") != std::string::npos &&
               m.find("cannot be captured into a CUDA graph") != std::string::npos;
    });
    std::vector<Tensor> after = host_copies(t.net->parameters());
    for (size_t k = 0; k < before.size(); ++k)
        BOOST_TEST(kiln_test::relative_error(after[k], before[k]) == 0.0, "parameter " << k);
    BOOST_CHECK_EXCEPTION(step(), Error, [](const Error& e) {
        return std::string(e.what()).find("could not be captured earlier") != std::string::npos;
    });
    // Eager training goes on from where it was, as the reference's.
    for (int s = 1; s < 4; ++s) {
        t.x.copy_(b.xs[size_t(s)]), t.y.copy_(b.ys[size_t(s)]), ref.x.copy_(b.xs[size_t(s)]),
            ref.y.copy_(b.ys[size_t(s)]);
        double got = t.step()[0].item<double>(), want = ref.step()[0].item<double>();
        BOOST_TEST(std::abs(got - want) <= 1e-6 * (1 + std::abs(want)), "step " << s);
    }
    auto pt = t.net->parameters(), pr = ref.net->parameters();
    for (size_t k = 0; k < pt.size(); ++k)
        BOOST_TEST(kiln_test::relative_error(pt[k].detach().cpu(), pr[k].detach().cpu()) <= 1e-6,
                   "parameter " << k);
}

// A target out of range in a replayed cross_entropy raises at the next host wait, naming
// the op; the process goes on.
BOOST_AUTO_TEST_CASE(an_index_out_of_range_in_a_replay_raises_at_the_next_host_wait,
                     *utf::precondition(kiln_test::NeedsGpu{"cuda_graph_step"})) {
    Tensor logits = randn({8, 5}).cuda(), target = randint(0, 5, {8}).cuda();
    cuda::GraphedStep step([&] { return F::cross_entropy(logits, target); }, {.warmup = 1});
    Tensor want = F::cross_entropy(logits, target).cpu();
    step();
    BOOST_TEST(kiln_test::relative_error(step()[0].cpu(), want) <= 1e-6);
    target.copy_(full({8}, 7.0, {.dtype = DType::int64}).cuda());
    Tensor loss = step()[0];
    BOOST_CHECK_EXCEPTION(loss.cpu(), Error, [](const Error& e) {
        std::string m = e.what();
        return m.find("out of bounds") != std::string::npos &&
               m.find("replay") != std::string::npos;
    });
    target.copy_(randint(0, 5, {8}).cuda());
    BOOST_TEST(std::isfinite(step()[0].item<double>()));
}

// A tensor made during a capture and dropped afterwards keeps its block for the graph (its
// replays write it): a new tensor gets another block while the graph lives.
BOOST_AUTO_TEST_CASE(blocks_made_in_a_capture_stay_the_graphs,
                     *utf::precondition(kiln_test::NeedsGpu{"cuda_graph_step"})) {
    Tensor x = randn({1000}).cuda();
    Tensor kept = x * 1.0;  // warms the kernel up: the capture compiles nothing
    auto graph = std::make_unique<cuda::Graph>();
    Tensor out;
    graph->capture([&] { out = x * 2.0; });
    const void* block = out.raw_data();
    out = Tensor();
    Tensor fresh = empty({1000}, DType::float32, kCuda);
    BOOST_TEST(fresh.raw_data() != block, "the graph's block went to another tensor");
    fresh.fill_(5.0);
    graph->replay();
    BOOST_TEST(fresh.cpu().amin().item<double>() == 5.0);
    graph.reset();
}

BOOST_AUTO_TEST_SUITE_END()
