// Stateless layers and losses (PyTorch's torch.nn.functional), made of table ops only,
// so autograd and the JIT see through them.
#pragma once
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
// -log_probs[i, targets[i]]; log_probs [N, C], targets int64 [N].
Tensor nll_loss(const Tensor& log_probs, const Tensor& targets, Reduction reduction = Reduction::mean);
// nll_loss(log_softmax(logits)). targets: int64 class indices [N], or probabilities [N, C].
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, Reduction reduction = Reduction::mean);
// (input - target)^2; the shapes must match.
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::mean);

}  // namespace kiln::nn::functional

namespace kiln::nn {
namespace F = functional;
}
