// Internal to codegen/: what both rungs of the CUDA dialect write the same way — the eager
// kernels (emit_eager_cuda.cpp: one kernel per op and dtypes, any shape, geometry at run time)
// and the generated ones (emit_cuda.cpp: one kernel per schedule kernel, sizes in the text).
// Their statements (emit_expr.h), their element types and conversions, their grid-stride and
// row loops, and the block-wide combines of a row's reduction made from tensor/reductions.def.
// Like emit_expr.h it needs no Schedule, only tensor/, so tensor/kernels_cuda.cpp may reach it.
#pragma once
#include <string>

#include "codegen/emit_expr.h"

namespace kiln::codegen::emit_detail {

// A statement as CUDA C++ writes it: C casts, `!= 0` to bool, the ternary operator; math in
// float32 stays float (kiln_math's float overloads), other dtypes are cast back.
struct CudaSpelling : Spelling {
    std::string convert(const std::string& x, DType to) const override;
    std::string select(const std::string& c, const std::string& a,
                       const std::string& b) const override;
    std::string result(const std::string& math, OpId op, DType compute) const override;
};

// How a row's reduction is combined across its block (the block_<reduction> helpers of
// cuda_block_helpers()), through the block's shared slots of its accumulator's type.
struct BlockCombine {
    std::string combine;  // block_sum, block_amax, block_amin
    const char* acc;      // the accumulator's C type (bool: int, which warp shuffles carry)
    const char* shared;   // the block's shared slots of that type
};
BlockCombine block_combine(OpId op, DType accumulator);
// "__shared__ double shared_f64[32];": one slot per warp.
std::string shared_slots(const char* shared);

// block_combine<Combine>(v, shared, identity) (warp shuffles, then the warps' results
// through shared memory; every thread gets the block's value; blockDim.x a multiple of 32,
// at most 1024), then block_<reduction>(v, shared) for each line of tensor/reductions.def.
std::string cuda_block_helpers();

// The start of a grid-stride loop over `n` elements: `step` and this thread's `first`.
std::string grid_stride_head(const std::string& ind);
// One block per row (`split`: per slice of a row, `splits` slices of `chunk` elements) of
// `rows` rows of `row_size`: the loop over the block's rows or slices, opened, with `row`,
// `j_begin` and `j_end` defined. The caller closes it.
std::string row_loop_head(const std::string& ind, bool split);
// One pass along the row, each thread taking every blockDim.x-th element j; opened.
std::string row_pass_head(const std::string& ind);

}  // namespace kiln::codegen::emit_detail
