// A planted cheat: tasks 1.1 and 1.2 answered by kiln's autograd tape: the op run again on
// a detached input that requires grad, with grad mode on (1.1: EnableGradGuard; 1.2: on a
// thread of its own, where grad mode starts on), and the recorded node's apply() (a virtual
// call: no symbol) is kiln's derivative formula. Caught by the tests' hook on the tape (1.1)
// and the manifest (1.2: a thread, where that hook does not watch).
// grader-expects: 1.1 | recorded ops on kiln's autograd tape
// grader-expects: 1.2 | calls std::thread::_M_start_thread (via student::binary_backward
#include <thread>

#include "assignments/a1/student.h"

#define unary_backward reference_unary_backward
#define binary_backward reference_binary_backward
#include "assignments/solutions/a1/student.cpp"
#undef unary_backward
#undef binary_backward

namespace student {

Tensor unary_backward(OpId op, const Tensor& grad, const Tensor& x, const Tensor& out) {
    (void)out;
    kiln::autograd::EnableGradGuard on;
    Tensor xi = x.detach();
    xi.requires_grad_();
    return kiln::dispatch(op, {xi}).grad_fn()->apply(grad).at(0);
}

std::pair<Tensor, Tensor> binary_backward(OpId op, const Tensor& grad, const Tensor& x,
                                          const Tensor& y, const Tensor& out) {
    (void)out;
    std::vector<Tensor> g;
    std::thread([&] {
        Tensor xi = x.detach(), yi = y.detach();
        xi.requires_grad_(), yi.requires_grad_();
        g = kiln::dispatch(op, {xi, yi}).grad_fn()->apply(grad);
    }).join();
    return {g.at(0), g.at(1)};
}

}  // namespace student
