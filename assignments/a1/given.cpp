// Assignment 1, given code: building the engine's graph (student.h). Not a task.
#include <array>

#include "assignments/a1/student.h"

namespace student {

std::vector<Tensor> Var::run_backward(const Tensor& g) {
    ++backward_calls;
    return backward_fn ? backward_fn(g) : std::vector<Tensor>{};
}

VarPtr leaf(Tensor value) {
    auto v = std::make_shared<Var>();
    v->value = std::move(value);
    return v;
}

namespace {

// A node whose backward is kiln's formula for `op` (the derivative column of ops.def).
VarPtr make_op(OpId op, std::vector<VarPtr> parents, const kiln::Attrs& attrs) {
    std::vector<Tensor> inputs;
    for (const VarPtr& p : parents) inputs.push_back(p->value);
    auto v = std::make_shared<Var>();
    {
        kiln::NoGradGuard no_grad;  // the engine keeps its own graph, not kiln's tape
        v->value = kiln::dispatch(op, inputs, attrs);
    }
    v->op = kiln::op_info(op).name;
    v->parents = std::move(parents);
    Tensor out = v->value;
    v->backward_fn = [op, attrs, inputs, out](const Tensor& grad) {
        std::vector<kiln::Shape> shapes;
        std::vector<kiln::DType> dtypes;
        for (const Tensor& t : inputs) shapes.push_back(t.shape()), dtypes.push_back(t.dtype());
        kiln::BackwardArgs args{
            inputs, out, grad, attrs, shapes, dtypes, (1u << inputs.size()) - 1};
        kiln::NoGradGuard no_grad;
        return kiln::op_info(op).backward(args);
    };
    return v;
}

}  // namespace

VarPtr apply(OpId op, const VarPtr& x) { return make_op(op, {x}, {}); }
VarPtr apply(OpId op, const VarPtr& x, const VarPtr& y) { return make_op(op, {x, y}, {}); }
VarPtr sum(const VarPtr& x) { return make_op(OpId::sum, {x}, {}); }

}  // namespace student
