// The "inductor" backend (DESIGN.md §2, §8): AOT autograd splits a graph into forward and
// backward halves; each half is lowered to an LGraph and built by the code generator: C++ for
// the system compiler on the CPU, CUDA C++ for NVRTC when its values live on the GPU.
// Graphs that need no generated kernel, or a CPU graph without a compiler, are interpreted.
//
// Registration: jit/ never includes codegen/, and a static library drops object files that
// nothing references. So the inline variable below, defined in every program that includes
// this header (kiln.h does), both references inductor_backend (pulling this file's object
// in) and registers it at start-up, replacing jit's fallback (aot_eager) for "inductor".
#pragma once
#include <span>
#include <string>
#include <vector>

#include "codegen/choose.h"
#include "codegen/pipeline.h"
#include "jit/backends.h"

namespace kiln::codegen {

jit::CompiledFn inductor_backend(const jit::Graph& graph, std::span<const Tensor> examples);

// What the backend made of one graph (a whole graph, or one AOT half): what each pipeline
// stage returned, for tests, logs, explain and the REPL's `:code f`.
struct CompiledGraphInfo {
    int id = 0;                  // N of graph_N.txt, graph_N.<stage>.txt, output_code_N.cpp
    std::string graph;           // the jit Graph, one line per node
    std::string schedule;        // Schedule::print(): which nodes fused into which kernel
    std::string source;          // the generated translation unit ("" when interpreted)
    bool cuda = false;           // source is CUDA C++ (output_code_N.cu) built by NVRTC
    int generated_kernels = 0;   // pointwise + row kernels in the schedule
    bool interpreted = false;    // no kernel to generate, no compiler, or not lowerable
    std::string why_interpreted;
    std::vector<std::string> fallbacks;  // "gather_3: gather has no generated form (...)": nodes run eagerly
    // codegen/fuse_conv.cpp, one line per conv2d: "conv2d_3: fused sub, mul, relu (stopped: ...)"
    // or "conv2d_3: not fused (why)"; the fused ones run as one conv2d_fused node.
    std::vector<std::string> conv_fusions;
    // The kernels-or-eager choice (codegen/choose.h), one report per size class, latest
    // first seen first. Empty when nothing is chosen: interpreted, CUDA, or choice turned off.
    std::vector<ChoiceReport> choices;
    // Each pipeline stage's time (codegen/pipeline.h), in order; "5_build" once the build is done.
    std::vector<StageTime> stages;
};

// The most recent graph handed to the inductor (empty info before any).
CompiledGraphInfo last_compiled();
// Every graph compiled on behalf of `graph` (the Graph a backend received): one entry
// without grad, or the forward and (once backward ran) backward halves.
std::vector<CompiledGraphInfo> compiled_graphs(const jit::Graph* graph);

struct InductorStats {
    int64_t graphs = 0;              // graphs (or halves) handed to the code generator
    int64_t graphs_interpreted = 0;  // of which: run by the interpreter for good
    int64_t builds = 0;              // translation units built (compiler or disk cache)
    int64_t calls_compiled = 0;      // calls served by generated code
    int64_t calls_interpreted = 0;   // calls served by the interpreter (fallback, or async pending)
};
InductorStats inductor_stats();  // totals since process start; tests compare differences

// Blocks until every background (async_compile) build has finished. For tests and exit.
void wait_for_async_compiles();

inline const bool inductor_registered = (jit::register_backend("inductor", inductor_backend), true);

// NVRTC's cubins kept in the per-user kernel cache (codegen/cuda_cache.cpp), registered the same way.
bool register_cubin_disk_cache();
inline const bool cubin_cache_registered = register_cubin_disk_cache();

}  // namespace kiln::codegen
