// Shape-only tracing on the GPU (jit/fake.h, docs/jit.md "Shape-only tracing"): ResNet-18
// and the GPT decoder compiled on CUDA tensors record the same graphs and guards, and give
// the same losses, gradients and parameters, with KILN_FAKE_TRACE on and off; the
// shape-only recording never falls back to real tensors. The device rules themselves are
// checked without a GPU in tests/jit/test_fake_devices.cpp.
#include <boost/test/unit_test.hpp>
#include <regex>

#include "jit/explain.h"
#include "jit/fake.h"
#include "kiln.h"
#include "models/gpt.h"
#include "models/resnet.h"
#include "tests/cuda/needs_gpu.h"

using namespace kiln;
namespace F = kiln::nn::functional;
namespace utf = boost::unit_test;

namespace {

using kiln_test::kCuda;

struct Run {
    std::string graphs, guards;
    std::vector<std::string> fallbacks;
    std::vector<Tensor> losses, grads, state;  // on the CPU
};

// Guards name objects by address ("Gpt@0x55910c317e40"); each way builds its own model, so
// the addresses differ while the guards are the same.
std::string without_addresses(const std::string& guard) {
    static const std::regex address("@0x[0-9a-f]+");
    return std::regex_replace(guard, address, "@ADDR");
}

// Two compiled training steps (SGD with momentum) of a fresh model on the GPU, recorded
// shape-only or with real tensors.
template <class Make>
Run train(bool fake, const Make& make,
          const std::function<Tensor(nn::Module&, const Tensor&, const Tensor&)>& loss_fn,
          const std::function<std::pair<Tensor, Tensor>(int)>& batch) {
    jit::FakeTraceScope mode(fake);
    struct CudaOn {  // whatever KILN_FAKE_TRACE_CUDA says: this test is about the switch on
        bool prev = jit::fake_trace_cuda_enabled();
        CudaOn() { jit::set_fake_trace_cuda(true); }
        ~CudaOn() { jit::set_fake_trace_cuda(prev); }
    } cuda_on;
    jit::reset();
    std::shared_ptr<nn::Module> net = make();
    net->to(kCuda);
    net->train();
    optim::SGD opt(net->parameters(), 0.05, 0.9);
    auto c = compile(loss_fn);
    Run r;
    for (int i = 0; i < 2; ++i) {
        auto [x, y] = batch(i);
        opt.zero_grad();
        Tensor loss = c(*net, x.cuda(), y.cuda());
        BOOST_TEST((loss.device() == kCuda));
        loss.backward();
        r.losses.push_back(loss.detach().cpu());
        if (i == 0)
            for (const Tensor& p : net->parameters()) r.grads.push_back(p.grad().cpu());
        opt.step();
    }
    for (const auto& [name, t] : net->state_dict()) r.state.push_back(t.detach().cpu());
    jit::ExplainOutput e = jit::explain_compiled(c);
    for (const std::string& g : e.graphs) r.graphs += g + "\n";
    for (const auto& entry : e.guards)
        for (const std::string& g : entry) r.guards += without_addresses(g) + "\n";
    r.fallbacks = e.fake_fallbacks;
    return r;
}

template <class Make>
void check_both_ways(
    const char* what, const Make& make,
    const std::function<Tensor(nn::Module&, const Tensor&, const Tensor&)>& loss_fn,
    const std::function<std::pair<Tensor, Tensor>(int)>& batch) {
    Run real = train(false, make, loss_fn, batch);
    Run fake = train(true, make, loss_fn, batch);
    BOOST_TEST_CONTEXT(what) {
        BOOST_TEST(real.fallbacks.empty());
        BOOST_TEST(
            fake.fallbacks.empty(),
            "shape-only tracing stopped: " << (fake.fallbacks.empty() ? "" : fake.fallbacks[0]));
        BOOST_CHECK_EQUAL(real.graphs, fake.graphs);
        BOOST_CHECK_EQUAL(real.guards, fake.guards);
        for (size_t i = 0; i < real.losses.size(); ++i)
            BOOST_TEST(allclose(fake.losses[i], real.losses[i], 1e-5, 1e-6), "loss " << i);
        BOOST_REQUIRE_EQUAL(fake.grads.size(), real.grads.size());
        for (size_t i = 0; i < real.grads.size(); ++i)
            BOOST_TEST(allclose(fake.grads[i], real.grads[i], 1e-4, 1e-5), "grad " << i);
        BOOST_REQUIRE_EQUAL(fake.state.size(), real.state.size());
        // cuDNN may pick engines whose weight gradients add with atomics (not bit-reproducible,
        // as in PyTorch unless deterministic): two momentum steps later, under a loaded GPU, one
        // late state entry (114 of ResNet-18) was seen past 1e-4 (H100, 16-way ctest; it passed
        // alone); graphs and guards above are compared exactly.
        for (size_t i = 0; i < real.state.size(); ++i)
            BOOST_TEST(allclose(fake.state[i], real.state[i], 1e-3, 1e-4), "state " << i);
    }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(cuda_fake_trace)

BOOST_AUTO_TEST_CASE(resnet18_and_gpt_record_the_same_on_the_gpu_both_ways,
                     *utf::precondition(kiln_test::NeedsGpu{"cuda fake trace"})) {
    check_both_ways(
        "resnet18",
        [] {
            manual_seed(9);
            return std::make_shared<models::ResNet18>(10);
        },
        [](nn::Module& net, const Tensor& x, const Tensor& t) {
            return F::cross_entropy(net.forward(x), t);
        },
        [](int i) {
            manual_seed(40 + i);
            return std::pair{randn({4, 3, 32, 32}), randint(0, 10, {4})};
        });
    models::GptConfig cfg{
        .vocab_size = 64, .max_positions = 16, .layers = 2, .d_model = 32, .heads = 4};
    check_both_ways(
        "gpt",
        [cfg] {
            manual_seed(5);
            return std::make_shared<models::Gpt>(cfg);
        },
        [](nn::Module& net, const Tensor& x, const Tensor& t) {
            Tensor logits = net.forward(x);
            return F::cross_entropy(logits.reshape({t.size(0), logits.size(-1)}), t);
        },
        [](int i) {
            manual_seed(60 + i);
            return std::pair{randint(0, 64, {2, 16}), randint(0, 64, {32})};
        });
}

BOOST_AUTO_TEST_SUITE_END()
