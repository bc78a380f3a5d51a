// A planted cheat: task 4.2 answered by kiln's own max-flow source, #included into the
// student's file under another name (kiln::jit::aot::copied_min_cut), so the call the
// manifest forbids (kiln::jit::aot::min_cut) never appears. Caught because a student's file
// may define functions only in namespace student: this one defines kiln's.
// grader-expects: 4.2 | defines kiln::jit::aot::copied_min_cut
#include "assignments/a4/student.h"

#define min_cut reference_min_cut
#include "assignments/solutions/a4/student.cpp"
#undef min_cut

#define min_cut copied_min_cut
#define partition copied_partition
#define partition_save_all copied_partition_save_all
#include "jit/aot/partition.cpp"
#undef min_cut
#undef partition
#undef partition_save_all

namespace student {

Cut min_cut(int num_vertices, const std::vector<FlowEdge>& edges, int source, int sink) {
    std::vector<kiln::jit::aot::FlowEdge> kiln_edges;
    for (const FlowEdge& e : edges) kiln_edges.push_back({e.from, e.to, e.capacity});
    auto cut = kiln::jit::aot::copied_min_cut(num_vertices, kiln_edges, source, sink);
    return {cut.value, cut.source_side};
}

}  // namespace student
