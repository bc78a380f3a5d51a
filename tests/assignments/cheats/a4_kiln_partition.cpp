// A planted cheat: the reference solution with task 4.3 answered by kiln's partitioner
// (student.h already includes jit/aot/partition.h). Its partitions are kiln's, so only the
// manifest can fail it.
// grader-expects: 4.3 | write the partition; kiln::jit::aot::partition is the reference
#include "assignments/a4/student.h"

#define partition reference_partition
#include "assignments/solutions/a4/student.cpp"
#undef partition

namespace student {

Partition partition(const std::vector<PartitionNode>& joint) {
    return kiln::jit::aot::partition(joint);
}

}  // namespace student
