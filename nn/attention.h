// Multi-head attention with PyTorch's parameters (in_proj_weight [3E, E], in_proj_bias [3E],
// out_proj), batch-first inputs [B, L, E], over nn::functional::scaled_dot_product_attention.
#pragma once
#include <memory>

#include "nn/layers.h"

namespace kiln::nn {

// What MultiheadAttention::attention takes besides query, key and value.
struct AttentionOptions {
    // [L, S] or broadcastable to [B, num_heads, L, S]: bool True = may attend (kiln's and
    // scaled_dot_product_attention's convention), or float, added to the scores.
    Tensor attn_mask;
    bool is_causal = false;  // mask key j > query i (without attn_mask)
    // [B, S]: bool True = ignore that key (PyTorch's convention), or float, added to the scores.
    Tensor key_padding_mask;
    bool need_weights = false;         // also return the attention weights
    bool average_attn_weights = true;  // weights [B, L, S] averaged over heads; else [B, heads, L, S]
};
struct AttentionOutput {
    Tensor output;   // as the query's layout
    Tensor weights;  // after dropout, as PyTorch; undefined unless need_weights
};

class MultiheadAttention : public Module {
   public:
    MultiheadAttention(int64_t embed_dim, int64_t num_heads, bool bias = true, double dropout = 0.0);
    // query [B, L, E], key and value [B, S, E] -> [B, L, E]; with batch_first = false,
    // [L, B, E] and [S, B, E] (PyTorch's default layout) -> [L, B, E]. A bool attn_mask means
    // "may attend" (scaled_dot_product_attention's convention, the opposite of PyTorch's
    // nn.MultiheadAttention; kiln script's nn.MultiheadAttention follows PyTorch's).
    Tensor attend(const Tensor& query, const Tensor& key, const Tensor& value, const Tensor& attn_mask = {}, bool is_causal = false);
    // PyTorch's forward: the masks merged (key_padding_mask's bool True = ignore, as PyTorch),
    // dropout on the attention weights while training, the weights when asked for.
    AttentionOutput attention(const Tensor& query, const Tensor& key, const Tensor& value, const AttentionOptions& options = {});
    Tensor forward(const Tensor& x) override { return attend(x, x, x); }  // self-attention
    std::string extra_repr() const override;

    int64_t embed_dim, num_heads;
    double dropout = 0.0;     // on the attention weights, in training mode only (PyTorch's dropout=)
    bool batch_first = true;  // PyTorch's default is false; kiln's models are batch-first
    Tensor in_proj_weight, in_proj_bias;
    std::shared_ptr<Linear> out_proj;

   private:
    AttentionOutput attention_batch_first(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& options);
};

}  // namespace kiln::nn
