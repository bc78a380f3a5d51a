// nn::Conv2d, the pooling layers and Flatten: parameter layout and initialization as
// PyTorch's, forward equal to the functional forms, a small conv net that trains.
#include <boost/test/unit_test.hpp>

#include <cmath>

#include "kiln.h"

using namespace kiln;

BOOST_AUTO_TEST_SUITE(conv_layers)

BOOST_AUTO_TEST_CASE(conv2d_has_pytorch_parameters_and_initialization) {
    manual_seed(1);
    nn::Conv2d conv(4, 6, {3, 2}, {1, 1}, {1, 0}, {1, 1}, 2);
    BOOST_TEST(conv.weight.shape() == (Shape{6, 2, 3, 2}));
    BOOST_TEST(conv.bias.shape() == (Shape{6}));
    BOOST_TEST(conv.parameters().size() == 2u);
    double bound = 1.0 / std::sqrt(2.0 * 3 * 2);  // fan_in = in / groups * kH * kW
    BOOST_TEST(conv.weight.abs().amax().item<double>() <= bound);
    BOOST_TEST(conv.weight.abs().amax().item<double>() > bound * 0.5);
    BOOST_TEST(conv.extra_repr() == "4, 6, kernel_size=(3, 2), stride=(1, 1), padding=(1, 0), groups=2");
    Tensor x = randn({2, 4, 5, 5});
    BOOST_TEST(allclose(conv.forward(x), conv2d(x, conv.weight, conv.bias, {1, 1}, {1, 0}, {1, 1}, 2)));
    BOOST_CHECK_THROW(nn::Conv2d(3, 4, {3, 3}, {1, 1}, {0, 0}, {1, 1}, 2), Error);
    BOOST_TEST(!nn::Conv2d(3, 4, {1, 1}, {1, 1}, {0, 0}, {1, 1}, 1, false).bias.defined());
}

BOOST_AUTO_TEST_CASE(pooling_layers_and_flatten) {
    Tensor x = randn({2, 3, 6, 6});
    BOOST_TEST(allclose(nn::MaxPool2d({2, 2}).forward(x), max_pool2d(x, {.kernel = {2, 2}, .stride = {2, 2}})));  // stride = kernel
    BOOST_TEST(allclose(nn::AvgPool2d({3, 3}, {1, 1}, {1, 1}).forward(x), avg_pool2d(x, {.kernel = {3, 3}, .padding = {1, 1}})));
    BOOST_TEST(nn::AdaptiveAvgPool2d({1, 1}).forward(x).shape() == (Shape{2, 3, 1, 1}));
    BOOST_TEST(nn::Flatten().forward(x).shape() == (Shape{2, 108}));
    BOOST_TEST(nn::Flatten(0, 1).forward(x).shape() == (Shape{6, 6, 6}));
    BOOST_CHECK_THROW(nn::Flatten(2, 1).forward(x), Error);
}

BOOST_AUTO_TEST_CASE(a_small_conv_net_trains_eager_and_compiled_alike) {
    auto make = [] {
        manual_seed(5);
        return nn::sequential(nn::Conv2d(1, 4, {3, 3}, {1, 1}, {1, 1}), nn::ReLU(), nn::MaxPool2d({2, 2}), nn::Flatten(),
                              nn::Linear(4 * 4 * 4, 3));
    };
    manual_seed(6);
    Tensor x = randn({8, 1, 8, 8}), target = randn({8, 3});
    auto train = [&](bool compiled) {
        auto net = make();
        optim::SGD opt(net->parameters(), 0.05);
        auto loss_fn = [&](const Tensor& input) {
            Tensor d = net->forward(input) - target;
            return (d * d).mean();
        };
        auto step = compile(loss_fn);
        std::vector<double> losses;
        for (int i = 0; i < 5; ++i) {
            opt.zero_grad();
            Tensor l = compiled ? step(x) : loss_fn(x);
            l.backward();
            opt.step();
            losses.push_back(l.item<double>());
        }
        return losses;
    };
    std::vector<double> eager = train(false), jit = train(true);
    BOOST_TEST(eager.back() < eager.front());
    for (size_t i = 0; i < eager.size(); ++i) BOOST_TEST(std::abs(eager[i] - jit[i]) < 1e-5 * (1 + eager[i]), "step " << i);
}

BOOST_AUTO_TEST_CASE(embedding_looks_rows_up_and_trains) {
    manual_seed(8);
    nn::Embedding emb(6, 3);
    BOOST_TEST(emb.weight.shape() == (Shape{6, 3}));
    BOOST_TEST(emb.extra_repr() == "6, 3");
    Tensor idx = tensor(std::vector<int64_t>{5, 0, 5}, {3});
    Tensor rows = emb.forward(idx);
    BOOST_TEST(allclose(rows.slice(0, 0, 1), emb.weight.slice(0, 5, 6)));
    rows.sum().backward();
    BOOST_TEST(emb.weight.grad().slice(0, 5, 6).sum().item<float>() == 6.0f);  // looked up twice, 3 columns
    BOOST_TEST(emb.weight.grad().slice(0, 1, 5).abs().sum().item<float>() == 0.0f);
    BOOST_CHECK_THROW(emb.forward(tensor(std::vector<int64_t>{6}, {1})), Error);
}

BOOST_AUTO_TEST_SUITE_END()
