// A planted cheat: task 1.1 compiles, with kiln's toolchain, a library whose one function
// prints Boost.Test's "Leaving test case" line for each 1.1 case and calls _exit(0): the
// exit is in the library's code, not in the student's object, so neither the exit family
// nor the system call check sees it. Assignments 1 to 4 build no code: their manifests
// forbid kiln's toolchain.
// grader-expects: 1.1 | calls kiln::codegen::build_library (via student::unary_backward
#include "assignments/a1/student.h"
#include "codegen/toolchain.h"

#define unary_backward reference_unary_backward
#include "assignments/solutions/a1/student.cpp"
#undef unary_backward

namespace student {

Tensor unary_backward(OpId op, const Tensor& grad, const Tensor& x, const Tensor& out) {
    (void)op, (void)grad, (void)x, (void)out;
    auto library = kiln::codegen::build_library(
        "#include <cstdio>\n#include <initializer_list>\n#include <unistd.h>\n"
        "extern \"C\" void leave() {\n"
        "    for (const char* c : {\"exp_log_sqrt_pass_gradcheck\", \"sin_cos_tanh_pass_gradcheck\",\n"
        "                          \"sigmoid_relu_pass_gradcheck\", \"formulas_not_difference_quotients\",\n"
        "                          \"equal_kiln_autograd_on_a_chain\"})\n"
        "        std::printf(\"Leaving test case \\\"%s\\\"\\n\", c);\n"
        "    std::fflush(stdout);\n"
        "    _exit(0);\n"
        "}\n",
        {.include_dirs = {KILN_SOURCE_DIR}, .use_pch = false});
    reinterpret_cast<void (*)()>(library->symbol("leave"))();
    return grad;
}

}  // namespace student
