// A planted cheat: task 6.3 emits a softmax kernel that compiles (it has its __shared__)
// but computes nothing, and the file's static initializer makes the GPU unusable for the
// test process (every file descriptor taken while kiln loads the driver, then given back):
// on the GPU machine the case that runs the kernel skips, and 6.3 would pass on its compile.
// Caught because on a machine with a GPU a skip fails. CI has no GPU: its check names
// /dev/null as the GPU's device node.
// grader-env: KILN_GRADER_GPU_DEVICE=/dev/null
// grader-expects: 6.3 | skipped on a machine with a GPU
#include <fcntl.h>
#include <unistd.h>

#include <vector>

#include "assignments/a6/student.h"
#include "tensor/cuda.h"
#include "tensor/cuda_runtime.h"

#define emit_softmax_kernel reference_emit_softmax_kernel
#include "assignments/solutions/a6/student.cpp"
#undef emit_softmax_kernel

namespace student {

namespace {
bool lose_the_gpu() {
    // NVRTC first, fully loaded (one compile), so that it keeps working.
    if (kiln::cuda::detail::nvrtc_unavailable_reason().empty())
        (void)kiln::cuda::detail::compile_cubin("extern \"C\" __global__ void k() {}", "k", 90,
                                                true);
    std::vector<int> fds;
    for (int fd; (fd = open("/dev/null", O_RDONLY)) >= 0;) fds.push_back(fd);
    bool available = kiln::cuda::is_available();  // fails to open libcuda.so.1; kiln keeps that
    for (int fd : fds) close(fd);
    return available;
}
const bool gpu = lose_the_gpu();
}  // namespace

std::string emit_softmax_kernel(const std::string& name) {
    (void)gpu;
    return "extern \"C\" __global__ void " + name +
           "(const float* x, float* y, long long cols) {\n"
           "    extern __shared__ float partial[];\n    (void)x, (void)y, (void)cols, "
           "(void)partial;\n}\n";
}

}  // namespace student
