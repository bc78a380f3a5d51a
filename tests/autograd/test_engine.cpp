// The backward engine: accumulation, retain_graph, detach, grad mode, leaves.
#include <boost/test/unit_test.hpp>

#include "kiln.h"

using namespace kiln;

namespace {
bool message_has(const Error& e, const std::string& part) { return std::string(e.what()).find(part) != std::string::npos; }
}  // namespace

BOOST_AUTO_TEST_CASE(tensor_used_twice_gets_both_contributions) {
    Tensor x = tensor({1.0, -2.0, 3.0}, {.requires_grad = true});
    (x * x).sum().backward();
    BOOST_TEST(allclose(x.grad(), tensor({2.0, -4.0, 6.0})));
}

BOOST_AUTO_TEST_CASE(diamond_graph_sums_paths) {
    Tensor x = tensor({0.5, 2.0}, {.requires_grad = true});
    Tensor a = x * 3.0, b = exp(x);
    (a * b).sum().backward();  // d/dx 3x e^x = 3 e^x (1 + x)
    BOOST_TEST(allclose(x.grad(), 3.0 * exp(x.detach()) * (1.0 + x.detach())));
}

BOOST_AUTO_TEST_CASE(gradients_accumulate_across_backward_calls) {
    Tensor x = tensor({1.0, 2.0}, {.requires_grad = true});
    (x * 2.0).sum().backward();
    (x * 3.0).sum().backward();
    BOOST_TEST(allclose(x.grad(), tensor({5.0, 5.0})));
    x.zero_grad();
    BOOST_TEST(!x.grad().defined());
    (x * 4.0).sum().backward();
    BOOST_TEST(allclose(x.grad(), tensor({4.0, 4.0})));
}

BOOST_AUTO_TEST_CASE(retain_graph_allows_a_second_backward) {
    Tensor x = tensor({1.0, 2.0}, {.requires_grad = true});
    Tensor y = (x * x).sum();
    y.backward(Tensor(), /*retain_graph=*/true);
    y.backward();
    BOOST_TEST(allclose(x.grad(), tensor({4.0, 8.0})));
}

BOOST_AUTO_TEST_CASE(second_backward_without_retain_graph_explains_itself) {
    Tensor x = tensor({1.0, 2.0}, {.requires_grad = true});
    Tensor y = (x * x).sum();
    y.backward();
    BOOST_CHECK_EXCEPTION(y.backward(), Error, [](const Error& e) {
        return message_has(e, "backward through the graph a second time") && message_has(e, "retain_graph=true");
    });
}

BOOST_AUTO_TEST_CASE(detach_stops_gradients) {
    Tensor x = tensor({1.0, 2.0}, {.requires_grad = true});
    Tensor d = x.detach();
    BOOST_TEST(!d.requires_grad());
    BOOST_TEST(d.is_leaf());
    (x * d).sum().backward();  // d is a constant: grad is d, not 2x
    BOOST_TEST(allclose(x.grad(), tensor({1.0, 2.0})));
    BOOST_TEST(d.raw_data() == x.raw_data());  // shares storage
}

BOOST_AUTO_TEST_CASE(no_grad_guard_records_nothing) {
    Tensor x = randn({3}, {.requires_grad = true});
    {
        NoGradGuard no_grad;
        BOOST_TEST(!autograd::grad_enabled());
        Tensor y = exp(x) * 2.0;
        BOOST_TEST(!y.grad_fn());
        BOOST_TEST(!y.requires_grad());
        {
            autograd::EnableGradGuard enable;
            BOOST_TEST(bool((x * 2.0).grad_fn()));
        }
    }
    BOOST_TEST(autograd::grad_enabled());
    BOOST_TEST(bool((x * 2.0).grad_fn()));
}

BOOST_AUTO_TEST_CASE(backward_of_a_non_scalar_needs_an_explicit_grad) {
    Tensor x = tensor({1.0, 2.0, 3.0}, {.requires_grad = true});
    Tensor y = x * x;
    BOOST_CHECK_EXCEPTION(y.backward(), Error, [](const Error& e) { return message_has(e, "only for scalar outputs"); });
    Tensor y2 = x * x;
    y2.backward(tensor({1.0, 0.5, -1.0}));
    BOOST_TEST(allclose(x.grad(), tensor({2.0, 2.0, -6.0})));
    BOOST_CHECK_EXCEPTION((x * x).backward(tensor({1.0, 2.0})), Error,
                          [](const Error& e) { return message_has(e, "does not match output shape [3]"); });
}

BOOST_AUTO_TEST_CASE(leaves_and_non_leaves) {
    Tensor x = randn({2}, {.requires_grad = true});
    Tensor c = randn({2});
    Tensor y = x * 2.0;
    BOOST_TEST(x.is_leaf());
    BOOST_TEST(c.is_leaf());
    BOOST_TEST(!y.is_leaf());
    BOOST_TEST(y.requires_grad());
    BOOST_TEST(!(c * 2.0).requires_grad());
    y.sum().backward();
    BOOST_TEST(x.grad().defined());
    BOOST_TEST(!y.grad().defined());  // non-leaves do not keep .grad
    BOOST_CHECK_THROW(y.requires_grad_(false), Error);
}

BOOST_AUTO_TEST_CASE(backward_on_a_tensor_without_grad_explains_itself) {
    Tensor c = randn({1});
    BOOST_CHECK_EXCEPTION(c.backward(), Error, [](const Error& e) { return message_has(e, "does not require grad"); });
}

BOOST_AUTO_TEST_CASE(requires_grad_on_integers_is_an_error) {
    Tensor i = tensor(std::vector<int64_t>{1, 2});
    BOOST_CHECK_EXCEPTION(i.requires_grad_(), Error, [](const Error& e) {
        return message_has(e, "only floating point tensors can require gradients");
    });
    BOOST_CHECK_THROW(zeros({2}, {.dtype = int64, .requires_grad = true}), Error);
}

// PyTorch never lets an int64 or bool tensor require grad, so a result of that dtype from an
// input that requires grad has no history: every compare of the table, casts, argmax/argmin,
// a sum of bools. Float results computed from it do not require grad either.
BOOST_AUTO_TEST_CASE(int64_and_bool_results_never_require_grad) {
    Tensor x = randn({3, 4}, {.requires_grad = true});
    std::vector<std::pair<std::string, Tensor>> results = {
        {"to(int64)", x.to(int64)},
        {"to(bool)", x.to(DType::boolean)},
        {"argmax", argmax(x, 1)},
        {"argmin", argmin(x)},
        {"sum of a compare", (x > 0.0).sum()},
        {"int64 arithmetic", x.to(int64) * 2},
        {"float from int64", x.to(int64).to(float32)},
        {"float from bool", where(x > 0.0, 1.0, zeros_like(x).detach())},
    };
    for (int i = 0; i < kOpCount; ++i)
        if (op_info(OpId(i)).kind == OpKind::pointwise && op_info(OpId(i)).math &&
            !op_info(OpId(i)).backward)
            results.push_back({op_info(OpId(i)).name, dispatch(OpId(i), {x, x * 2.0})});
    BOOST_TEST(results.size() > 10u);  // the table's compares were found
    for (const auto& [what, t] : results) {
        BOOST_TEST_CONTEXT(what) {
            BOOST_TEST(!t.requires_grad());
            BOOST_TEST(!t.grad_fn());
        }
    }
    // The float path next to an int cast still carries the gradient, once.
    (x.to(int64).to(float32) + x * 3.0).sum().backward();
    BOOST_TEST(allclose(x.grad(), full({3, 4}, 3.0)));
}

BOOST_AUTO_TEST_CASE(leaf_gradient_keeps_the_leaf_dtype_and_shape) {
    Tensor x = randn({3, 1}, {.requires_grad = true});
    (x.to(float64) * ones({3, 4}, {.dtype = float64})).sum().backward();
    BOOST_TEST(x.grad().dtype() == float32);
    BOOST_TEST(x.grad().shape() == Shape({3, 1}));
    BOOST_TEST(allclose(x.grad(), full({3, 1}, 4.0)));
}

BOOST_AUTO_TEST_CASE(saved_tensors_released_after_backward) {
    Tensor x = randn({4}, {.requires_grad = true});
    Tensor y = (exp(x) * x).sum();
    BOOST_TEST(autograd::saved_report(y).total_tensors == 3u);
    y.backward();
    BOOST_TEST(autograd::saved_report(y).total_tensors == 0u);
}

BOOST_AUTO_TEST_CASE(cat_saves_no_inputs) {
    Tensor a = randn({2}, {.requires_grad = true}), b = randn({2}), c = randn({3});
    Tensor y = cat({a, b, c});
    BOOST_TEST(autograd::saved_report(y).total_tensors == 0u);
}
