// Compiled (inductor) vs eager kiln on the CPU, with memcpy as the bandwidth reference, all
// in one run. Prints one JSON object. Workloads follow the codegen issue: sin+cos, a GELU
// chain, modified_sigmoid (with its graph break), an exp chain, softmax and layernorm over
// rows of 4096x1024, and an MLP training step. Also cold-compile and warm-cache-load times.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "codegen/toolchain.h"
#include "bench/cpu_workloads.h"
#include "kiln.h"
#include "tensor/parallel.h"

using namespace kiln;

namespace {

constexpr int kReps = 7;

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Calls before a compiled function's steady state: the first, then the inductor's
// kernels-or-eager measurement (codegen/choose.h: 3 timed calls of each path).
constexpr int kCompiledWarmup = 7;

// Median wall time of `body`, in ns, after `warmup` calls.
double median_ns(const std::function<void()>& body, int warmup = 1) {
    for (int i = 0; i < warmup; ++i) body();
    std::vector<double> ns;
    for (int r = 0; r < kReps; ++r) {
        auto t0 = std::chrono::steady_clock::now();
        body();
        ns.push_back(seconds_since(t0) * 1e9);
    }
    std::sort(ns.begin(), ns.end());
    return ns[kReps / 2];
}

using namespace kiln_bench;

struct Workload {
    const char* name;
    Tensor (*fn)(Tensor, Tensor);
    int tensors_read;  // for the bytes-moved estimate: inputs read + 1 output written
    bool rows;         // a [rows, 1024] input instead of a flat one
};

// How many of f's graphs (AOT halves counted apart) the inductor chose to run eagerly
// because its kernels were not faster on the first calls (codegen/choose.h).
template <class F>
int graphs_run_eagerly(const F& f) {
    int n = 0;
    for (const auto& lines : jit::explain_compiled(f).backend_choices)
        for (const std::string& line : lines) n += line.ends_with("-> eager");
    return n;
}

std::string json_workload(const Workload& w, int64_t n, int threads, double eager_ns,
                          double compiled_ns, double memcpy_ns, int eager_graphs) {
    // memcpy moves 2 floats per element (read + write); the workload moves tensors_read + 1.
    double bw_fraction = memcpy_ns / 2.0 * double(w.tensors_read + 1) / compiled_ns;
    char buf[512];
    std::snprintf(
        buf, sizeof buf,
        "{\"workload\": \"%s\", \"numel\": %lld, \"threads\": %d, \"eager_ns_per_elem\": %.4f, "
        "\"compiled_ns_per_elem\": %.4f, \"memcpy_ns_per_elem\": %.4f, \"speedup_vs_eager\": %.3f, "
        "\"fraction_of_memcpy_bandwidth\": %.3f, \"graphs_run_eagerly\": %d}",
        w.name, (long long)n, threads, eager_ns, compiled_ns, memcpy_ns, eager_ns / compiled_ns,
        bw_fraction, eager_graphs);
    return buf;
}

// First call of a fresh compiled function: trace + codegen (cold) or + disk load (warm).
double first_call_seconds(Tensor (*fn)(Tensor, Tensor), const Tensor& x, const Tensor& y) {
    jit::reset();
    auto f = compile(fn);
    auto t0 = std::chrono::steady_clock::now();
    f(x, y);
    return seconds_since(t0);
}

std::string mlp_step_json() {
    manual_seed(0);
    Tensor w1 = (randn({784, 512}) * 0.03).requires_grad_(), b1 = zeros({512}, {.requires_grad = true});
    Tensor w2 = (randn({512, 512}) * 0.03).requires_grad_(), b2 = zeros({512}, {.requires_grad = true});
    Tensor w3 = (randn({512, 10}) * 0.03).requires_grad_(), b3 = zeros({10}, {.requires_grad = true});
    Tensor x = randn({256, 784});
    Tensor onehot = (arange(10).unsqueeze(0) == randint(0, 10, {256, 1})).to(float32);
    auto loss_fn = [&](Tensor xb, Tensor t) {
        Tensor h = relu(matmul(xb, w1) + b1);
        h = relu(matmul(h, w2) + b2);
        return -(log_softmax(matmul(h, w3) + b3, 1) * t).sum() * (1.0 / 256);
    };
    auto compiled = compile(loss_fn);
    auto step = [&](auto& f) {
        for (Tensor* p : {&w1, &b1, &w2, &b2, &w3, &b3}) p->zero_grad();
        f(x, onehot).backward();
    };
    double eager_ms = median_ns([&] { step(loss_fn); }) / 1e6;
    double compiled_ms = median_ns([&] { step(compiled); }, kCompiledWarmup) / 1e6;
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "{\"workload\": \"mlp_train_step_784_512_512_10_b256\", \"eager_ms\": %.3f, "
                  "\"compiled_ms\": %.3f, \"speedup_vs_eager\": %.3f, \"graphs_run_eagerly\": %d}",
                  eager_ms, compiled_ms, eager_ms / compiled_ms, graphs_run_eagerly(compiled));
    return buf;
}

}  // namespace

int main() {
    // A private cache, so "cold" really compiles.
    std::string cache = (std::filesystem::temp_directory_path() / ("kiln-bench-cache-" + std::to_string(::getpid()))).string();
    setenv("KILN_CACHE_DIR", cache.c_str(), 1);
    const std::vector<Workload> workloads = {
        {"sin_plus_cos", sin_cos, 2, false},       {"gelu_chain", gelu_tanh, 1, false},
        {"modified_sigmoid", modified_sigmoid, 2, false}, {"exp_chain", exp_chain, 1, false},
        {"softmax_rows_4096x1024", softmax_rows, 1, true}, {"layernorm_rows_4096x1024", layernorm_rows, 1, true},
    };
    std::string out = "{\"bench\": \"cpu_codegen\", \"dtype\": \"float32\", \"stat\": \"median\", \"reps\": " +
                      std::to_string(kReps) + ", \"compiler_available\": " +
                      (codegen::compiler_available() ? "true" : "false") + ",\n \"compile\": [";
    bool first = true;
    for (const Workload& w : workloads) {
        Tensor x = w.rows ? randn({4096, 1024}) : randn({1000000}), y = randn_like(x);
        double cold = first_call_seconds(w.fn, x, y);
        codegen::toolchain_forget_loaded();
        double warm = first_call_seconds(w.fn, x, y);
        char buf[256];
        std::snprintf(buf, sizeof buf, "%s\n  {\"workload\": \"%s\", \"cold_first_call_s\": %.3f, \"warm_first_call_s\": %.4f}",
                      first ? "" : ",", w.name, cold, warm);
        out += buf;
        first = false;
    }
    out += "],\n \"throughput\": [";
    first = true;
    for (int64_t n : {int64_t(1000000), int64_t(10000000)}) {
        std::vector<float> src(size_t(n), 1.0f), dst(size_t(n), 0.0f);
        for (int threads : {1, 2}) {
            set_num_threads(threads);
            double memcpy_ns = median_ns([&] { std::memcpy(dst.data(), src.data(), size_t(n) * 4); }) / double(n);
            for (const Workload& w : workloads) {
                if (w.rows && n != 10000000) continue;  // rows workloads run once, at 4096x1024
                Tensor x = w.rows ? randn({4096, 1024}) : randn({n}), y = randn_like(x);
                auto f = compile(w.fn);
                double numel = double(x.numel());
                double eager = median_ns([&] { w.fn(x, y); }) / numel;
                double compiled = median_ns([&] { f(x, y); }, kCompiledWarmup) / numel;
                out += std::string(first ? "\n  " : ",\n  ") +
                       json_workload(w, x.numel(), threads, eager, compiled, memcpy_ns,
                                     graphs_run_eagerly(f));
                first = false;
            }
        }
    }
    set_num_threads(0);
    out += "],\n \"mlp\": " + mlp_step_json() + "\n}";
    std::puts(out.c_str());
    std::filesystem::remove_all(cache);
}
