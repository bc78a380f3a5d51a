// Eager CUDA kernels against the device's own copy bandwidth, in one run: a pointwise op
// reads and writes n floats, as a device-to-device copy of n floats does, so the ratio says
// how close the generated kernel comes to memory speed. Prints one JSON object; without a
// GPU it says why and exits 0.
#include <chrono>
#include <cstdio>

#include "kiln.h"
#include "tensor/cuda.h"

using namespace kiln;

namespace {
template <class F>
double best_ms(F&& f, int reps = 20) {
    f();
    cuda::synchronize();
    double best = 1e30;
    for (int r = 0; r < reps; ++r) {
        auto t0 = std::chrono::steady_clock::now();
        f();
        cuda::synchronize();
        best = std::min(best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    return best;
}
}  // namespace

int main() {
    if (!cuda::is_available()) {
        std::printf("{\"bench\": \"cuda_eager\", \"skipped\": \"%s\"}\n", cuda::unavailable_reason().c_str());
        return 0;
    }
    const int64_t n = int64_t(1) << 26;  // 64M floats, 256 MiB
    Tensor x = randn({n}).cuda(), y = randn({n}).cuda(), dst = empty({n}, DType::float32, Device{DeviceType::cuda, 0});
    double copy = best_ms([&] { dst.copy_(x); });
    double sig = best_ms([&] { (void)sigmoid(x); });
    double add = best_ms([&] { (void)(x + y); });
    Tensor m = randn({4096, 4096}).cuda();
    double sum_rows = best_ms([&] { (void)m.sum({1}); });
    double softmax = best_ms([&] { (void)m.softmax(1); });
    Tensor a = randn({4096, 4096}).cuda(), b = randn({4096, 4096}).cuda();
    double mm = best_ms([&] { (void)matmul(a, b); }, 5);
    double gbps = 2.0 * double(n) * 4 / (copy * 1e6);
    std::printf("{\"bench\": \"cuda_eager\", \"device\": \"%s\", \"n\": %lld, \"copy_ms\": %.3f, \"copy_GBps\": %.0f, "
                "\"sigmoid_ms\": %.3f, \"sigmoid_vs_copy\": %.2f, \"add_ms\": %.3f, \"add_vs_copy\": %.2f, "
                "\"sum_rows_4096x4096_ms\": %.3f, \"softmax_4096x4096_ms\": %.3f, \"matmul_4096_ms\": %.3f, "
                "\"matmul_TFLOPs\": %.1f}\n",
                cuda::device_name().c_str(), (long long)n, copy, gbps, sig, copy / sig, add, 1.5 * copy / add, sum_rows,
                softmax, mm, 2.0 * 4096.0 * 4096 * 4096 / (mm * 1e9));
    return 0;
}
