// A planted cheat (tests/assignments/cheats, not in the student release): the reference
// solution with tasks 1.1 and 1.2 answered by kiln's own derivative formulas, the call that
// a1/given.cpp demonstrates. Its gradients are right, so only the manifest can fail it.
// grader-expects: 1.1 | calls kiln::op_info (via student::unary_backward
// grader-expects: 1.2 | kiln::op_info(op).backward is kiln's formula
#include "assignments/a1/student.h"

#define unary_backward reference_unary_backward
#define binary_backward reference_binary_backward
#include "assignments/solutions/a1/student.cpp"
#undef unary_backward
#undef binary_backward

namespace student {

namespace {
std::vector<Tensor> kiln_formula(OpId op, const Tensor& grad, std::vector<Tensor> inputs,
                                 const Tensor& out) {
    std::vector<kiln::Shape> shapes;
    std::vector<kiln::DType> dtypes;
    for (const Tensor& t : inputs) shapes.push_back(t.shape()), dtypes.push_back(t.dtype());
    kiln::BackwardArgs args{inputs, out, grad, {}, shapes, dtypes, (1u << inputs.size()) - 1};
    return kiln::op_info(op).backward(args);
}
}  // namespace

Tensor unary_backward(OpId op, const Tensor& grad, const Tensor& x, const Tensor& out) {
    return kiln_formula(op, grad, {x}, out).at(0);
}

std::pair<Tensor, Tensor> binary_backward(OpId op, const Tensor& grad, const Tensor& x,
                                          const Tensor& y, const Tensor& out) {
    auto g = kiln_formula(op, grad, {x, y}, out);
    return {g.at(0), g.at(1)};
}

}  // namespace student
