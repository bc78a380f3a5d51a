// The CUDA backend: LGraph -> schedule (the same scheduler as the CPU's) -> CUDA C++
// (emit_cuda.h) -> NVRTC -> a cubin loaded on cuda:0 -> a runnable graph. Blas and fallback
// kernels run through kiln's eager CUDA kernels (cuBLAS for matmul).
#pragma once
#include <span>
#include <string>
#include <vector>

#include "codegen/lower_input.h"
#include "codegen/schedule.h"
#include "tensor/ops.h"

namespace kiln::codegen {

class CompiledCudaGraph {
   public:
    // Loads the kernels of `source` (compiled by NVRTC once per process per source text).
    CompiledCudaGraph(Schedule schedule, std::string source);

    // Inputs in LGraph::inputs order, on the graph's device (a 0-d CPU tensor is copied
    // over, as eager does); outputs freshly allocated on the device. Launches are queued on
    // kiln's stream: nothing waits for the GPU here.
    std::vector<Tensor> run(std::span<const Tensor> inputs) const;
    std::vector<Tensor> run(const std::vector<Tensor>& inputs) const { return run(std::span<const Tensor>(inputs)); }

    const Schedule& schedule() const { return schedule_; }
    const std::string& source() const { return source_; }

   private:
    Schedule schedule_;
    std::string source_;
    std::vector<void*> kernels_;                 // per kernel: the CUfunction, or nullptr for host kernels
    std::vector<std::vector<int>> kernel_args_;  // per kernel: Kernel::args()
    std::vector<int> split_reductions_;          // per kernel: cuda_split_reductions()
    std::vector<int> max_block_;                 // per kernel: the most threads a block can have
    int num_value_ids_ = 0;
};

// Several graphs in one translation unit and one NVRTC call. Needs a usable GPU (the cubin
// is built for its sm_XX); without one, raises naming what is missing.
std::vector<CompiledCudaGraph> compile_cuda_many(const std::vector<LGraph>& graphs);
CompiledCudaGraph compile_cuda(const LGraph& graph);

// The schedules and the translation unit compile_cuda_many would build, without building:
// for compile-only tests (NVRTC needs no GPU) and :code.
std::vector<Schedule> schedule_many(const std::vector<LGraph>& graphs);
std::string emit_cuda_many(const std::vector<Schedule>& schedules);

}  // namespace kiln::codegen
