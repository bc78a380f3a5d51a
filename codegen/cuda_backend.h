// The CUDA backend: LGraph -> schedule (the same scheduler as the CPU's) -> CUDA C++
// (emit_cuda.h) -> NVRTC -> a cubin loaded on cuda:0 -> a runnable graph. Blas and fallback
// kernels run through kiln's eager CUDA kernels (cuBLAS for matmul).
#pragma once
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "codegen/lower_input.h"
#include "codegen/schedule.h"
#include "tensor/ops.h"

namespace kiln::cuda {
class Graph;
}

namespace kiln::codegen {

// NVRTC compiles one program on one thread: a translation unit of `source_bytes` is split
// into this many programs (split_cuda_source), compiled at once. Each program repeats the
// prelude, so each gets at least kNvrtcProgramBytes of source, and there are at most as many
// programs as cores (std::thread::hardware_concurrency).
inline constexpr size_t kNvrtcProgramBytes = 8 * 1024;
int nvrtc_programs_for(size_t source_bytes);

class CompiledCudaGraph {
   public:
    // Loads the kernels of `source` (compiled by NVRTC once per process per source text), in
    // `nvrtc_programs` programs compiled at once (0: nvrtc_programs_for(source.size())).
    CompiledCudaGraph(Schedule schedule, std::string source, int nvrtc_programs = 0);

    // Inputs in LGraph::inputs order, on the graph's device (a 0-d CPU tensor is copied
    // over, as eager does); outputs freshly allocated on the device. Launches are queued on
    // kiln's stream: nothing waits for the GPU here.
    std::vector<Tensor> run(std::span<const Tensor> inputs) const;
    std::vector<Tensor> run(const std::vector<Tensor>& inputs) const { return run(std::span<const Tensor>(inputs)); }

    const Schedule& schedule() const { return schedule_; }
    const std::string& source() const { return source_; }
    int nvrtc_programs() const { return nvrtc_programs_; }  // its kernels were compiled as

   private:
    Schedule schedule_;
    std::string source_;
    std::vector<void*> kernels_;                 // per kernel: the CUfunction, or nullptr for host kernels
    std::vector<std::vector<int>> kernel_args_;  // per kernel: Kernel::args()
    std::vector<std::vector<int>> release_;      // per kernel: values dropped after it (release_plan)
    std::vector<int> split_reductions_;          // per kernel: cuda_split_reductions()
    std::vector<int> max_block_;                 // per kernel: the most threads a block can have
    int nvrtc_programs_ = 0;
    int num_value_ids_ = 0;
    std::set<int> returned_;  // value ids the graph returns
};

// mode="reduce-overhead": a compiled graph's launches (kernels, copies, cuBLAS) captured
// into a CUDA graph and replayed with one launch. The first call runs normally (warm-up:
// NVRTC, cuBLAS and the allocator are ready after it); the second captures, with inputs
// copied into static buffers, and replays; later calls copy their inputs in and replay. New
// input shapes (symbolic sizes) capture again. Outputs are copies of the static outputs
// (a graph input returned as it is stays itself), so a later replay never changes a result
// the caller holds. An input that came at the same address on the call before the capture
// (a parameter, a batch the caller refills in place, a buffer the caching allocator hands
// out again) is not copied: the graph reads that address, and each replay checks that the
// input is there; a call with it elsewhere captures again, the input copied from then on. A graph
// that cannot be captured (it reads a CPU value, which needs a copy from host memory) runs as in
// the default mode, saying why in why_not_captured(). Called while a CUDA graph of the caller's is
// captured (cuda::GraphedStep), it runs its launches into that capture as the default mode does: no
// graph inside a graph.
class CudaGraphReplay {
   public:
    explicit CudaGraphReplay(const CompiledCudaGraph& graph);
    ~CudaGraphReplay();
    std::vector<Tensor> run(std::span<const Tensor> inputs);
    const std::string& why_not_captured() const { return disabled_; }

   private:
    const CompiledCudaGraph& graph_;
    int64_t calls_ = 0;
    std::string disabled_;
    std::vector<Shape> shapes_;
    std::vector<Tensor> static_inputs_, static_outputs_;
    std::vector<const void*> last_addresses_;  // each input's address on the previous call
    std::vector<bool> aliased_;                // the graph reads input i at alias_addresses_[i]
    std::vector<const void*> alias_addresses_;
    std::vector<bool> moved_;                  // the input came at a new address after a capture
    std::unique_ptr<cuda::Graph> captured_;
    std::mutex mu_;
};

struct CudaGraphStats {
    int64_t captures = 0, replays = 0, not_captured = 0;
    std::string last_not_captured;  // why, for the latest graph that could not be captured
    int64_t inside_outer = 0;       // calls run inside a capture of the caller's (GraphedStep)
};
CudaGraphStats cuda_graph_stats();  // totals since process start

// Several graphs in one translation unit and one NVRTC call. Needs a usable GPU (the cubin
// is built for its sm_XX); without one, raises naming what is missing.
std::vector<CompiledCudaGraph> compile_cuda_many(const std::vector<LGraph>& graphs);
CompiledCudaGraph compile_cuda(const LGraph& graph);
// The build stage alone, for a schedule already made and emitted (NVRTC or the cubin cache).
CompiledCudaGraph build_cuda(Schedule schedule, std::string source, int nvrtc_programs = 0);

// The schedules and the translation unit compile_cuda_many would build, without building:
// for compile-only tests (NVRTC needs no GPU) and :code.
std::vector<Schedule> schedule_many(const std::vector<LGraph>& graphs);
std::string emit_cuda_many(const std::vector<Schedule>& schedules);

}  // namespace kiln::codegen
