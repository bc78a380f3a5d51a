// parallel_for: splits [0, n) into chunks over a small thread pool; runs inline when small.
#pragma once
#include <cstdint>
#include <functional>

namespace kiln {

// Elements below which a loop stays on the calling thread (thread handoff costs ~5 us).
inline constexpr int64_t kParallelGrain = 1 << 15;

int num_threads();
void set_num_threads(int n);  // 0: hardware concurrency; also read from KILN_NUM_THREADS
// body(begin, end) runs on disjoint ranges covering [0, n).
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& body);

}  // namespace kiln
