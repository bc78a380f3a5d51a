// batch_norm / BatchNorm2d (running statistics as PyTorch, train and eval, compiled) and
// scaled_dot_product_attention (against the formula, causal masks, compiled with gradients).
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <functional>
#include <sstream>

#include "kiln.h"

using namespace kiln;
namespace F = kiln::nn::functional;

namespace {
// f(x) and w's gradient from its backward (w's gradient cleared first).
template <class Fn>
std::pair<Tensor, Tensor> loss_and_grad(Fn&& f, const Tensor& x, Tensor& w) {
    w.zero_grad();
    Tensor loss = f(x);
    loss.backward();
    return {loss, w.grad().clone()};
}
}  // namespace

BOOST_AUTO_TEST_SUITE(norm_attention)

BOOST_AUTO_TEST_CASE(batch_norm_normalizes_per_channel_and_tracks_running_statistics) {
    manual_seed(31);
    Tensor x = randn({4, 3, 5, 5}) * 3.0 + 2.0;
    nn::BatchNorm2d bn(3);
    Tensor y = bn.forward(x);
    Tensor m = y.mean({0, 2, 3}), v = (y * y).mean({0, 2, 3});
    BOOST_TEST(m.abs().amax().item<float>() < 1e-5);
    BOOST_TEST((v - 1.0).abs().amax().item<float>() < 1e-3);
    // running = 0.9 * running + 0.1 * batch (mean; unbiased variance), as PyTorch
    Tensor batch_mean = x.mean({0, 2, 3}), batch_var = var(x, {0, 2, 3}, 1);
    BOOST_TEST(allclose(bn.running_mean, batch_mean * 0.1, 1e-4, 1e-5));
    BOOST_TEST(allclose(bn.running_var, batch_var * 0.1 + 0.9, 1e-4, 1e-5));
    bn.eval();
    Tensor e = bn.forward(x);
    Tensor want = (x - bn.running_mean.reshape({1, 3, 1, 1})) / sqrt(bn.running_var.reshape({1, 3, 1, 1}) + 1e-5);
    BOOST_TEST(allclose(e, want, 1e-4, 1e-5));
    BOOST_TEST(allclose(bn.running_mean, batch_mean * 0.1, 1e-4, 1e-5));  // eval does not update
    BOOST_CHECK_THROW(bn.forward(randn({2, 4, 3, 3})), Error);
    nn::BatchNorm2d one(2);
    BOOST_CHECK_THROW(one.forward(randn({1, 2, 1, 1})), Error);  // one value per channel while training
}

BOOST_AUTO_TEST_CASE(a_compiled_conv_bn_relu_step_equals_eager_including_running_statistics) {
    auto run = [](bool compiled) {
        manual_seed(32);
        auto net = nn::sequential(nn::Conv2d(2, 4, {3, 3}, {1, 1}, {1, 1}), nn::BatchNorm2d(4), nn::ReLU(), nn::AdaptiveAvgPool2d({1, 1}),
                                  nn::Flatten());
        Tensor x = randn({3, 2, 6, 6});
        auto loss_fn = [&](const Tensor& input) { return net->forward(input).sum(); };
        auto step = compile(loss_fn);
        std::vector<double> out;
        for (int i = 0; i < 3; ++i) {
            Tensor l = compiled ? step(x * double(i + 1)) : loss_fn(x * double(i + 1));
            l.backward();
            out.push_back(l.item<double>());
        }
        auto* bn = dynamic_cast<nn::BatchNorm2d*>((*net)[1].get());
        for (float v : bn->running_mean.to_vector<float>()) out.push_back(v);
        for (float v : bn->running_var.to_vector<float>()) out.push_back(v);
        for (float v : net->parameters()[0].grad().flatten().to_vector<float>()) out.push_back(v);
        return out;
    };
    std::vector<double> eager = run(false), jit = run(true);
    BOOST_REQUIRE(eager.size() == jit.size());
    for (size_t i = 0; i < eager.size(); ++i) BOOST_TEST(std::abs(eager[i] - jit[i]) < 1e-4 * (1 + std::abs(eager[i])), "value " << i);
}

// Batch norm's statistics over (0, 2, 3) are generated reductions: no node of a compiled
// BatchNorm2d training step runs its eager kernel. Forward: one row kernel (statistics,
// normalize, relu) beside the running statistics' and the loss's kernels, 4 in all (8 with 2
// fallbacks before 2026-11-25); backward: 5 kernels (14 with 7 fallbacks before).
BOOST_AUTO_TEST_CASE(a_compiled_batch_norm_training_step_has_no_fallback_kernels) {
    manual_seed(34);
    nn::BatchNorm2d bn(8);
    auto loss_fn = [&](const Tensor& x) { return relu(bn.forward(x)).sum(); };
    auto step = compile(loss_fn, {.choose_faster = false});
    Tensor x = randn({4, 8, 6, 6}).requires_grad_();
    Tensor loss = step(x);
    loss.backward();
    codegen::CompiledGraphInfo backward = codegen::last_compiled();
    BOOST_TEST(!backward.interpreted);
    BOOST_TEST(backward.fallbacks.empty(), backward.schedule);
    BOOST_TEST(backward.generated_kernels <= 5, backward.schedule);
    std::ostringstream explained;
    explained << jit::explain_compiled(step);
    BOOST_TEST(explained.str().find("Not fused") == std::string::npos, explained.str());
    Tensor grad = x.grad().clone();
    x.zero_grad();
    Tensor want = loss_fn(x);
    want.backward();
    BOOST_TEST(allclose(loss, want, 1e-4, 1e-4));
    BOOST_TEST(allclose(grad, x.grad(), 1e-4, 1e-5));
}

BOOST_AUTO_TEST_CASE(attention_matches_the_formula_and_masks_the_future) {
    manual_seed(33);
    Tensor q = randn({2, 3, 5, 8}), k = randn({2, 3, 7, 8}), v = randn({2, 3, 7, 4});
    Tensor want = matmul(softmax(matmul(q, k.transpose(-2, -1)) / std::sqrt(8.0), -1), v);
    BOOST_TEST(allclose(F::scaled_dot_product_attention(q, k, v), want, 1e-4, 1e-5));
    BOOST_TEST(allclose(F::scaled_dot_product_attention(q, k, v, {}, false, 0.5), matmul(softmax(matmul(q, k.transpose(-2, -1)) * 0.5, -1), v),
                        1e-4, 1e-5));
    // causal: query i sees keys 0..i only, so changing the last value moves only the last row
    Tensor s = randn({1, 4, 8}), sv = randn({1, 4, 8});
    Tensor a = F::scaled_dot_product_attention(s, s, sv, {}, true);
    Tensor sv2 = sv.clone();
    sv2 = sv2 + where(arange(4).reshape({1, 4, 1}) == 3.0, ones({1, 4, 8}), zeros({1, 4, 8}));
    Tensor b = F::scaled_dot_product_attention(s, s, sv2, {}, true);
    BOOST_TEST((a - b).slice(1, 0, 3).abs().amax().item<float>() == 0.0f);
    BOOST_TEST((a - b).slice(1, 3, 4).abs().amax().item<float>() > 0.5f);
    BOOST_TEST(allclose(a.slice(1, 0, 1), sv.slice(1, 0, 1)));  // the first query sees only the first key
    // a bool mask (True = attend) equals the causal one when it is the lower triangle
    Tensor lower = arange(4).unsqueeze(1) >= arange(4).unsqueeze(0);
    BOOST_TEST(allclose(F::scaled_dot_product_attention(s, s, sv, lower), a, 1e-5, 1e-6));
    BOOST_CHECK_THROW(F::scaled_dot_product_attention(q, randn({2, 3, 7, 6}), v), Error);
    BOOST_CHECK_THROW(F::scaled_dot_product_attention(s, s, sv, lower, true), Error);
}

BOOST_AUTO_TEST_CASE(compiled_causal_attention_equals_eager_with_gradients) {
    manual_seed(34);
    Tensor w = (randn({16, 48}) * 0.2).requires_grad_();
    auto block = [&](const Tensor& x) {  // one head, qkv from one projection, causal
        std::vector<Tensor> qkv = chunk(matmul(x, w), 3, -1);
        return F::scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], {}, true).sum();
    };
    auto compiled = compile(block);
    Tensor x = randn({2, 6, 16});
    auto [l, g] = loss_and_grad(block, x, w);
    auto [lc, gc] = loss_and_grad(compiled, x, w);
    BOOST_TEST(std::abs(l.item<float>() - lc.item<float>()) < 1e-4);
    BOOST_TEST(allclose(gc, g, 1e-4, 1e-5));
}

// Self-attention (query, key and value the same tensor) without a gradient projects with one
// GEMM against the whole in_proj_weight; the same values as three distinct tensors take the
// three-projection path. Outputs agree, eager and compiled (whose schedule then has four
// GEMMs: the packed projection, two for attention, the output projection). With gradients
// both take three projections: outputs and every parameter's gradient agree.
BOOST_AUTO_TEST_CASE(self_attention_s_packed_projection_equals_three_projections) {
    manual_seed(35);
    nn::MultiheadAttention mha(16, 4);
    Tensor x = randn({2, 6, 16});
    {
        autograd::NoGradGuard no_grad;
        Tensor three = mha.attend(x, x.clone(), x.clone(), {}, true);
        BOOST_TEST(allclose(mha.attend(x, x, x, {}, true), three, 1e-4, 1e-5));
        auto f = compile([&](const Tensor& t) { return mha.attend(t, t, t, {}, true); });
        BOOST_TEST(allclose(f(x), three, 1e-4, 1e-5));
        std::istringstream lines(codegen::last_compiled().schedule);
        int gemms = 0;
        for (std::string line; std::getline(lines, line);) gemms += line.find(" blas") != std::string::npos;
        BOOST_TEST(gemms == 4, codegen::last_compiled().schedule);
    }
    auto grads = [&](const std::function<Tensor()>& run) {
        for (Tensor p : mha.parameters()) p.zero_grad();
        Tensor out = run();
        (out * out).sum().backward();
        std::vector<Tensor> g{out.detach()};
        for (Tensor p : mha.parameters()) g.push_back(p.grad().clone());
        return g;
    };
    auto same = grads([&] { return mha.attend(x, x, x, {}, true); });
    auto three = grads([&] { return mha.attend(x, x.clone(), x.clone(), {}, true); });
    BOOST_REQUIRE_EQUAL(same.size(), three.size());
    for (size_t i = 0; i < same.size(); ++i)
        BOOST_TEST_CONTEXT("tensor " << i << " (0: the output, then the parameters' gradients)") {
            BOOST_TEST(allclose(same[i], three[i], 1e-4, 1e-5));
        }
}

// Issue 30 item 10: a query whose bool mask row has no True gave NaN (softmax of a row of
// -inf); PyTorch 2.5+ gives zeros for it, and finite gradients. The other rows keep the
// formula's values. Eager and compiled under every backend, values and gradients.
BOOST_AUTO_TEST_CASE(a_fully_masked_attention_row_gives_zeros_and_finite_gradients) {
    manual_seed(36);
    Tensor q = randn({2, 4, 8}), k = randn({2, 5, 8}), v = randn({2, 5, 3});
    // query 1 may attend to nothing; the others to a few keys
    std::vector<int64_t> allowed = {1, 0, 1, 1, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 0, 0, 0, 1, 0};
    Tensor mask = tensor(allowed, {4, 5}) == 1.0;
    auto attend = [&](const Tensor& qq) { return F::scaled_dot_product_attention(qq, k, v, mask); };
    // the formula, row by row in float64: masked keys left out; no key: zeros
    std::vector<double> qv = q.to(float64).to_vector<double>(),
                        kv = k.to(float64).to_vector<double>(),
                        vv = v.to(float64).to_vector<double>();
    std::vector<double> want;
    for (int64_t b = 0; b < 2; ++b)
        for (int64_t i = 0; i < 4; ++i) {
            std::vector<double> s(5, -INFINITY);
            double mx = -INFINITY;
            for (int64_t j = 0; j < 5; ++j) {
                if (!allowed[size_t(i * 5 + j)]) continue;
                double dot = 0;
                for (int64_t e = 0; e < 8; ++e)
                    dot += qv[size_t((b * 4 + i) * 8 + e)] * kv[size_t((b * 5 + j) * 8 + e)];
                s[size_t(j)] = dot / std::sqrt(8.0);
                mx = std::max(mx, s[size_t(j)]);
            }
            double z = 0;
            for (int64_t j = 0; j < 5; ++j)
                z += std::isinf(s[size_t(j)]) ? 0 : std::exp(s[size_t(j)] - mx);
            for (int64_t c = 0; c < 3; ++c) {
                double acc = 0;
                for (int64_t j = 0; j < 5; ++j)
                    if (!std::isinf(s[size_t(j)]))
                        acc += std::exp(s[size_t(j)] - mx) / z * vv[size_t((b * 5 + j) * 3 + c)];
                want.push_back(acc);
            }
        }
    Tensor expected = tensor(want, {2, 4, 3});
    auto check = [&](const std::function<Tensor(const Tensor&)>& f, const std::string& how) {
        Tensor qq = q.detach().requires_grad_();
        Tensor out = f(qq);
        BOOST_TEST_CONTEXT(how) {
            BOOST_TEST(allclose(out.to(float64), expected, 1e-5, 1e-6));
            BOOST_TEST(out.slice(1, 1, 2).abs().amax().item<float>() ==
                       0.0f);  // the masked row: zeros
            out.sum().backward();
            BOOST_TEST((qq.grad().abs() < INFINITY).to(float32).amin().item<float>() ==
                       1.0f);  // no NaN, no inf
            BOOST_TEST(qq.grad().slice(1, 1, 2).abs().amax().item<float>() == 0.0f);
        }
        return qq.grad();
    };
    Tensor g = check(attend, "eager");
    // the gradient of the other rows, by finite differences in float64
    BOOST_TEST(gradcheck(
        [&](const std::vector<Tensor>& in) {
            return F::scaled_dot_product_attention(in[0], in[1], in[2], mask);
        },
        {q.to(float64), k.to(float64), v.to(float64)}));
    for (const char* backend : {"eager", "aot_eager", "inductor"}) {
        jit::reset();
        auto compiled = compile(attend, {.backend = backend});
        for (int call = 0; call < 2; ++call)
            BOOST_TEST(allclose(check([&](const Tensor& t) { return compiled(t); }, backend), g,
                                1e-5, 1e-6));
    }
    // A float mask of -inf in a whole row is the same masked row.
    Tensor additive = where(mask, zeros({4, 5}), -INFINITY);
    BOOST_TEST(allclose(F::scaled_dot_product_attention(q, k, v, additive).to(float64), expected,
                        1e-5, 1e-6));
}

// Issue 30 item 11: BatchNorm2d(momentum=None) keeps the plain average of the batches' mean
// and unbiased variance; track_running_stats=false has no buffers and normalizes with the
// batch's statistics in eval() too. Eager and compiled.
BOOST_AUTO_TEST_CASE(batch_norm_momentum_none_and_no_running_stats) {
    manual_seed(37);
    std::vector<Tensor> batches = {randn({4, 3, 5, 5}) * 2.0 + 1.0, randn({4, 3, 5, 5}) - 3.0,
                                   randn({4, 3, 5, 5}) * 0.5};
    for (const char* backend : {"none", "eager", "aot_eager", "inductor"}) {
        BOOST_TEST_CONTEXT(backend) {
            jit::reset();
            nn::BatchNorm2d bn(3, 1e-5, std::nullopt);
            auto compiled =
                compile(bn, {.backend = std::string(backend) == "none" ? "eager" : backend});
            auto run = [&](const Tensor& x) {
                return std::string(backend) == "none" ? bn.forward(x) : compiled(x);
            };
            std::vector<double> mean_sum(3), var_sum(3);
            for (size_t i = 0; i < batches.size(); ++i) {
                run(batches[i]);
                std::vector<double> m = batches[i].to(float64).mean({0, 2, 3}).to_vector<double>(),
                                    v = var(batches[i].to(float64), {0, 2, 3}, 1)
                                            .to_vector<double>();
                for (size_t c = 0; c < 3; ++c) mean_sum[c] += m[c], var_sum[c] += v[c];
                std::vector<double> want_mean,
                    want_var;  // the cumulative average (the initial 0 and 1 weigh nothing)
                for (size_t c = 0; c < 3; ++c)
                    want_mean.push_back(mean_sum[c] / double(i + 1)),
                        want_var.push_back(var_sum[c] / double(i + 1));
                BOOST_TEST(
                    allclose(bn.running_mean.to(float64), tensor(want_mean, {3}), 1e-4, 1e-5),
                    "batch " << i);
                BOOST_TEST(allclose(bn.running_var.to(float64), tensor(want_var, {3}), 1e-4, 1e-5),
                           "batch " << i);
            }
            BOOST_TEST(bn.num_batches_tracked.item<int64_t>() == 3);
        }
    }
    nn::BatchNorm2d free(3, 1e-5, 0.1, true, false);
    BOOST_TEST(!free.running_mean.defined());
    BOOST_TEST(free.state_dict().size() == 2u);  // weight and bias only
    Tensor x = batches[1];
    Tensor by_batch = (x - x.mean({0, 2, 3}, true)) / sqrt(var(x, {0, 2, 3}, 0, true) + 1e-5);
    BOOST_TEST(allclose(free.forward(x), by_batch, 1e-4, 1e-5));
    free.eval();
    BOOST_TEST(
        allclose(free.forward(x), by_batch, 1e-4, 1e-5));  // eval: still the batch's statistics
    for (const char* backend : {"eager", "aot_eager", "inductor"}) {
        jit::reset();
        auto compiled = compile(free, {.backend = backend});
        BOOST_TEST(allclose(compiled(x), by_batch, 1e-4, 1e-5), backend);
    }
    std::ostringstream os;
    os << free << " " << nn::BatchNorm2d(2, 1e-5, std::nullopt);
    BOOST_TEST(os.str() ==
               "BatchNorm2d(3, eps=1e-05, momentum=0.1, affine=True, track_running_stats=False) "
               "BatchNorm2d(2, eps=1e-05, momentum=None, affine=True, track_running_stats=True)");
}

// The table op attention (what scaled_dot_product_attention calls on CUDA) against loops in
// double written from the definition: batch dims broadcast, causal with more queries than
// keys and fewer, the heads-last result; its recomputing gradient against finite differences;
// compiled (where the inductor makes it write heads-last) against eager.
BOOST_AUTO_TEST_CASE(the_attention_op_equals_the_definition_and_its_gradient_finite_differences) {
    manual_seed(35);
    auto reference = [](const Tensor& q, const Tensor& k, const Tensor& v, double scale, bool causal) {
        // q [B, H, L, d], k [B or 1, H, S, d], v [B or 1, H, S, dv] (batch 1 broadcast)
        int64_t B = q.size(0), H = q.size(1), L = q.size(2), S = k.size(2), d = q.size(3), dv = v.size(3);
        Tensor qd = q.to(float64).contiguous(), kd = k.to(float64).contiguous(), vd = v.to(float64).contiguous();
        const double *qp = qd.data_ptr<double>(), *kp = kd.data_ptr<double>(), *vp = vd.data_ptr<double>();
        Tensor out = zeros({B, H, L, dv}, {.dtype = float64});
        double* o = out.data_ptr<double>();
        for (int64_t b = 0; b < B; ++b)
            for (int64_t h = 0; h < H; ++h)
                for (int64_t i = 0; i < L; ++i) {
                    int64_t kb = k.size(0) == 1 ? 0 : b, vb = v.size(0) == 1 ? 0 : b;
                    std::vector<double> w(size_t(S), 0.0);
                    double top = -INFINITY, total = 0;
                    for (int64_t j = 0; j < S; ++j) {
                        if (causal && j > i) continue;
                        double dot = 0;
                        for (int64_t c = 0; c < d; ++c)
                            dot += qp[((b * H + h) * L + i) * d + c] * kp[((kb * H + h) * S + j) * d + c];
                        w[size_t(j)] = dot * scale, top = std::max(top, dot * scale);
                    }
                    for (int64_t j = 0; j < S; ++j)
                        if (!(causal && j > i)) total += w[size_t(j)] = std::exp(w[size_t(j)] - top);
                    for (int64_t j = 0; j < S; ++j)
                        if (!(causal && j > i))
                            for (int64_t c = 0; c < dv; ++c)
                                o[((b * H + h) * L + i) * dv + c] += w[size_t(j)] / total * vp[((vb * H + h) * S + j) * dv + c];
                }
        return out;
    };
    for (bool causal : {false, true})
        for (auto [L, S] : {std::pair<int64_t, int64_t>{5, 5}, {7, 4}, {3, 6}})
            BOOST_TEST_CONTEXT("causal " << causal << ", L " << L << ", S " << S) {
                Tensor q = randn({2, 3, L, 4}), k = randn({1, 3, S, 4}), v = randn({2, 3, S, 5});
                Tensor out = attention(q, k, v, 0.7, causal);
                BOOST_TEST((out.shape() == Shape{2, 3, L, 5}));
                BOOST_TEST(allclose(out.to(float64), reference(q, k, v, 0.7, causal), 1e-5, 1e-6));
                Tensor heads_last = dispatch(OpId::attention, {q, k, v}, {.dim = causal, .scalar = 0.7, .keepdim = true});
                BOOST_TEST((heads_last.shape() == Shape{2, L, 3, 5}));
                BOOST_TEST(allclose(heads_last.transpose(1, 2), out, 0, 0));
                BOOST_TEST(gradcheck(
                    [&](const std::vector<Tensor>& in) { return attention(in[0], in[1], in[2], 0.7, causal); },
                    {q.to(float64), k.to(float64), v.to(float64)}));
                BOOST_TEST(gradcheck(
                    [&](const std::vector<Tensor>& in) {
                        return dispatch(OpId::attention, {in[0], in[1], in[2]}, {.dim = causal, .scalar = 0.7, .keepdim = true});
                    },
                    {q.to(float64), k.to(float64), v.to(float64)}));
            }
    // Mismatched features or positions, mixed dtypes: errors naming the op.
    BOOST_CHECK_THROW(attention(randn({2, 4}), randn({3, 5}), randn({3, 4}), 1, false), Error);
    BOOST_CHECK_THROW(attention(randn({2, 4}), randn({3, 4}), randn({2, 4}), 1, false), Error);
    BOOST_CHECK_THROW(attention(randn({2, 4}), randn({3, 4}).to(float64), randn({3, 4}), 1, false), Error);
    auto message = [](const std::function<void()>& f) {
        try {
            f();
        } catch (const Error& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    BOOST_TEST(message([] { attention(randn({4}), randn({3, 4}), randn({3, 4}), 1, false); }).find("attention: expected q, k, v with at least 2 dims") == 0u);
    BOOST_TEST(message([] { attention(randn({2, 3, 4}), randn({3, 3, 4}), randn({3, 3, 4}), 1, false); }).find("attention: shapes [2] and [3] cannot be broadcast") == 0u);
    BOOST_TEST(message([] { attention(randint(0, 3, {3, 4}), randint(0, 3, {3, 4}), randint(0, 3, {3, 4}), 1, false); }).find("attention: expected q, k, v of one float dtype") == 0u);
    BOOST_TEST(message([] { dispatch(OpId::attention, {randn({2, 3, 4}), randn({2, 3, 4}), randn({2, 3, 4})}, {.keepdim = true}); }).find("attention: the heads-last result needs") == 0u);
    // No key at all: zeros, as matmul-softmax-matmul over an empty dim (PyTorch's), and zero
    // gradients; no query: an empty result. The functional form agrees.
    Tensor lone = randn({2, 4}, {.requires_grad = true});
    Tensor none = attention(lone, randn({0, 4}), randn({0, 3}), 1, true);
    BOOST_TEST((none.shape() == Shape{2, 3}));
    BOOST_TEST(none.abs().sum().item<float>() == 0.0f);
    none.sum().backward();
    BOOST_TEST(lone.grad().abs().sum().item<float>() == 0.0f);
    BOOST_TEST((attention(randn({0, 4}), randn({2, 4}), randn({2, 3}), 1, true).shape() == Shape{0, 3}));
    BOOST_TEST(F::scaled_dot_product_attention(randn({2, 4}), randn({0, 4}), randn({0, 3})).abs().sum().item<float>() == 0.0f);

    // Compiled: the heads' transpose back folds into the op (codegen/lower_graph.h).
    Tensor wq = randn({8, 8}) * 0.3;
    auto block = [&](const Tensor& x) {
        Tensor y = matmul(x, wq).reshape({2, 6, 2, 4}).transpose(1, 2);  // [B, H, L, d] heads
        return attention(y, y, y, 0.5, true).transpose(1, 2).reshape({2, 6, 8}).relu();
    };
    Tensor x = randn({2, 6, 8});
    auto compiled = compile(block, {.choose_faster = false});
    for (int call = 0; call < 2; ++call) BOOST_TEST(allclose(compiled(x), block(x), 1e-5, 1e-6));
}

// The attention op inside everything at once: heads read as strided views of one projection,
// q scaled by a tensor changed in place, a data-dependent graph break after the op, the heads-last
// way back, batches 2, 3 and 5 (a symbolic recompile), backward, under every backend: loss
// and weight gradient equal eager's.
BOOST_AUTO_TEST_CASE(the_attention_op_with_in_place_views_a_break_dynamic_batches_and_backward_equals_eager) {
    manual_seed(36);
    Tensor w = (randn({8, 24}) * 0.3).requires_grad_();
    auto f = [&](const Tensor& x) {
        int64_t B = x.size(0), L = x.size(1);
        Tensor heads = matmul(x, w).reshape({B, L, 3, 2, 4});  // q, k, v of 2 heads of 4
        Tensor gain = full({1}, 1.0);  // written in place (no autograd history: functionalized)
        gain.mul_(1.5);
        Tensor q = heads.select(2, 0).transpose(1, 2) * gain;
        Tensor k = heads.select(2, 1).transpose(1, 2), v = heads.select(2, 2).transpose(1, 2);
        Tensor out = attention(q, k, v, 0.5, true);
        if (out.sum() > 0.0) out = out * 2.0; else out = out - 1.0;  // a data-dependent graph break
        return out.transpose(1, 2).reshape({B, L, 8}).tanh().sum();
    };
    for (const char* backend : {"eager", "aot_eager", "inductor"}) {
        jit::reset();
        auto compiled = compile(f, {.backend = backend, .choose_faster = false});
        for (int64_t B : {2, 3, 5})
            BOOST_TEST_CONTEXT(backend << ", batch " << B) {
                Tensor x = randn({B, 6, 8});
                auto [want, want_grad] = loss_and_grad(f, x, w);
                auto [got, got_grad] = loss_and_grad(compiled, x, w);
                BOOST_TEST(std::abs(got.item<double>() - want.item<double>()) < 1e-4 * (1 + std::abs(want.item<double>())));
                BOOST_TEST(allclose(got_grad, want_grad, 1e-4, 1e-5));
            }
        jit::Counters c = jit::counters();
        BOOST_TEST(c.graph_breaks >= 1, backend);     // the break was taken
        BOOST_TEST(c.graphs_compiled >= 2, backend);  // graphs on both sides of it, not eager runs
        BOOST_TEST(c.eager_runs == 0, backend);
        BOOST_TEST(c.compiles >= 2, backend);         // the batches recompiled
    }
}

BOOST_AUTO_TEST_SUITE_END()
