// Stateless layers and losses (PyTorch's torch.nn.functional), made of table ops only,
// so autograd and the JIT see through them.
#pragma once
#include "tensor/ops.h"

namespace kiln::nn::functional {

enum class Reduction { mean, sum, none };

Tensor relu(const Tensor& x);
Tensor softmax(const Tensor& x, int64_t dim = -1);
Tensor log_softmax(const Tensor& x, int64_t dim = -1);

// int64 [N, num_classes] with a 1 at each target's class.
Tensor one_hot(const Tensor& targets, int64_t num_classes);

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
