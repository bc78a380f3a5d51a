// A planted cheat: task 1.1 prints Boost.Test's "Leaving test case" line for each 1.1 case,
// then runs exit_group(0) as machine code kept in a data array (made executable with
// mprotect): no code section holds the system call, so the machine code check cannot see
// it. The manifests forbid making memory executable.
// grader-expects: 1.1 | calls mprotect (via student::unary_backward
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>

#include "assignments/a1/student.h"

#define unary_backward reference_unary_backward
#include "assignments/solutions/a1/student.cpp"
#undef unary_backward

namespace student {

namespace {
// mov $231, %eax; xor %edi, %edi; syscall
alignas(4096) unsigned char code[4096] = {0xb8, 0xe7, 0x00, 0x00, 0x00, 0x31, 0xff, 0x0f, 0x05};
}  // namespace

Tensor unary_backward(OpId op, const Tensor& grad, const Tensor& x, const Tensor& out) {
    (void)op, (void)grad, (void)x, (void)out;
    for (const char* c : {"exp_log_sqrt_pass_gradcheck", "sin_cos_tanh_pass_gradcheck",
                          "sigmoid_relu_pass_gradcheck", "formulas_not_difference_quotients",
                          "equal_kiln_autograd_on_a_chain"})
        std::printf("Leaving test case \"%s\"\n", c);
    std::fflush(stdout);
#if defined(__x86_64__)
    mprotect(code, sizeof code, PROT_READ | PROT_EXEC);
    reinterpret_cast<void (*)()>(reinterpret_cast<std::uintptr_t>(code))();
#endif
    return grad;
}

}  // namespace student
