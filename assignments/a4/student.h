// Assignment 4: AOT autograd's min-cut recompute (assignments/a4/README.md). kiln traces
// the derivative formulas into one joint forward+backward graph (jit/aot/joint.h); you turn
// it into the partitioner's input (task 4.1), write a max-flow/min-cut (4.2), and choose
// what the forward saves with it (4.3): the seed's cos(cos(x)) saves 1 tensor, not 2.
#pragma once
#include <cstdint>
#include <vector>

#include "jit/aot/joint.h"
#include "jit/aot/partition.h"
#include "kiln.h"

namespace student {

using kiln::jit::aot::JointGraph;
using kiln::jit::aot::Partition;
using kiln::jit::aot::PartitionNode;

// --- Task 4.1: the joint graph as the partitioner sees it: one PartitionNode per node of
// joint.graph except its final output node, in the same order, with: name; inputs (the
// node's args); bytes (elements times the dtype's size); is_primal / is_tangent (the
// placeholders: the first num_primals are primals, the rest tangents); is_fw_output
// (joint.fw_outputs); is_bw_output (joint.input_grads, where >= 0); recomputable
// (placeholders yes; calls as the op table says: kiln::op_info(op).recompute).
std::vector<PartitionNode> partition_input(const JointGraph& joint);

// --- Task 4.2: a minimum s-t cut of a directed network (Edmonds-Karp or any max-flow).
// `value` is the cut's capacity (= the max flow); `source_side[v]` says whether v is on
// the source's side (reachable from the source in the final residual network).
struct FlowEdge {
    int from = 0, to = 0;
    int64_t capacity = 0;
};
struct Cut {
    int64_t value = 0;
    std::vector<bool> source_side;
};
Cut min_cut(int num_vertices, const std::vector<FlowEdge>& edges, int source, int sink);

// --- Task 4.3: which forward values to save, by min-cut (functorch's
// min_cut_rematerialization_partition). Split each forward value v into v_in -> v_out with
// capacity bytes(v) (at least 1); producer_out -> consumer_in edges of infinite capacity;
// source -> v_in (infinite) for values that must come from the forward: primals, forward
// outputs, values that are not recomputable; v_in -> sink (infinite) for backward-only
// nodes that are not tangents (they must run in the backward), with their forward inputs'
// out -> their in; and bw outputs that don't depend on a tangent: v_out -> sink. The saved
// values are those whose v_in -> v_out edge is cut. Return finish_partition(joint, saved).
Partition partition(const std::vector<PartitionNode>& joint);

// --- Given (not a task): nodes that depend on a tangent (backward only), and the rest of
// a Partition once `saved` is chosen: what the forward and the backward graphs compute.
std::vector<bool> backward_only(const std::vector<PartitionNode>& joint);
Partition finish_partition(const std::vector<PartitionNode>& joint, const std::vector<bool>& saved);

}  // namespace student
