// MultiheadAttention: one projection to q, k, v, heads split as [B, heads, L, E / heads],
// attention per head, heads joined, the output projection.
#include "nn/attention.h"

#include <cmath>

#include "autograd/node.h"
#include "nn/functional.h"

namespace kiln::nn {

MultiheadAttention::MultiheadAttention(int64_t e, int64_t h, bool with_bias) : embed_dim(e), num_heads(h) {
    KILN_CHECK(e > 0 && h > 0 && e % h == 0, "MultiheadAttention: embed_dim (", e, ") must be divisible by num_heads (", h, ")");
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
    if (batch_first) return attend_batch_first(q, k, v, attn_mask, is_causal);
    auto to_batch_first = [](const Tensor& t, const char* what) {
        KILN_CHECK(t.dim() == 3, "MultiheadAttention (batch_first=False): expected ", what, " [L, B, E], got ", t.shape());
        return t.transpose(0, 1);
    };
    Tensor out = attend_batch_first(to_batch_first(q, "query"), to_batch_first(k, "key"), to_batch_first(v, "value"), attn_mask,
                                    is_causal);
    return out.transpose(0, 1);
}

Tensor MultiheadAttention::attend_batch_first(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& attn_mask,
                                              bool is_causal) {
    KILN_CHECK(q.dim() == 3 && q.size(-1) == embed_dim, "MultiheadAttention: expected query [B, L, ", embed_dim, "], got ", q.shape());
    KILN_CHECK(k.dim() == 3 && v.dim() == 3 && k.shape() == v.shape() && k.size(0) == q.size(0) && k.size(-1) == embed_dim,
               "MultiheadAttention: expected key and value [B, S, ", embed_dim, "] matching the query's batch, got ", k.shape(), " and ",
               v.shape());
    std::vector<Tensor> w = chunk(in_proj_weight, 3, 0), b;
    if (in_proj_bias.defined()) b = chunk(in_proj_bias, 3, 0);
    auto project = [&](const Tensor& x, int i) {
        Tensor y = matmul(x, w[size_t(i)].t());
        if (!b.empty()) y = y + b[size_t(i)];
        int64_t B = x.size(0), L = x.size(1);
        return y.reshape({B, L, num_heads, embed_dim / num_heads}).transpose(1, 2);  // [B, heads, L, d]
    };
    Tensor out = functional::scaled_dot_product_attention(project(q, 0), project(k, 1), project(v, 2), attn_mask, is_causal);
    out = out.transpose(1, 2).reshape({q.size(0), q.size(1), embed_dim});
    return out_proj->forward(out);
}

std::string MultiheadAttention::extra_repr() const {
    return "embed_dim=" + std::to_string(embed_dim) + ", num_heads=" + std::to_string(num_heads);
}

}  // namespace kiln::nn
