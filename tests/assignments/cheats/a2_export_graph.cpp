// A planted cheat: the reference solution with task 2.1's trace answered by kiln's own
// one-graph recorder behind jit::export_graph, plus renumbering its placeholders into
// argument order; no Recorder involved. Its graphs are kiln's, so only the manifest can
// fail it.
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
    const Graph& g = program.graph();
    // kiln names a placeholder for tensors[k] "arg0_k" and lists them in order of first use.
    kiln::jit::GraphBuilder b;
    std::vector<int> ids(g.nodes().size(), -1), by_arg(tensors.size(), -1);
    for (size_t i = 0; i < g.nodes().size(); ++i)
        if (g.nodes()[i].kind == kiln::jit::NodeKind::placeholder) {
            const std::string& n = g.nodes()[i].name;
            if (n.rfind("arg0_", 0) != 0)  // kiln lifted a captured tensor: refuse it
                throw kiln::Error("trace: fn reads a tensor it was not given: " + n);
            by_arg.at(std::stoul(n.substr(5))) = int(i);
        }
    for (size_t k = 0; k < tensors.size(); ++k) {
        std::string name = "arg" + std::to_string(k);
        int id = b.placeholder(name, kiln::jit::meta_of(tensors[k]),
                               "tensors[" + std::to_string(k) + "]");
        if (by_arg[k] >= 0) ids[by_arg[k]] = id;
    }
    std::vector<int> outputs;
    for (size_t i = 0; i < g.nodes().size(); ++i) {
        const kiln::jit::Node& n = g.nodes()[i];
        std::vector<int> args;
        for (int a : n.args) args.push_back(ids[a]);
        if (n.kind == kiln::jit::NodeKind::call)
            ids[i] = b.call(n.op, n.attrs, args, n.meta, n.grad_enabled);
        else if (n.kind == kiln::jit::NodeKind::output)
            outputs = args;
    }
    return b.build(outputs);
}

}  // namespace student
