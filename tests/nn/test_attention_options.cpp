// Issue 30 item 11: MultiheadAttention's key_padding_mask, need_weights (and
// average_attn_weights) and dropout, and scaled_dot_product_attention's dropout_p, against
// float64 loops written here; eager and compiled under every backend, dropout's draws
// included.
#include <boost/test/unit_test.hpp>
#include <algorithm>
#include <cmath>
#include <functional>
#include <tuple>

#include "kiln.h"

using namespace kiln;
namespace F = kiln::nn::functional;

namespace {

std::vector<double> f64(const Tensor& t) { return t.detach().to(float64).contiguous().to_vector<double>(); }

// PyTorch's multi-head attention in float64 loops over the module's parameters: query
// [B, L, E], key and value [B, S, E] (batch-first); attend(b, i, j): may query i of batch b
// attend to key j. keep (optional, [B, H, L, S]) multiplies the softmax's weights: dropout's
// 0 or 1/(1-p). Returns the output [B, L, E] and the per-head weights [B, H, L, S] (after
// keep, as PyTorch returns them); a query that may attend to no key gets zeros.
struct Reference {
    std::vector<double> out, weights;
};
Reference mha_reference(const nn::MultiheadAttention& m, const Tensor& query, const Tensor& key, const Tensor& value,
                        const std::function<bool(int64_t, int64_t, int64_t)>& attend, const std::vector<double>& keep = {}) {
    int64_t B = query.size(0), L = query.size(1), S = key.size(1), E = m.embed_dim, H = m.num_heads, d = E / H;
    std::vector<double> wi = f64(m.in_proj_weight), bi = f64(m.in_proj_bias), wo = f64(m.out_proj->weight),
                        bo = f64(m.out_proj->bias);
    auto project = [&](const Tensor& x, int64_t part) {
        std::vector<double> xv = f64(x), y;
        int64_t T = x.size(1);
        for (int64_t b = 0; b < B; ++b)
            for (int64_t t = 0; t < T; ++t)
                for (int64_t o = 0; o < E; ++o) {
                    double acc = bi[size_t(part * E + o)];
                    for (int64_t e = 0; e < E; ++e) acc += xv[size_t((b * T + t) * E + e)] * wi[size_t((part * E + o) * E + e)];
                    y.push_back(acc);
                }
        return y;
    };
    std::vector<double> Q = project(query, 0), K = project(key, 1), V = project(value, 2);
    Reference r;
    r.weights.assign(size_t(B * H * L * S), 0.0);
    std::vector<double> heads(size_t(B * L * E), 0.0);
    for (int64_t b = 0; b < B; ++b)
        for (int64_t h = 0; h < H; ++h)
            for (int64_t i = 0; i < L; ++i) {
                std::vector<double> s(size_t(S), -INFINITY);
                double mx = -INFINITY;
                for (int64_t j = 0; j < S; ++j) {
                    if (!attend(b, i, j)) continue;
                    double dot = 0;
                    for (int64_t c = 0; c < d; ++c) dot += Q[size_t((b * L + i) * E + h * d + c)] * K[size_t((b * S + j) * E + h * d + c)];
                    s[size_t(j)] = dot / std::sqrt(double(d));
                    mx = std::max(mx, s[size_t(j)]);
                }
                double z = 0;
                for (double x : s) z += std::isinf(x) ? 0.0 : std::exp(x - mx);
                for (int64_t j = 0; j < S; ++j) {
                    size_t at = size_t(((b * H + h) * L + i) * S + j);
                    double w = std::isinf(s[size_t(j)]) ? 0.0 : std::exp(s[size_t(j)] - mx) / z;
                    if (!keep.empty()) w *= keep[at];
                    r.weights[at] = w;
                    for (int64_t c = 0; c < d; ++c) heads[size_t((b * L + i) * E + h * d + c)] += w * V[size_t((b * S + j) * E + h * d + c)];
                }
            }
    for (int64_t b = 0; b < B; ++b)
        for (int64_t i = 0; i < L; ++i)
            for (int64_t o = 0; o < E; ++o) {
                double acc = bo[size_t(o)];
                for (int64_t e = 0; e < E; ++e) acc += heads[size_t((b * L + i) * E + e)] * wo[size_t(o * E + e)];
                r.out.push_back(acc);
            }
    return r;
}

// The per-head weights [B, H, L, S] averaged over heads: [B, L, S].
std::vector<double> head_mean(const std::vector<double>& w, int64_t B, int64_t H, int64_t L, int64_t S) {
    std::vector<double> out(size_t(B * L * S), 0.0);
    for (int64_t b = 0; b < B; ++b)
        for (int64_t h = 0; h < H; ++h)
            for (int64_t k = 0; k < L * S; ++k) out[size_t(b * L * S + k)] += w[size_t((b * H + h) * L * S + k)] / double(H);
    return out;
}

bool close(const Tensor& got, const std::vector<double>& want, const Shape& shape, double rtol = 1e-5, double atol = 1e-6) {
    return got.shape() == shape && allclose(got.to(float64), tensor(want, shape), rtol, atol);
}

void randomize_biases(nn::MultiheadAttention& m) {
    autograd::NoGradGuard no_grad;
    m.in_proj_bias.copy_(randn(m.in_proj_bias.shape()) * 0.5);
    m.out_proj->bias.copy_(randn(m.out_proj->bias.shape()) * 0.5);
}

// The fraction of exact zeros in t.
double zero_fraction(const Tensor& t) { return (t == 0.0).to(float64).mean().item<double>(); }

}  // namespace

BOOST_AUTO_TEST_SUITE(attention_options)

// key_padding_mask [B, S] (bool True = ignore, PyTorch's) merged with attn_mask and is_causal;
// need_weights returns the weights averaged over heads (or per head); float masks add.
BOOST_AUTO_TEST_CASE(multihead_attention_key_padding_mask_and_weights_match_float64_loops) {
    manual_seed(40);
    nn::MultiheadAttention m(8, 2);
    randomize_biases(m);
    const int64_t B = 2, L = 3, S = 5, H = 2;
    Tensor q = randn({B, L, 8}), k = randn({B, S, 8}), v = randn({B, S, 8});
    std::vector<int64_t> pad = {0, 1, 0, 0, 1, 0, 0, 1, 0, 0};             // True = ignore the key
    std::vector<int64_t> allow = {1, 1, 0, 1, 0, 0, 1, 1, 1, 1, 1, 0, 1, 0, 1};  // [L, S], True = may attend
    Tensor kpm = tensor(pad, {B, S}) == 1.0, attn = tensor(allow, {L, S}) == 1.0;
    auto both = [&](int64_t b, int64_t i, int64_t j) { return allow[size_t(i * S + j)] && !pad[size_t(b * S + j)]; };
    Reference want = mha_reference(m, q, k, v, both);

    nn::AttentionOutput got = m.attention(q, k, v, {.attn_mask = attn, .key_padding_mask = kpm, .need_weights = true});
    BOOST_TEST(close(got.output, want.out, {B, L, 8}));
    BOOST_TEST(close(got.weights, head_mean(want.weights, B, H, L, S), {B, L, S}));
    nn::AttentionOutput per_head = m.attention(
        q, k, v, {.attn_mask = attn, .key_padding_mask = kpm, .need_weights = true, .average_attn_weights = false});
    BOOST_TEST(close(per_head.weights, want.weights, {B, H, L, S}));
    nn::AttentionOutput no_weights = m.attention(q, k, v, {.attn_mask = attn, .key_padding_mask = kpm});
    BOOST_TEST(close(no_weights.output, want.out, {B, L, 8}));
    BOOST_TEST(!no_weights.weights.defined());

    // float masks (0 / -inf, added) mean the same, either one or both
    Tensor kpm_float = where(kpm, -INFINITY, zeros({B, S})), attn_float = where(attn, zeros({L, S}), -INFINITY);
    BOOST_TEST(close(m.attention(q, k, v, {.attn_mask = attn, .key_padding_mask = kpm_float}).output, want.out, {B, L, 8}));
    BOOST_TEST(close(m.attention(q, k, v, {.attn_mask = attn_float, .key_padding_mask = kpm}).output, want.out, {B, L, 8}));
    BOOST_TEST(close(m.attention(q, k, v, {.attn_mask = attn_float, .key_padding_mask = kpm_float}).output, want.out, {B, L, 8}));

    // key_padding_mask alone, and with is_causal (self-attention, L = S)
    auto unpadded = [&](int64_t b, int64_t, int64_t j) { return !pad[size_t(b * S + j)]; };
    BOOST_TEST(close(m.attention(q, k, v, {.key_padding_mask = kpm}).output, mha_reference(m, q, k, v, unpadded).out, {B, L, 8}));
    Tensor x = randn({B, S, 8});
    auto causal = [&](int64_t b, int64_t i, int64_t j) { return j <= i && !pad[size_t(b * S + j)]; };
    Reference want_causal = mha_reference(m, x, x, x, causal);
    nn::AttentionOutput c = m.attention(x, x, x, {.is_causal = true, .key_padding_mask = kpm, .need_weights = true});
    BOOST_TEST(close(c.output, want_causal.out, {B, S, 8}));
    BOOST_TEST(close(c.weights, head_mean(want_causal.weights, B, H, S, S), {B, S, S}));

    // PyTorch's default layout [L, B, E]: the output follows it, the weights stay [B, L, S]
    m.batch_first = false;
    nn::AttentionOutput seq = m.attention(q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1),
                                          {.attn_mask = attn, .key_padding_mask = kpm, .need_weights = true});
    BOOST_TEST(close(seq.output.transpose(0, 1), want.out, {B, L, 8}));
    BOOST_TEST(close(seq.weights, head_mean(want.weights, B, H, L, S), {B, L, S}));
    m.batch_first = true;

    // compiled: values and the query's gradient equal eager's, under every backend
    auto attend = [&](const Tensor& qq) {
        nn::AttentionOutput r = m.attention(qq, k, v, {.attn_mask = attn, .key_padding_mask = kpm, .need_weights = true});
        return std::tuple<Tensor, Tensor>(r.output, r.weights);
    };
    auto grad_of = [&](const std::function<std::tuple<Tensor, Tensor>(const Tensor&)>& f, Tensor* out, Tensor* w) {
        Tensor qq = q.detach().requires_grad_();
        auto [o, ww] = f(qq);
        ((o * o).sum() + (ww * ww).sum()).backward();
        *out = o, *w = ww;
        return qq.grad();
    };
    Tensor eo, ew;
    Tensor g = grad_of(attend, &eo, &ew);
    BOOST_TEST(close(eo, want.out, {B, L, 8}));
    for (const char* backend : {"eager", "aot_eager", "inductor"}) {
        BOOST_TEST_CONTEXT(backend) {
            jit::reset();
            auto compiled = compile(attend, {.backend = backend});
            for (int call = 0; call < 2; ++call) {
                Tensor co, cw;
                Tensor cg = grad_of([&](const Tensor& t) { return compiled(t); }, &co, &cw);
                BOOST_TEST(close(co, want.out, {B, L, 8}));
                BOOST_TEST(close(cw, head_mean(want.weights, B, H, L, S), {B, L, S}));
                BOOST_TEST(allclose(cg, g, 1e-4, 1e-6));
            }
        }
    }

    // bad masks are named
    BOOST_CHECK_THROW(m.attention(q, k, v, {.key_padding_mask = ones({B, S - 1}) == 1.0}), Error);
    BOOST_CHECK_THROW(m.attention(q, k, v, {.key_padding_mask = tensor(pad, {B, S})}), Error);  // int64
}

// dropout= zeroes attention weights with probability p and scales the rest by 1/(1-p), in
// training mode only; the returned weights are the ones used (after dropout), as PyTorch's.
BOOST_AUTO_TEST_CASE(multihead_attention_dropout_in_training_mode_only) {
    manual_seed(41);
    const double p = 0.3;
    nn::MultiheadAttention m(16, 2, true, p);
    randomize_biases(m);
    const int64_t B = 4, T = 32, H = 2;
    Tensor x = randn({B, T, 16});
    auto all = [](int64_t, int64_t, int64_t) { return true; };
    Reference plain = mha_reference(m, x, x, x, all);

    manual_seed(7);
    nn::AttentionOutput got = m.attention(x, x, x, {.need_weights = true, .average_attn_weights = false});
    std::vector<double> w = f64(got.weights), keep;
    int64_t dropped = 0;
    bool scaled = true;
    for (size_t i = 0; i < w.size(); ++i) {
        if (w[i] == 0) {
            ++dropped, keep.push_back(0.0);
            continue;
        }
        keep.push_back(1.0 / (1.0 - p));
        scaled = scaled && std::abs(w[i] - plain.weights[i] / (1 - p)) <= 1e-5 * plain.weights[i] / (1 - p) + 1e-7;
    }
    BOOST_TEST(scaled);  // each kept weight is the softmax's / (1 - p)
    double fraction = double(dropped) / double(w.size());  // 8192 weights: sd 0.005
    BOOST_TEST(std::abs(fraction - p) < 0.03, "dropped " << fraction);
    // the output is made of exactly these weights
    BOOST_TEST(close(got.output, mha_reference(m, x, x, x, all, keep).out, {B, T, 16}, 1e-4, 1e-5));
    // the same draw whether or not the weights are returned (scaled_dot_product_attention's dropout_p)
    manual_seed(7);
    BOOST_TEST(allclose(m.attention(x, x, x).output, got.output, 1e-5, 1e-6));
    manual_seed(8);
    BOOST_TEST(!allclose(m.attention(x, x, x).output, got.output, 1e-3, 1e-3));  // another seed, another draw

    // eval: no dropout
    m.eval();
    nn::AttentionOutput e = m.attention(x, x, x, {.need_weights = true, .average_attn_weights = false});
    BOOST_TEST(close(e.output, plain.out, {B, T, 16}));
    BOOST_TEST(close(e.weights, plain.weights, {B, H, T, T}));
    BOOST_TEST(close(m.forward(x), plain.out, {B, T, 16}));
    m.train();

    // compiled: the same draws as eager from the same seed (values and gradients), every backend
    auto attend = [&](const Tensor& t) {
        nn::AttentionOutput r = m.attention(t, t, t, {.need_weights = true, .average_attn_weights = false});
        return std::tuple<Tensor, Tensor>(r.output, r.weights);
    };
    auto run = [&](const std::function<std::tuple<Tensor, Tensor>(const Tensor&)>& f, uint64_t seed) {
        manual_seed(seed);
        Tensor t = x.detach().requires_grad_();
        auto [o, ww] = f(t);
        (o * o).sum().backward();
        return std::vector<Tensor>{o, ww, t.grad()};
    };
    for (const char* backend : {"eager", "aot_eager", "inductor"}) {
        BOOST_TEST_CONTEXT(backend) {
            jit::reset();
            auto compiled = compile(attend, {.backend = backend});
            for (uint64_t seed : {50, 51}) {
                std::vector<Tensor> want = run(attend, seed), have = run([&](const Tensor& t) { return compiled(t); }, seed);
                BOOST_TEST(allclose(have[0], want[0], 1e-5, 1e-6), "seed " << seed);
                BOOST_TEST(allclose(have[1], want[1], 1e-5, 1e-7), "seed " << seed);
                BOOST_TEST(allclose(have[2], want[2], 1e-4, 1e-6), "seed " << seed);
                BOOST_TEST(std::abs(zero_fraction(have[1]) - p) < 0.03);
            }
        }
    }
    BOOST_CHECK_THROW(nn::MultiheadAttention(8, 2, true, 1.5), Error);
    BOOST_CHECK_THROW(nn::MultiheadAttention(8, 2, true, -0.1), Error);
}

// scaled_dot_product_attention(dropout_p=): dropout on the weights whenever dropout_p > 0 (the
// function has no training flag, as PyTorch's). With v the identity the output is the weights.
BOOST_AUTO_TEST_CASE(scaled_dot_product_attention_dropout_p) {
    manual_seed(42);
    const int64_t B = 2, H = 4, T = 32, D = 8;
    Tensor q = randn({B, H, T, D}), k = randn({B, H, T, D});
    Tensor v = eye(T).reshape({1, 1, T, T}).expand({B, H, T, T});
    // the softmax in float64 loops
    std::vector<double> qv = f64(q), kv = f64(k), want;
    for (int64_t bh = 0; bh < B * H; ++bh)
        for (int64_t i = 0; i < T; ++i) {
            std::vector<double> s;
            for (int64_t j = 0; j < T; ++j) {
                double dot = 0;
                for (int64_t c = 0; c < D; ++c) dot += qv[size_t((bh * T + i) * D + c)] * kv[size_t((bh * T + j) * D + c)];
                s.push_back(dot / std::sqrt(double(D)));
            }
            double mx = *std::max_element(s.begin(), s.end()), z = 0;
            for (double x : s) z += std::exp(x - mx);
            for (double x : s) want.push_back(std::exp(x - mx) / z);
        }
    Tensor plain = F::scaled_dot_product_attention(q, k, v);
    BOOST_TEST(close(plain, want, {B, H, T, T}));
    BOOST_TEST(allclose(F::scaled_dot_product_attention(q, k, v, {}, false, std::nullopt, 0.0), plain, 0.0, 0.0));

    const double p = 0.25;
    manual_seed(9);
    Tensor d = F::scaled_dot_product_attention(q, k, v, {}, false, std::nullopt, p);
    std::vector<double> dv = f64(d);
    int64_t dropped = 0;
    bool scaled = true;
    for (size_t i = 0; i < dv.size(); ++i) {
        if (dv[i] == 0) ++dropped;
        else scaled = scaled && std::abs(dv[i] - want[i] / (1 - p)) <= 1e-5 * want[i] / (1 - p) + 1e-7;
    }
    BOOST_TEST(scaled);
    BOOST_TEST(std::abs(double(dropped) / double(dv.size()) - p) < 0.025);  // 8192 weights: sd 0.005
    {
        autograd::NoGradGuard no_grad;  // no training flag: applied all the same
        manual_seed(9);
        BOOST_TEST(allclose(F::scaled_dot_product_attention(q, k, v, {}, false, std::nullopt, p), d, 0.0, 0.0));
    }
    BOOST_TEST(F::scaled_dot_product_attention(q, k, v, {}, false, std::nullopt, 1.0).abs().amax().item<float>() == 0.0f);
    BOOST_CHECK_THROW(F::scaled_dot_product_attention(q, k, v, {}, false, std::nullopt, 1.5), Error);
    BOOST_CHECK_THROW(F::scaled_dot_product_attention(q, k, v, {}, false, std::nullopt, -0.1), Error);

    // compiled (causal, a random v): the same draws as eager from the same seed, with gradients
    Tensor vr = randn({B, H, T, D});
    auto attend = [&](const Tensor& qq) { return F::scaled_dot_product_attention(qq, k, vr, {}, true, std::nullopt, p); };
    auto run = [&](const std::function<Tensor(const Tensor&)>& f, uint64_t seed) {
        manual_seed(seed);
        Tensor t = q.detach().requires_grad_();
        Tensor o = f(t);
        (o * o).sum().backward();
        return std::pair<Tensor, Tensor>(o, t.grad());
    };
    for (const char* backend : {"eager", "aot_eager", "inductor"}) {
        BOOST_TEST_CONTEXT(backend) {
            jit::reset();
            auto compiled = compile(attend, {.backend = backend});
            for (uint64_t seed : {60, 61}) {
                auto [wo, wg] = run(attend, seed);
                auto [co, cg] = run([&](const Tensor& t) { return compiled(t); }, seed);
                BOOST_TEST(allclose(co, wo, 1e-5, 1e-6), "seed " << seed);
                BOOST_TEST(allclose(cg, wg, 1e-4, 1e-6), "seed " << seed);
            }
        }
    }
}

BOOST_AUTO_TEST_SUITE_END()
