// The cost of a cache hit: a 2-op function on 10-element tensors, compiled (eager backend)
// vs called eagerly, and the guard check alone. Prints one JSON object.
#include <chrono>
#include <cstdio>

#include "jit/compile.h"

using namespace kiln;

namespace {

Tensor two_ops(Tensor x, Tensor y) { return sin(x) + y; }

template <class F>
double per_call_us(F&& f, int iters) {
    for (int i = 0; i < iters / 10; ++i) f();  // warm up
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) f();
    auto t1 = std::chrono::steady_clock::now();
    return std::chrono::duration<double, std::micro>(t1 - t0).count() / iters;
}

}  // namespace

int main() {
    constexpr int kIters = 200000;
    Tensor x = randn({10}), y = randn({10});
    auto compiled = compile(two_ops, {.backend = "eager"});
    compiled(x, y);  // record

    double eager_us = per_call_us([&] { return two_ops(x, y); }, kIters);
    double hit_us = per_call_us([&] { return compiled(x, y); }, kIters);

    jit::Args args{{.kind = jit::ArgKind::tensor, .tensor = x, .position = 0},
                   {.kind = jit::ArgKind::tensor, .tensor = y, .position = 1}};
    const jit::GuardSet* guards = nullptr;
    compiled.core().with_entries([&](const auto& entries) { guards = &entries.at(0)->guards; });
    std::vector<int64_t> syms;
    volatile bool ok = true;
    double guard_us = per_call_us([&] { ok = ok && guards->check(args, syms); }, kIters * 5);

    std::printf("{\"bench\": \"jit_overhead\", \"fn\": \"sin(x) + y\", \"numel\": 10, \"iters\": %d, "
                "\"eager_us\": %.4f, \"compiled_hit_us\": %.4f, \"hit_overhead_us\": %.4f, "
                "\"guard_check_us\": %.4f, \"target_overhead_us\": 0.5, \"guards_ok\": %s}\n",
                kIters, eager_us, hit_us, hit_us - eager_us, guard_us, ok ? "true" : "false");
    return ok ? 0 : 1;
}
