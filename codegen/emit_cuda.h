// The CUDA emitter (docs/codegen.md): the same Schedule the C++ emitter reads, written as one
// CUDA C++ translation unit for NVRTC, with one extern "C" __global__ function per generated
// kernel. See docs/cuda.md "Compiled functions on the GPU".
#pragma once
#include <string>
#include <vector>

#include "codegen/schedule.h"

namespace kiln::codegen {

// Every generated CUDA kernel takes its buffers (Kernel::args(): loads, then stores, as
// float32 device pointers) and then the symbols s0, s1, ... as `long long`, by value.
//
// Pointwise kernels are grid-stride loops over the domain's elements, four at a time
// through float4 loads and stores when every array is contiguous along the loop and 16-byte
// aligned (checked in the kernel), one at a time with index math otherwise. Row kernels are
// one thread block per row (grid-stride over rows): each pass along the row folds a
// per-thread partial, then the block combines them with warp shuffles, so softmax and
// layernorm are one kernel each, as on the CPU.
std::string emit_cuda(const Schedule& schedule);
// The __global__ function that runs `kernel` of `source`: itself, or the earlier kernel whose
// code it repeats (kernels that differ only in names are emitted once; codegen/same_code.h).
std::string cuda_kernel_entry(const std::string& source, const std::string& kernel);
std::string emit_cuda(const std::vector<const Schedule*>& schedules);

// NVRTC compiles one program on one thread; a large translation unit of emit_cuda is cut
// into `units` programs that compile at once. Each holds the whole prelude and a contiguous
// run of the kernels (about equal bytes each, at least one kernel each: fewer units when
// there are fewer kernels); one unit is the source as it is. None when it has no kernel.
struct CudaUnit {
    std::string source;
    std::vector<std::string> kernels;  // the __global__ functions it defines
};
std::vector<CudaUnit> split_cuda_source(const std::string& source, int units);

// A row kernel whose one pass comes first can spread each row over several blocks (for few,
// long rows: a full reduction). Such a kernel takes three more arguments after the symbols:
// `float* partials` (rows * splits * R floats), `unsigned* counters` (rows, zero), `long long
// splits`. Returns R, its number of reductions, or 0 for kernels without them.
int cuda_split_reductions(const Schedule& schedule, int kernel);

// Threads per block a row kernel is launched with, for `rows` rows: 1024 for fewer rows than
// SMs, else emit_detail::cuda_row_block_for(row_size) (codegen/register_row.h), which the
// register variant's groups assume. Its loops do not depend on it: any multiple of 32 up to
// 1024 is correct (a row that does not fit the registers takes the general loop).
int cuda_row_block(int64_t rows, int64_t row_size, int sms);

}  // namespace kiln::codegen
