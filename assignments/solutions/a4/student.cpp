// Assignment 4: the reference solution (not shipped to students: make assignment-release).
#include "assignments/a4/student.h"

#include <algorithm>
#include <limits>
#include <queue>

namespace student {

using namespace kiln;

std::vector<PartitionNode> partition_input(const JointGraph& joint) {
    const auto& nodes = joint.graph->nodes();
    std::vector<PartitionNode> pn(nodes.size() - 1);  // all but the output node
    for (size_t i = 0; i + 1 < nodes.size(); ++i) {
        const jit::Node& n = nodes[i];
        bool placeholder = n.kind == jit::NodeKind::placeholder;
        pn[i].name = n.name;
        pn[i].inputs = n.args;
        pn[i].bytes = size_t(shape_numel(n.meta.shape)) * dtype_bytes(n.meta.dtype);
        pn[i].is_primal = placeholder && int(i) < joint.num_primals;
        pn[i].is_tangent = placeholder && int(i) >= joint.num_primals;
        pn[i].recomputable = n.kind != jit::NodeKind::call || op_info(n.op).recompute;
    }
    for (int o : joint.fw_outputs) pn[o].is_fw_output = true;
    for (int g : joint.input_grads)
        if (g >= 0) pn[g].is_bw_output = true;
    return pn;
}

Cut min_cut(int num_vertices, const std::vector<FlowEdge>& edges, int source, int sink) {
    // Residual network: arc 2k is edge k, arc 2k+1 its reverse (capacity 0 at first).
    struct Arc {
        int to;
        int64_t cap;
    };
    std::vector<Arc> arcs;
    std::vector<std::vector<int>> out(num_vertices);
    for (const FlowEdge& e : edges) {
        out[e.from].push_back(int(arcs.size()));
        arcs.push_back({e.to, e.capacity});
        out[e.to].push_back(int(arcs.size()));
        arcs.push_back({e.from, 0});
    }
    Cut cut;
    for (;;) {  // Edmonds-Karp: augment along a shortest path until none is left
        std::vector<int> via(num_vertices, -1);
        std::queue<int> q;
        q.push(source);
        via[source] = -2;
        while (!q.empty() && via[sink] == -1) {
            int v = q.front();
            q.pop();
            for (int a : out[v])
                if (arcs[a].cap > 0 && via[arcs[a].to] == -1)
                    via[arcs[a].to] = a, q.push(arcs[a].to);
        }
        if (via[sink] == -1) break;
        int64_t push = std::numeric_limits<int64_t>::max();
        for (int v = sink; v != source; v = arcs[via[v] ^ 1].to)
            push = std::min(push, arcs[via[v]].cap);
        for (int v = sink; v != source; v = arcs[via[v] ^ 1].to)
            arcs[via[v]].cap -= push, arcs[via[v] ^ 1].cap += push;
        cut.value += push;
    }
    cut.source_side.assign(num_vertices, false);
    std::vector<int> stack{source};
    cut.source_side[source] = true;
    while (!stack.empty()) {
        int v = stack.back();
        stack.pop_back();
        for (int a : out[v])
            if (arcs[a].cap > 0 && !cut.source_side[arcs[a].to])
                cut.source_side[arcs[a].to] = true, stack.push_back(arcs[a].to);
    }
    return cut;
}

Partition partition(const std::vector<PartitionNode>& g) {
    constexpr int64_t inf = std::numeric_limits<int64_t>::max() / 4;
    int n = int(g.size()), source = 2 * n, sink = 2 * n + 1;
    auto in = [](int v) { return 2 * v; };
    auto out = [](int v) { return 2 * v + 1; };
    std::vector<bool> bw = backward_only(g);
    std::vector<FlowEdge> edges;
    for (int v = 0; v < n; ++v) {
        const PartitionNode& node = g[v];
        if (bw[v]) {
            if (node.is_tangent) continue;
            edges.push_back({in(v), sink, inf});  // must run in the backward ...
            for (int p : node.inputs)
                if (!bw[p])
                    edges.push_back({out(p), in(v), inf});  // ... reading these forward values
            continue;
        }
        edges.push_back({in(v), out(v),
                         std::max<int64_t>(int64_t(node.bytes), 1)});  // saving v costs its bytes
        if (node.is_primal || node.is_fw_output || !node.recomputable)
            edges.push_back({source, in(v), inf});
        for (int p : node.inputs) edges.push_back({out(p), in(v), inf});
        if (node.is_bw_output)
            edges.push_back({out(v), sink, inf});  // a gradient with no tangent in it
    }
    Cut cut = min_cut(2 * n + 2, edges, source, sink);
    std::vector<bool> saved(n, false);
    for (int v = 0; v < n; ++v)
        saved[v] = !bw[v] && cut.source_side[in(v)] && !cut.source_side[out(v)];
    return finish_partition(g, saved);
}

}  // namespace student
