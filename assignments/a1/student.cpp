// Assignment 1: your code. Replace each `throw kiln::Error("TODO(task ...)")` with the
// task's body (student.h says what each function must do); `make assignment A=1` grades it.
#include "assignments/a1/student.h"

namespace student {

Tensor unary_backward(OpId op, const Tensor& grad, const Tensor& x, const Tensor& out) {
    (void)op, (void)grad, (void)x, (void)out;
    throw kiln::Error("TODO(task 1.1): unary_backward");
}

std::pair<Tensor, Tensor> binary_backward(OpId op, const Tensor& grad, const Tensor& x,
                                          const Tensor& y, const Tensor& out) {
    (void)op, (void)grad, (void)x, (void)y, (void)out;
    throw kiln::Error("TODO(task 1.2): binary_backward");
}

std::vector<Var*> topo_order(const VarPtr& root) {
    (void)root;
    throw kiln::Error("TODO(task 1.3): topo_order");
}

void backward(const VarPtr& root) {
    (void)root;
    throw kiln::Error("TODO(task 1.4): backward");
}

}  // namespace student
