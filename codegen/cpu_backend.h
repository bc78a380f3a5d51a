// The CPU "inductor" backend: LGraph -> schedule -> C++ source -> shared object -> a
// runnable graph. Blas and fallback kernels run on the host through kiln's eager kernels.
#pragma once
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "codegen/emit_cpp.h"
#include "codegen/lower_input.h"
#include "codegen/schedule.h"
#include "tensor/ops.h"

namespace kiln::codegen {

class CompiledLibrary;

struct CpuCompileOptions {
    std::vector<std::string> extra_flags;  // appended to the toolchain's (-O3 -march=native ...)
};

class CompiledCpuGraph {
   public:
    CompiledCpuGraph(Schedule schedule, std::string source, std::shared_ptr<CompiledLibrary> library);

    // Runs the graph: inputs in LGraph::inputs order (any strides: non-contiguous ones are
    // copied first); outputs in LGraph::outputs order, freshly allocated with empty().
    // Throws kiln::Error naming the input if a shape or dtype does not match the graph.
    std::vector<Tensor> run(std::span<const Tensor> inputs) const;
    std::vector<Tensor> run(const std::vector<Tensor>& inputs) const { return run(std::span<const Tensor>(inputs)); }

    const Schedule& schedule() const { return schedule_; }
    const std::string& source() const { return source_; }  // the whole translation unit

   private:
    Schedule schedule_;
    std::string source_;
    std::shared_ptr<CompiledLibrary> library_;  // keeps kernels_ loaded
    std::vector<KernelFn> kernels_;             // per kernel; nullptr for host kernels
    std::vector<EpilogueRowsFn>
        epilogues_;  // per kernel: `<name>_rows` of a matmul's epilogue, else nullptr
    std::vector<std::vector<int>> kernel_args_; // per kernel: Kernel::args(), computed once
    std::vector<std::vector<int>> release_;     // per kernel: values dropped after it (release_plan)
    int num_value_ids_ = 0;                     // value ids are < this
};

CompiledCpuGraph compile_cpu(const LGraph& graph, const CpuCompileOptions& options = {});
// The build stage alone, for a schedule already made and emitted (the inductor's pipeline
// plans each graph once): compiler or disk cache, then load.
CompiledCpuGraph build_cpu(Schedule schedule, std::string source, const CpuCompileOptions& options = {});
std::shared_ptr<CompiledLibrary> build_cpu_library(const std::string& source, const CpuCompileOptions& options = {});
// Several graphs in ONE translation unit and one compiler call (the compiler's start-up
// and headers dominate small kernels' build time). For LGraphs built by hand (tests,
// benches): schedule -> fuse_epilogues -> emit -> build, the pipeline's stages 2 to 5.
std::vector<CompiledCpuGraph> compile_cpu_many(const std::vector<LGraph>& graphs, const CpuCompileOptions& options = {});

// The reference: runs the graph op by op through the eager dispatcher ("keep a
// simple path beside the fast one"). Also what fallback kernels do, one node at a time.
std::vector<Tensor> run_eager(const LGraph& graph, const std::vector<Tensor>& inputs);

}  // namespace kiln::codegen
