// The model ops on CUDA tensors (issue 14 on the GPU): unfold2d/fold2d (so conv2d and the
// pooling composites), gather/scatter_add (index_select, embedding, cross_entropy), batch norm
// and attention, forward and backward, against the CPU; the GPT decoder trained on the GPU
// equal to the CPU one. Compile-only: every window/index kernel source through NVRTC (CI).
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <iostream>
#include <tuple>

#include "codegen/cuda_backend.h"
#include "codegen/emit_eager_cuda.h"
#include "kiln.h"
#include "models/gpt.h"
#include "models/resnet.h"
#include "tensor/cuda.h"
#include "tensor/cuda_runtime.h"
#include "tensor/kernels.h"
#include "tests/cuda/needs_gpu.h"

using namespace kiln;
namespace F = kiln::nn::functional;
namespace utf = boost::unit_test;

namespace {

using kiln_test::kCuda;

double max_relative(const Tensor& gpu, const Tensor& cpu_result) {
    Tensor a = gpu.detach().cpu().to(DType::float64), b = cpu_result.detach().to(DType::float64);
    BOOST_REQUIRE(a.shape() == b.shape());
    double scale = std::max(1.0, b.abs().amax().item<double>());
    return (a - b).abs().amax().item<double>() / scale;
}

// f on CPU leaves and on their CUDA copies: outputs and every leaf's gradient agree.
void check_forward_backward(const std::string& what, const std::vector<Tensor>& leaves,
                            const std::function<Tensor(const std::vector<Tensor>&)>& f,
                            double tol = 1e-4) {
    BOOST_TEST_CONTEXT(what) {
        std::vector<Tensor> on_cpu, on_gpu;
        for (const Tensor& t : leaves) {
            bool grad = is_floating(t.dtype());
            on_cpu.push_back(grad ? t.clone().requires_grad_() : t);
            on_gpu.push_back(grad ? t.cuda().requires_grad_() : t.cuda());
        }
        Tensor yc = f(on_cpu), yg = f(on_gpu);
        BOOST_TEST((yg.device() == kCuda));
        BOOST_TEST(max_relative(yg, yc) < tol);
        Tensor w = randn(yc.shape());  // a random weighting, so every output element matters
        (yc * w).sum().backward();
        (yg * w.cuda()).sum().backward();
        for (size_t i = 0; i < leaves.size(); ++i)
            if (on_cpu[i].requires_grad())
                BOOST_TEST(max_relative(on_gpu[i].grad(), on_cpu[i].grad()) < tol,
                           "grad of leaf " << i);
    }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(cuda_models)

BOOST_AUTO_TEST_CASE(window_and_index_kernel_sources_compile_with_nvrtc) {
    if (!cuda::detail::nvrtc_unavailable_reason().empty()) {
        std::cout << "cuda models: SKIPPED compile-only test ("
                  << cuda::detail::nvrtc_unavailable_reason() << ")\n";
        return;
    }
    auto sources = cuda_index_kernel_sources();
    BOOST_TEST(sources.size() == 16u);  // with arange's three
    for (const auto& [label, source] : sources) {
        std::string entry = "kiln_" + label.substr(0, label.find(' '));
        BOOST_TEST_CONTEXT(label) {
            BOOST_CHECK_NO_THROW(cuda::detail::compile_cubin(source, entry, 90, /*ptx_only=*/true));
        }
    }
}

BOOST_AUTO_TEST_CASE(conv_and_pooling_match_the_cpu_forward_and_backward,
                     *utf::precondition(kiln_test::NeedsGpu{"cuda models"})) {
    manual_seed(21);
    Tensor x = randn({2, 4, 9, 11});
    check_forward_backward("conv2d stride 2 padding 1", {x, randn({6, 4, 3, 3}) * 0.2, randn({6})},
                           [](const auto& t) {
                               return conv2d(t[0], t[1], t[2], {2, 2}, {1, 1});
                           });
    check_forward_backward("conv2d dilation 2, groups 2", {x, randn({4, 2, 3, 2}) * 0.2},
                           [](const auto& t) {
                               return conv2d(t[0], t[1], {}, {1, 2}, {2, 0}, {2, 1}, 2);
                           });
    check_forward_backward("max_pool2d 3x3 stride 2 padding 1", {x}, [](const auto& t) {
        return max_pool2d(t[0], {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}});
    });
    check_forward_backward("avg_pool2d 2x2", {x}, [](const auto& t) {
        return avg_pool2d(t[0], {.kernel = {2, 2}, .stride = {2, 2}});
    });
    check_forward_backward("adaptive_avg_pool2d to 4x3", {x}, [](const auto& t) {
        return adaptive_avg_pool2d(t[0], {4, 3});
    });
    check_forward_backward(
        "conv2d float64", {x.to(DType::float64), (randn({3, 4, 2, 2}) * 0.3).to(DType::float64)},
        [](const auto& t) { return conv2d(t[0], t[1]); }, 1e-10);
}

// max_pool2d on CUDA is max_pool2d_index's kernel and a gather that skips the bounds check
// (no copy to the host): values, indices and gradients equal the CPU's on windows with ties
// (integer-valued inputs), a NaN, padding, dilation and ceil_mode, with and without a
// gradient; compiled under mode="reduce-overhead" it is captured in a CUDA graph.
BOOST_AUTO_TEST_CASE(max_pool2d_on_cuda_equals_the_cpu_and_is_captured_in_a_cuda_graph,
                     *utf::precondition(kiln_test::NeedsGpu{"cuda models"})) {
    manual_seed(23);
    Tensor ties = (randn({2, 3, 11, 10}) * 2).round();  // many equal maxima: the first one wins
    Tensor nan = randn({1, 2, 7, 7});
    ptr<float>(nan)[49 + 3 * 7 + 4] = std::nanf("");  // [0, 1, 3, 4]
    std::vector<std::pair<std::string, Window2d>> windows = {
        {"3x3 stride 2 padding 1", {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}}},
        {"2x3 stride 1 dilation 2", {.kernel = {2, 3}, .stride = {1, 1}, .dilation = {2, 2}}},
        {"3x3 stride 2 ceil_mode", {.kernel = {3, 3}, .stride = {2, 2}, .ceil_mode = true}},
    };
    for (const auto& [what, w] : windows)
        for (const Tensor& x : {ties, nan}) {
            BOOST_TEST_CONTEXT(what << ", input of " << x.numel()) {
                auto [vc, ic] = max_pool2d_with_indices(x, w);
                auto [vg, ig] = max_pool2d_with_indices(x.cuda(), w);
                BOOST_TEST(max_relative(ig, ic) == 0.0, "indices");
                Tensor g = vg.cpu();  // a NaN as 1e30 on each side: equal only where both have one
                BOOST_TEST(max_relative(where(g != g, 1e30, g), where(vc != vc, 1e30, vc)) == 0.0,
                           "values (a NaN only where both have one)");
                Tensor xc = x.clone().requires_grad_(), xg = x.cuda().requires_grad_();
                Tensor gw = randn(vc.shape());
                (max_pool2d(xc, w) * gw).sum().backward();  // a NaN loss; finite gradients
                (max_pool2d(xg, w) * gw.cuda()).sum().backward();
                BOOST_TEST(max_relative(xg.grad(), xc.grad()) < 1e-6, "gradient");
            }
        }
    auto pool = [](const Tensor& x) {  // a generated kernel after the pool: a graph to capture
        return relu(max_pool2d(x, {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}}) - 0.5);
    };
    auto graphed = compile(pool, {.mode = "reduce-overhead"});
    codegen::CudaGraphStats before = codegen::cuda_graph_stats();
    Tensor x = randn({2, 8, 16, 16}).cuda();
    for (int i = 0; i < 3; ++i)
        BOOST_TEST(max_relative(graphed(x), pool(x.cpu())) == 0.0, "call " << i);
    codegen::CudaGraphStats after = codegen::cuda_graph_stats();
    BOOST_TEST(after.captures - before.captures == 1);
    BOOST_TEST(after.not_captured == before.not_captured,
               "not captured: " << after.last_not_captured.substr(0, 300));
}

BOOST_AUTO_TEST_CASE(attention_kernel_sources_compile_with_nvrtc) {
    if (!cuda::detail::nvrtc_unavailable_reason().empty()) {
        std::cout << "cuda models: SKIPPED compile-only test ("
                  << cuda::detail::nvrtc_unavailable_reason() << ")\n";
        return;
    }
    // GPT's heads, odd feature counts (the guards on every 4th feature), the largest, float64's
    // smaller key tiles.
    for (auto [dtype, d, dv] : {std::tuple{DType::float32, 64, 64}, {DType::float32, 3, 5},
                                {DType::float32, 128, 128}, {DType::float64, 128, 128},
                                {DType::float64, 1, 33}})
        BOOST_TEST_CONTEXT(dtype << " d " << d << " dv " << dv) {
            BOOST_CHECK_NO_THROW(cuda::detail::compile_cubin(codegen::eager_cuda_attention(dtype, d, dv).source,
                                                             "kiln_attention", 90, /*ptx_only=*/true));
        }
    BOOST_CHECK_NO_THROW(cuda::detail::compile_cubin(codegen::eager_cuda_attention(DType::float32, 64, 64, 16).source,
                                                     "kiln_attention", 90, /*ptx_only=*/true));  // KILN_ATTENTION_QUERIES=16
    BOOST_TEST(codegen::eager_cuda_attention(DType::float32, 64, 64, 16).queries_per_block == 16);
    BOOST_TEST(codegen::eager_cuda_attention(DType::float64, 128, 128).queries_per_block == 16);  // 32 do not fit
    BOOST_CHECK_THROW(codegen::eager_cuda_attention(DType::float32, 129, 4), Error);
    BOOST_CHECK_THROW(codegen::eager_cuda_attention(DType::float32, 64, 64, 8), Error);
}

// The attention kernel against the CPU's composition (matmul, mask, softmax, matmul): sizes
// around its tiles of 32 queries and 32 keys, causal with more queries than keys and fewer,
// q, k and v read in place from a packed projection's heads (strided) or broadcast over the
// batch, the heads-last result, float64; without a gradient scaled_dot_product_attention is
// this one launch.
BOOST_AUTO_TEST_CASE(the_attention_kernel_equals_the_composition_on_the_cpu,
                     *utf::precondition(kiln_test::NeedsGpu{"cuda models"})) {
    manual_seed(23);
    for (bool causal : {false, true})
        for (auto [L, S, d, dv] : {std::tuple{1, 1, 1, 1}, {31, 33, 3, 5}, {32, 32, 64, 64},
                                   {100, 70, 64, 16}, {70, 100, 16, 64}, {130, 129, 128, 128}})
            for (DType dtype : {DType::float32, DType::float64})
                BOOST_TEST_CONTEXT("causal " << causal << " L " << L << " S " << S << " d " << d
                                             << " dv " << dv << " " << dtype) {
                    Tensor q = randn({2, 3, L, d}).to(dtype), k = randn({2, 3, S, d}).to(dtype),
                           v = randn({1, 3, S, dv}).to(dtype);
                    double scale = 1.0 / std::sqrt(double(d));
                    Tensor want = attention(q, k, v, scale, causal);  // the CPU's composition
                    double tol = dtype == DType::float64 ? 1e-12 : 2e-5;
                    BOOST_TEST(max_relative(attention(q.cuda(), k.cuda(), v.cuda(), scale, causal), want) < tol);
                    Attrs heads_last{.dim = causal, .scalar = scale, .keepdim = true};
                    Tensor hl = dispatch(OpId::attention, {q.cuda(), k.cuda(), v.cuda()}, heads_last);
                    BOOST_TEST((hl.shape() == Shape{2, L, 3, dv}));
                    BOOST_TEST(max_relative(hl.transpose(1, 2), want) < tol);
                }
    // A packed projection's heads, [B, L, 3, H, d] viewed as three [B, H, L, d]: read in place.
    Tensor packed = randn({2, 40, 3, 4, 16});
    auto head = [](const Tensor& p, int64_t i) { return p.select(2, i).transpose(1, 2); };
    Tensor want = attention(head(packed, 0), head(packed, 1), head(packed, 2), 0.25, true);
    Tensor on_gpu = packed.cuda();
    BOOST_TEST(max_relative(attention(head(on_gpu, 0), head(on_gpu, 1), head(on_gpu, 2), 0.25, true), want) < 2e-5);
    {
        autograd::NoGradGuard no_grad;
        Tensor qg = head(on_gpu, 0), kg = head(on_gpu, 1), vg = head(on_gpu, 2);
        F::scaled_dot_product_attention(qg, kg, vg, {}, true);  // compiles the kernel
        int64_t before = cuda::detail::operations_issued();
        Tensor out = F::scaled_dot_product_attention(qg, kg, vg, {}, true);
        BOOST_TEST(cuda::detail::operations_issued() - before == 1);  // one kernel, no copies
        BOOST_TEST(max_relative(out, want) < 2e-5);
    }
    // With a gradient to record it is the composition (its backward saves the weights).
    check_forward_backward(
        "causal attention with gradients", {randn({2, 3, 40, 8}), randn({2, 3, 40, 8}), randn({2, 3, 40, 8})},
        [](const auto& t) { return attention(t[0], t[1], t[2], 0.3, true); });
}

// GPT's compiled inference on the GPU (the attention op, heads-last, the packed projection)
// equals the CPU's eager forward.
BOOST_AUTO_TEST_CASE(compiled_gpt_inference_on_the_gpu_equals_eager_on_the_cpu,
                     *utf::precondition(kiln_test::NeedsGpu{"cuda models"})) {
    models::GptConfig c{.vocab_size = 50, .max_positions = 40, .layers = 2, .d_model = 64, .heads = 2};
    manual_seed(6);
    models::Gpt net(c);
    net.eval();
    Tensor tokens = randint(0, 50, {3, 37});
    autograd::NoGradGuard no_grad;
    Tensor want = net.forward(tokens);
    net.to(kCuda);
    auto compiled = compile([&](const Tensor& t) { return net.forward(t); }, {.choose_faster = false});
    for (int call = 0; call < 2; ++call) BOOST_TEST(max_relative(compiled(tokens.cuda()), want) < 1e-4);
    BOOST_TEST(max_relative(net.forward(tokens.cuda()), want) < 1e-4);
}

BOOST_AUTO_TEST_CASE(indexing_losses_norms_and_attention_match_the_cpu,
                     *utf::precondition(kiln_test::NeedsGpu{"cuda models"})) {
    manual_seed(22);
    Tensor x = randn({5, 7}), idx = randint(0, 7, {5, 4});
    check_forward_backward("gather dim 1", {x, idx},
                           [](const auto& t) { return gather(t[0], 1, t[1]); });
    check_forward_backward("scatter_add dim 0", {x, randint(0, 5, {3, 7}), randn({3, 7})},
                           [](const auto& t) { return scatter_add(t[0], 0, t[1], t[2]); });
    check_forward_backward("embedding", {randint(0, 10, {3, 4}), randn({10, 6})},
                           [](const auto& t) { return embedding(t[0], t[1]); });
    check_forward_backward("cross_entropy with class targets", {randn({8, 5}), randint(0, 5, {8})},
                           [](const auto& t) { return F::cross_entropy(t[0], t[1]); });
    check_forward_backward("batch_norm, batch statistics",
                           {randn({4, 3, 5, 5}) * 2 + 1, randn({3}), randn({3})},
                           [](const auto& t) {
                               Tensor mean = zeros({3}, {.device = t[0].device()}),
                                      var = ones({3}, {.device = t[0].device()});
                               return F::batch_norm(t[0], mean, var, t[1], t[2], /*training=*/true);
                           });
    check_forward_backward(
        "causal attention", {randn({2, 3, 6, 8}), randn({2, 3, 6, 8}), randn({2, 3, 6, 8})},
        [](const auto& t) { return F::scaled_dot_product_attention(t[0], t[1], t[2], {}, true); });
    check_forward_backward("argmax", {randn({4, 9})}, [](const auto& t) {
        return argmax(t[0], 1).to(DType::float32) * t[0].sum();
    });

    // An index out of range raises naming it (at the next read of CUDA values: the check is
    // deferred, tests/cuda/test_cuda.cpp), and the GPU stays usable.
    try {
        gather(x.cuda(), 1, full({5, 4}, 9, {.dtype = DType::int64}).cuda()).cpu();
        BOOST_ERROR("an index out of range was accepted");
    } catch (const Error& e) {
        std::string m = e.what();
        BOOST_TEST(m.find("index 9 is out of bounds for dim 1 with size 7") != std::string::npos,
                   m);
    }
    try {  // a negative index too, as PyTorch's gather (issue 30 item 9: it counted from the end)
        gather(x.cuda(), 1, full({5, 4}, -1, {.dtype = DType::int64}).cuda()).cpu();
        BOOST_ERROR("a negative index was accepted");
    } catch (const Error& e) {
        std::string m = e.what();
        BOOST_TEST(m.find("index -1 is out of bounds for dim 1 with size 7") != std::string::npos,
                   m);
    }
    BOOST_CHECK_THROW(gather(x.cuda(), 1, idx), Error);  // index on the CPU, data on the GPU
    BOOST_TEST(max_relative(gather(x.cuda(), 1, idx.cuda()), gather(x, 1, idx)) == 0.0);
}

BOOST_AUTO_TEST_CASE(a_gpt_decoder_trains_on_the_gpu_like_on_the_cpu,
                     *utf::precondition(kiln_test::NeedsGpu{"cuda models"})) {
    models::GptConfig c{
        .vocab_size = 40, .max_positions = 16, .layers = 2, .d_model = 32, .heads = 4};
    manual_seed(5);
    models::Gpt on_cpu(c);
    manual_seed(5);
    models::Gpt on_gpu(c);
    on_gpu.to(kCuda);
    Tensor tokens = randint(0, 40, {3, 12}), targets = randint(0, 40, {3 * 12});
    auto step = [&](models::Gpt& net, const Tensor& tok, const Tensor& tgt) {
        for (Tensor& p : net.parameters()) p.zero_grad();
        Tensor loss = F::cross_entropy(net.forward(tok).reshape({3 * 12, 40}), tgt);
        loss.backward();
        autograd::NoGradGuard no_grad;
        for (Tensor& p : net.parameters()) p.add_(p.grad(), -0.1);
        return loss.item<double>();
    };
    for (int i = 0; i < 3; ++i) {
        double lc = step(on_cpu, tokens, targets), lg = step(on_gpu, tokens.cuda(), targets.cuda());
        BOOST_TEST(std::abs(lc - lg) < 1e-4 * (1 + std::abs(lc)),
                   "step " << i << ": " << lc << " vs " << lg);
    }
    std::vector<Tensor> pc = on_cpu.parameters(), pg = on_gpu.parameters();
    for (size_t i = 0; i < pc.size(); ++i)
        BOOST_TEST(max_relative(pg[i], pc[i]) < 1e-4, "parameter " << i);
}

BOOST_AUTO_TEST_CASE(resnet18_moves_with_its_buffers_and_compiled_training_matches_the_cpu,
                     *utf::precondition(kiln_test::NeedsGpu{"cuda models"})) {
    manual_seed(9);
    models::ResNet18 on_cpu(10);
    manual_seed(9);
    models::ResNet18 on_gpu(10);
    on_gpu.to(kCuda);  // parameters and batch-norm buffers
    for (const auto& [name, t] : on_gpu.state_dict()) BOOST_TEST((t.device() == kCuda), name);
    Tensor x = randn({4, 3, 32, 32}), target = randint(0, 10, {4});
    auto loss_fn = [](nn::Module& net, const Tensor& input, const Tensor& t) {
        return F::cross_entropy(net.forward(input), t);
    };
    auto compiled = compile(loss_fn);
    optim::SGD opt_cpu(on_cpu.parameters(), 0.05, 0.9), opt_gpu(on_gpu.parameters(), 0.05, 0.9);
    for (int i = 0; i < 3; ++i) {
        opt_cpu.zero_grad(), opt_gpu.zero_grad();
        Tensor lc = loss_fn(on_cpu, x, target), lg = compiled(on_gpu, x.cuda(), target.cuda());
        lc.backward(), lg.backward();
        BOOST_TEST(std::abs(lc.item<double>() - lg.item<double>()) <
                       1e-3 * (1 + std::abs(lc.item<double>())),
                   "step " << i);
        if (i == 0) {
            // The first step's gradients and batch statistics, before SGD with momentum lets
            // float32 rounding differences (batch norm over 4 values in layer4) grow.
            auto pc = on_cpu.named_parameters(), pg = on_gpu.named_parameters();
            for (size_t k = 0; k < pc.size(); ++k)
                BOOST_TEST(max_relative(pg[k].second.grad(), pc[k].second.grad()) < 1e-3,
                           "grad of " << pc[k].first);
            auto sc = on_cpu.state_dict(), sg = on_gpu.state_dict();
            for (size_t k = 0; k < sc.size(); ++k)
                if (sc[k].first.find("running_") != std::string::npos)
                    BOOST_TEST(max_relative(sg[k].second, sc[k].second) < 1e-4, sc[k].first);
        }
        opt_cpu.step(), opt_gpu.step();
    }
    // Three momentum steps let float32 rounding differences grow in the weights, so the eval
    // forward is compared on the same weights: the GPU model's, loaded into the CPU one.
    on_cpu.load_state_dict(on_gpu.state_dict());
    on_cpu.eval(), on_gpu.eval();
    auto forward = compile([](nn::Module& net, const Tensor& input) { return net.forward(input); });
    BOOST_TEST(max_relative(forward(on_gpu, x.cuda()), on_cpu.forward(x)) < 1e-4);
}

BOOST_AUTO_TEST_SUITE_END()
