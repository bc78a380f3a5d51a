// The benches' timer: the median of `reps` runs of `body` after `warmup` untimed ones, in ms.
#pragma once
#include <algorithm>
#include <chrono>
#include <functional>
#include <vector>

namespace kiln_bench {

inline double median_ms(const std::function<void()>& body, int reps, int warmup) {
    for (int i = 0; i < warmup; ++i) body();
    std::vector<double> ms;
    for (int r = 0; r < reps; ++r) {
        auto t0 = std::chrono::steady_clock::now();
        body();
        ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(ms.begin(), ms.end());
    return ms[size_t(reps) / 2];
}

}  // namespace kiln_bench
