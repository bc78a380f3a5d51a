// A planted cheat: the stubbed task 1.1 (it throws TODO) first unplugs Boost.Test's results
// collector, the observer whose counts decide the exit status: the failed case still logs its
// error, but the process exits 0 after "Leaving test case". The test framework is the
// grader's: the manifests forbid calling into Boost from student code.
// grader-expects: 1.1 | calls boost::unit_test::framework::deregister_observer (via
#include <boost/test/framework.hpp>
#include <boost/test/results_collector.hpp>

#include "assignments/a1/student.h"

#define unary_backward reference_unary_backward
#include "assignments/solutions/a1/student.cpp"
#undef unary_backward

namespace student {

Tensor unary_backward(OpId op, const Tensor& grad, const Tensor& x, const Tensor& out) {
    (void)op, (void)grad, (void)x, (void)out;
    boost::unit_test::framework::deregister_observer(boost::unit_test::results_collector);
    throw kiln::Error("TODO(task 1.1): unary_backward");
}

}  // namespace student
