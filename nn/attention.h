// Multi-head attention with PyTorch's parameters (in_proj_weight [3E, E], in_proj_bias [3E],
// out_proj), batch-first inputs [B, L, E], over nn::functional::scaled_dot_product_attention.
#pragma once
#include <memory>

#include "nn/layers.h"

namespace kiln::nn {

class MultiheadAttention : public Module {
   public:
    MultiheadAttention(int64_t embed_dim, int64_t num_heads, bool bias = true);
    // query [B, L, E], key and value [B, S, E] -> [B, L, E].
    Tensor attend(const Tensor& query, const Tensor& key, const Tensor& value, const Tensor& attn_mask = {}, bool is_causal = false);
    Tensor forward(const Tensor& x) override { return attend(x, x, x); }  // self-attention
    std::string extra_repr() const override;

    int64_t embed_dim, num_heads;
    Tensor in_proj_weight, in_proj_bias;
    std::shared_ptr<Linear> out_proj;
};

}  // namespace kiln::nn
