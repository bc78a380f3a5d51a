// max_pool2d forward + backward on ResNet's first pool ([8, 64, 56, 56], 3x3 stride 2
// padding 1; `build/bench_pool 112` for ResNet-18 224's [8, 64, 112, 112]), eager and compiled
// (inductor, choose_faster off), and the forward alone without a gradient, also through
// max_pool2d_with_indices (the index op and a gather). Prints one JSON object; times are
// medians, ms (docs/perf.md, "max_pool2d").
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
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

Tensor index_pool_sum(Tensor x) { return (max_pool2d_with_indices(x, kPool).first * 1.5).sum(); }

}  // namespace

int main(int argc, char** argv) {
    int64_t side = argc > 1 ? std::atoll(argv[1]) : 56;
    manual_seed(0);
    Tensor x = randn({8, 64, side, side});
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
    double eager_index = median_ms([&] { (void)index_pool_sum(x); });
    auto compiled_index = compile(index_pool_sum, {.choose_faster = false});
    double compiled_index_ms = median_ms([&] { (void)compiled_index(x); });
    std::printf(
        "{\"shape\": [8, 64, %lld, %lld], \"threads\": %d, \"eager_fwd_bwd_ms\": %.2f, "
        "\"compiled_fwd_bwd_ms\": %.2f, "
        "\"eager_fwd_ms\": %.2f, \"compiled_fwd_ms\": %.2f, \"eager_fwd_index_ms\": %.2f, "
        "\"compiled_fwd_index_ms\": %.2f}\n",
        (long long)side, (long long)side, num_threads(), eager_train, compiled_train, eager_infer,
        compiled_inference, eager_index, compiled_index_ms);
}
