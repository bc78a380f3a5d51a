// Losses as compositions of table ops: class picking is a where() over a one-hot mask.
#include "nn/functional.h"

#include <cmath>

#include "autograd/node.h"

namespace kiln::nn::functional {
namespace {

Tensor reduce(const Tensor& per_sample, Reduction r) {
    switch (r) {
        case Reduction::mean: return per_sample.mean();
        case Reduction::sum: return per_sample.sum();
        case Reduction::none: return per_sample;
    }
    return per_sample;
}

// bool [N, C]: true where column j is sample i's target.
Tensor class_mask(const Tensor& targets, int64_t num_classes, const char* op) {
    KILN_CHECK(targets.dim() == 1 && targets.dtype() == int64, op, ": expected int64 class indices of shape [N], got ",
               targets.dtype(), " ", targets.shape());
    // Reading values is a graph break under the JIT, so only eager calls check the range.
    if (!dispatch_hook() && targets.numel() > 0) {
        int64_t lo = targets.amin().item<int64_t>(), hi = targets.amax().item<int64_t>();
        KILN_CHECK(lo >= 0 && hi < num_classes, op, ": target ", lo < 0 ? lo : hi, " is out of bounds for ",
                   num_classes, " classes");
    }
    return arange(double(num_classes), {.dtype = int64, .device = targets.device()}) == targets.unsqueeze(1);
}

}  // namespace

Tensor relu(const Tensor& x) { return kiln::relu(x); }
Tensor softmax(const Tensor& x, int64_t dim) { return x.softmax(dim); }
Tensor log_softmax(const Tensor& x, int64_t dim) { return x.log_softmax(dim); }

Tensor one_hot(const Tensor& targets, int64_t num_classes) {
    return class_mask(targets, num_classes, "one_hot").to(int64);
}

// The losses read sizes only to check them; under compile() the ops that follow check the
// same agreements structurally (jit/sym_shapes.cpp), so the reads pin no symbol.
Tensor nll_loss(const Tensor& log_probs, const Tensor& targets, Reduction reduction) {
    SizesUnobserved quiet;
    KILN_CHECK(log_probs.dim() == 2, "nll_loss: expected log-probabilities of shape [N, C], got ", log_probs.shape());
    KILN_CHECK(targets.dim() == 1 && targets.size(0) == log_probs.size(0), "nll_loss: expected targets of shape [",
               log_probs.size(0), "], got ", targets.shape());
    Tensor mask = class_mask(targets, log_probs.size(1), "nll_loss");
    Tensor picked = where(mask, log_probs, 0.0).sum({1});
    return reduce(-picked, reduction);
}

Tensor cross_entropy(const Tensor& logits, const Tensor& targets, Reduction reduction) {
    SizesUnobserved quiet;
    KILN_CHECK(logits.dim() == 2, "cross_entropy: expected logits of shape [N, C], got ", logits.shape());
    Tensor log_probs = logits.log_softmax(1);
    if (is_floating(targets.dtype())) {
        KILN_CHECK(targets.shape() == logits.shape(), "cross_entropy: probability targets must have the logits' shape ",
                   logits.shape(), ", got ", targets.shape());
        return reduce(-(targets * log_probs).sum({1}), reduction);
    }
    return nll_loss(log_probs, targets, reduction);
}

Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
    SizesUnobserved quiet;
    KILN_CHECK(input.shape() == target.shape(), "mse_loss: input ", input.shape(), " and target ", target.shape(),
               " differ in shape (kiln does not broadcast losses silently)");
    return reduce(square(input - target), reduction);
}

Tensor gelu(const Tensor& x, const std::string& approximate) {
    if (approximate == "none") return x * (erf(x * 0.7071067811865476) + 1.0) * 0.5;
    KILN_CHECK(approximate == "tanh", "gelu: approximate must be 'none' or 'tanh', got '", approximate, "'");
    Tensor inner = (x + x * x * x * 0.044715) * 0.7978845608028654;  // sqrt(2/pi)
    return x * (tanh(inner) + 1.0) * 0.5;
}

Tensor silu(const Tensor& x) { return x * sigmoid(x); }

Tensor dropout(const Tensor& x, double p, bool training) {
    KILN_CHECK(p >= 0 && p <= 1, "dropout: probability has to be between 0 and 1, but got ", p);
    if (!training || p == 0) return x;
    if (p == 1) return x * 0.0;
    Tensor keep = rand(x.shape(), {.device = x.device()}) >= p;  // each element kept with probability 1-p
    return where(keep, x * (1.0 / (1.0 - p)), 0.0);
}

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias, double eps) {
    int64_t k = int64_t(normalized_shape.size());
    bool fits = k >= 1 && k <= x.dim();
    for (int64_t i = 0; fits && i < k; ++i) fits = x.size(x.dim() - k + i) == normalized_shape[i];
    KILN_CHECK(fits, "layer_norm: given normalized_shape=", normalized_shape, ", expected input with shape [*, ...", normalized_shape,
               "], but got input of size ", x.shape());
    KILN_CHECK(!weight.defined() || weight.shape() == normalized_shape, "layer_norm: weight has shape ", weight.shape(),
               ", expected ", normalized_shape);
    KILN_CHECK(!bias.defined() || bias.shape() == normalized_shape, "layer_norm: bias has shape ", bias.shape(), ", expected ",
               normalized_shape);
    Shape dims;
    for (int64_t i = x.dim() - k; i < x.dim(); ++i) dims.push_back(i);
    Tensor centered = x - x.mean(dims, true);
    Tensor out = centered * rsqrt((centered * centered).mean(dims, true) + eps);
    if (weight.defined()) out = out * weight;
    if (bias.defined()) out = out + bias;
    return out;
}

Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight, const Tensor& bias,
                  bool training, double momentum, double eps) {
    KILN_CHECK(x.dim() >= 2, "batch_norm: expected an input [N, C, ...], got shape ", x.shape());
    int64_t C = x.size(1);
    for (const Tensor* t : {&running_mean, &running_var, &weight, &bias})
        KILN_CHECK(!t->defined() || t->shape() == Shape{C}, "batch_norm: expected per-channel tensors of shape [", C, "], got ",
                   t->shape());
    Shape dims = {0}, per_channel(size_t(x.dim()), 1);
    for (int64_t d = 2; d < x.dim(); ++d) dims.push_back(d);
    per_channel[1] = C;
    Tensor mean, var;
    if (training) {
        int64_t n = x.numel() / std::max<int64_t>(C, 1);
        KILN_CHECK(n > 1, "batch_norm: expected more than 1 value per channel when training, got input of shape ", x.shape());
        mean = x.mean(dims, true);
        Tensor centered = x - mean;
        var = (centered * centered).mean(dims, true);
        if (running_mean.defined() && running_var.defined()) {
            autograd::NoGradGuard no_grad;
            Tensor(running_mean).assign_(running_mean * (1 - momentum) + mean.detach().reshape({C}) * momentum);
            Tensor(running_var).assign_(running_var * (1 - momentum) + var.detach().reshape({C}) * (momentum * double(n) / double(n - 1)));
        }
    } else {
        KILN_CHECK(running_mean.defined() && running_var.defined(), "batch_norm: running_mean and running_var are needed in eval mode");
        mean = running_mean.reshape(per_channel);
        var = running_var.reshape(per_channel);
    }
    Tensor out = (x - mean) * rsqrt(var + eps);
    if (weight.defined()) out = out * weight.reshape(per_channel);
    if (bias.defined()) out = out + bias.reshape(per_channel);
    return out;
}

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& attn_mask, bool is_causal,
                                    std::optional<double> scale) {
    KILN_CHECK(q.dim() >= 2 && k.dim() >= 2 && v.dim() >= 2, "scaled_dot_product_attention: expected q, k, v with at least 2 dims, got ",
               q.shape(), ", ", k.shape(), ", ", v.shape());
    KILN_CHECK(q.size(-1) == k.size(-1), "scaled_dot_product_attention: q ", q.shape(), " and k ", k.shape(),
               " must have the same last dim");
    KILN_CHECK(k.size(-2) == v.size(-2), "scaled_dot_product_attention: k ", k.shape(), " and v ", v.shape(),
               " must have the same number of positions");
    KILN_CHECK(!(is_causal && attn_mask.defined()), "scaled_dot_product_attention: give attn_mask or is_causal, not both");
    double s = scale.value_or(1.0 / std::sqrt(double(q.size(-1))));
    Tensor scores = matmul(q, k.transpose(-2, -1)) * s;  // [..., L, S]
    int64_t L = q.size(-2), S = k.size(-2);
    if (is_causal) {
        TensorOptions on = {.device = scores.device()};
        Tensor above = arange(double(L), on).unsqueeze(1) < arange(double(S), on).unsqueeze(0);  // key after the query
        scores = masked_fill(scores, above, -INFINITY);
    } else if (attn_mask.defined()) {
        scores = attn_mask.dtype() == DType::boolean ? masked_fill(scores, eq(attn_mask, 0.0), -INFINITY) : scores + attn_mask;
    }
    return matmul(kiln::softmax(scores, -1), v);
}

}  // namespace kiln::nn::functional
