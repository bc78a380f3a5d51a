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
    // appended to the toolchain's (kKernelOptFlags, -march=native ...)
    std::vector<std::string> extra_flags;
};

// A graph whose kernels' text is at least twice this is split over several translation
// units, compiled at once (emit_units; at most compile_jobs() units, about one per this many
// bytes): each extra compiler costs ~0.05 s of CPU (the lean prelude), a unit of this size
// ~0.1 s (kKernelOptFlags), so on an idle machine with two cores the graph's kernels are ready in about
// half the time.
inline constexpr size_t kMinUnitBytes = 16 * 1024;

class CompiledCpuGraph {
   public:
    // `libraries`: the units the schedule's kernels were built in (emit_units), each kernel's
    // entry looked up in the first that has it; throws kiln::Error naming a missing one.
    CompiledCpuGraph(Schedule schedule, std::string source,
                     std::vector<std::shared_ptr<CompiledLibrary>> libraries);

    // Runs the graph: inputs in LGraph::inputs order (any strides: non-contiguous ones are
    // copied first); outputs in LGraph::outputs order, freshly allocated with empty().
    // Throws kiln::Error naming the input if a shape or dtype does not match the graph.
    std::vector<Tensor> run(std::span<const Tensor> inputs) const;
    std::vector<Tensor> run(const std::vector<Tensor>& inputs) const { return run(std::span<const Tensor>(inputs)); }

    const Schedule& schedule() const { return schedule_; }
    const std::string& source() const { return source_; }  // the whole translation unit
    size_t libraries() const { return libraries_.size(); }  // the units it was built in

   private:
    Schedule schedule_;
    std::string source_;
    std::vector<std::shared_ptr<CompiledLibrary>> libraries_;  // keep kernels_ loaded
    std::vector<KernelFn> kernels_;             // per kernel; nullptr for host kernels
    std::vector<EpilogueRowsFn>
        epilogues_;  // per kernel: `<name>_rows` of a matmul's epilogue, else nullptr
    std::vector<std::vector<int>> kernel_args_; // per kernel: Kernel::args(), computed once
    std::vector<std::vector<int>> release_;     // per kernel: values dropped after it (release_plan)
    // per input: read only by layout changes the host makes (codegen/channels_last.h)
    std::vector<bool> any_layout_input_;
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
