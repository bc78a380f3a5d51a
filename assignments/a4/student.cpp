// Assignment 4: your code. Replace each `throw kiln::Error("TODO(task ...)")` with the
// task's body (student.h says what each function must do); `make assignment A=4` grades it.
#include "assignments/a4/student.h"

namespace student {

std::vector<PartitionNode> partition_input(const JointGraph& joint) {
    (void)joint;
    throw kiln::Error("TODO(task 4.1): partition_input");
}

Cut min_cut(int num_vertices, const std::vector<FlowEdge>& edges, int source, int sink) {
    (void)num_vertices, (void)edges, (void)source, (void)sink;
    throw kiln::Error("TODO(task 4.2): min_cut");
}

Partition partition(const std::vector<PartitionNode>& joint) {
    (void)joint;
    throw kiln::Error("TODO(task 4.3): partition");
}

}  // namespace student
