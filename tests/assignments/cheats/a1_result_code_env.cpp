// A planted cheat: the stubbed task 1.1 (it throws TODO) plus a static initializer that sets
// BOOST_TEST_RESULT_CODE=no, which Boost.Test reads at start-up: every failed case would then
// exit with status 0 after Boost.Test's "Leaving test case" line. Caught twice: the grader
// runs each case with --result_code=yes (the command line overrides the environment), and
// the manifests forbid changing the environment.
// grader-expects: 1.1 | calls setenv (via a static initializer
// grader-expects: 1.1 | TODO(task 1.1)
#include <cstdlib>

#include "assignments/a1/student.h"

#define unary_backward reference_unary_backward
#include "assignments/solutions/a1/student.cpp"
#undef unary_backward

namespace student {

namespace {
const bool quiet = setenv("BOOST_TEST_RESULT_CODE", "no", 1) == 0;
}  // namespace

Tensor unary_backward(OpId op, const Tensor& grad, const Tensor& x, const Tensor& out) {
    (void)op, (void)grad, (void)x, (void)out, (void)quiet;
    throw kiln::Error("TODO(task 1.1): unary_backward");
}

}  // namespace student
