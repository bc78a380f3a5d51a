// A planted cheat: tasks 1.1 and 1.2 answered by the functions behind kiln's op table,
// kiln::backward_<op> (tensor/dispatch.cpp declares them from ops.def): the same formula as
// op_info(op).backward, reached under another name.
// grader-expects: 1.1 | calls kiln::backward_
// grader-expects: 1.2 | calls kiln::backward_
#include "assignments/a1/student.h"

#define unary_backward reference_unary_backward
#define binary_backward reference_binary_backward
#include "assignments/solutions/a1/student.cpp"
#undef unary_backward
#undef binary_backward

namespace kiln {
#define KILN_UNARY(name, ...) std::vector<Tensor> backward_##name(const BackwardArgs& b);
#define KILN_BINARY(name, ...) std::vector<Tensor> backward_##name(const BackwardArgs& b);
#include "tensor/ops.def"
#undef KILN_UNARY
#undef KILN_BINARY
}  // namespace kiln

namespace student {

namespace {
std::vector<Tensor> table(OpId op, const Tensor& grad, std::vector<Tensor> in, const Tensor& out) {
    std::vector<kiln::Shape> shapes;
    std::vector<kiln::DType> dtypes;
    for (const Tensor& t : in) shapes.push_back(t.shape()), dtypes.push_back(t.dtype());
    kiln::BackwardArgs args{in, out, grad, {}, shapes, dtypes, (1u << in.size()) - 1};
    switch (op) {
#define KILN_UNARY(name, ...) \
    case OpId::name:          \
        return kiln::backward_##name(args);
#define KILN_BINARY(name, ...) \
    case OpId::name:           \
        return kiln::backward_##name(args);
#include "tensor/ops.def"
#undef KILN_UNARY
#undef KILN_BINARY
        default:
            throw kiln::Error("no formula");
    }
}
}  // namespace

Tensor unary_backward(OpId op, const Tensor& grad, const Tensor& x, const Tensor& out) {
    return table(op, grad, {x}, out).at(0);
}

std::pair<Tensor, Tensor> binary_backward(OpId op, const Tensor& grad, const Tensor& x,
                                          const Tensor& y, const Tensor& out) {
    auto g = table(op, grad, {x, y}, out);
    return {g.at(0), g.at(1)};
}

}  // namespace student
