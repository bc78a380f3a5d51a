// Lesson 08: demonstrating speedups — eager vs compiled, timed.
//
// Mirrors "Introduction to torch.compile", section "Demonstrating Speedups" (and the same
// section of the older "TorchDynamo and TorchInductor Tutorial"): time inference and a
// training step, eager and compiled; the first compiled call pays for compilation; then
// N_ITERS timed calls each, and the median speedup.
//
// The model is an MLP (784-512-512-10, batch 256); lesson 09 does the same with the
// tutorial's ResNet-18 and a GPT decoder. Training is compiled both ways the two tutorials
// do it: the older one compiles the model and keeps zero_grad, backward and the optimizer
// step outside (model_opt = torch.compile(model); train(model_opt, data)); the newer one
// compiles the whole step, optimizer included (train_opt = torch.compile(train)).
// The table runs on the CPU, and again on the GPU where there is one.
//
//   build/tutorial_08_speedups            N_ITERS = 10 (make demo-all)
//   build/tutorial_08_speedups --iters 3  fewer iterations (the CTest run)
//
// Timings are wall-clock and move with the machine's load; the checks below are about
// results (compiled equals eager), never about speed.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include "kiln.h"
#include "tensor/cuda.h"

using namespace kiln;
namespace F = nn::functional;

// The tutorial's helpers. timed(fn): fn's result and its wall time in seconds. On the CPU
// the work is done when fn returns; the GPU runs asynchronously, so timed() waits for it
// (the tutorial's torch.cuda.synchronize()).
bool on_gpu = false;
template <class Fn>
std::pair<Tensor, double> timed(Fn&& fn) {
    auto start = std::chrono::steady_clock::now();
    Tensor result = fn();
    if (on_gpu) cuda::synchronize();
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return {result, s};
}

// generate_data(b): a batch of random inputs and int64 class targets, on `device`.
Device device = kiln::cpu;
std::pair<Tensor, Tensor> generate_data(int64_t b) {
    return {randn({b, 784}).to(device), randint(0, 10, {b}).to(device)};
}

std::shared_ptr<nn::Sequential> init_model() {
    return nn::sequential(nn::Linear(784, 512), nn::ReLU(), nn::Linear(512, 512), nn::ReLU(),
                          nn::Linear(512, 10));
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    size_t n = v.size();
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Copies a's parameters into b (same architecture): two models with equal weights.
void copy_weights(nn::Module& from, nn::Module& to) {
    NoGradGuard no_grad;
    auto pe = from.parameters(), pc = to.parameters();
    for (size_t i = 0; i < pe.size(); ++i) pc[i].copy_(pe[i]);
}

// The whole demonstration on one device: inference, training three ways, the table.
template <class Check>
void run_table(Check& check, int n_iters) {
    const int64_t batch = 256;
    manual_seed(0);
    const std::string where = on_gpu ? "CUDA (" + cuda::device_name(0) + ")" : "CPU";
    std::cout << "\n==== " << (on_gpu ? "CUDA" : "CPU") << "\n";

    // A progress bar with an ETA over all timed iterations (5 loops of n_iters), on
    // stderr so that stdout stays the lesson's record.
    const int total_steps = 5 * n_iters;
    int done_steps = 0;
    auto bar_start = std::chrono::steady_clock::now();
    auto progress = [&](const char* what) {
        ++done_steps;
        double elapsed =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - bar_start).count();
        double eta = elapsed / done_steps * (total_steps - done_steps);
        int filled = 30 * done_steps / total_steps;
        std::fprintf(stderr, "\r[%-30s] %3d/%d  %-16s ETA %5.1f s",
                     std::string(filled, '#').c_str(), done_steps, total_steps, what, eta);
        if (done_steps == total_steps) std::fprintf(stderr, "\n");
    };
    // ---------------------------------------------------------------- inference
    // The compiled model is a separate copy with the same weights, so that both paths
    // see the same model and their answers can be compared.
    auto model = init_model();
    auto model_c = init_model();
    copy_weights(*model, *model_c);
    model->to(device);
    model_c->to(device);
    model->eval();
    model_c->eval();
    jit::reset();
    // fullgraph = true, as the tutorial does to show that the model compiles without a
    // break: an MLP's forward is one graph. (Default backend: inductor.)
    auto model_opt = compile(*model_c, {.fullgraph = true});

    Tensor inp = generate_data(batch).first;
    double eager_first, compile_first;
    {
        NoGradGuard no_grad;
        eager_first = timed([&] { return (*model)(inp); }).second;
        auto [out, s] = timed([&] { return model_opt(inp); });
        compile_first = s;
        check(allclose(out.cpu(), (*model)(inp).cpu(), 1e-4, 1e-5),
              "compiled inference equals eager");
    }
    std::printf("first call: eager %.4f s, compile %.4f s (recording + building kernels)\n",
                eager_first, compile_first);

    std::vector<double> eager_eval, compile_eval;
    for (int i = 0; i < n_iters; ++i) {
        Tensor x = generate_data(batch).first;
        NoGradGuard no_grad;
        eager_eval.push_back(timed([&] { return (*model)(x); }).second);
        progress("eager eval");
    }
    for (int i = 0; i < n_iters; ++i) {
        Tensor x = generate_data(batch).first;
        NoGradGuard no_grad;
        compile_eval.push_back(timed([&] { return model_opt(x); }).second);
        progress("compiled eval");
    }
    check(jit::counters().compiles == 1, "inference: one entry, every timed call a cache hit");

    // ---------------------------------------------------------------- training
    // Three fresh models with equal weights, each with its own Adam: eager; the whole step
    // compiled (Adam inside); the model compiled (Adam outside).
    auto train_model = init_model();
    auto train_model_c = init_model();
    auto train_model_m = init_model();
    copy_weights(*train_model, *train_model_c);
    copy_weights(*train_model, *train_model_m);
    for (auto* m : {&train_model, &train_model_c, &train_model_m}) (*m)->to(device);
    optim::Adam opt(train_model->parameters());
    optim::Adam opt_c(train_model_c->parameters());
    optim::Adam opt_m(train_model_m->parameters());

    // The tutorial's train(), returning the loss so the two runs can be compared.
    auto train = [](nn::Module& mod, optim::Optimizer& o, Tensor x, Tensor y) {
        o.zero_grad();
        Tensor pred = mod(x);
        Tensor loss = F::cross_entropy(pred, y);
        loss.backward();
        o.step();
        return loss.detach();
    };
    // The whole step compiled. backward() is a graph break that makes the entry re-run
    // its host code every call (docs/jit.md, "Runs every call"), its graphs — forward,
    // backward (AOT autograd) and the optimizer's update — served from the cache.
    auto train_opt =
        compile([&](Tensor x, Tensor y) { return train(*train_model_c, opt_c, x, y); });
    // The older tutorial's way: only the model compiled. zero_grad, the loss, backward()
    // and Adam's step run eagerly around it; backward runs the compiled backward graph
    // that AOT autograd made together with the forward (lesson 06).
    auto model_m_opt = compile(*train_model_m);
    auto train_outside = [&](Tensor x, Tensor y) {
        opt_m.zero_grad();
        Tensor loss = F::cross_entropy(model_m_opt(x), y);
        loss.backward();
        opt_m.step();
        return loss.detach();
    };

    std::vector<std::pair<Tensor, Tensor>> batches;
    for (int i = 0; i < n_iters + 1; ++i) batches.push_back(generate_data(batch));
    auto [eager_loss0, eager_train_first] =
        timed([&] { return train(*train_model, opt, batches[0].first, batches[0].second); });
    auto [compile_loss0, compile_train_first] =
        timed([&] { return train_opt(batches[0].first, batches[0].second); });
    auto [outside_loss0, outside_train_first] =
        timed([&] { return train_outside(batches[0].first, batches[0].second); });
    std::printf("first training step: eager %.4f s, compiled step %.4f s, compiled model %.4f s\n",
                eager_train_first, compile_train_first, outside_train_first);

    // What the JIT did during the timed compiled steps, to read the table by.
    std::vector<double> eager_train, compile_train, outside_train;
    std::vector<Tensor> eager_losses = {eager_loss0}, compile_losses = {compile_loss0},
                        outside_losses = {outside_loss0};
    for (int i = 1; i <= n_iters; ++i) {
        auto [loss, s] =
            timed([&] { return train(*train_model, opt, batches[i].first, batches[i].second); });
        eager_train.push_back(s);
        eager_losses.push_back(loss);
        progress("eager train");
    }
    jit::Counters before = jit::counters();
    for (int i = 1; i <= n_iters; ++i) {
        auto [loss, s] = timed([&] { return train_opt(batches[i].first, batches[i].second); });
        compile_train.push_back(s);
        compile_losses.push_back(loss);
        progress("compiled train");
    }
    jit::Counters after = jit::counters();
    std::printf("timed compiled steps: %d calls, %lld re-runs, %lld graphs compiled\n", n_iters,
                (long long)(after.reruns - before.reruns),
                (long long)(after.graphs_compiled - before.graphs_compiled));
    for (int i = 1; i <= n_iters; ++i) {
        auto [loss, s] = timed([&] { return train_outside(batches[i].first, batches[i].second); });
        outside_train.push_back(s);
        outside_losses.push_back(loss);
        progress("compiled model");
    }
    // Same data, same initial weights: the compiled step must train exactly like eager
    // (up to float rounding in the generated kernels).
    bool same_losses = true, same_outside = true;
    for (size_t i = 0; i < eager_losses.size(); ++i) {
        double e = eager_losses[i].item<double>(), c = compile_losses[i].item<double>(),
               o = outside_losses[i].item<double>();
        same_losses = same_losses && std::abs(c - e) <= 1e-4 + 1e-3 * std::abs(e);
        same_outside = same_outside && std::abs(o - e) <= 1e-4 + 1e-3 * std::abs(e);
        std::printf("step %2zu  eager loss %.5f  compiled step %.5f  compiled model %.5f\n", i, e,
                    c, o);
    }
    check(same_losses, "compiled training gives eager's loss at every step");
    check(same_outside, "the compiled model with Adam outside gives eager's loss at every step");
    bool same_weights = true;
    auto pe = train_model->parameters(), pc = train_model_c->parameters(),
         pm = train_model_m->parameters();
    for (size_t i = 0; i < pe.size(); ++i)
        same_weights = same_weights && allclose(pc[i].cpu(), pe[i].cpu(), 1e-3, 1e-5) &&
                       allclose(pm[i].cpu(), pe[i].cpu(), 1e-3, 1e-5);
    check(same_weights, "after training, both compiled models' weights agree with eager's");

    // ---------------------------------------------------------------- the table
    double ee = median(eager_eval), ce = median(compile_eval), et = median(eager_train),
           ct = median(compile_train), ot = median(outside_train);
    std::printf("\nMLP 784-512-512-10, batch %lld, %s, N_ITERS = %d (medians)\n", (long long)batch,
                where.c_str(), n_iters);
    std::printf("%-26s %10s %12s %9s %14s\n", "", "eager ms", "compiled ms", "speedup",
                "first call s");
    std::printf("%-26s %10.3f %12.3f %8.2fx %14.3f\n", "inference", ee * 1e3, ce * 1e3, ee / ce,
                compile_first);
    std::printf("%-26s %10.3f %12.3f %8.2fx %14.3f\n", "training, step compiled", et * 1e3,
                ct * 1e3, et / ct, compile_train_first);
    std::printf("%-26s %10.3f %12.3f %8.2fx %14.3f\n", "training, model compiled", et * 1e3,
                ot * 1e3, et / ot, outside_train_first);
    // Reading it. Inference: the MLP's time is its three GEMMs, the same OpenBLAS calls
    // in both columns, so fusing the bias + relu epilogues wins little on the CPU; the
    // tutorial's GPU speedups come from many small kernels and launch overhead. Training:
    // a compiled step re-runs its host code (backward() is a break), and today a re-run
    // also replays its ops eagerly (docs/jit.md, "Breaks that consume values"), so it pays
    // eager plus compiled for the ops around the break. Adam keeps its step count as a
    // tensor (as PyTorch's capturable Adam does): its bias correction 1 - beta^t is then
    // tensor math: only the first two steps record graphs (the first one creates Adam's
    // state), and later steps reuse them ("graphs compiled" above counts the 2nd step's).
    // The model compiled alone (Adam outside) has no break inside its compiled function:
    // each step is one cache hit for the forward, the compiled backward, and Adam's eager
    // update. The checks above show both are right; this table shows what they cost.
    // On the GPU the picture changes: every eager op is a kernel launch, and fusing the
    // pointwise work removes launches as well as memory traffic.
}

int main(int argc, char** argv) {
    int failures = 0;
    auto check = [&](bool ok, const std::string& fact) {
        std::cout << "  check: " << fact << ": " << (ok ? "yes" : "NO") << "\n";
        failures += !ok;
    };
    int n_iters = 10;
    for (int i = 1; i + 1 < argc; ++i)
        if (std::strcmp(argv[i], "--iters") == 0) n_iters = std::max(1, std::atoi(argv[i + 1]));

    run_table(check, n_iters);
    // The same table on the GPU, where there is one; else the reason, from the CUDA runtime.
    if (cuda::is_available()) {
        on_gpu = true;
        device = Device{DeviceType::cuda, 0};
        run_table(check, n_iters);
    } else {
        std::cout << "\nCUDA: not available here (" << cuda::unavailable_reason() << ")\n";
    }

    std::cout << (failures ? "lesson 08: FAILED\n" : "lesson 08: all checks passed\n");
    return failures ? 1 : 0;
}
