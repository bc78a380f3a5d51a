// kiln on the GPU, in one run: eager CUDA kernels vs compiled (the CUDA emitter's fused
// kernels), on the workloads of the CUDA issue, with the device's own copy bandwidth as the
// limit. GPU time is measured with CUDA events (median of 100 timed calls after warm-up);
// per-call wall time for the tiny calls. bench/torch_gpu.py measures PyTorch the same way;
// bench/compare_gpu.py joins the two into one table. Prints one JSON object; without a GPU
// it says why and exits 0. "library_paths" times each library path against the path its
// switch falls back to, in the same process (KILN_CUDNN, KILN_FUSED_OPTIM, KILN_CUBLASLT;
// docs/cuda.md, "Library paths").
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "codegen/cuda_backend.h"
#include "kiln.h"
#include "models/resnet.h"
#include "tensor/cuda.h"
#include "tensor/cuda_runtime.h"

using namespace kiln;

namespace {

const Device kCuda{DeviceType::cuda, 0};

// Median GPU time of `f` over `reps` calls, each bracketed by events (after 10 warm-up calls).
template <class F>
double median_gpu_us(F&& f, int reps = 100) {
    for (int i = 0; i < 10; ++i) f();
    cuda::synchronize();
    std::vector<double> times;
    cuda::Event start, end;
    for (int r = 0; r < reps; ++r) {
        start.record();
        f();
        end.record();
        times.push_back(start.elapsed_ms(end) * 1e3);
    }
    std::sort(times.begin(), times.end());
    return times[times.size() / 2];
}

// Device operations (kernels, cuBLAS calls, copies) one call of `f` issues, averaged over 20.
template <class F>
double operations_per_call(F&& f) {
    f();
    cuda::synchronize();
    int64_t before = cuda::detail::operations_issued();
    for (int i = 0; i < 20; ++i) f();
    cuda::synchronize();
    return double(cuda::detail::operations_issued() - before) / 20;
}

// Wall time per call of `f` issued back to back (what a Python loop sees), in microseconds.
template <class F>
double wall_us_per_call(F&& f, int calls = 2000) {
    for (int i = 0; i < 50; ++i) f();
    cuda::synchronize();
    std::vector<double> rounds;
    for (int round = 0; round < 5; ++round) {
        auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < calls; ++i) f();
        cuda::synchronize();
        rounds.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / calls);
    }
    std::sort(rounds.begin(), rounds.end());
    return rounds[rounds.size() / 2];
}

Tensor sin_cos(Tensor x, Tensor y) { return sin(x) + cos(y); }
Tensor gelu(Tensor x, Tensor) { return 0.5 * x * (1.0 + tanh(0.7978845608 * (x + 0.044715 * x * x * x))); }
Tensor modified_sigmoid(Tensor x, Tensor y) {
    x = 1.0 / (exp(-x) + 5);
    if (x.mean() > 0.5) x = x / 1.1;
    return x * y;
}
Tensor softmax_rows(Tensor x, Tensor) { return softmax(x, 1); }
Tensor layernorm_rows(Tensor x, Tensor) {
    Tensor mu = x.mean({1}, true);
    Tensor d = x - mu;
    return d * rsqrt((d * d).mean({1}, true) + 1e-5);
}

std::string entry(const char* name, const char* what, double eager, double compiled, double graphed, double extra = -1,
                  const char* extra_name = nullptr, std::vector<double> ops = {}) {
    std::fprintf(stderr, "bench_gpu: %s done\n", name);  // progress, on stderr
    char buf[512];
    int n = std::snprintf(buf, sizeof buf,
                          "{\"workload\": \"%s\", \"measure\": \"%s\", \"kiln_eager_us\": %.2f, \"kiln_compiled_us\": %.2f, "
                          "\"kiln_reduce_overhead_us\": %.2f",
                          name, what, eager, compiled, graphed);
    if (extra_name) n += std::snprintf(buf + n, sizeof buf - n, ", \"%s\": %.3f", extra_name, extra);
    if (!ops.empty())
        n += std::snprintf(buf + n, sizeof buf - n, ", \"device_ops_per_call\": [%.1f, %.1f, %.1f]", ops[0], ops[1], ops[2]);
    std::snprintf(buf + n, sizeof buf - n, "}");
    return buf;
}

// One library path on and off (its switch set to 0), both in microseconds: GPU time (events)
// or wall time per call.
std::string library_path(const char* path, const char* workload, const char* measure,
                         const char* env, const std::function<double()>& time) {
    double on = time();
    setenv(env, "0", 1);
    double off = time();
    unsetenv(env);
    std::fprintf(stderr, "bench_gpu: %s %s done\n", path, workload);
    char buf[384];
    std::snprintf(buf, sizeof buf,
                  "{\"path\": \"%s\", \"workload\": \"%s\", \"measure\": \"%s\", \"switch\": "
                  "\"%s\", \"on_us\": %.2f, "
                  "\"off_us\": %.2f}",
                  path, workload, measure, env, on, off);
    return buf;
}

std::vector<std::string> library_paths() {
    std::vector<std::string> rows;
    {  // cuDNN: a ResNet 3x3 layer forward and both gradients, and the 224x224 stem's forward
        Tensor x = randn({8, 64, 56, 56}).cuda().requires_grad_(),
               w = (randn({64, 64, 3, 3}) * 0.05).cuda().requires_grad_();
        Tensor gy = randn({8, 64, 56, 56}).cuda();
        auto step = [&] {
            x.zero_grad(), w.zero_grad();
            (conv2d(x, w, {}, {1, 1}, {1, 1}) * gy).sum().backward();
        };
        rows.push_back(library_path("cudnn", "conv3x3_64ch_56x56_b8_fwd_bwd", "gpu", "KILN_CUDNN",
                                    [&] { return median_gpu_us(step, 20); }));
        Tensor img = randn({8, 3, 224, 224}).cuda(), stem = (randn({64, 3, 7, 7}) * 0.05).cuda();
        rows.push_back(library_path("cudnn", "conv7x7s2_stem_224_b8_fwd", "gpu", "KILN_CUDNN", [&] {
            return median_gpu_us([&] { (void)conv2d(img, stem, {}, {2, 2}, {3, 3}); }, 20);
        }));
    }
    {  // the multi-tensor step over ResNet-18's 62 parameters: wall time per step (host-bound)
        models::ResNet18 net(1000);
        net.to(kCuda);
        std::vector<Tensor> ps = net.parameters();
        for (Tensor& p : ps) p.set_grad(randn(p.shape()).cuda() * 1e-3);
        optim::SGD sgd(ps, 1e-3, 0.9);
        optim::Adam adam(ps, 1e-5);
        rows.push_back(library_path("fused_optim", "sgd_momentum_resnet18_params", "wall",
                                    "KILN_FUSED_OPTIM",
                                    [&] { return wall_us_per_call([&] { sgd.step(); }, 200); }));
        rows.push_back(library_path("fused_optim", "adam_resnet18_params", "wall",
                                    "KILN_FUSED_OPTIM",
                                    [&] { return wall_us_per_call([&] { adam.step(); }, 200); }));
    }
    {  // cublasLt: Linear's bias in the GEMM, a GPT MLP's up-projection and a small layer
        manual_seed(1);
        nn::Linear big(768, 3072), small(256, 256);
        big.to(kCuda), small.to(kCuda);
        Tensor xb = randn({4096, 768}).cuda(), xs = randn({8, 256}).cuda();
        autograd::NoGradGuard no_grad;
        rows.push_back(library_path("cublaslt", "linear_768x3072_b4096_fwd", "gpu", "KILN_CUBLASLT",
                                    [&] { return median_gpu_us([&] { (void)big.forward(xb); }); }));
        rows.push_back(
            library_path("cublaslt", "linear_256x256_b8_fwd", "wall", "KILN_CUBLASLT",
                         [&] { return wall_us_per_call([&] { (void)small.forward(xs); }); }));
    }
    return rows;
}

}  // namespace

int main() {
    if (!cuda::is_available()) {
        std::printf("{\"bench\": \"gpu\", \"skipped\": \"%s\"}\n", cuda::unavailable_reason().c_str());
        return 0;
    }
    std::vector<std::string> rows;
    const int64_t n = int64_t(1) << 24;  // 16M floats
    Tensor x = randn({n}).cuda(), y = randn({n}).cuda(), dst = empty({n}, DType::float32, kCuda);
    // The limit: a device-to-device memcpy of 16M floats (reads and writes 2 floats per element).
    double copy_us = median_gpu_us([&] { cuda::detail::copy_bytes(dst.raw_data(), true, x.raw_data(), true, x.nbytes()); });
    rows.push_back(entry("copy_16M", "gpu", copy_us, copy_us, copy_us, 2.0 * double(n) * 4 / (copy_us * 1e3), "GBps"));

    struct Flat {
        const char* name;
        Tensor (*fn)(Tensor, Tensor);
        int arrays;  // floats moved per element: inputs read + output written
    };
    for (const Flat& w : {Flat{"sin_plus_cos_16M", sin_cos, 3}, Flat{"gelu_16M", gelu, 2}, Flat{"modified_sigmoid_16M", modified_sigmoid, 3}}) {
        auto compiled = compile(w.fn);
        auto graphed = compile(w.fn, {.mode = "reduce-overhead"});
        double eager = median_gpu_us([&] { (void)w.fn(x, y); });
        double comp = median_gpu_us([&] { (void)compiled(x, y); });
        double ro = median_gpu_us([&] { (void)graphed(x, y); });
        // the fraction of copy bandwidth: a copy moves 2 floats per element
        rows.push_back(entry(w.name, "gpu", eager, comp, ro, copy_us / 2.0 * w.arrays / comp, "fraction_of_copy_bandwidth"));
    }
    for (const Flat& w : {Flat{"softmax_4096x1024", softmax_rows, 2}, Flat{"layernorm_4096x1024", layernorm_rows, 2}}) {
        const char* name = w.name;
        auto fn = w.fn;
        Tensor m = randn({4096, 1024}).cuda();
        auto compiled = compile(fn);
        auto graphed = compile(fn, {.mode = "reduce-overhead"});
        double eager = median_gpu_us([&] { (void)fn(m, m); });
        double comp = median_gpu_us([&] { (void)compiled(m, m); });
        int kernels = codegen::last_compiled().generated_kernels;
        double ro = median_gpu_us([&] { (void)graphed(m, m); });
        rows.push_back(entry(name, "gpu", eager, comp, ro, kernels, "generated_kernels"));
    }
    {  // more row kernels (issue 26): log_softmax, layer_norm with weight and bias (PyTorch's
       // eager side is its fused kernel), attention's scaled and causally masked softmax
        Tensor m = randn({4096, 1024}).cuda(), w = randn({1024}).cuda(), b = randn({1024}).cuda();
        Tensor scores = randn({8, 12, 256, 256}).cuda();
        Tensor causal = (arange(256.0).unsqueeze(1) < arange(256.0).unsqueeze(0)).cuda();
        auto row = [&](const char* name, auto fn, const auto&... args) {
            auto compiled = compile(fn);
            auto graphed = compile(fn, {.mode = "reduce-overhead"});
            double eager = median_gpu_us([&] { (void)fn(args...); });
            double comp = median_gpu_us([&] { (void)compiled(args...); });
            int kernels = codegen::last_compiled().generated_kernels;
            double ro = median_gpu_us([&] { (void)graphed(args...); });
            rows.push_back(entry(name, "gpu", eager, comp, ro, kernels, "generated_kernels"));
        };
        row("log_softmax_4096x1024", [](const Tensor& x) { return log_softmax(x, 1); }, m);
        row(
            "layer_norm_wb_4096x1024",
            [](const Tensor& x, const Tensor& w, const Tensor& b) {
                return nn::functional::layer_norm(x, {1024}, w, b);
            },
            m, w, b);
        row(
            "attention_softmax_8x12x256x256",
            [](const Tensor& s, const Tensor& mask) {
                return softmax(masked_fill(s * 0.125, mask, -INFINITY), -1);
            },
            scores, causal);
    }
    {  // the seed's tiny call: per-call wall time at n = 10
        Tensor a = randn({10}).cuda(), b = randn({10}).cuda();
        auto compiled = compile(sin_cos);
        auto graphed = compile(sin_cos, {.mode = "reduce-overhead"});
        double eager = wall_us_per_call([&] { (void)sin_cos(a, b); });
        double comp = wall_us_per_call([&] { (void)compiled(a, b); });
        double ro = wall_us_per_call([&] { (void)graphed(a, b); });
        std::vector<double> ops = {operations_per_call([&] { (void)sin_cos(a, b); }), operations_per_call([&] { (void)compiled(a, b); }),
                                   operations_per_call([&] { (void)graphed(a, b); })};
        rows.push_back(entry("sin_plus_cos_n10_call", "wall", eager, comp, ro, -1, nullptr, ops));
        // The floor of any call: one eager kernel (neg) through kiln's dispatcher and the driver.
        double one = wall_us_per_call([&] { (void)neg(a); });
        rows.push_back(entry("one_eager_kernel_n10", "wall", one, one, one, -1, nullptr, {1, 1, 1}));
    }
    {  // the AOT walk-through: (a + b + c + d).cos().cos(), forward + backward, n = 10
        auto fn = [](const Tensor& a, const Tensor& b, const Tensor& c, const Tensor& d) { return cos(cos(a + b + c + d)); };
        auto compiled = compile(fn);
        auto graphed = compile(fn, {.mode = "reduce-overhead"});
        std::vector<Tensor> in;
        for (int i = 0; i < 4; ++i) in.push_back(randn({10}).cuda().requires_grad_());
        auto step = [&](auto& f) {
            for (Tensor& t : in) t.zero_grad();
            f(in[0], in[1], in[2], in[3]).sum().backward();
        };
        double eager = wall_us_per_call([&] { step(fn); }, 500);
        double comp = wall_us_per_call([&] { step(compiled); }, 500);
        double ro = wall_us_per_call([&] { step(graphed); }, 500);
        std::vector<double> ops = {operations_per_call([&] { step(fn); }), operations_per_call([&] { step(compiled); }),
                                   operations_per_call([&] { step(graphed); })};
        rows.push_back(entry("walkthrough_fwd_bwd_n10", "wall", eager, comp, ro, -1, nullptr, ops));
    }
    {  // MLP 784-512-512-10 training step, batch 256: forward, backward, SGD update
        manual_seed(0);
        auto param = [](Shape s, double scale) { return (randn(s) * scale).cuda().requires_grad_(); };
        std::vector<Tensor> ps = {param({784, 512}, 0.03), param({512}, 0), param({512, 512}, 0.03), param({512}, 0),
                                  param({512, 10}, 0.03), param({10}, 0)};
        Tensor xb = randn({256, 784}).cuda();
        Tensor onehot = (arange(10).unsqueeze(0) == randint(0, 10, {256, 1})).to(float32).cuda();
        auto loss_fn = [&](Tensor input, Tensor t) {
            Tensor h = relu(matmul(input, ps[0]) + ps[1]);
            h = relu(matmul(h, ps[2]) + ps[3]);
            return -(log_softmax(matmul(h, ps[4]) + ps[5], 1) * t).sum() * (1.0 / 256);
        };
        auto compiled = compile(loss_fn);
        auto graphed = compile(loss_fn, {.mode = "reduce-overhead"});
        auto step = [&](auto& f) {
            for (Tensor& p : ps) p.zero_grad();
            f(xb, onehot).backward();
            autograd::NoGradGuard no_grad;
            for (Tensor& p : ps) p.add_(p.grad(), -0.01);
        };
        double eager = wall_us_per_call([&] { step(loss_fn); }, 200);
        double comp = wall_us_per_call([&] { step(compiled); }, 200);
        double ro = wall_us_per_call([&] { step(graphed); }, 200);
        std::vector<double> ops = {operations_per_call([&] { step(loss_fn); }), operations_per_call([&] { step(compiled); }),
                                   operations_per_call([&] { step(graphed); })};
        rows.push_back(entry("mlp_train_step_b256", "wall", eager, comp, ro, -1, nullptr, ops));
    }
    std::vector<std::string> paths = library_paths();
    codegen::CudaGraphStats graphs = codegen::cuda_graph_stats();
    std::string out = "{\"bench\": \"gpu\", \"device\": \"" + cuda::device_name() + "\", \"stat\": \"median\", \"cuda_graphs\": {\"captures\": " +
                      std::to_string(graphs.captures) + ", \"replays\": " + std::to_string(graphs.replays) + ", \"not_captured\": " +
                      std::to_string(graphs.not_captured) + "}, \"rows\": [\n  ";
    for (size_t i = 0; i < rows.size(); ++i) out += (i ? ",\n  " : "") + rows[i];
    out += "\n], \"library_paths\": [\n  ";
    for (size_t i = 0; i < paths.size(); ++i) out += (i ? ",\n  " : "") + paths[i];
    out += "\n]}";
    std::printf("%s\n", out.c_str());
    return 0;
}
