// A matmul as BLAS calls, planned once and run by row blocks: the eager matmul kernel runs a
// plan whole, and the CPU code generator runs it a block of rows at a time with the fused
// epilogue after each block (codegen/cpu_epilogue.cpp, docs/codegen.md).
#pragma once
#include <cstdint>
#include <memory>

#include "tensor/tensor.h"

namespace kiln {

// One operand of a GEMM as BLAS reads it: row-major, maybe transposed (a transposed view is a
// flag, never a copy), with its leading dimension in elements.
struct GemmOperand {
    bool trans = false;
    int64_t ld = 0;
};
// An [r, c] matrix with strides (s0, s1) as BLAS reads it in place, row-major (s1 == 1) or
// transposed (s0 == 1); false when neither stride is 1 (the operand is copied first). The CPU
// plan (plan_gemm) and CUDA's cuBLAS matmul (tensor/kernels_cuda.cpp) both use it.
bool gemm_layout(int64_t r, int64_t c, int64_t s0, int64_t s1, GemmOperand& g);

// Which library runs a plan's GEMMs: OpenBLAS (or the BLAS kiln opened, tensor/blas_library.h),
// or oneDNN's dnnl_sgemm (float32, where kiln is built with oneDNN). plan_gemm chooses per
// shape; KILN_GEMM=openblas or =onednn forces one (docs/env.md).
enum class GemmLibrary { blas, onednn };
const char* gemm_library_name(GemmLibrary lib);  // "openblas" (any BLAS kiln opened), "onednn"

namespace detail {
struct PackedWeights;  // b in oneDNN's matmul layout (tensor/gemm.cpp, packed_b)
}

struct GemmPlan {
    Tensor a, b;                  // broadcast to [batch..., M, K] and [batch..., K, N]; copied only
                                  // when neither of the last two strides is 1
    Shape batch;                  // the broadcast batch dims
    int64_t batches = 1;          // BLAS calls: the batch dims' product (1 when folded into M)
    int64_t M = 0, N = 0, K = 0;  // per call; rows of all calls: batches * M
    GemmOperand ga, gb;
    Shape full_shape;  // [batch..., M, N] before folding: the output BLAS writes
    Shape out_shape;   // what matmul returns (1-D operands' dims dropped)
    GemmLibrary library = GemmLibrary::blas;
    // b packed once for oneDNN's matmul primitive, kept between calls: set where b (one matrix,
    // a's rows plain) was multiplied at the same storage version before, so a weight of
    // repeated inference calls is packed once instead of by every dnnl_sgemm. Null otherwise.
    std::shared_ptr<const detail::PackedWeights> packed_b;
};

// Checks the operands as matmul does. A batch of `a` times one matrix `b` (a Linear's x @ W^T
// on [B, T, E]) is one GEMM with M = B * T rows when a's rows are evenly spaced in memory.
GemmPlan plan_gemm(const Tensor& a, const Tensor& b);
// Rows [r0, r1) of call `call` (0 <= call < batches) into `out`, the whole contiguous output
// ([batches * M, N] elements of a's dtype). OpenBLAS runs on its own threads (its count set by
// sync_blas_threads / set_blas_threads, tensor/parallel.h); oneDNN runs single-threaded on
// each of kiln's threads, the rows or columns split over num_threads() (one part inside a
// parallel_for).
void gemm_rows(const GemmPlan& p, int64_t call, int64_t r0, int64_t r1, void* out);
// True when each of several threads may run its own single-threaded GEMMs of this plan at
// once (gemm_rows inside a parallel_for): always for oneDNN; for OpenBLAS after setting its
// thread count to 1 (sync_blas_threads sets it back), false for another BLAS.
bool gemm_single_threaded_calls(const GemmPlan& p);

// Time inside BLAS, summed over gemm_rows calls (threads add up), for profiles
// (bench/epilogue.cpp). Counting starts at gemm_profile(true), which zeroes the counts.
struct GemmProfile {
    int64_t calls = 0;
    int64_t ns = 0;
};
void gemm_profile(bool on);
GemmProfile gemm_profile_counts();

namespace detail {
// The OpenMP thread count the calling thread's last dnnl_sgemm ran with (0 before any, or
// without oneDNN): always 1, kiln's threads split a GEMM (for tests).
int onednn_gemm_threads();
// The packed-b cache (GemmPlan::packed_b): hits (a plan given packed b), packs made, and GEMM
// parts run on the packed b through oneDNN's matmul primitive. KILN_GEMM_PACK=0 (read at every
// plan) turns packing off, 1 packs wherever a plan qualifies, auto (default) where measured faster.
struct GemmPackStats {
    int64_t hits = 0, packs = 0, packed_parts = 0, entries = 0;
};
GemmPackStats gemm_pack_stats();
// Shapes timed so far under KILN_GEMM=auto / KILN_GEMM_PACK=auto (tensor/gemm.cpp, "choosing
// by measurement"): each is timed once per process, its faster kept.
int64_t gemm_choices();
void gemm_pack_clear();
}  // namespace detail

}  // namespace kiln
