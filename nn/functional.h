// Stateless layers and losses (PyTorch's torch.nn.functional), made of table ops only,
// so autograd and the JIT see through them.
#pragma once
#include <optional>
#include <string>

#include "tensor/ops.h"

namespace kiln::nn::functional {

enum class Reduction { mean, sum, none };

Tensor relu(const Tensor& x);
Tensor softmax(const Tensor& x, int64_t dim = -1);
Tensor log_softmax(const Tensor& x, int64_t dim = -1);

// int64 [N, num_classes] with a 1 at each target's class.
Tensor one_hot(const Tensor& targets, int64_t num_classes);

// x * Phi(x): exact with erf ("none"), or the tanh approximation ("tanh"), as torch.
Tensor gelu(const Tensor& x, const std::string& approximate = "none");
Tensor silu(const Tensor& x);  // x * sigmoid(x)
// Zeroes each element with probability p and scales the rest by 1/(1-p) while training;
// the identity otherwise (and for p = 0).
Tensor dropout(const Tensor& x, double p = 0.5, bool training = true);
// (x - mean) / sqrt(var + eps) over the last normalized_shape.size() dims (biased variance),
// then * weight + bias when given (their shape: normalized_shape).
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = {}, const Tensor& bias = {},
                  double eps = 1e-5);
// -weight[t] * log_probs[i, t] with t = targets[i]; log_probs [N, C] (or [N, C, d...] with
// targets [N, d...], or unbatched [C] with a 0-d target), targets int64. A target equal to
// ignore_index adds nothing; the mean divides by the summed weights of the others (their
// count without weight), as PyTorch. Any other target outside [0, C) raises.
Tensor nll_loss(const Tensor& log_probs, const Tensor& targets,
                Reduction reduction = Reduction::mean, const Tensor& weight = {},
                int64_t ignore_index = -100);
// nll_loss(log_softmax(logits)) over the class dim 1 (0 for unbatched [C] logits). targets:
// int64 class indices, or probabilities of the logits' shape. label_smoothing mixes in the
// uniform distribution over classes, as PyTorch.
Tensor cross_entropy(const Tensor& logits, const Tensor& targets,
                     Reduction reduction = Reduction::mean, const Tensor& weight = {},
                     int64_t ignore_index = -100, double label_smoothing = 0.0);
// Batch normalization over [N, C, ...] per channel C. training: normalize with the batch's
// mean and biased variance, and (when given) move running_mean/running_var toward the
// batch's mean and unbiased variance by `momentum`, in place, as PyTorch; otherwise
// normalize with the running statistics.
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight = {},
                  const Tensor& bias = {}, bool training = false, double momentum = 0.1, double eps = 1e-5);
// softmax(q k^T * scale + mask) v over the last two dims ([..., L, E] queries, [..., S, E] keys,
// [..., S, Ev] values); scale defaults to 1/sqrt(E); is_causal masks key j > query i;
// attn_mask: bool (True = take part) or float (added). A query that may attend to no key
// (a masked row: all scores -inf) gives zeros and zero gradients, as PyTorch 2.5+.
// dropout_p > 0: dropout (zero with probability p, the rest scaled by 1/(1-p)) on the
// attention weights before they multiply v, whenever it is given, as PyTorch's function
// (which has no training flag: modules pass 0 in eval).
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& attn_mask = {},
                                    bool is_causal = false, std::optional<double> scale = std::nullopt,
                                    double dropout_p = 0.0);
// The attention weights softmax(q k^T * scale + mask) [..., L, S] of
// scaled_dot_product_attention (same arguments and checks, zeros for a fully masked row), before
// dropout: what nn::MultiheadAttention returns with need_weights.
Tensor attention_weights(const Tensor& q, const Tensor& k, const Tensor& attn_mask = {}, bool is_causal = false,
                         std::optional<double> scale = std::nullopt);
// (input - target)^2; the shapes must match.
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::mean);

}  // namespace kiln::nn::functional

namespace kiln::nn {
namespace F = functional;
}
