// nn:: modules and losses, and optim:: optimizers against PyTorch's update formulas.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <sstream>

#include "kiln.h"

using namespace kiln;
namespace F = kiln::nn::functional;

namespace {
std::vector<std::string> names(const nn::Module& m) {
    std::vector<std::string> out;
    for (const auto& [name, p] : m.named_parameters()) out.push_back(name);
    return out;
}
}  // namespace

BOOST_AUTO_TEST_SUITE(modules)

BOOST_AUTO_TEST_CASE(linear_shapes_names_and_init_range) {
    manual_seed(0);
    nn::Linear fc(4, 3);
    BOOST_TEST(fc.weight.shape() == Shape({3, 4}));
    BOOST_TEST(fc.bias.shape() == Shape({3}));
    BOOST_TEST(fc.weight.requires_grad());
    BOOST_TEST(fc.weight.is_leaf());
    BOOST_TEST((names(fc) == std::vector<std::string>{"weight", "bias"}));
    BOOST_TEST(fc.weight.abs().amax().item<float>() <= 0.5f);  // U(-1/sqrt(4), 1/sqrt(4))
    BOOST_TEST(fc(randn({5, 4})).shape() == Shape({5, 3}));
    BOOST_TEST(fc(randn({4})).shape() == Shape({3}));
    Tensor x = randn({2, 4});
    BOOST_TEST(allclose(fc(x), matmul(x, fc.weight.t()) + fc.bias));
    BOOST_CHECK_EXCEPTION(fc(randn({2, 5})), Error, [](const Error& e) {
        return std::string(e.what()).find("expected input with last dim 4") != std::string::npos;
    });
    nn::Linear no_bias(4, 3, false);
    BOOST_TEST((names(no_bias) == std::vector<std::string>{"weight"}));
}

BOOST_AUTO_TEST_CASE(sequential_names_printing_and_train_mode) {
    auto model = nn::sequential(nn::Linear(2, 8), nn::ReLU(), nn::Linear(8, 3));
    BOOST_TEST((names(*model) == std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"}));
    BOOST_TEST(model->parameters().size() == 4u);
    BOOST_TEST(model->size() == 3u);
    BOOST_TEST((*model)(randn({5, 2})).shape() == Shape({5, 3}));
    std::ostringstream os;
    os << *model;
    BOOST_TEST(os.str() ==
               "Sequential(\n"
               "  (0): Linear(in_features=2, out_features=8, bias=True)\n"
               "  (1): ReLU()\n"
               "  (2): Linear(in_features=8, out_features=3, bias=True)\n"
               ")");
    BOOST_TEST(model->is_training());
    model->eval();
    BOOST_TEST(!(*model)[0]->is_training());
    model->train();
    BOOST_TEST((*model)[2]->is_training());
}

BOOST_AUTO_TEST_CASE(sequential_from_shared_ptrs_keeps_identity_and_nests) {
    auto fc = std::make_shared<nn::Linear>(3, 3);
    nn::Sequential inner(fc, std::make_shared<nn::ReLU>());
    BOOST_TEST(inner[0].get() == fc.get());
    auto outer = nn::sequential(std::make_shared<nn::Sequential>(fc, std::make_shared<nn::ReLU>()), fc);
    // fc appears twice: its parameters are listed once, under the first name.
    BOOST_TEST((names(*outer) == std::vector<std::string>{"0.0.weight", "0.0.bias"}));
}

BOOST_AUTO_TEST_CASE(zero_grad_drops_parameter_grads) {
    auto model = nn::sequential(nn::Linear(2, 2), nn::ReLU(), nn::Linear(2, 1));
    (*model)(randn({4, 2})).sum().backward();
    BOOST_TEST(model->parameters()[0].grad().defined());
    model->zero_grad();
    for (const Tensor& p : model->parameters()) BOOST_TEST(!p.grad().defined());
}

BOOST_AUTO_TEST_CASE(unregister_drops_a_name_so_it_can_be_registered_again) {
    struct Holder : nn::Module {
        Tensor forward(const Tensor& x) override { return x; }
    } m;
    m.register_parameter("w", ones({2}));
    m.register_module("fc", std::make_shared<nn::Linear>(2, 2));
    BOOST_CHECK_THROW(m.register_parameter("w", ones({3})), Error);  // twice is still an error
    BOOST_TEST(m.has_parameter("w"));
    BOOST_TEST(m.has_child("fc"));
    BOOST_TEST(m.unregister("fc"));
    BOOST_TEST(!m.has_child("fc"));
    BOOST_TEST(!m.unregister("fc"));  // nothing left under that name
    m.register_module("fc", std::make_shared<nn::Linear>(2, 3));
    BOOST_TEST(m.unregister("w"));
    m.register_parameter("w", zeros({3}));
    BOOST_TEST((names(m) == std::vector<std::string>{"w", "fc.weight", "fc.bias"}));
    BOOST_TEST(m.named_parameters()[1].second.size(0) == 3);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(losses)

BOOST_AUTO_TEST_CASE(cross_entropy_matches_hand_computation) {
    Tensor logits = tensor({{1.0, 2.0, 3.0}, {1.0, 0.0, -1.0}});
    Tensor targets = tensor(std::vector<int64_t>{2, 0});
    auto nll = [](std::vector<double> z, int t) {
        double lse = std::log(std::exp(z[0]) + std::exp(z[1]) + std::exp(z[2]));
        return lse - z[size_t(t)];
    };
    double l0 = nll({1, 2, 3}, 2), l1 = nll({1, 0, -1}, 0);
    BOOST_TEST(F::cross_entropy(logits, targets).item<double>() == (l0 + l1) / 2, boost::test_tools::tolerance(1e-6));
    BOOST_TEST(F::cross_entropy(logits, targets, F::Reduction::sum).item<double>() == l0 + l1,
               boost::test_tools::tolerance(1e-6));
    BOOST_TEST(allclose(F::cross_entropy(logits, targets, F::Reduction::none), tensor({l0, l1})));
    // Probability targets equal to the one-hot give the same loss.
    Tensor probs = F::one_hot(targets, 3).to(float32);
    BOOST_TEST(allclose(F::cross_entropy(logits, probs), F::cross_entropy(logits, targets)));
}

BOOST_AUTO_TEST_CASE(cross_entropy_gradient_is_softmax_minus_one_hot) {
    Tensor logits = randn({4, 5}, {.requires_grad = true});
    Tensor targets = tensor(std::vector<int64_t>{0, 4, 2, 2});
    F::cross_entropy(logits, targets).backward();
    Tensor expected = (logits.detach().softmax(1) - F::one_hot(targets, 5).to(float32)) / 4.0;
    BOOST_TEST(allclose(logits.grad(), expected, 1e-5, 1e-6));
    auto ce = [](const std::vector<Tensor>& in) { return F::cross_entropy(in[0], in[1]); };
    BOOST_TEST(gradcheck(ce, {randn({4, 5}), targets}));
    auto ce_probs = [](const std::vector<Tensor>& in) { return F::cross_entropy(in[0], in[1].softmax(1)); };
    BOOST_TEST(gradcheck(ce_probs, {randn({3, 4}), randn({3, 4})}));
}

BOOST_AUTO_TEST_CASE(cross_entropy_explains_bad_targets) {
    Tensor logits = randn({2, 3});
    BOOST_CHECK_EXCEPTION(F::cross_entropy(logits, tensor(std::vector<int64_t>{0, 3})), Error, [](const Error& e) {
        return std::string(e.what()).find("target 3 is out of bounds for 3 classes") != std::string::npos;
    });
    BOOST_CHECK_EXCEPTION(F::cross_entropy(logits, tensor({0.0, 1.0})), Error, [](const Error& e) {
        return std::string(e.what()).find("probability targets must have the logits' shape") != std::string::npos;
    });
    BOOST_CHECK_THROW(F::cross_entropy(logits, tensor(std::vector<int64_t>{0, 1, 2})), Error);
}

BOOST_AUTO_TEST_CASE(mse_loss_matches_hand_computation) {
    Tensor a = tensor({1.0, 2.0, 4.0}), b = tensor({0.0, 2.0, 1.0});
    BOOST_TEST(F::mse_loss(a, b).item<double>() == 10.0 / 3, boost::test_tools::tolerance(1e-6));
    BOOST_TEST(F::mse_loss(a, b, F::Reduction::sum).item<double>() == 10.0, boost::test_tools::tolerance(1e-6));
    BOOST_TEST(gradcheck([](const std::vector<Tensor>& in) { return F::mse_loss(in[0], in[1]); },
                         {randn({3, 2}), randn({3, 2})}));
    BOOST_CHECK_THROW(F::mse_loss(a, tensor({1.0})), Error);
}

BOOST_AUTO_TEST_CASE(softmax_rows_sum_to_one) {
    Tensor p = F::softmax(randn({3, 4}) * 10.0);
    BOOST_TEST(allclose(p.sum({-1}), ones({3}), 1e-5, 1e-6));
    BOOST_TEST(allclose(exp(F::log_softmax(randn({3, 4}))).sum({1}), ones({3}), 1e-5, 1e-6));
}

BOOST_AUTO_TEST_SUITE_END()
