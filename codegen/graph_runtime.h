// Internal to codegen/: what the CPU and CUDA runners of a Schedule share (cpu_backend.cpp
// defines them). Host kernels (blas, fallback) and views that leave a graph run through
// dispatch_eager, which sends CUDA tensors to the eager CUDA kernels.
#pragma once
#include <span>
#include <string>
#include <vector>

#include "codegen/emit_cpp.h"
#include "codegen/schedule.h"

namespace kiln::codegen::detail {

// `shape` with its symbols replaced by their values.
Shape concrete(const Shape& shape, const std::vector<int64_t>& symbols);
std::string shape_text(const Shape& shape);  // [s0, 3]
// Binds s0, s1, ... from the input shapes and checks every input's dtype, shape and device
// (a 0-d input may be on any device) against the graph; throws kiln::Error naming the input.
std::vector<int64_t> bind_symbols(const LGraph& graph, std::span<const Tensor> inputs, int num_symbols);
std::vector<int64_t> bind_symbols(const LGraph& graph, std::span<const Tensor> inputs, int num_symbols, Device device);
Tensor eval_node(const LNode& n, std::span<const Tensor> inputs, const std::vector<int64_t>& symbols);
Tensor contiguous_input(const Tensor& t);
// The value `id`, built on demand through the eager dispatcher from its inputs (views that
// a host kernel reads or the graph returns); `env` is indexed by value id.
Tensor value_of(const Schedule& schedule, int id, std::span<Tensor> env, const std::vector<int64_t>& symbols);
// Per kernel k, the env slots no later kernel (and no graph output) reads: a runner drops
// them after kernel k, so a graph holds its intermediates only while they are needed, as
// eager code does when its handles die (without this, a training step's backward graph
// kept every intermediate gradient to the end: 2.6x eager's memory on the GPT decoder).
std::vector<std::vector<int>> release_plan(const Schedule& schedule);
// Blas kernel k and its epilogue k + 1 as one step: BLAS by blocks of rows, the epilogue over
// each block after it (codegen/cpu_epilogue.cpp). Fills env with the stores and the GEMM output.
void run_gemm_with_epilogue(const Schedule& s, int k, EpilogueRowsFn epilogue,
                            std::span<Tensor> env, const std::vector<int64_t>& symbols);

}  // namespace kiln::codegen::detail
