// AOT autograd, step 1: trace the op table's derivative formulas over a recorded forward
// graph into one joint forward+backward graph (docs/aot.md).
#pragma once
#include <memory>
#include <vector>

#include "jit/graph.h"

namespace kiln::jit::aot {

struct JointGraph {
    std::shared_ptr<const Graph> graph;  // placeholders: primals, then tangents
    int num_primals = 0;
    std::vector<int> fw_outputs;        // node index of each forward output
    std::vector<int> tangent_of;        // per forward output: its tangent placeholder, or -1
    std::vector<int> input_grads;       // per primal: node index of its gradient, or -1
};

// Runs the forward graph on `example_inputs` and the derivative formulas backwards from
// one tangent per differentiable output, recording every op. Shapes are those of the
// examples (a joint graph is built per input shape).
JointGraph build_joint(const Graph& forward, std::span<const Tensor> example_inputs);

}  // namespace kiln::jit::aot
