// A planted cheat that hides the call from its task's function: a global std::function,
// set to kiln's partitioner by the file's static initializer, which partition() then calls.
// partition()'s own code refers only to the global; the call is in the initializer, which
// counts for every task.
// grader-expects: 4.3 | calls kiln::jit::aot::partition (via a static initializer
#include <functional>

#include "assignments/a4/student.h"

#define partition reference_partition
#include "assignments/solutions/a4/student.cpp"
#undef partition

namespace student {

namespace {
std::function<Partition(const std::vector<PartitionNode>&)> kiln_partition =
    kiln::jit::aot::partition;
}  // namespace

Partition partition(const std::vector<PartitionNode>& joint) { return kiln_partition(joint); }

}  // namespace student
