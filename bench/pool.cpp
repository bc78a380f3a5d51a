// max_pool2d forward + backward on ResNet's first pool ([8, 64, 56, 56], 3x3 stride 2
// padding 1), eager and compiled (inductor, choose_faster off), and the forward alone without
// a gradient. Prints one JSON object; times are medians, ms (docs/perf.md, "max_pool2d").
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

double median_ms(const std::function<void()>& body) { return kiln_bench::median_ms(body, 11, 2); }

const Window2d kPool{.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}};
Tensor pool_sum(Tensor x) { return (max_pool2d(x, kPool) * 1.5).sum(); }

}  // namespace

int main() {
    manual_seed(0);
    Tensor x = randn({8, 64, 56, 56});
    Tensor leaf = x.detach().requires_grad_();
    auto step = [&](const std::function<Tensor(Tensor)>& f) {
        leaf.zero_grad();
        f(leaf).backward();
    };
    double eager_train = median_ms([&] { step(pool_sum); });
    auto compiled = compile(pool_sum, {.choose_faster = false});
    double compiled_train = median_ms([&] { step([&](Tensor t) { return compiled(t); }); });
    double eager_infer = median_ms([&] { (void)pool_sum(x); });
    auto compiled_infer = compile(pool_sum, {.choose_faster = false});
    double compiled_inference = median_ms([&] { (void)compiled_infer(x); });
    std::printf(
        "{\"shape\": [8, 64, 56, 56], \"threads\": %d, \"eager_fwd_bwd_ms\": %.2f, "
        "\"compiled_fwd_bwd_ms\": %.2f, "
        "\"eager_fwd_ms\": %.2f, \"compiled_fwd_ms\": %.2f}\n",
        num_threads(), eager_train, compiled_train, eager_infer, compiled_inference);
}
