// partition(): a max-flow / min-cut over the joint graph (Edmonds-Karp on a small network).
#include "jit/aot/partition.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <queue>

namespace kiln::jit::aot {
namespace {

constexpr int64_t kInf = std::numeric_limits<int64_t>::max() / 4;

struct FlowNetwork {
    struct Arc {
        int to;
        int64_t cap;
    };
    std::vector<Arc> arcs;                 // arcs[2k] forward, arcs[2k+1] its residual
    std::vector<std::vector<int>> out;     // arc indices leaving each vertex

    explicit FlowNetwork(int vertices) : out(vertices) {}
    void add(int from, int to, int64_t cap) {
        out[from].push_back(int(arcs.size()));
        arcs.push_back({to, cap});
        out[to].push_back(int(arcs.size()));
        arcs.push_back({from, 0});
    }
    // Augments along shortest paths until none is left; returns the flow.
    int64_t max_flow(int s, int t) {
        int64_t flow = 0;
        for (;;) {
            std::vector<int> via(out.size(), -1);
            std::queue<int> q;
            q.push(s);
            via[s] = -2;
            while (!q.empty() && via[t] == -1) {
                int v = q.front();
                q.pop();
                for (int a : out[v])
                    if (arcs[a].cap > 0 && via[arcs[a].to] == -1) via[arcs[a].to] = a, q.push(arcs[a].to);
            }
            if (via[t] == -1) return flow;
            int64_t push = kInf;
            for (int v = t; v != s; v = arcs[via[v] ^ 1].to) push = std::min(push, arcs[via[v]].cap);
            for (int v = t; v != s; v = arcs[via[v] ^ 1].to) arcs[via[v]].cap -= push, arcs[via[v] ^ 1].cap += push;
            flow += push;
        }
    }
    // Vertices still reachable from s in the residual network: the source side of the cut.
    std::vector<bool> source_side(int s) const {
        std::vector<bool> seen(out.size(), false);
        std::vector<int> stack{s};
        seen[s] = true;
        while (!stack.empty()) {
            int v = stack.back();
            stack.pop_back();
            for (int a : out[v])
                if (arcs[a].cap > 0 && !seen[arcs[a].to]) seen[arcs[a].to] = true, stack.push_back(arcs[a].to);
        }
        return seen;
    }
};

// Nodes that depend on a tangent: they can only run in the backward.
std::vector<bool> backward_only(const std::vector<PartitionNode>& g) {
    std::vector<bool> bw(g.size(), false);
    for (size_t i = 0; i < g.size(); ++i) {
        bw[i] = g[i].is_tangent;
        for (int p : g[i].inputs) bw[i] = bw[i] || bw[p];
    }
    return bw;
}

// Marks everything `roots` need (transitively), stopping at `stop` values.
std::vector<bool> closure(const std::vector<PartitionNode>& g, std::vector<bool> need, const std::vector<bool>& stop) {
    for (int i = int(g.size()) - 1; i >= 0; --i)
        if (need[i] && !stop[i])
            for (int p : g[i].inputs) need[p] = true;
    return need;
}

Partition finish(const std::vector<PartitionNode>& g, const std::vector<bool>& bw, const std::vector<bool>& saved) {
    Partition p;
    std::vector<bool> fw_roots(g.size(), false), bw_roots(g.size(), false);
    for (size_t i = 0; i < g.size(); ++i) {
        fw_roots[i] = g[i].is_fw_output || saved[i];
        bw_roots[i] = bw[i] || g[i].is_bw_output;
    }
    std::vector<bool> none(g.size(), false), stop = saved;
    for (size_t i = 0; i < g.size(); ++i) stop[i] = stop[i] || g[i].is_primal;  // primals reach bw only if saved
    p.in_forward = closure(g, fw_roots, none);
    p.in_backward = closure(g, bw_roots, stop);
    for (size_t i = 0; i < g.size(); ++i) {
        if (p.in_forward[i] && bw[i]) p.in_forward[i] = false;
        if (saved[i]) {
            p.saved.push_back(int(i));
            p.saved_bytes += g[i].bytes;
            p.in_backward[i] = false;  // arrives as an input
        }
    }
    return p;
}

}  // namespace

MinCut min_cut(int num_vertices, const std::vector<FlowEdge>& edges, int source, int sink) {
    FlowNetwork net(num_vertices);
    for (const FlowEdge& e : edges) net.add(e.from, e.to, e.capacity);
    MinCut cut;
    cut.value = net.max_flow(source, sink);
    cut.source_side = net.source_side(source);
    return cut;
}

Partition partition(const std::vector<PartitionNode>& g) {
    int n = int(g.size()), source = 2 * n, sink = 2 * n + 1;
    auto in = [](int v) { return 2 * v; };
    auto out = [](int v) { return 2 * v + 1; };
    std::vector<bool> bw = backward_only(g);
    FlowNetwork net(2 * n + 2);
    for (int v = 0; v < n; ++v) {
        const PartitionNode& node = g[v];
        if (bw[v]) {
            if (!node.is_tangent) net.add(in(v), sink, kInf);  // must run in the backward
            continue;
        }
        // Saving v costs its bytes; a value that cannot be recomputed must come from the
        // forward (source side), so only saving it can feed the backward.
        net.add(in(v), out(v), std::max<int64_t>(int64_t(node.bytes), 1));
        if (node.is_primal || node.is_fw_output || !node.recomputable) net.add(source, in(v), kInf);
        for (int p : node.inputs) net.add(out(p), in(v), kInf);
        // A gradient that doesn't depend on the tangents (a constant zero, say) must still
        // reach the backward: saved or recomputed there.
        if (node.is_bw_output) net.add(out(v), sink, kInf);
    }
    for (int v = 0; v < n; ++v)
        if (bw[v] && !g[v].is_tangent)
            for (int p : g[v].inputs)
                if (!bw[p]) net.add(out(p), in(v), kInf);
    net.max_flow(source, sink);
    std::vector<bool> s_side = net.source_side(source), saved(n, false);
    for (int v = 0; v < n; ++v) saved[v] = !bw[v] && s_side[in(v)] && !s_side[out(v)];
    return finish(g, bw, saved);
}

Partition partition_save_all(const std::vector<PartitionNode>& g) {
    std::vector<bool> bw = backward_only(g), saved(g.size(), false);
    for (size_t i = 0; i < g.size(); ++i)
        if (bw[i])
            for (int p : g[i].inputs) saved[p] = saved[p] || !bw[p];
    return finish(g, bw, saved);
}

}  // namespace kiln::jit::aot
