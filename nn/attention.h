// Multi-head attention with PyTorch's parameters (in_proj_weight [3E, E], in_proj_bias [3E],
// out_proj), batch-first inputs [B, L, E], over nn::functional::scaled_dot_product_attention.
#pragma once
#include <memory>

#include "nn/layers.h"

namespace kiln::nn {

class MultiheadAttention : public Module {
   public:
    MultiheadAttention(int64_t embed_dim, int64_t num_heads, bool bias = true);
    // query [B, L, E], key and value [B, S, E] -> [B, L, E]; with batch_first = false,
    // [L, B, E] and [S, B, E] (PyTorch's default layout) -> [L, B, E]. A bool attn_mask means
    // "may attend" (scaled_dot_product_attention's convention, the opposite of PyTorch's
    // nn.MultiheadAttention; kiln script's nn.MultiheadAttention follows PyTorch's).
    Tensor attend(const Tensor& query, const Tensor& key, const Tensor& value, const Tensor& attn_mask = {}, bool is_causal = false);
    Tensor forward(const Tensor& x) override { return attend(x, x, x); }  // self-attention
    std::string extra_repr() const override;

    int64_t embed_dim, num_heads;
    bool batch_first = true;  // PyTorch's default is false; kiln's models are batch-first
    Tensor in_proj_weight, in_proj_bias;
    std::shared_ptr<Linear> out_proj;

   private:
    Tensor attend_batch_first(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& attn_mask, bool is_causal);
};

}  // namespace kiln::nn
