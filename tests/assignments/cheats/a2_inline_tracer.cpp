// A planted cheat: task 2.1 answered by kiln's own tracer, driven directly
// (jit/tracer_state.h: kiln::jit::tracing::Tracer), so no call to a function the manifest
// names (record_one_graph, trace, trace_entry) is ever made. Breaks and captured tensors,
// which kiln's tracer handles, are refused afterwards, as 2.1 asks.
// grader-expects: 2.1 | calls kiln::jit::tracing::Tracer
#include "assignments/a2/student.h"
#include "jit/tracer_state.h"

#define trace reference_trace
#include "assignments/solutions/a2/student.cpp"
#undef trace

namespace student {

std::shared_ptr<const Graph> trace(const Fn& fn, const std::vector<Tensor>& tensors,
                                   const std::vector<double>& scalars) {
    using namespace kiln::jit;
    Entry entry;
    Args args;
    for (size_t i = 0; i < tensors.size(); ++i) {
        ArgValue a;
        a.tensor = tensors[i];
        a.position = int(i);
        args.push_back(a);
    }
    entry.guards.args.resize(args.size());
    TraceConfig cfg;
    cfg.backend = "eager";
    TraceStats stats;
    tracing::Tracer tracer(entry, args, {}, cfg, stats);
    Tensor out;
    kiln::set_dispatch_hook(&tracer);
    try {
        out = fn(tensors, scalars);
    } catch (...) {
        kiln::set_dispatch_hook(nullptr);
        throw;
    }
    kiln::set_dispatch_hook(nullptr);
    tracer.finish({out});
    if (!entry.breaks.empty()) throw kiln::Error("trace: a graph break");
    for (SlotKind k : entry.slot_kinds)
        if (k == SlotKind::lifted) throw kiln::Error("trace: a captured tensor");
    // Kiln's placeholders come in order of first use; 2.1's in argument order.
    const Segment& seg = *entry.root;
    const Graph& g = *seg.graph;
    GraphBuilder b;
    std::vector<int> id(g.nodes().size(), -1);
    for (size_t slot = 0; slot < tensors.size(); ++slot)
        for (int i = 0; i < g.num_inputs(); ++i)
            if (seg.input_slots[size_t(i)] == int(slot))
                id[size_t(i)] = b.placeholder(g.nodes()[size_t(i)].name, g.nodes()[size_t(i)].meta,
                                              "argument");
    std::vector<int> outs;
    for (size_t i = size_t(g.num_inputs()); i < g.nodes().size(); ++i) {
        const Node& n = g.nodes()[i];
        std::vector<int> a;
        for (int k : n.args) a.push_back(id[size_t(k)]);
        if (n.kind == NodeKind::output) {
            outs = a;
            continue;
        }
        Tensor example = kiln::zeros(n.meta.shape, {.dtype = n.meta.dtype});
        id[i] = b.call(n.op, n.attrs, a, example, n.grad_enabled);
    }
    return b.build(outs);
}

}  // namespace student
