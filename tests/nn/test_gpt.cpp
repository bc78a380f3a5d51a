// nn::MultiheadAttention and the GPT-2-style decoder (models/gpt.h): PyTorch's parameter
// names and shapes, causality (a token's logits ignore later tokens), compiled forward and
// gradients equal to eager, a few SGD steps reduce the loss.
#include <boost/test/unit_test.hpp>

#include <algorithm>

#include "models/gpt.h"
#include "tensor/gemm.h"
#include "tensor/parallel.h"
#include "tests/scoped_env.h"

using namespace kiln;

BOOST_AUTO_TEST_SUITE(gpt)

BOOST_AUTO_TEST_CASE(multihead_attention_has_pytorchs_parameters_and_equals_per_head_attention) {
    manual_seed(51);
    nn::MultiheadAttention mha(8, 2);
    std::vector<std::string> names;
    for (const auto& [name, p] : mha.named_parameters()) names.push_back(name);
    BOOST_TEST(names == (std::vector<std::string>{"in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"}));
    BOOST_TEST(mha.in_proj_weight.shape() == (Shape{24, 8}));
    Tensor x = randn({2, 5, 8});
    Tensor got = mha.forward(x);
    // by hand: head h uses rows [4h, 4h + 4) of each projection
    std::vector<Tensor> heads;
    for (int h = 0; h < 2; ++h) {
        auto proj = [&](int which) { return matmul(x, mha.in_proj_weight.slice(0, which * 8 + h * 4, which * 8 + h * 4 + 4).t()); };
        heads.push_back(nn::functional::scaled_dot_product_attention(proj(0), proj(1), proj(2)));
    }
    Tensor want = mha.out_proj->forward(cat(heads, -1));
    BOOST_TEST(allclose(got, want, 1e-4, 1e-5));
    BOOST_CHECK_THROW(nn::MultiheadAttention(10, 3), Error);
}

BOOST_AUTO_TEST_CASE(multihead_attention_takes_pytorchs_sequence_first_layout) {
    manual_seed(53);
    nn::MultiheadAttention mha(8, 2);
    Tensor q = randn({2, 5, 8}), kv = randn({2, 3, 8});
    Tensor want = mha.attend(q, kv, kv);
    mha.batch_first = false;  // [L, B, E] in and out
    Tensor got = mha.attend(q.transpose(0, 1), kv.transpose(0, 1), kv.transpose(0, 1));
    BOOST_TEST(got.shape() == (Shape{5, 2, 8}));
    BOOST_TEST(allclose(got.transpose(0, 1), want, 1e-5, 1e-6));
    BOOST_CHECK_THROW(mha.attend(randn({5, 8}), kv, kv), Error);
}

BOOST_AUTO_TEST_CASE(the_decoder_is_causal_compiles_equal_to_eager_and_trains) {
    manual_seed(52);
    models::Gpt net({.vocab_size = 32, .max_positions = 16, .layers = 2, .d_model = 32, .heads = 4});
    std::vector<std::string> names;
    for (const auto& [name, p] : net.named_parameters()) names.push_back(name);
    auto has = [&](const std::string& n) { return std::find(names.begin(), names.end(), n) != names.end(); };
    BOOST_TEST(has("wte.weight"));
    BOOST_TEST(has("h.1.attn.in_proj_weight"));
    BOOST_TEST(has("h.0.mlp.c_fc.weight"));
    BOOST_TEST(has("ln_f.bias"));
    Tensor tokens = randint(0, 32, {2, 10});
    Tensor logits = net.forward(tokens);
    BOOST_TEST(logits.shape() == (Shape{2, 10, 32}));
    // causal: changing the last token leaves the earlier positions' logits unchanged
    Tensor other = tokens.clone();
    other = where(arange(10).unsqueeze(0) == 9.0, full({2, 10}, 5.0, {.dtype = DType::int64}), other);
    Tensor changed = net.forward(other);
    BOOST_TEST((changed - logits).slice(1, 0, 9).abs().amax().item<float>() < 1e-5);
    // compiled forward and backward equal eager
    Tensor targets = randint(0, 32, {20});
    auto loss_fn = [&](const Tensor& t) { return nn::functional::cross_entropy(net.forward(t).reshape({20, 32}), targets); };
    auto compiled = compile(loss_fn);
    net.zero_grad();
    Tensor l = loss_fn(tokens);
    l.backward();
    std::vector<Tensor> want;
    for (const Tensor& p : net.parameters()) want.push_back(p.grad().clone());
    net.zero_grad();
    Tensor lc = compiled(tokens);
    lc.backward();
    BOOST_TEST(std::abs(l.item<float>() - lc.item<float>()) < 1e-4);
    std::vector<Tensor> params = net.parameters();
    for (size_t i = 0; i < params.size(); ++i) BOOST_TEST(allclose(params[i].grad(), want[i], 1e-3, 1e-5), "parameter " << names[i]);
    // a few SGD steps reduce the loss
    optim::SGD opt(net.parameters(), 0.5);
    double first = 0, last = 0;
    for (int i = 0; i < 5; ++i) {
        opt.zero_grad();
        Tensor step_loss = compiled(tokens);
        step_loss.backward();
        opt.step();
        (i == 0 ? first : last) = step_loss.item<double>();
    }
    BOOST_TEST(last < first);
}

// GPT's GEMMs run on oneDNN under KILN_GEMM=auto (the default) where kiln has it, and on
// OpenBLAS with KILN_GEMM=openblas: compiled logits, loss and every gradient agree between the
// two, at 1 and 2 threads (the attention's batched GEMMs split over kiln's threads at 2).
BOOST_AUTO_TEST_CASE(compiled_gpt_on_each_gemm_library_agrees) {
    manual_seed(53);
    models::Gpt net(
        {.vocab_size = 64, .max_positions = 64, .layers = 2, .d_model = 128, .heads = 2});
    Tensor tokens = randint(0, 64, {4, 64}), targets = randint(0, 64, {256});
    auto loss_fn = [&](const Tensor& t) {
        return nn::functional::cross_entropy(net.forward(t).reshape({256, 64}), targets);
    };
    auto compiled = compile(loss_fn);
    auto run = [&](const std::string& library, int threads) {
        kiln_test::ScopedEnv env("KILN_GEMM", library);
        set_num_threads(threads);
        net.zero_grad();
        Tensor loss = compiled(tokens);
        loss.backward();
        std::vector<Tensor> out{loss.detach()};
        for (const Tensor& p : net.parameters()) out.push_back(p.grad().clone());
        set_num_threads(0);
        return out;
    };
    std::vector<Tensor> want = run("openblas", 1);
    for (int threads : {1, 2}) {
        std::vector<Tensor> got = run("auto", threads);
        BOOST_TEST(std::abs(got[0].item<float>() - want[0].item<float>()) < 1e-5);
        for (size_t i = 1; i < got.size(); ++i)
            BOOST_TEST(allclose(got[i], want[i], 1e-3, 1e-6),
                       "gradient " << i << ", " << threads << " threads");
    }
}

// Compiled inference calls after the second run their Linear GEMMs on weights packed once
// (tensor/gemm.cpp, GemmPlan::packed_b): each call's logits equal eager's with packing off
// (dnnl_sgemm), at 1 and 2 threads, and so do they after every weight is written in place
// (a load_state_dict-style copy_), which must not leave the old packed weights in use.
BOOST_AUTO_TEST_CASE(compiled_inference_on_packed_weights_equals_eager) {
    // The packed path itself: on oneDNN, packed wherever a plan qualifies (under auto each is
    // taken only where measured faster, which depends on the CPU).
    kiln_test::ScopedEnv onednn("KILN_GEMM", "onednn"), always("KILN_GEMM_PACK", "1");
    manual_seed(54);
    models::Gpt net(
        {.vocab_size = 64, .max_positions = 64, .layers = 2, .d_model = 128, .heads = 2});
    net.eval();
    Tensor tokens = randint(0, 64, {4, 64});
    auto forward = [&](const Tensor& t) { return net.forward(t); };
    auto compiled = compile(forward);
    autograd::NoGradGuard no_grad;
    auto eager = [&] {
        kiln_test::ScopedEnv env("KILN_GEMM_PACK", "0");
        return net.forward(tokens);
    };
    for (int threads : {1, 2}) {
        set_num_threads(threads);
        for (int round = 0; round < 2; ++round) {
            Tensor want = eager();
            int64_t parts = detail::gemm_pack_stats().packed_parts;
            for (int call = 0; call < 4; ++call)
                BOOST_TEST(allclose(compiled(tokens), want, 1e-4, 1e-5),
                           threads << " threads, round " << round << ", call " << call);
#ifdef KILN_HAVE_DNNL
            BOOST_TEST(detail::gemm_pack_stats().packed_parts > parts);  // packing was used
#endif
            for (Tensor& p : net.parameters()) p.copy_(p * 0.5 + 0.01);  // new weights, in place
        }
    }
    set_num_threads(0);
}

BOOST_AUTO_TEST_SUITE_END()
