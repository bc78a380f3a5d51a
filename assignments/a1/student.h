// Assignment 1: autograd (assignments/a1/README.md). You write the derivative formulas of a
// few table ops (tasks 1.1, 1.2) and the backward pass of a small autograd engine (1.3, 1.4).
// Everything here is in namespace student; kiln's own autograd is the reference.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kiln.h"

namespace student {

using kiln::OpId;
using kiln::Tensor;

// --- Task 1.1: the gradient of a unary op with respect to its input x, as Tensor code,
// given the incoming gradient `grad`, the input `x` and the op's output `out` (exactly what
// the derivative column of tensor/ops.def has in scope). Ops: exp, log, sin, cos, tanh,
// sigmoid, sqrt, relu. Others: throw kiln::Error.
Tensor unary_backward(OpId op, const Tensor& grad, const Tensor& x, const Tensor& out);

// --- Task 1.2: the gradients of a binary op with respect to x and to y. Ops: add, sub, mul,
// div. x and y may broadcast against each other: each gradient must have its input's
// shape (kiln::sum_to reduces a gradient back to a shape).
std::pair<Tensor, Tensor> binary_backward(OpId op, const Tensor& grad, const Tensor& x,
                                          const Tensor& y, const Tensor& out);

// --- A small autograd engine (micrograd's, over kiln Tensors). Given: building the graph.
// A Var is one value of the graph; `backward_fn` maps the gradient of this Var to the
// gradients of its parents (in `parents` order). Leaves have no parents.
struct Var {
    Tensor value;
    Tensor grad;  // undefined until backward reaches this Var
    std::vector<std::shared_ptr<Var>> parents;
    std::function<std::vector<Tensor>(const Tensor& grad)> backward_fn;
    std::string op = "leaf";
    int backward_calls = 0;  // how often run_backward ran (the tests read it)

    // Runs backward_fn once, counting the call. Use this, not backward_fn directly.
    std::vector<Tensor> run_backward(const Tensor& g);
};
using VarPtr = std::shared_ptr<Var>;

VarPtr leaf(Tensor value);
// An op of the table on Vars. Its backward uses kiln's own formula (op_info(op).backward),
// so tasks 1.3 and 1.4 are graded apart from 1.1 and 1.2.
VarPtr apply(OpId op, const VarPtr& x);
VarPtr apply(OpId op, const VarPtr& x, const VarPtr& y);
VarPtr sum(const VarPtr& x);

// --- Task 1.3: every Var reachable from `root` (root included) exactly once, each after all
// of its parents (a topological order: leaves first, root last).
std::vector<Var*> topo_order(const VarPtr& root);

// --- Task 1.4: the backward pass. Seeds root's gradient with ones, then walks the Vars in
// reverse topological order: each Var's run_backward is called exactly once, with the
// sum of the gradients its children sent it, and each parent's share is accumulated into
// the parent's `grad`. Every Var reachable from root ends with a defined `grad`.
void backward(const VarPtr& root);

}  // namespace student
