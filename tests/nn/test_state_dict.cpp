// state_dict() / load_state_dict() and the .npy directory form (nn/state_dict.h): PyTorch's
// names, order and buffers, round trips of ResNet-18 and the GPT through a directory with
// identical outputs, the errors, tied weights, and — when python3 can import torch — the
// same weights give the same logits as PyTorch (bench/export_torch_weights.py).
#include <unistd.h>

#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "models/gpt.h"
#include "models/resnet.h"

using namespace kiln;
namespace fs = std::filesystem;

namespace {

// A fresh directory under /tmp, removed with everything in it at the end of the scope.
struct TempDir {
    fs::path path;
    TempDir() {
        std::string pattern = (fs::temp_directory_path() / "kiln-state-dict-XXXXXX").string();
        BOOST_REQUIRE(mkdtemp(pattern.data()) != nullptr);
        path = pattern;
    }
    ~TempDir() {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
    std::string str(const std::string& sub = "") const {
        return (sub.empty() ? path : path / sub).string();
    }
};

std::vector<std::string> keys_of(const nn::StateDict& d) {
    std::vector<std::string> keys;
    for (const auto& [k, v] : d) keys.push_back(k);
    return keys;
}

bool contains(const std::vector<std::string>& v, const std::string& s) {
    return std::find(v.begin(), v.end(), s) != v.end();
}

// The message of the kiln::Error that f throws ("" when it throws none).
template <class F>
std::string error_of(F f) {
    try {
        f();
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

bool same_values(const Tensor& a, const Tensor& b) {
    return a.shape() == b.shape() &&
           (a.to(DType::float64) - b.to(DType::float64)).abs().amax().item<double>() == 0.0;
}

// max |got - want| / max |want|
double max_relative_difference(const Tensor& got, const Tensor& want) {
    double scale = want.to(DType::float64).abs().amax().item<double>();
    return (got.to(DType::float64) - want.to(DType::float64)).abs().amax().item<double>() /
           std::max(scale, 1e-30);
}

const models::GptConfig kSmallGpt{
    .vocab_size = 64, .max_positions = 16, .layers = 2, .d_model = 32, .heads = 4};

}  // namespace

BOOST_AUTO_TEST_SUITE(state_dict)

BOOST_AUTO_TEST_CASE(resnet18_state_dict_has_torchvisions_keys_and_buffers) {
    manual_seed(61);
    models::ResNet18 net(1000);
    std::vector<std::string> keys = keys_of(net.state_dict());
    BOOST_TEST(keys.size() == 122u);  // len(torchvision.models.resnet18().state_dict())
    std::vector<std::string> first(keys.begin(), keys.begin() + 7);
    BOOST_TEST(first ==
               (std::vector<std::string>{"conv1.weight", "bn1.weight", "bn1.bias",
                                         "bn1.running_mean", "bn1.running_var",
                                         "bn1.num_batches_tracked", "layer1.0.conv1.weight"}));
    BOOST_TEST(contains(keys, "layer2.0.downsample.1.running_var"));
    BOOST_TEST(keys[keys.size() - 2] == "fc.weight");
    BOOST_TEST(keys.back() == "fc.bias");
    BOOST_TEST(net.parameters().size() == 62u);  // buffers are not parameters
    BOOST_TEST(net.named_buffers().size() == 60u);
    for (const auto& [k, v] : net.state_dict()) {
        BOOST_TEST(!v.requires_grad(), k);
        bool counter = k.ends_with("num_batches_tracked");
        BOOST_TEST((v.dtype() == (counter ? DType::int64 : DType::float32)), k);
        if (counter) BOOST_TEST(v.dim() == 0, k);
    }
    // the entries share the module's storage, as PyTorch's do
    Tensor bias = net.state_dict().back().second;
    bias.fill_(3.0);
    BOOST_TEST(net.fc->bias.amin().item<float>() == 3.0f);
}

BOOST_AUTO_TEST_CASE(batch_norm_counts_training_calls_eager_and_compiled) {
    manual_seed(62);
    nn::BatchNorm2d eager_bn(3), compiled_bn(3);
    Tensor x = randn({4, 3, 5, 5});
    auto f = compile([&](const Tensor& t) { return compiled_bn.forward(t); });
    for (int i = 0; i < 3; ++i) {
        eager_bn.forward(x);
        f(x);
    }
    BOOST_TEST(eager_bn.num_batches_tracked.item<int64_t>() == 3);
    BOOST_TEST(compiled_bn.num_batches_tracked.item<int64_t>() == 3);
    BOOST_TEST(allclose(compiled_bn.running_var, eager_bn.running_var, 1e-5, 1e-6));
    eager_bn.eval();
    eager_bn.forward(x);
    BOOST_TEST(eager_bn.num_batches_tracked.item<int64_t>() == 3);  // eval does not count
}

BOOST_AUTO_TEST_CASE(resnet18_round_trips_through_an_npy_directory) {
    manual_seed(63);
    models::ResNet18 net(5);
    Tensor x = randn({2, 3, 32, 32});
    net.forward(x);  // training: moves the running statistics and counts a batch
    net.eval();
    Tensor want = net.forward(x);
    TempDir dir;
    nn::save_state_dict(net, dir.str("resnet"));
    BOOST_TEST(fs::exists(dir.path / "resnet" / "layer1.0.conv1.weight.npy"));
    BOOST_TEST(fs::exists(dir.path / "resnet" / "bn1.num_batches_tracked.npy"));
    std::ofstream(dir.path / "resnet" / "README.txt")
        << "not a tensor\n";  // other files are ignored
    std::vector<std::string> keys = keys_of(nn::read_state_dict_npy(dir.str("resnet")));
    BOOST_TEST(keys.size() == 122u);
    BOOST_TEST(std::is_sorted(keys.begin(), keys.end()));

    manual_seed(64);
    models::ResNet18 other(5);
    other.eval();
    BOOST_TEST(!same_values(other.forward(x), want));
    std::vector<Tensor> before = other.parameters();
    optim::SGD opt(other.parameters(),
                   0.1);  // built before loading: must still see the loaded tensors
    nn::IncompatibleKeys result = nn::load_state_dict_npy(other, dir.str("resnet"));
    BOOST_TEST(result.missing_keys.empty());
    BOOST_TEST(result.unexpected_keys.empty());
    BOOST_TEST(same_values(other.forward(x), want));  // bit for bit
    BOOST_TEST(other.bn1->num_batches_tracked.item<int64_t>() == 1);
    BOOST_TEST(other.bn1->num_batches_tracked.dtype() == DType::int64);
    std::vector<Tensor> after = other.parameters();
    for (size_t i = 0; i < before.size(); ++i)
        BOOST_TEST(after[i].same(before[i]));  // copied in place
    BOOST_TEST(other.fc->weight.requires_grad());
    BOOST_TEST(other.fc->weight.is_leaf());
    Tensor loss = other.forward(x).sum();
    loss.backward();
    opt.step();
    BOOST_TEST(
        !same_values(other.fc->weight, net.fc->weight));  // the optimizer moved the loaded weight
}

BOOST_AUTO_TEST_CASE(gpt_round_trips_and_lists_the_tied_head_once) {
    manual_seed(65);
    models::Gpt net(kSmallGpt);
    std::vector<std::string> keys = keys_of(net.state_dict());
    BOOST_TEST(keys.front() == "wte.weight");
    BOOST_TEST(contains(keys, "h.1.attn.in_proj_weight"));
    BOOST_TEST(contains(keys, "h.0.attn.out_proj.bias"));
    BOOST_TEST(contains(keys, "h.0.mlp.c_fc.weight"));
    BOOST_TEST(keys.back() == "ln_f.bias");
    BOOST_TEST(!contains(keys, "lm_head.weight"));  // tied to wte.weight: listed once
    BOOST_TEST(net.lm_head->weight.same(net.wte->weight));
    Tensor tokens = randint(0, 64, {2, 12});
    Tensor want = net.forward(tokens);
    TempDir dir;
    nn::save_state_dict(net, dir.str());

    manual_seed(66);
    models::Gpt other(kSmallGpt);
    auto compiled = compile([&](const Tensor& t) { return other.forward(t); });
    Tensor before = compiled(tokens);
    nn::load_state_dict_npy(other, dir.str());
    BOOST_TEST(same_values(other.forward(tokens), want));
    BOOST_TEST(!same_values(before, want));
    BOOST_TEST(
        allclose(compiled(tokens), want, 1e-4, 1e-5));  // compiled code reads the loaded weights
    BOOST_TEST(other.lm_head->weight.same(other.wte->weight));  // still tied

    // the tied name is an alias: a dict naming the head lm_head.weight (as PyTorch's GPT-2
    // ports save it) loads, and so does one with both names
    manual_seed(67);
    models::Gpt third(kSmallGpt);
    nn::StateDict dict = net.state_dict();
    dict.front().first = "lm_head.weight";
    third.load_state_dict(dict);
    BOOST_TEST(same_values(third.forward(tokens), want));
    dict.emplace_back("wte.weight", net.wte->weight);
    BOOST_TEST(third.load_state_dict(dict).unexpected_keys.empty());
    // missing only when neither name is there
    nn::StateDict without(dict.begin() + 1, dict.end() - 1);
    std::vector<std::string> missing =
        third.load_state_dict(without, /*strict=*/false).missing_keys;
    BOOST_TEST(missing == (std::vector<std::string>{"wte.weight"}));
}

BOOST_AUTO_TEST_CASE(load_errors_name_the_keys_and_leave_the_module_untouched) {
    manual_seed(68);
    models::ResNet18 net(3);
    nn::StateDict good = models::ResNet18(3).state_dict();
    Tensor fc_before = net.fc->weight.clone();

    nn::StateDict missing(good.begin() + 1, good.end());  // no conv1.weight
    std::string e = error_of([&] { net.load_state_dict(missing); });
    BOOST_TEST(e.find("Error(s) in loading state_dict for ResNet18") != std::string::npos, e);
    BOOST_TEST(e.find("Missing key(s) in state_dict: \"conv1.weight\".") != std::string::npos, e);

    nn::StateDict unexpected = good;
    unexpected.emplace_back("fc.scale", ones({3}));
    e = error_of([&] { net.load_state_dict(unexpected); });
    BOOST_TEST(e.find("Unexpected key(s) in state_dict: \"fc.scale\".") != std::string::npos, e);
    BOOST_TEST(e.find("Missing") == std::string::npos, e);

    nn::StateDict wrong_shape = models::ResNet18(7).state_dict();
    e = error_of([&] { net.load_state_dict(wrong_shape); });
    BOOST_TEST(e.find("size mismatch for fc.weight: copying a param with shape [7, 512] from "
                      "checkpoint, the shape in current "
                      "model is [3, 512].") != std::string::npos,
               e);
    BOOST_TEST(e.find("size mismatch for fc.bias") != std::string::npos, e);
    BOOST_TEST(e.find("Missing") == std::string::npos,
               e);  // a key that is there with a bad shape is not missing
    e = error_of([&] {
        net.load_state_dict(wrong_shape, /*strict=*/false);
    });  // shapes are checked even when not strict
    BOOST_TEST(e.find("size mismatch for fc.weight") != std::string::npos, e);

    nn::StateDict twice = good;
    twice.push_back(good.front());
    e = error_of([&] { net.load_state_dict(twice); });
    BOOST_TEST(e.find("\"conv1.weight\" appears twice") != std::string::npos, e);

    BOOST_TEST(same_values(net.fc->weight, fc_before));  // nothing was copied by any failed load

    // not strict: the rest loads, and the result lists what did not match
    nn::StateDict partial = missing;
    partial.emplace_back("extra", zeros({1}));
    nn::IncompatibleKeys result = net.load_state_dict(partial, /*strict=*/false);
    BOOST_TEST(result.missing_keys == (std::vector<std::string>{"conv1.weight"}));
    BOOST_TEST(result.unexpected_keys == (std::vector<std::string>{"extra"}));
    BOOST_TEST(same_values(net.fc->weight, good[good.size() - 2].second));

    struct PathName
        : nn::Module {  // a C++ name may hold a '/': never written outside the directory
        PathName() { register_parameter("sub/escaped", zeros({1})); }
        Tensor forward(const Tensor& x) override { return x; }
    };
    TempDir dir;
    e = error_of([&] { nn::save_state_dict(PathName(), dir.str("weights")); });
    BOOST_TEST(e.find("the key 'sub/escaped' cannot be a file name") != std::string::npos, e);
    BOOST_TEST(!fs::exists(dir.path / "weights"));

    e = error_of([&] { nn::read_state_dict_npy("/nonexistent/kiln-weights"); });
    BOOST_TEST(e.find("'/nonexistent/kiln-weights' is not a directory") != std::string::npos, e);
}

BOOST_AUTO_TEST_CASE(load_converts_dtypes_as_copy_does) {
    manual_seed(69);
    nn::BatchNorm2d bn(4);
    nn::StateDict dict = {{"weight", arange(4.0).to(DType::float64)},
                          {"bias", tensor(std::vector<int64_t>{1, 2, 3, 4}, {4})},
                          {"running_mean", full({4}, 0.5)},
                          {"running_var", full({4}, 2.0)},
                          {"num_batches_tracked", scalar_tensor(9.0, DType::float32)}};
    bn.load_state_dict(dict);
    BOOST_TEST(bn.weight.dtype() == DType::float32);
    BOOST_TEST(same_values(bn.weight, arange(4.0)));
    BOOST_TEST(same_values(bn.bias, arange(4.0) + 1.0));
    BOOST_TEST(bn.num_batches_tracked.dtype() == DType::int64);
    BOOST_TEST(bn.num_batches_tracked.item<int64_t>() == 9);
}

// The comparison with PyTorch: the export script builds the same two models in PyTorch with
// a fixed seed, saves their state dicts, one input and its logits; kiln loads the weights
// and must give the same logits. PyTorch is a reference here, never a dependency.
BOOST_AUTO_TEST_CASE(weights_exported_from_pytorch_give_pytorchs_logits) {
    if (std::system("python3 -c 'import torch' >/dev/null 2>&1") != 0) {
        std::cout << "state_dict: PyTorch comparison SKIPPED (python3 cannot import torch)\n";
        return;
    }
    TempDir dir;
    std::string cmd =
        std::string("python3 ") + KILN_SOURCE_DIR + "/bench/export_torch_weights.py --out " +
        dir.str() +
        " --num-classes 10 --vocab-size 64 --max-positions 16 --layers 2 --d-model 32 --heads 4";
    BOOST_REQUIRE_MESSAGE(std::system(cmd.c_str()) == 0, "failed: " << cmd);

    models::ResNet18 resnet(10);
    nn::load_state_dict_npy(resnet, dir.str("resnet18"));
    resnet.eval();
    Tensor got = resnet.forward(load_npy(dir.str("resnet18.input.npy")));
    double resnet_diff = max_relative_difference(got, load_npy(dir.str("resnet18.logits.npy")));

    models::Gpt gpt(kSmallGpt);
    nn::IncompatibleKeys result = nn::load_state_dict_npy(gpt, dir.str("gpt"));
    BOOST_TEST(result.unexpected_keys
                   .empty());  // lm_head.weight, PyTorch's second name for wte.weight, is accepted
    BOOST_TEST(fs::exists(dir.path / "gpt" / "lm_head.weight.npy"));
    got = gpt.forward(load_npy(dir.str("gpt.input.npy")));
    double gpt_diff = max_relative_difference(got, load_npy(dir.str("gpt.logits.npy")));

    std::cout << "state_dict: PyTorch comparison: max relative difference resnet18 " << resnet_diff
              << ", gpt " << gpt_diff << "\n";
    BOOST_TEST(resnet_diff < 1e-4);
    BOOST_TEST(gpt_diff < 1e-4);
}

BOOST_AUTO_TEST_SUITE_END()
