// A planted cheat: task 1.1 answered through the given engine (student::apply builds a Var
// whose backward is kiln's formula), so student.cpp itself never names kiln::op_info. The
// grader follows the call into a1/given.cpp and fails the task all the same.
// grader-expects: 1.1 | calls kiln::op_info (via student::unary_backward -> student::apply
#include "assignments/a1/student.h"

#define unary_backward reference_unary_backward
#include "assignments/solutions/a1/student.cpp"
#undef unary_backward

namespace student {

Tensor unary_backward(OpId op, const Tensor& grad, const Tensor& x, const Tensor& out) {
    (void)out;
    VarPtr v = student::apply(op, leaf(x));
    return v->run_backward(grad).at(0);
}

}  // namespace student
