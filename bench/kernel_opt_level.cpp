// Generated kernels' speed at two optimization levels, in one process, so that a busy
// machine slows both alike: each workload is compiled twice, with KILN_CXXFLAGS=-O3 (what
// kernels got before) and without (kKernelOptLevel, -O2), then both are called in turn for
// many rounds and the fastest round of each is kept. KILN_CHOOSE=0, so both run their
// generated kernels. One JSON line per workload: ns per element (ms per step for the training
// step) before and after, and after/before. `bench_kernel_opt_level [rounds] [before-flags]
// [after-flags]` compares other KILN_CXXFLAGS. See docs/perf.md, "Cold first calls".
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>

#include "bench/cpu_workloads.h"
#include "codegen/toolchain.h"
#include "kiln.h"
#include "tensor/parallel.h"

using namespace kiln;
using namespace kiln_bench;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Fastest of `rounds` rounds of `calls` calls of a and b, interleaved; seconds per call.
std::pair<double, double> fastest(const std::function<void()>& a, const std::function<void()>& b,
                                  int rounds, int calls) {
    double best_a = 1e30, best_b = 1e30;
    for (int r = 0; r < rounds; ++r)
        for (int which = 0; which < 2; ++which) {
            const auto& f = which == 0 ? a : b;
            auto t0 = std::chrono::steady_clock::now();
            for (int c = 0; c < calls; ++c) f();
            double s = seconds_since(t0) / calls;
            (which == 0 ? best_a : best_b) = std::min(which == 0 ? best_a : best_b, s);
        }
    return {best_a, best_b};
}

// KILN_CXXFLAGS of the two builds: "before" and "after" (argv[2] and argv[3] override them).
const char* g_before = "-O3";
const char* g_after = "";

void print(const std::string& name, const std::string& unit, double per, double o3, double o2) {
    std::printf(
        "{\"workload\": \"%s\", \"unit\": \"%s\", \"before\": %.4f, \"after\": %.4f, "
        "\"after_over_before\": %.3f}\n",
        name.c_str(), unit.c_str(), o3 / per, o2 / per, o2 / o3);
    std::fflush(stdout);
}

// Compiles fn once per level (the build reads KILN_CXXFLAGS) and makes its first call.
template <class F, class... A>
auto compiled_at(F fn, const char* flags, A&... args) {
    if (*flags)
        setenv("KILN_CXXFLAGS", flags, 1);
    else
        unsetenv("KILN_CXXFLAGS");
    auto f = compile(fn);
    f(args...);
    unsetenv("KILN_CXXFLAGS");
    return f;
}

void pointwise(const char* name, Tensor (*fn)(Tensor, Tensor), bool rows, int64_t numel,
               int rounds) {
    Tensor x = rows ? randn({numel / 1024, 1024}) : randn({numel}), y = randn_like(x);
    auto o3 = compiled_at(fn, g_before, x, y);
    auto o2 = compiled_at(fn, g_after, x, y);
    int calls = std::max<int64_t>(1, (1 << 22) / numel);
    auto [t3, t2] = fastest([&] { o3(x, y); }, [&] { o2(x, y); }, rounds, calls);
    print(std::string(name) + "_" + std::to_string(numel), "ns/element", double(numel) * 1e-9, t3,
          t2);
}

// Batch norm (batch statistics) + relu and its backward: the row kernels of a ResNet
// training step, over [8, 64, 28, 28].
Tensor bn_relu_loss(Tensor x, Tensor g) {
    Tensor m = x.mean({0, 2, 3}, true);
    Tensor d = x - m;
    Tensor v = (d * d).mean({0, 2, 3}, true);
    return relu(d * rsqrt(v + 1e-5) * g).sum();
}

void bn_relu_step(int rounds) {
    Tensor x = randn({8, 64, 28, 28}).requires_grad_(),
           g = (randn({1, 64, 1, 1}) + 1).requires_grad_();
    auto step = [&](auto& f) {
        x.zero_grad(), g.zero_grad();
        f(x, g).backward();
    };
    auto o3 = compiled_at(bn_relu_loss, g_before, x, g);
    auto o2 = compiled_at(bn_relu_loss, g_after, x, g);
    step(o3), step(o2);
    auto [t3, t2] = fastest([&] { step(o3); }, [&] { step(o2); }, rounds, 4);
    print("bn_relu_train_step_8x64x28x28", "ms/step", 1e-3, t3, t2);
}

}  // namespace

int main(int argc, char** argv) {
    int rounds = argc > 1 ? std::atoi(argv[1]) : 15;
    if (argc > 2) g_before = argv[2];
    if (argc > 3) g_after = argv[3];
    std::string cache =
        (std::filesystem::temp_directory_path() / ("kiln-bench-opt-" + std::to_string(::getpid())))
            .string();
    setenv("KILN_CACHE_DIR", cache.c_str(), 1);
    setenv("KILN_CHOOSE", "0", 1);
    std::printf(
        "{\"bench\": \"kernel_opt_level\", \"rounds\": %d, \"threads\": %d, \"before\": \"%s\", "
        "\"after\": \"%s\"}\n",
        rounds, num_threads(), g_before, g_after);
    for (int64_t numel : {int64_t(1) << 16, int64_t(1) << 20}) {
        pointwise("sin_plus_cos", sin_cos, false, numel, rounds);
        pointwise("gelu_tanh", gelu_tanh, false, numel, rounds);
        pointwise("gelu_erf", gelu_erf, false, numel, rounds);
        pointwise("exp_chain", exp_chain, false, numel, rounds);
        pointwise("softmax_rows", softmax_rows, true, numel, rounds);
        pointwise("log_softmax_rows", log_softmax_rows, true, numel, rounds);
        pointwise("layernorm_rows", layernorm_rows, true, numel, rounds);
    }
    bn_relu_step(rounds);
    std::filesystem::remove_all(cache);
}
