// AOT autograd, step 2: split the joint graph with the min-cut partitioner into a forward
// graph (outputs + saved tensors) and a backward graph (saved + tangents -> input grads),
// and run them as one node of the eager tape (the seed's OptimizedFunction pattern).
#pragma once
#include <string>

#include "jit/aot/joint.h"
#include "jit/aot/partition.h"
#include "jit/backends.h"

namespace kiln::jit::aot {

// Compiles a graph of the forward or backward half (aot_eager: the interpreter).
using GraphCompiler = std::function<CompiledFn(std::shared_ptr<const Graph>, std::span<const Tensor> examples)>;

struct SavedInfo {
    std::string name;
    Shape shape;
    size_t bytes = 0;
};
struct MemoryReport {
    std::vector<SavedInfo> eager;     // what the eager tape would keep
    std::vector<SavedInfo> compiled;  // what the partitioned forward keeps
    size_t eager_bytes() const;
    size_t compiled_bytes() const;
    std::string str() const;
};

// The two halves of one segment for one set of input shapes.
struct AotPlan {
    JointGraph joint;
    std::shared_ptr<const Graph> forward, backward;
    MemoryReport memory;
    int num_outputs = 0;              // forward outputs (the rest of forward's results are saved)
    std::vector<int> tangent_outputs; // forward outputs that take a tangent, in tangent order
    std::vector<int> input_grad_slot; // per primal: index into backward's results, or -1
    // Per primal: the forward outputs that depend on it (through ops that pass gradient).
    // A primal gets no gradient when none of them received one, as in eager autograd.
    std::vector<std::vector<int>> outputs_of_input;
};

// The partitioner's view of a joint graph: one node per node of joint.graph except its
// output node, with bytes, primal/tangent/output flags and the op table's recompute flag.
std::vector<PartitionNode> partition_input(const JointGraph& joint);

// Builds the joint graph, partitions it and cuts it into forward and backward graphs.
AotPlan plan(const Graph& forward, std::span<const Tensor> example_inputs);

// A backend that runs `inner`-compiled forward/backward halves when inputs need grad. The
// backward half is compiled at the first backward, or, with `backward_with_forward`, right
// after the forward half (a compiler that builds in the background then builds both at once).
CompiledFn aot_compile(std::shared_ptr<const Graph> graph, std::span<const Tensor> examples, GraphCompiler inner,
                       bool backward_with_forward = false);

// The interpreter as a GraphCompiler.
CompiledFn interpret_compiler(std::shared_ptr<const Graph> graph, std::span<const Tensor> examples);

// The memory report of the most recent plan built for `graph` (empty when none).
MemoryReport last_memory_report(const Graph* graph);
MemoryReport latest_memory_report();  // of the most recent plan, any graph

// The "aot_eager" backend: joint graph + partition, both halves interpreted.
CompiledFn aot_eager_backend(const Graph& graph, std::span<const Tensor> examples);

}  // namespace kiln::jit::aot
