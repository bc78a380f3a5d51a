// A planted cheat: like a1_thread_exit, but the process ends through a system call written
// as inline assembly (exit_group(0)), so no function symbol names the exit.
// grader-expects: 1.1 | calls asm:syscall (via student::unary_backward)
#include <cstdio>

#include "assignments/a1/student.h"

#define unary_backward reference_unary_backward
#include "assignments/solutions/a1/student.cpp"
#undef unary_backward

namespace student {

Tensor unary_backward(OpId op, const Tensor& grad, const Tensor& x, const Tensor& out) {
    (void)op, (void)grad, (void)x, (void)out;
    for (const char* c : {"exp_log_sqrt_pass_gradcheck", "sin_cos_tanh_pass_gradcheck",
                          "sigmoid_relu_pass_gradcheck", "equal_kiln_autograd_on_a_chain"})
        std::printf("Leaving test case \"%s\"\n", c);
    std::fflush(stdout);
#if defined(__x86_64__)
    asm volatile("mov $231, %%eax\n\txor %%edi, %%edi\n\tsyscall" ::
                     : "rax", "rdi", "rcx", "r11", "memory");
#elif defined(__aarch64__)
    asm volatile("mov x8, #94\n\tmov x0, #0\n\tsvc #0" ::: "x0", "x8", "memory");
#endif
    return grad;
}

}  // namespace student
