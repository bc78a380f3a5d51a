// MultiheadAttention: one projection to q, k, v, heads split as [B, heads, L, E / heads],
// attention per head, heads joined, the output projection.
#include "nn/attention.h"

#include <cmath>

#include "autograd/node.h"
#include "nn/functional.h"

namespace kiln::nn {

MultiheadAttention::MultiheadAttention(int64_t e, int64_t h, bool with_bias, double p) : embed_dim(e), num_heads(h), dropout(p) {
    KILN_CHECK(e > 0 && h > 0 && e % h == 0, "MultiheadAttention: embed_dim (", e, ") must be divisible by num_heads (", h, ")");
    KILN_CHECK(p >= 0 && p <= 1, "MultiheadAttention: dropout must be between 0 and 1, got ", p);
    double bound = std::sqrt(6.0 / double(e + 3 * e));  // xavier_uniform over [3E, E], as PyTorch
    in_proj_weight = register_parameter("in_proj_weight", rand({3 * e, e}) * (2 * bound) - bound);
    if (with_bias) in_proj_bias = register_parameter("in_proj_bias", zeros({3 * e}));
    out_proj = std::make_shared<Linear>(e, e, with_bias);
    if (with_bias) {
        autograd::NoGradGuard no_grad;
        out_proj->bias.fill_(0);  // PyTorch zeroes it
    }
    register_module("out_proj", out_proj);
}

Tensor MultiheadAttention::attend(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& attn_mask, bool is_causal) {
    return attention(q, k, v, {.attn_mask = attn_mask, .is_causal = is_causal}).output;
}

AttentionOutput MultiheadAttention::attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& options) {
    if (batch_first) return attention_batch_first(q, k, v, options);
    auto to_batch_first = [](const Tensor& t, const char* what) {
        KILN_CHECK(t.dim() == 3, "MultiheadAttention (batch_first=False): expected ", what, " [L, B, E], got ", t.shape());
        return t.transpose(0, 1);
    };
    AttentionOutput out =
        attention_batch_first(to_batch_first(q, "query"), to_batch_first(k, "key"), to_batch_first(v, "value"), options);
    out.output = out.output.transpose(0, 1);  // the weights are [B, ...] in both layouts, as PyTorch's
    return out;
}

namespace {

// attn_mask and key_padding_mask [B, S] (bool True = ignore) as one mask for
// scaled_dot_product_attention over [B, heads, L, S]: bool (True = may attend) when both
// are bool, else float (bool ones become 0 / -inf) added together, as PyTorch merges them.
Tensor merge_masks(const Tensor& attn_mask, bool is_causal, const Tensor& key_padding_mask, const Tensor& scores_like, int64_t B,
                   int64_t L, int64_t S) {
    const Tensor& kpm = key_padding_mask;
    KILN_CHECK(kpm.shape() == (Shape{B, S}), "MultiheadAttention: expected key_padding_mask of shape [", B, ", ", S, "], got ",
               kpm.shape());
    KILN_CHECK(kpm.dtype() == DType::boolean || is_floating(kpm.dtype()),
               "MultiheadAttention: only bool and floating types of key_padding_mask are supported, got ", kpm.dtype());
    TensorOptions on = {.device = scores_like.device()};
    Tensor mask = attn_mask;
    if (is_causal) mask = arange(double(L), on).unsqueeze(1) >= arange(double(S), on).unsqueeze(0);  // key j <= query i
    Tensor kp = kpm.reshape({B, 1, 1, S});
    bool additive = is_floating(kp.dtype()) || (mask.defined() && is_floating(mask.dtype()));
    if (!additive) {
        Tensor attend = eq(kp, 0.0);
        return mask.defined() ? where(mask, attend, mask) : attend;  // both allow it
    }
    auto to_float = [&](const Tensor& m, const Tensor& masked) {
        if (m.dtype() != DType::boolean) return m;
        return masked_fill(zeros(m.shape(), {.dtype = scores_like.dtype(), .device = m.device()}), masked, -INFINITY);
    };
    Tensor out = to_float(kp, kp);
    if (mask.defined()) out = to_float(mask, mask.dtype() == DType::boolean ? eq(mask, 0.0) : mask) + out;
    return out;
}

}  // namespace

AttentionOutput MultiheadAttention::attention_batch_first(const Tensor& q, const Tensor& k, const Tensor& v,
                                                          const AttentionOptions& o) {
    KILN_CHECK(q.dim() == 3 && q.size(-1) == embed_dim, "MultiheadAttention: expected query [B, L, ", embed_dim, "], got ", q.shape());
    KILN_CHECK(k.dim() == 3 && v.dim() == 3 && k.shape() == v.shape() && k.size(0) == q.size(0) && k.size(-1) == embed_dim,
               "MultiheadAttention: expected key and value [B, S, ", embed_dim, "] matching the query's batch, got ", k.shape(), " and ",
               v.shape());
    std::vector<Tensor> w, b;
    auto project = [&](const Tensor& x, int i) {
        if (w.empty()) w = chunk(in_proj_weight, 3, 0);
        if (b.empty() && in_proj_bias.defined()) b = chunk(in_proj_bias, 3, 0);
        Tensor y = matmul(x, w[size_t(i)].t());
        if (!b.empty()) y = y + b[size_t(i)];
        int64_t B = x.size(0), L = x.size(1);
        return y.reshape({B, L, num_heads, embed_dim / num_heads}).transpose(1, 2);  // [B, heads, L, d]
    };
    Tensor qh, kh, vh;
    bool records_gradients =
        autograd::grad_enabled() &&
        (q.requires_grad() || in_proj_weight.requires_grad() ||
         (in_proj_bias.defined() && in_proj_bias.requires_grad()));
    if (q.same(k) && k.same(v) && !records_gradients) {
        // Self-attention without a gradient (inference): one GEMM against the whole
        // in_proj_weight (PyTorch's in_projection_packed), the [B, L, 3 * E] result viewed
        // as q, k and v: one launch for three on a GPU, one wider GEMM on the CPU. Training
        // keeps three projections: CPU GPT training measured slower with the packed form in
        // nine interleaved rounds of ten, four of them after its backward wrote q's, k's and
        // v's gradients as one cat (docs/perf-models.md, 2026-11-27).
        Tensor y = matmul(q, in_proj_weight.t());
        if (in_proj_bias.defined()) y = y + in_proj_bias;
        int64_t B = q.size(0), L = q.size(1);
        Tensor heads = y.reshape({B, L, 3, num_heads, embed_dim / num_heads});
        qh = heads.select(2, 0).transpose(1, 2);  // [B, heads, L, d]
        kh = heads.select(2, 1).transpose(1, 2);
        vh = heads.select(2, 2).transpose(1, 2);
    } else {
        qh = project(q, 0), kh = project(k, 1), vh = project(v, 2);
    }
    Tensor mask = o.attn_mask;
    bool causal = o.is_causal;
    if (o.key_padding_mask.defined()) {
        mask = merge_masks(o.attn_mask, o.is_causal && !o.attn_mask.defined(), o.key_padding_mask, qh, q.size(0), q.size(1), k.size(1));
        causal = false;
    }
    double p = is_training() ? dropout : 0.0;  // PyTorch: no dropout in eval
    AttentionOutput result;
    Tensor out;
    if (!o.need_weights) {
        out = functional::scaled_dot_product_attention(qh, kh, vh, mask, causal, std::nullopt, p);
    } else {
        Tensor weights = functional::attention_weights(qh, kh, mask, causal);  // [B, heads, L, S]
        if (p > 0) weights = functional::dropout(weights, p, true);
        out = matmul(weights, vh);
        result.weights = o.average_attn_weights ? weights.mean({1}) : weights;
    }
    out = out.transpose(1, 2).reshape({q.size(0), q.size(1), embed_dim});
    result.output = out_proj->forward(out);
    return result;
}

std::string MultiheadAttention::extra_repr() const {
    return "embed_dim=" + std::to_string(embed_dim) + ", num_heads=" + std::to_string(num_heads);
}

}  // namespace kiln::nn
