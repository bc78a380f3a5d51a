// Assignment 4, given code: the bookkeeping around the cut (student.h). Not a task.
#include "assignments/a4/student.h"

namespace student {

std::vector<bool> backward_only(const std::vector<PartitionNode>& g) {
    std::vector<bool> bw(g.size(), false);
    for (size_t i = 0; i < g.size(); ++i) {
        bw[i] = g[i].is_tangent;
        for (int p : g[i].inputs) bw[i] = bw[i] || bw[p];
    }
    return bw;
}

namespace {
// Marks everything `need` reads, transitively, stopping at `stop` values.
std::vector<bool> closure(const std::vector<PartitionNode>& g, std::vector<bool> need,
                          const std::vector<bool>& stop) {
    for (int i = int(g.size()) - 1; i >= 0; --i)
        if (need[i] && !stop[i])
            for (int p : g[i].inputs) need[p] = true;
    return need;
}
}  // namespace

Partition finish_partition(const std::vector<PartitionNode>& g, const std::vector<bool>& saved) {
    std::vector<bool> bw = backward_only(g);
    Partition p;
    std::vector<bool> fw_roots(g.size(), false), bw_roots(g.size(), false), stop = saved;
    for (size_t i = 0; i < g.size(); ++i) {
        fw_roots[i] = g[i].is_fw_output || saved[i];
        bw_roots[i] = bw[i] || g[i].is_bw_output;
        stop[i] = stop[i] || g[i].is_primal;  // primals reach the backward only if saved
    }
    p.in_forward = closure(g, fw_roots, std::vector<bool>(g.size(), false));
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

}  // namespace student
