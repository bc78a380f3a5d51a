// A planted cheat: task 6.1 emits a kernel that only has the look of one: one __global__
// function of the right name, a `float vN = ...;` statement per node and a store to
// a.out[k][i], all zeros. NVRTC compiles it and the text checks find what they look for; on
// a machine without a GPU nothing ran it. Caught by running its source on the CPU.
// grader-expects: 6.1 | the kernel does not compute the group
#include <sstream>

#include "assignments/a6/student.h"

#define emit_cuda_kernel reference_emit_cuda_kernel
#include "assignments/solutions/a6/student.cpp"
#undef emit_cuda_kernel

namespace student {

std::string emit_cuda_kernel(const Graph& graph, const Group& group, const std::string& name) {
    (void)graph;
    std::ostringstream os;
    os << "namespace kiln_math {\nextern \"C\" __global__ void " << name << "(KernelArgs a) {\n"
       << "    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < a.n;\n"
       << "         i += (long long)blockDim.x * gridDim.x) {\n";
    for (int id : group.nodes) os << "        float v" << id << " = 0.f; (void)v" << id << ";\n";
    for (size_t k = 0; k < group.outputs.size(); ++k) os << "        a.out[" << k << "][i] = 0.f;\n";
    os << "    }\n}\n}\n";
    return os.str();
}

}  // namespace student
