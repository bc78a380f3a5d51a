// Post-accumulate-grad hooks (autograd/hooks.h): once per backward per leaf, after all of
// that backward's gradients for the leaf are in .grad.
#include <boost/test/unit_test.hpp>

#include "autograd/hooks.h"
#include "tensor/ops.h"

using namespace kiln;

BOOST_AUTO_TEST_SUITE(post_accumulate_grad_hooks)

BOOST_AUTO_TEST_CASE(a_leaf_used_twice_runs_its_hook_once_with_the_whole_gradient) {
    Tensor w = full({3}, 2.0).requires_grad_();
    std::vector<std::vector<float>> seen;
    int64_t id = autograd::register_post_accumulate_grad_hook(
        w, [&](const Tensor& leaf) { seen.push_back(leaf.grad().to_vector<float>()); });
    ((w * 3.0).sum() + (w * w).sum()).backward();  // d/dw = 3 + 2w = 7
    BOOST_REQUIRE_EQUAL(seen.size(), 1u);
    BOOST_CHECK(seen[0] == std::vector<float>({7, 7, 7}));
    autograd::remove_post_accumulate_grad_hook(id);
    (w * 3.0).sum().backward();
    BOOST_CHECK_EQUAL(seen.size(), 1u);
}

BOOST_AUTO_TEST_CASE(a_leaf_that_gets_no_gradient_runs_no_hook) {
    Tensor a = ones({2}).requires_grad_(), b = ones({2}).requires_grad_();
    int calls_a = 0, calls_b = 0;
    int64_t ia = autograd::register_post_accumulate_grad_hook(a, [&](const Tensor&) { ++calls_a; });
    int64_t ib = autograd::register_post_accumulate_grad_hook(b, [&](const Tensor&) { ++calls_b; });
    (a * 2.0).sum().backward();
    BOOST_CHECK_EQUAL(calls_a, 1);
    BOOST_CHECK_EQUAL(calls_b, 0);
    a.sum().backward();  // backward from a leaf's own sum: one node, one edge
    BOOST_CHECK_EQUAL(calls_a, 2);
    autograd::remove_post_accumulate_grad_hook(ia);
    autograd::remove_post_accumulate_grad_hook(ib);
}

BOOST_AUTO_TEST_CASE(only_leaves_that_require_grad_take_hooks) {
    BOOST_CHECK_THROW(autograd::register_post_accumulate_grad_hook(ones({2}), [](const Tensor&) {}),
                      Error);
}

BOOST_AUTO_TEST_SUITE_END()
