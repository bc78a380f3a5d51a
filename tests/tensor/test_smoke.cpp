// A first end-to-end check: forward, backward and printing on a tiny example.
#include <boost/test/unit_test.hpp>

#include "kiln.h"

using namespace kiln;

BOOST_AUTO_TEST_CASE(mul_add_relu_backward_matches_hand_derivative) {
    Tensor a = tensor({{1.0, -2.0}, {3.0, 4.0}}, {.requires_grad = true});
    Tensor b = tensor({2.0, 0.5}, {.requires_grad = true});
    Tensor loss = (a * b).relu().sum();
    loss.backward();
    BOOST_TEST(loss.item<float>() == 2.0f + 0.0f + 6.0f + 2.0f);
    BOOST_TEST(allclose(a.grad(), tensor({{2.0, 0.0}, {2.0, 0.5}})));
    BOOST_TEST(allclose(b.grad(), tensor({4.0, 4.0})));
    BOOST_TEST(to_string(b) == "tensor([2.0000, 0.5000], requires_grad=True)");
}
