// ResNet-18 (models/resnet.h): torchvision's parameter count and names, any input size,
// compiled equal to eager, and a few SGD steps reduce the loss.
#include <boost/test/unit_test.hpp>

#include <algorithm>

#include "models/resnet.h"

using namespace kiln;

BOOST_AUTO_TEST_SUITE(resnet)

BOOST_AUTO_TEST_CASE(resnet18_has_torchvisions_layout) {
    manual_seed(41);
    models::ResNet18 net(1000);
    int64_t count = 0;
    for (const Tensor& p : net.parameters()) count += p.numel();
    BOOST_TEST(count == 11689512);  // torchvision.models.resnet18().parameters()
    std::vector<std::string> names;
    for (const auto& [name, p] : net.named_parameters()) names.push_back(name);
    BOOST_TEST(names.front() == "conv1.weight");
    auto has = [&](const std::string& n) { return std::find(names.begin(), names.end(), n) != names.end(); };
    BOOST_TEST(has("layer2.0.downsample.0.weight"));
    BOOST_TEST(has("layer4.1.bn2.bias"));
    BOOST_TEST(names.back() == "fc.bias");
}

BOOST_AUTO_TEST_CASE(resnet18_compiled_equals_eager_and_trains) {
    manual_seed(42);
    models::ResNet18 net(10);
    Tensor x = randn({2, 3, 32, 32}), target = tensor(std::vector<int64_t>{3, 7}, {2});
    net.eval();
    auto compiled = compile(net);
    Tensor want = net.forward(x);
    BOOST_TEST(want.shape() == (Shape{2, 10}));
    BOOST_TEST(allclose(compiled(x), want, 1e-3, 1e-4));
    BOOST_TEST(net.forward(randn({1, 3, 40, 48})).shape() == (Shape{1, 10}));  // any size
    net.train();
    optim::SGD opt(net.parameters(), 0.05, 0.9);
    std::vector<double> losses;
    for (int i = 0; i < 4; ++i) {
        opt.zero_grad();
        Tensor l = nn::functional::cross_entropy(net.forward(x), target);
        l.backward();
        opt.step();
        losses.push_back(l.item<double>());
    }
    BOOST_TEST(losses.back() < losses.front());
}

// In eval mode every one of ResNet-18's 20 convolutions takes its batch norm (and relu, and
// the residual add where there is one) as oneDNN post-ops (codegen/fuse_conv.cpp): counted
// here so that the fusion cannot silently stop happening; the output still equals eager.
BOOST_AUTO_TEST_CASE(resnet18_eval_compiled_fuses_every_conv_epilogue) {
    manual_seed(43);
    models::ResNet18 net(10);
    net.eval();
    for (auto& [name, b] : net.named_buffers())  // statistics away from 0 and 1
        if (name.find("running_mean") != std::string::npos)
            b.copy_(randn(b.shape()) * 0.1);
        else if (name.find("running_var") != std::string::npos)
            b.copy_(rand(b.shape()) + 0.5);
    Tensor x = randn({2, 3, 32, 32});
    NoGradGuard no_grad;  // inference: one graph, no AOT halves
    int before = codegen::last_compiled().id;
    auto compiled = compile(net, {.choose_faster = false});
    Tensor got = compiled(x), want = net.forward(x);
    BOOST_TEST(allclose(got, want, 1e-3, 1e-4));
    codegen::CompiledGraphInfo info = codegen::last_compiled();
    BOOST_REQUIRE(info.id > before);
    int fused = 0, with_residual = 0;
    for (const std::string& n : info.conv_fusions) {
        fused += n.find(": fused sub, mul, mul, add") != std::string::npos;
        with_residual += n.find("add, add, relu") != std::string::npos;
    }
#ifdef KILN_HAVE_DNNL
    BOOST_TEST(info.conv_fusions.size() == 20u);
    BOOST_TEST(fused == 20);
    BOOST_TEST(with_residual == 8);  // the second conv of each of the 8 basic blocks
#else
    BOOST_TEST_MESSAGE("built without oneDNN: conv2d is im2col + GEMM, nothing to fuse");
    BOOST_TEST(fused == 0);
#endif
}

BOOST_AUTO_TEST_SUITE_END()
