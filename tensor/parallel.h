// parallel_for: splits [0, n) into chunks over a small thread pool; runs inline when small.
#pragma once
#include <cstdint>
#include <functional>

namespace kiln {

// Elements below which a loop stays on the calling thread (thread handoff costs ~5 us).
inline constexpr int64_t kParallelGrain = 1 << 15;

int num_threads();
// True on a thread running a parallel_for body: a library call made there runs on this thread
// alone (tensor/gemm.cpp sets oneDNN's OpenMP count to 1 there).
bool in_parallel_for();
void set_num_threads(int n);  // 0: hardware concurrency; also read from KILN_NUM_THREADS
// OpenBLAS keeps a thread count of its own (all cores), and its idle workers spin: call this
// before a BLAS call so that BLAS uses num_threads() threads too. No-op for another BLAS.
void sync_blas_threads();
// Sets OpenBLAS's thread count (the fused matmul epilogue runs BLAS single-threaded on each
// of its threads); false, and nothing set, where the BLAS is not OpenBLAS.
bool set_blas_threads(int n);
// body(begin, end) runs on disjoint ranges covering [0, n): up to 4 per thread, each range at
// least `grain` long (but the last), taken by whichever thread is free; ranges of 1024 or more
// start at multiples of 16.
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& body);

}  // namespace kiln
