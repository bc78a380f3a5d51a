// The min-cut rematerialization partitioner of AOT autograd (docs/aot.md).
//
// Input: a joint forward+backward graph, abstracted to what the cut needs. Output: which
// forward values the forward graph saves for backward; everything else the backward
// graph needs is recomputed from those. Like functorch's min_cut_rematerialization_partition:
// each value v becomes an edge v_in -> v_out whose capacity is the bytes of v (what saving
// it costs); a minimum s-t cut picks the cheapest set of values that separates what the
// forward computes from what the backward consumes.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace kiln::jit::aot {

struct PartitionNode {
    std::string name;
    std::vector<int> inputs;   // producer indices (earlier in the list)
    size_t bytes = 0;          // size of this value
    bool is_primal = false;    // a forward input
    bool is_tangent = false;   // an incoming gradient (backward input)
    bool is_fw_output = false; // returned by the forward
    bool is_bw_output = false; // returned by the backward (an input's gradient)
    bool recomputable = true;  // cheap to recompute (pointwise, views, cheap reductions)
};

struct Partition {
    std::vector<int> saved;          // values the forward saves, in node order
    std::vector<bool> in_forward;    // computed by the forward graph
    std::vector<bool> in_backward;   // computed (or recomputed) by the backward graph
    size_t saved_bytes = 0;
};

// A minimum s-t cut of a directed network, by max flow (Edmonds-Karp): partition() cuts
// with it. `value` is the cut's capacity (= the max flow); `source_side[v]`: v is still
// reachable from `source` in the final residual network.
struct FlowEdge {
    int from = 0, to = 0;
    int64_t capacity = 0;
};
struct MinCut {
    int64_t value = 0;
    std::vector<bool> source_side;
};
MinCut min_cut(int num_vertices, const std::vector<FlowEdge>& edges, int source, int sink);

// `joint` is topologically ordered. Backward nodes are those depending on a tangent.
Partition partition(const std::vector<PartitionNode>& joint);

// What plain eager autograd would keep for the same graph is computed elsewhere (the
// tape's saved tensors); this helper is for tests: save every forward value that a
// backward node reads directly.
Partition partition_save_all(const std::vector<PartitionNode>& joint);

}  // namespace kiln::jit::aot
