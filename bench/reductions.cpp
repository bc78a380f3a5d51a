// Generated reductions over non-trailing dims vs eager kiln on the CPU (docs/codegen.md):
// column sums (a bias gradient's sum over dim 0 of [4096, 1024]), batch norm's statistics and
// its training forward over (0, 2, 3) of [32, 64, 28, 28], an int64 column sum. Compiled
// runs its kernels only (choose_faster off). Prints one JSON object; times are medians, ms.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <vector>

#include "bench/median.h"
#include "kiln.h"
#include "tensor/parallel.h"

using namespace kiln;

namespace {

double median_ms(const std::function<void()>& body) { return kiln_bench::median_ms(body, 15, 3); }

Tensor column_sum(Tensor x) { return x.sum({0}); }
Tensor column_max(Tensor x) { return x.amax({0}); }
Tensor bn_stats(Tensor x) {
    Tensor mean = x.mean({0, 2, 3}, true);
    Tensor d = x - mean;
    return (d * d).mean({0, 2, 3}, true) + mean;
}
Tensor bn_train(Tensor x) {
    Tensor mean = x.mean({0, 2, 3}, true);
    Tensor d = x - mean;
    Tensor var = (d * d).mean({0, 2, 3}, true);
    return relu(d * rsqrt(var + 1e-5));
}

void row(const char* name, Tensor (*fn)(Tensor), const Tensor& x, bool last) {
    auto f = compile(fn, {.choose_faster = false});
    double eager = median_ms([&] { (void)fn(x); });
    double compiled = median_ms([&] { (void)f(x); });
    Tensor a = f(x), b = fn(x);
    bool equal = allclose(a.to(DType::float64), b.to(DType::float64), 1e-4, 1e-4);
    std::printf(
        "  \"%s\": {\"eager_ms\": %.3f, \"compiled_ms\": %.3f, \"speedup\": %.2f, \"equal\": "
        "%s}%s\n",
        name, eager, compiled, eager / compiled, equal ? "true" : "false", last ? "" : ",");
}

}  // namespace

int main() {
    manual_seed(0);
    Tensor cols = randn({4096, 1024});
    Tensor ints = randint(-100, 100, {4096, 1024});
    Tensor images = randn({32, 64, 28, 28});
    std::printf("{\n  \"threads\": %d,\n", num_threads());
    row("sum_dim0_4096x1024", column_sum, cols, false);
    row("amax_dim0_4096x1024", column_max, cols, false);
    row("int64_sum_dim0_4096x1024", column_sum, ints, false);
    row("bn_stats_32x64x28x28", bn_stats, images, false);
    row("bn_train_forward_32x64x28x28", bn_train, images, true);
    std::printf("}\n");
}
