// Lesson 09: real models — ResNet-18 and a GPT decoder, eager vs compiled.
//
// Mirrors "Introduction to torch.compile", section "Demonstrating Speedups", which times
// torchvision's ResNet-18 (lesson 08 did it on an MLP): inference and a training step with
// the optimizer, eager and compiled; the first compiled call pays for compilation, once
// with an empty kernel cache (cold) and once with the kernels already built (warm); then
// timed calls and the median speedup. Two models from models/: ResNet-18 (models/resnet.h,
// torchvision's layout) and a GPT-2-style decoder (models/gpt.h).
//
// Also the memory of a training step: what the forward keeps for the backward, eager vs
// compiled. Eager autograd saves each op's inputs as it goes; the compiled step's forward
// saves only what the min-cut of AOT autograd chose (lesson 06), and recomputes cheap
// pointwise values in the backward instead of keeping them.
//
// CTest runs small sizes so the lesson stays short on a 2-core machine:
//   build/tutorial_09_real_models            ResNet-18 on 4 x 3 x 32 x 32, a 2-layer decoder
//                                            (d = 64) on 2 x 32 tokens, N_ITERS = 2; first
//                                            calls with the kernel cache as found
//   build/tutorial_09_real_models --cold     first calls with an empty kernel cache (cold)
//   build/tutorial_09_real_models --full     the tutorial's size: ResNet-18 on 16 x 3 x 224 x
//                                            224, the decoder of docs/models.md (4 layers,
//                                            d = 256, 8 x 128 tokens), cold, N_ITERS = 10;
//                                            or KILN_LESSON_FULL=1
//   build/tutorial_09_real_models --iters N  N timed calls of each kind
// It runs on the CPU, and again on the GPU where there is one.
//
// Timings move with the machine's load. The checks are about results (compiled equals
// eager, inference and every training step's loss) and about memory counted in bytes,
// never about speed.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "kiln.h"
#include "models/gpt.h"
#include "models/resnet.h"
#include "tensor/cuda.h"
#include "tensor/cuda_runtime.h"

using namespace kiln;
namespace fs = std::filesystem;

namespace {

bool on_gpu = false;
Device device = kiln::cpu;

// The tutorial's timed(): the result and the wall time in seconds; on the GPU it waits
// for the device first (torch.cuda.synchronize()), since kernels run asynchronously.
template <class Fn>
std::pair<Tensor, double> timed(Fn&& fn) {
    auto start = std::chrono::steady_clock::now();
    Tensor result = fn();
    if (on_gpu) cuda::synchronize();
    return {result,
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()};
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    size_t n = v.size();
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// A progress bar with an ETA, on stderr so that stdout stays the lesson's record.
struct Progress {
    int total = 0, done = 0;
    std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
    void step(const std::string& what) {
        ++done;
        double elapsed =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        double eta = elapsed / done * (total - done);
        int filled = total ? 30 * done / total : 30;
        std::fprintf(stderr, "\r[%-30s] %3d/%d  %-24s ETA %6.1f s",
                     std::string(filled, '#').c_str(), done, total, what.c_str(), eta);
        if (done == total) std::fprintf(stderr, "\n");
    }
};

// One model: how to build it (the same seed gives the same weights) and how to draw a
// batch: inputs and the targets of its loss.
struct Workload {
    std::string name;
    std::function<std::shared_ptr<nn::Module>()> make;
    std::function<std::pair<Tensor, Tensor>()> batch;
};

struct Row {
    std::string model, task;
    double eager_ms, compiled_ms, cold_s, warm_s;
};

// The loss both models train on: cross-entropy over the logits' last dim (the decoder's
// [B, T, vocab] logits are flattened to [B * T, vocab]).
Tensor loss_fn(nn::Module& module, const Tensor& input, const Tensor& target) {
    Tensor logits = module.forward(input);
    return nn::functional::cross_entropy(logits.reshape({target.size(0), logits.size(-1)}), target);
}
Tensor forward_fn(nn::Module& module, const Tensor& input) { return module.forward(input); }

// With --cold the kernel cache starts empty for the first call: KILN_CACHE_DIR pointed at
// a fresh folder (docs/env.md), which the warm call then finds full. Without it the first
// call uses the cache as it finds it (cold the first time a machine runs the lesson).
bool cold_cache = false;
struct FreshKernelCache {
    fs::path dir;
    std::string old;
    bool had_old = false;
    explicit FreshKernelCache(const std::string& tag) {
        if (!cold_cache) return;
        dir = fs::temp_directory_path() / ("kiln_lesson09_" + tag + "_" + std::to_string(getpid()));
        fs::remove_all(dir);
        if (const char* o = std::getenv("KILN_CACHE_DIR")) old = o, had_old = true;
        setenv("KILN_CACHE_DIR", dir.c_str(), 1);
    }
    ~FreshKernelCache() {
        if (!cold_cache) return;
        if (had_old)
            setenv("KILN_CACHE_DIR", old.c_str(), 1);
        else
            unsetenv("KILN_CACHE_DIR");
        std::error_code ec;
        fs::remove_all(dir, ec);
    }
};

template <class Check>
void run_model(Check& check, Workload& w, int n_iters, Progress& progress, std::vector<Row>& rows) {
    std::cout << "\n-- " << w.name << "\n";
    // The batches, drawn once: both paths see the same data.
    std::vector<std::pair<Tensor, Tensor>> batches;
    for (int i = 0; i < n_iters + 2; ++i) {
        auto [input, target] = w.batch();
        batches.push_back({input.to(device), target.to(device)});
    }
    Tensor x = batches[0].first, t = batches[0].second;

    // ------------------------------------------------------------ inference
    // One model in eval mode serves both paths (inference changes no state). The module is
    // an argument of the compiled function, so its entry is guarded on it (lesson 02).
    manual_seed(0);
    std::shared_ptr<nn::Module> net = w.make();
    net->to(device);
    net->eval();
    Row infer{w.name, "inference", 0, 0, 0, 0};
    {
        NoGradGuard no_grad;
        auto [eager_out, eager_first] = timed([&] { return forward_fn(*net, x); });
        FreshKernelCache cache(w.name + "_infer");
        jit::reset();
        auto compiled = compile(forward_fn);
        auto [out, cold] = timed([&] { return compiled(*net, x); });
        // Warm: the JIT's entries forgotten (jit::reset()), the kernels found again in the
        // cache instead of built: recording and lowering remain.
        jit::reset();
        auto again = compile(forward_fn);
        double warm = timed([&] { return again(*net, x); }).second;
        infer.cold_s = cold, infer.warm_s = warm;
        std::printf("inference first call: eager %.3f s; compiled, %s %.3f s, warm cache %.3f s\n",
                    eager_first, cold_cache ? "cold cache" : "cache as found", cold, warm);
        check(allclose(out.cpu(), eager_out.cpu(), 1e-3, 1e-4),
              w.name + ": compiled inference equals eager");
        std::vector<double> eager_s, compiled_s;
        for (int i = 0; i < n_iters; ++i) {
            eager_s.push_back(timed([&] { return forward_fn(*net, x); }).second);
            progress.step(w.name + " eager eval");
        }
        // The inductor measures its kernels against eager on the first calls after the
        // first and keeps the faster per graph (docs/codegen.md, "Kernels or eager"); time
        // what it chose.
        for (int i = 0; i < 6 && !on_gpu; ++i) again(*net, x);
        for (int i = 0; i < n_iters; ++i) {
            compiled_s.push_back(timed([&] { return again(*net, x); }).second);
            progress.step(w.name + " compiled eval");
        }
        infer.eager_ms = median(eager_s) * 1e3, infer.compiled_ms = median(compiled_s) * 1e3;
    }
    rows.push_back(infer);

    // ------------------------------------------------------------ training
    // Two models with equal weights (the same seed), each with SGD with momentum: one trained
    // eagerly, one with forward + loss compiled; backward() and the optimizer step run
    // outside the compiled function, as the tutorial's train(model_opt, data) does. Both see
    // the same batch every step.
    manual_seed(0);
    std::shared_ptr<nn::Module> eager_net = w.make();
    manual_seed(0);
    std::shared_ptr<nn::Module> comp_net = w.make();
    eager_net->to(device), comp_net->to(device);
    eager_net->train(), comp_net->train();
    optim::SGD eager_opt(eager_net->parameters(), 0.001, 0.9);
    optim::SGD comp_opt(comp_net->parameters(), 0.001, 0.9);
    jit::reset();
    auto compiled_loss = compile(loss_fn);
    int eager_steps = 0, comp_steps = 0;  // step i trains on batches[i]
    auto eager_step = [&] {
        const auto& [input, target] = batches[size_t(eager_steps++)];
        eager_opt.zero_grad();
        Tensor loss = loss_fn(*eager_net, input, target);
        loss.backward();
        eager_opt.step();
        return loss.detach();
    };
    auto compiled_step = [&] {
        const auto& [input, target] = batches[size_t(comp_steps++)];
        comp_opt.zero_grad();
        Tensor loss = compiled_loss(*comp_net, input, target);
        loss.backward();
        comp_opt.step();
        return loss.detach();
    };

    Row train{w.name, "training", 0, 0, 0, 0};
    std::vector<Tensor> eager_losses, comp_losses;
    {
        // Cold and warm first calls of the compiled step (a fresh kernel cache, then the
        // same cache after jit::reset()); the steps themselves are real training steps.
        FreshKernelCache cache(w.name + "_train");
        jit::reset();
        compiled_loss = compile(loss_fn);
        auto [l0, eager_first] = timed(eager_step);
        auto [c0, cold] = timed(compiled_step);
        // Step 0 started from equal weights on the same batch: the compiled backward's
        // gradients must be eager's (each parameter's, to 1e-3 of its norm). Later steps
        // start from weights that differ by rounding, and batch norm over a few images
        // amplifies that, so their losses are printed, not compared exactly.
        auto pe = eager_net->parameters(), pc = comp_net->parameters();
        double worst = 0;
        for (size_t i = 0; i < pe.size(); ++i) {
            Tensor ge = pe[i].grad().cpu(), gc = pc[i].grad().cpu();
            auto norm = [](const Tensor& v) { return std::sqrt((v * v).sum().item<double>()); };
            worst = std::max(worst, norm(gc - ge) / std::max(norm(ge), 1e-12));
        }
        std::printf(
            "step 0: %zu parameters, largest gradient difference %.1e of the gradient's norm\n",
            pe.size(), worst);
        const Tensor &loss_e = l0, &loss_c = c0;  // (plain Tensors, for item<double>())
        double e0 = loss_e.item<double>(), g0 = loss_c.item<double>();
        check(std::abs(g0 - e0) <= 1e-4 * std::abs(e0) + 1e-5 && worst < 1e-3,
              w.name + ": the compiled step 0 has eager's loss and gradients");
        jit::reset();
        compiled_loss = compile(loss_fn);
        auto [l1, warm_e] = timed(eager_step);
        auto [c1, warm] = timed(compiled_step);
        (void)warm_e;
        train.cold_s = cold, train.warm_s = warm;
        std::printf("training first step: eager %.3f s; compiled, %s %.3f s, warm cache %.3f s\n",
                    eager_first, cold_cache ? "cold cache" : "cache as found", cold, warm);
        eager_losses = {l0, l1}, comp_losses = {c0, c1};
    }
    // Memory: what each forward keeps alive for its backward (autograd::saved_report on
    // the loss, before backward frees it).
    {
        Tensor eager_loss = loss_fn(*eager_net, x, t);
        Tensor comp_loss = compiled_loss(*comp_net, x, t);
        autograd::SavedReport e = autograd::saved_report(eager_loss),
                              c = autograd::saved_report(comp_loss);
        std::printf(
            "saved for backward: eager %zu tensors, %.2f MB; compiled %zu tensors, %.2f MB\n",
            e.total_tensors, e.total_bytes / 1e6, c.total_tensors, c.total_bytes / 1e6);
        check(c.total_bytes < e.total_bytes,
              w.name + ": the compiled forward keeps fewer bytes for backward than eager");
    }
    std::vector<double> eager_s, compiled_s;
    for (int i = 0; i < n_iters; ++i) {
        auto [loss, s] = timed(eager_step);
        eager_s.push_back(s), eager_losses.push_back(loss);
        progress.step(w.name + " eager train");
    }
    for (int i = 0; i < n_iters; ++i) {
        auto [loss, s] = timed(compiled_step);
        compiled_s.push_back(s), comp_losses.push_back(loss);
        progress.step(w.name + " compiled train");
    }
    train.eager_ms = median(eager_s) * 1e3, train.compiled_ms = median(compiled_s) * 1e3;
    rows.push_back(train);
    for (size_t i = 0; i < eager_losses.size(); ++i)
        std::printf("step %zu  eager loss %.5f  compiled loss %.5f\n", i,
                    eager_losses[i].item<double>(), comp_losses[i].item<double>());
}

template <class Check>
void run_all(Check& check, bool full, int n_iters) {
    std::cout << "\n==== " << (on_gpu ? "CUDA (" + cuda::device_name(0) + ")" : std::string("CPU"))
              << (full ? ", full size" : ", small size (--full for the tutorial's)") << "\n";
    manual_seed(0);
    std::vector<Workload> work;
    int64_t side = full ? 224 : 32, images = full ? 16 : 4;
    const int64_t classes = full ? 1000 : 10;
    work.push_back(
        {"ResNet-18 " + std::to_string(images) + "x3x" + std::to_string(side) + "x" +
             std::to_string(side),
         [classes] { return std::make_shared<models::ResNet18>(classes); },
         [=] {
             return std::pair{randn({images, 3, side, side}), randint(0, classes, {images})};
         }});
    models::GptConfig gc =
        full ? models::GptConfig{.vocab_size = 1024,
                                 .max_positions = 128,
                                 .layers = 4,
                                 .d_model = 256,
                                 .heads = 4}
             : models::GptConfig{
                   .vocab_size = 128, .max_positions = 32, .layers = 2, .d_model = 64, .heads = 2};
    int64_t batch = full ? 8 : 2, tokens = gc.max_positions;
    work.push_back({"GPT " + std::to_string(gc.layers) + " layers d=" + std::to_string(gc.d_model) +
                        " on " + std::to_string(batch) + "x" + std::to_string(tokens),
                    [gc] { return std::make_shared<models::Gpt>(gc); },
                    [=] {
                        return std::pair{randint(0, gc.vocab_size, {batch, tokens}),
                                         randint(0, gc.vocab_size, {batch * tokens})};
                    }});
    Progress progress;
    progress.total = int(work.size()) * 4 * n_iters;
    std::vector<Row> rows;
    for (Workload& w : work) run_model(check, w, n_iters, progress, rows);

    std::printf("\n%s, N_ITERS = %d (medians)\n", on_gpu ? "CUDA" : "CPU", n_iters);
    std::printf("%-28s %-10s %10s %12s %8s %12s %12s\n", "model", "task", "eager ms", "compiled ms",
                "speedup", cold_cache ? "cold first s" : "first s", "warm first s");
    for (const Row& r : rows)
        std::printf("%-28s %-10s %10.2f %12.2f %7.2fx %12.2f %12.2f\n", r.model.c_str(),
                    r.task.c_str(), r.eager_ms, r.compiled_ms, r.eager_ms / r.compiled_ms, r.cold_s,
                    r.warm_s);
    // Reading it. On the CPU a ResNet's time is its convolutions (oneDNN in both columns);
    // compiling fuses eval batch norm, the residual add and relu into them in inference
    // (training keeps them apart: docs/models.md) and the rest into a few kernels, which
    // wins little where the convolutions dominate (cuDNN's on a GPU, in both columns too).
    // The decoder's layernorms, GELU and softmax become one kernel each. On a GPU every eager
    // op is a launch: fusion removes launches as well as memory traffic, and the speedups grow.

    // Attention on the GPU. PyTorch's scaled_dot_product_attention picks a fused kernel on CUDA
    // (flash or memory-efficient attention); kiln's does too in inference (no mask tensor,
    // dropout or gradient): the table op attention, one kernel whose online softmax keeps a
    // running maximum and sum per query, so the [L, S] weights are never written. The CPU,
    // and training, keep matmul, softmax, matmul (the weights saved for the backward).
    if (on_gpu) {
        autograd::NoGradGuard no_grad;
        int64_t heads = gc.heads, d = gc.d_model / gc.heads;
        Tensor q = randn({batch, heads, tokens, d}).to(device), k = randn({batch, heads, tokens, d}).to(device),
               v = randn({batch, heads, tokens, d}).to(device);
        auto launches = [&](const std::function<Tensor()>& f) {
            f();  // its kernels compiled
            cuda::synchronize();
            int64_t before = cuda::detail::operations_issued();
            Tensor out = f();
            int64_t n = cuda::detail::operations_issued() - before;
            cuda::synchronize();
            return std::pair{n, out};
        };
        auto [fused, a] = launches([&] { return nn::functional::scaled_dot_product_attention(q, k, v, {}, true); });
        auto [composed, b] = launches(
            [&] { return matmul(nn::functional::attention_weights(q, k, {}, true), v); });
        Tensor gap = (a - b).abs().amax();
        double diff = gap.item<double>();
        std::printf("\nattention of %lld heads over %lld tokens, causal: fused %lld launch(es), "
                    "matmul-softmax-matmul %lld; largest difference %.2e\n",
                    (long long)(batch * heads), (long long)tokens, (long long)fused, (long long)composed, diff);
        check(fused == 1 && diff < 1e-4,
              "attention on CUDA is one kernel and equals matmul-softmax-matmul");
    }
}

}  // namespace

int main(int argc, char** argv) {
    int failures = 0;
    auto check = [&](bool ok, const std::string& fact) {
        std::cout << "  check: " << fact << ": " << (ok ? "yes" : "NO") << "\n";
        failures += !ok;
    };
    const char* full_env = std::getenv("KILN_LESSON_FULL");
    bool full = full_env && std::strcmp(full_env, "1") == 0;
    int n_iters = 2;
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--full") == 0) full = true;
        if (std::strcmp(argv[i], "--cold") == 0) cold_cache = true;
        if (std::strcmp(argv[i], "--iters") == 0 && i + 1 < argc)
            n_iters = std::max(1, std::atoi(argv[i + 1]));
    }
    if (full && n_iters == 2) n_iters = 10;
    cold_cache = cold_cache || full;

    run_all(check, full, n_iters);
    if (cuda::is_available()) {
        on_gpu = true;
        device = Device{DeviceType::cuda, 0};
        run_all(check, full, n_iters);
    } else {
        std::cout << "\nCUDA: not available here (" << cuda::unavailable_reason() << ")\n";
    }
    std::cout << (failures ? "lesson 09: FAILED\n" : "lesson 09: all checks passed\n");
    return failures ? 1 : 0;
}
