// A planted cheat: task 1.1 ends the test process with status 0 before any check runs, so
// a grader that only reads exit statuses would count every 1.1 test as passed. Caught
// twice: the manifests forbid the exit family, and a pass needs Boost.Test's own line that
// the test case finished.
// grader-expects: 1.1 | calls _Exit (via student::unary_backward)
// grader-expects: 1.1 | the process was ended early
#include <cstdlib>

#include "assignments/a1/student.h"

#define unary_backward reference_unary_backward
#include "assignments/solutions/a1/student.cpp"
#undef unary_backward

namespace student {

Tensor unary_backward(OpId op, const Tensor& grad, const Tensor& x, const Tensor& out) {
    (void)op, (void)grad, (void)x, (void)out;
    std::_Exit(0);
}

}  // namespace student
