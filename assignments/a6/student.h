// Assignment 6: a CUDA emitter (assignments/a6/README.md). Assignment 5's pointwise groups
// become CUDA kernels that NVRTC compiles (task 6.1) and the GPU runs (6.2); a row
// reduction, softmax, runs one thread block per row (6.3).
#pragma once
#include <span>
#include <string>
#include <vector>

#include "jit/graph.h"
#include "kiln.h"

namespace student {

using kiln::Tensor;
using kiln::jit::Graph;

// One fused kernel's worth of graph nodes, as in assignment 5 (indices into graph.nodes()).
struct Group {
    std::vector<int> nodes;    // call nodes, in graph order
    std::vector<int> inputs;   // values the group reads from outside it, in order of first use
    std::vector<int> outputs;  // values read after it, in graph order
};

// A group kernel's one argument, passed by value: the same struct is declared in
// cuda_preamble() for the device side.
constexpr int kMaxOperands = 8;
struct KernelArgs {
    const float* in[kMaxOperands];  // device pointers, group.inputs order
    float* out[kMaxOperands];       // device pointers, group.outputs order
    long long n;                    // elements
};

// --- Task 6.1: a group as one CUDA kernel, as source to append to cuda_preamble():
//   extern "C" __global__ void NAME(KernelArgs a) { ... }
// A grid-stride loop over the a.n elements (i starts at blockIdx.x * blockDim.x +
// threadIdx.x and steps by blockDim.x * gridDim.x), inside `namespace kiln_math` (where the
// op table's math functions are __device__ functions), one statement per node
// (`float v3 = sin(v1);`, the math being math_text of the op's math with its operands: an
// input a.in[k][i], an earlier statement's variable, or the scalar operand as a float
// literal such as `2.0f`), and each group output stored to a.out[k][i].
std::string emit_cuda_kernel(const Graph& graph, const Group& group, const std::string& name);

// --- Task 6.2: runs kernel `name` of `source` (cuda_preamble() + kernels) for `group` on
// the GPU: inputs are CUDA float32 tensors of the group's shape (make them contiguous), the
// outputs new CUDA tensors of that shape. Compile with kiln::cuda::detail::kernel(source,
// name) and launch with kiln::cuda::detail::launch(fn, n, args) (tensor/cuda_runtime.h).
// Returns the outputs, group.outputs order.
std::vector<Tensor> run_cuda_group(const Group& group, const std::string& source,
                                   const std::string& name, std::span<const Tensor> inputs);

// --- Task 6.3: softmax over each row of a contiguous [rows, cols] float32 matrix, one
// thread block per row:
//   extern "C" __global__ void NAME(const float* x, float* y, long long cols)
// blockIdx.x is the row. The block's kSoftmaxThreads threads stride over the row's columns
// for the row's max, combine their partial maxima through shared memory (extern __shared__
// float, kSoftmaxThreads of them), then the same for the sum of exp(x - max), then write
// exp(x - max) / sum. The tests launch it with rows blocks of kSoftmaxThreads threads.
constexpr int kSoftmaxThreads = 256;
std::string emit_softmax_kernel(const std::string& name);

// --- Given (not tasks).
// kiln's CUDA math prelude (tensor/kernels.h) and the device-side KernelArgs.
std::string cuda_preamble();
// `math` (an op's math text over x and y) with the identifiers x and y replaced.
std::string math_text(const std::string& math, const std::string& x, const std::string& y);

}  // namespace student
