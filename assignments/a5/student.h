// Assignment 5: fusion and codegen (assignments/a5/README.md). A custom backend, in the
// style of Inductor: group chains of pointwise nodes (task 5.1), emit one C++ loop per
// group from the op table's math text (5.2), build them all in one shared object with
// kiln's toolchain and run the graph with them (5.3).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "codegen/toolchain.h"
#include "jit/backends.h"
#include "jit/graph.h"
#include "kiln.h"

namespace student {

using kiln::Tensor;
using kiln::jit::Graph;

// One fused kernel's worth of graph nodes (indices into graph.nodes()).
struct Group {
    std::vector<int> nodes;    // call nodes, in graph order
    std::vector<int> inputs;   // values the group reads from outside it, in order of first use
    std::vector<int> outputs;  // its values read after it (by a later node or the graph's outputs),
                               // in graph order
};

// --- Task 5.1: grouping. A node is fusible when it is a call of a pointwise op with math
// text (kiln::op_info(op).math), produces float32, reads at most two operands counting a
// scalar one (attrs.scalar_pos), and every tensor it reads is float32 of its own shape (no
// broadcasting). group_pointwise returns the maximal runs of consecutive fusible nodes of
// one shape, in graph order (a node that is not fusible, or a new shape, ends a run).
bool fusible(const Graph& graph, int node);
std::vector<Group> group_pointwise(const Graph& graph);

// --- Task 5.2: one kernel per group, as C++ source to append to kernel_preamble():
//   namespace kiln_math { extern "C" void NAME(const float* const* in, float* const* out, int64_t
//   n) { ... } }
// A loop over the n elements, one statement per node (`float v3 = sin(v1);`), the math
// being the op's math text with x and y replaced (math_text) by its operands: a group
// input in[k][i], an earlier statement's variable, or the scalar operand as a literal.
// Each group output is stored to out[k][i].
std::string emit_kernel(const Graph& graph, const Group& group, const std::string& name);

// --- Task 5.3: compile and run. compile_fused groups the graph, emits every group's kernel
// into ONE source (kernel_preamble() first; kernel k named "kernel_k") and builds it with a
// single kiln::codegen::build_library call (include_dirs = {KILN_SOURCE_DIR}). run_fused
// runs the graph: a group's kernel where the group's first node is (its inputs made
// contiguous, its outputs new tensors), every other node through kiln::dispatch.
struct FusedGraph {
    std::vector<Group> groups;
    std::string source;
    std::shared_ptr<kiln::codegen::CompiledLibrary> library;  // null when there are no groups
};
FusedGraph compile_fused(const Graph& graph);
std::vector<Tensor> run_fused(const FusedGraph& fused, const Graph& graph,
                              std::span<const Tensor> inputs);

// --- Given (not tasks).
using KernelFn = void (*)(const float* const* in, float* const* out, int64_t n);
std::string kernel_preamble();  // the #includes every kernel source starts with
// `math` (an op's math text over x and y) with the identifiers x and y replaced.
std::string math_text(const std::string& math, const std::string& x, const std::string& y);
// The backend for kiln::compile(fn, {.backend = student::fusion_backend}).
kiln::jit::CompiledFn fusion_backend(const Graph& graph, std::span<const Tensor> examples);

}  // namespace student
