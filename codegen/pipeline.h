// The inductor's pipeline for one graph (DESIGN.md §8, docs/codegen.md "The pipeline"):
//   lower -> fuse_conv -> schedule -> fuse_epilogues -> emit(target) -> build(target) + load
// Each stage runs once and returns what it made. KILN_LOGS=passes prints each stage's output
// and time; KILN_DEBUG_DIR gets one file per stage (graph_N.0_lowered.txt ... output_code_N.cpp).
// plan_graph runs the stages up to the source; build_plan the rest (the inductor may run it
// on a background thread).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "codegen/cpu_backend.h"
#include "codegen/cuda_backend.h"
#include "codegen/schedule.h"
#include "jit/graph.h"

namespace kiln::codegen {

struct StageTime {
    std::string
        stage;  // "0_lowered", "1_conv_fused", "2_schedule", "3_epilogues", "4_emit", "5_build"
    double ms = 0;
};

// What plan_graph made of a graph: the build's input, and the stages' reports.
struct Plan {
    Schedule schedule;            // after fuse_epilogues (empty when lowering or scheduling failed)
    std::string source;           // the translation unit ("" when interpreted)
    Device device = cpu;          // cuda: CUDA C++ for NVRTC
    int generated_kernels = 0;    // pointwise + row kernels in the schedule
    std::string why_interpreted;  // set: nothing to build, the interpreter runs it
    std::vector<std::string> conv_fusions;  // fuse_conv's notes, one per conv2d
    std::vector<std::string> fallbacks;     // "gather_3: gather has no generated form (...)"
    std::vector<StageTime> stages;          // in order
    uint64_t graph_uid = 0;                 // the jit Graph's uid (the trace log's graph id)
    bool buildable() const { return why_interpreted.empty(); }
};

// lower -> fuse_conv -> schedule -> fuse_epilogues -> emit(target). `id` is the graph's N in
// the debug files and logs. A CPU graph on a machine without a working compiler is not
// buildable (warned once per cause).
Plan plan_graph(const jit::Graph& graph, int id);

// build(target) + load: the compiler (or the kernel cache) and dlopen, or NVRTC and the
// module load. Throws kiln::Error when the build fails (report it with build_failed).
struct Built {
    std::optional<CompiledCpuGraph> cpu;
    std::optional<CompiledCudaGraph> cuda;
    StageTime time;
};
Built build_plan(Plan plan, int id);

// A build of graph `id` threw: warns on stderr (a missing or timed-out compiler once per
// cause, anything else every time). `timeouts_before`: toolchain_stats().compiler_timeouts
// before the build.
void build_failed(int id, const Error& e, int64_t timeouts_before);

}  // namespace kiln::codegen
