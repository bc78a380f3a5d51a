// The cost of a cache hit: a 2-op function on 10-element tensors, compiled with the "eager"
// backend (graph interpreter) and the default "inductor" backend (generated kernels), vs
// called eagerly, and the guard check alone. Prints one JSON object.
//
//   bench_jit_overhead [iters]   (fewer iters for valgrind --tool=callgrind)
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "codegen/inductor.h"  // registers the real "inductor" (else it is aot_eager)
#include "jit/compile.h"

using namespace kiln;

namespace {

Tensor two_ops(Tensor x, Tensor y) { return sin(x) + y; }

// Out of line so that a callgrind profile shows each variant's cost per call.
[[gnu::noipa]] Tensor call_eager(const Tensor& x, const Tensor& y) { return two_ops(x, y); }
using TwoOps = jit::Compiled<Tensor(Tensor, Tensor)>;
[[gnu::noipa]] Tensor call_eager_backend(const TwoOps& f, const Tensor& x, const Tensor& y) { return f(x, y); }
[[gnu::noipa]] Tensor call_inductor(const TwoOps& f, const Tensor& x, const Tensor& y) { return f(x, y); }

template <class F>
double per_call_us(F&& f, int iters) {
    for (int i = 0; i < iters / 10; ++i) f();  // warm up
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) f();
    auto t1 = std::chrono::steady_clock::now();
    return std::chrono::duration<double, std::micro>(t1 - t0).count() / iters;
}

}  // namespace

int main(int argc, char** argv) {
    const int iters = argc > 1 ? std::atoi(argv[1]) : 200000;
    Tensor x = randn({10}), y = randn({10});
    auto compiled = compile(two_ops, {.backend = "eager"});
    auto inductor = compile(two_ops);  // the default backend
    compiled(x, y);  // record
    inductor(x, y);  // record, build the kernel (cached on disk after the first run)

    double eager_us = per_call_us([&] { return call_eager(x, y); }, iters);
    double hit_us = per_call_us([&] { return call_eager_backend(compiled, x, y); }, iters);
    double inductor_us = per_call_us([&] { return call_inductor(inductor, x, y); }, iters);

    jit::Args args{{.kind = jit::ArgKind::tensor, .tensor = x, .position = 0},
                   {.kind = jit::ArgKind::tensor, .tensor = y, .position = 1}};
    const jit::GuardSet* guards = nullptr;
    compiled.core().with_entries([&](const auto& entries) { guards = &entries.at(0)->guards; });
    std::vector<int64_t> syms;
    volatile bool ok = true;
    double guard_us = per_call_us([&] { ok = ok && guards->check(args, syms); }, iters * 5);
    ok = ok && allclose(compiled(x, y), two_ops(x, y)) && allclose(inductor(x, y), two_ops(x, y));

    // inductor_overhead_us is against eager's two kernels; its fused kernel does less work.
    std::printf("{\"bench\": \"jit_overhead\", \"fn\": \"sin(x) + y\", \"numel\": 10, \"iters\": %d, "
                "\"eager_us\": %.4f, \"compiled_hit_us\": %.4f, \"hit_overhead_us\": %.4f, "
                "\"inductor_hit_us\": %.4f, \"inductor_overhead_us\": %.4f, "
                "\"guard_check_us\": %.4f, \"target_overhead_us\": 0.5, \"guards_ok\": %s}\n",
                iters, eager_us, hit_us, hit_us - eager_us, inductor_us, inductor_us - eager_us, guard_us,
                ok ? "true" : "false");
    return ok ? 0 : 1;
}
