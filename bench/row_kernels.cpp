// Generated row kernels on the CPU, timed so that a shared, loaded machine still says
// something: per call the median and minimum wall time and the median CPU time of the whole
// process (all threads). modified_sigmoid at 1e6 (the whole function, its first segment
// x' = 1 / (exp(-x) + 5) with mean(x') > 0.5 - one row of 1e6 elements - and the pointwise
// part alone), then softmax and layernorm over rows of 1024 (4096 rows: from memory; 128
// rows: from cache), each at 1 and 2 threads.
//   build/bench_row_kernels
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "kiln.h"
#include "tensor/parallel.h"

using namespace kiln;

namespace {

struct Times {
    double wall_median_ms, wall_min_ms, cpu_median_ms;
};

double cpu_ms() {
    timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

template <class F>
Times time_calls(F&& call, int reps) {
    for (int i = 0; i < 8; ++i) call();  // past the kernels-or-eager choice (codegen/choose.h)
    std::vector<double> wall, cpu;
    for (int r = 0; r < reps; ++r) {
        auto t0 = std::chrono::steady_clock::now();
        double c0 = cpu_ms();
        call();
        cpu.push_back(cpu_ms() - c0);
        wall.push_back(
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() * 1e3);
    }
    std::sort(wall.begin(), wall.end());
    std::sort(cpu.begin(), cpu.end());
    return {wall[reps / 2], wall[0], cpu[reps / 2]};
}

void show(const char* what, int threads, Times t) {
    std::printf("%-34s %3d %12.3f %12.3f %12.3f\n", what, threads, t.wall_median_ms, t.wall_min_ms,
                t.cpu_median_ms);
}

Tensor modified_sigmoid(Tensor x, Tensor y) {
    x = 1.0 / (exp(-x) + 5);
    if (x.mean() > 0.5) x = x / 1.1;
    return x * y;
}
std::vector<Tensor> first_segment(Tensor x) {
    x = 1.0 / (exp(-x) + 5);
    return {x, x.mean() > 0.5};
}
Tensor pointwise_part(Tensor x) { return 1.0 / (exp(-x) + 5); }
Tensor softmax_rows(Tensor x) {
    Tensor e = exp(x - x.amax({1}, true));
    return e / e.sum({1}, true);
}
Tensor layernorm_rows(Tensor x) {
    Tensor mu = x.mean({1}, true);
    Tensor d = x - mu;
    return d * rsqrt((d * d).mean({1}, true) + 1e-5);
}

}  // namespace

int main() {
    Tensor x = randn({1000000}), y = randn({1000000});
    Tensor big = randn({4096, 1024}), small = randn({128, 1024});
    auto whole = compile(modified_sigmoid);
    auto segment = compile(first_segment);
    auto pointwise = compile(pointwise_part);
    auto softmax = compile(softmax_rows);
    auto layernorm = compile(layernorm_rows);
    std::printf("%-34s %3s %12s %12s %12s\n", "ms per call", "thr", "wall median", "wall min",
                "cpu median");
    for (int threads : {1, 2}) {
        set_num_threads(threads);
        show("modified_sigmoid 1e6", threads, time_calls([&] { whole(x, y); }, 60));
        show("  first segment (x', mean > 0.5)", threads, time_calls([&] { segment(x); }, 60));
        show("  pointwise part (x')", threads, time_calls([&] { pointwise(x); }, 60));
        show("softmax 4096x1024", threads, time_calls([&] { softmax(big); }, 40));
        show("layernorm 4096x1024", threads, time_calls([&] { layernorm(big); }, 40));
        show("softmax 128x1024", threads, time_calls([&] { softmax(small); }, 200));
        show("layernorm 128x1024", threads, time_calls([&] { layernorm(small); }, 200));
    }
    set_num_threads(0);
}
