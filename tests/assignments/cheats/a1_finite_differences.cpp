// A planted cheat: task 1.1 answered without a single derivative formula, by central
// differences of the op itself in float64 (the same method gradcheck checks with).
// grader-expects: 1.1 | formulas_not_difference_quotients
#include "assignments/a1/student.h"

#define unary_backward reference_unary_backward
#include "assignments/solutions/a1/student.cpp"
#undef unary_backward

namespace student {

Tensor unary_backward(OpId op, const Tensor& grad, const Tensor& x, const Tensor& out) {
    (void)out;
    kiln::NoGradGuard no_grad;
    Tensor xd = x.to(kiln::DType::float64);
    const double h = 1e-6;
    Tensor d = (kiln::dispatch(op, {xd + h}) - kiln::dispatch(op, {xd - h})) / (2 * h);
    return (grad.to(kiln::DType::float64) * d).to(grad.dtype());
}

}  // namespace student
