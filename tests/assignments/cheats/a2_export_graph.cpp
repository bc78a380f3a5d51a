// A planted cheat: the reference solution with task 2.1's trace answered by kiln's own
// one-graph recorder behind jit::export_graph, no Recorder involved.
// grader-expects: 2.1 | calls kiln::jit::record_one_graph (via student::trace)
#include "assignments/a2/student.h"
#include "jit/export.h"

#define trace reference_trace
#include "assignments/solutions/a2/student.cpp"
#undef trace

namespace student {

std::shared_ptr<const Graph> trace(const Fn& fn, const std::vector<Tensor>& tensors,
                                   const std::vector<double>& scalars) {
    auto program = kiln::jit::export_graph(
        [&](const std::vector<Tensor>& ts) { return fn(ts, scalars); }, tensors);
    return std::make_shared<Graph>(program.graph());
}

}  // namespace student
