// Losses as compositions of table ops: class picking is a where() over a one-hot mask.
#include "nn/functional.h"

#include <cmath>
#include <optional>

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

// bool [N, C]: true where column j is sample i's target (no column for ignore_index).
Tensor class_mask(const Tensor& targets, int64_t num_classes, const char* op,
                  std::optional<int64_t> ignore_index = std::nullopt) {
    KILN_CHECK(targets.dim() == 1 && targets.dtype() == int64, op, ": expected int64 class indices of shape [N], got ",
               targets.dtype(), " ", targets.shape());
    Tensor t = targets;
    Tensor kept;  // bool [N]: not ignore_index
    if (ignore_index) {
        kept = ne(targets, double(*ignore_index));
        t = where(kept, targets, 0.0);  // any class: the mask drops it below
    }
    // An eager CPU call names the op and the target; under compile() reading values would
    // break the graph, and on CUDA make the host wait for the GPU (twice, every loss): the
    // gather below raises instead, on CUDA at the next host wait, naming the op.
    if (!dispatch_hook() && t.numel() > 0 && t.device().type == DeviceType::cpu) {
        int64_t lo = t.amin().item<int64_t>(), hi = t.amax().item<int64_t>();
        KILN_CHECK_INDEX(lo >= 0 && hi < num_classes, op, ": target ", lo < 0 ? lo : hi,
                         " is out of bounds for ", num_classes, " classes");
    }
    Tensor classes = arange(double(num_classes), {.dtype = int64, .device = targets.device()});
    // gather(classes, t) is t itself, checked by gather on every path (eager, compiled,
    // CUDA): a target out of range must raise, not match no class and add 0.
    IndexCheckCaller caller(op);
    Tensor checked = gather(classes, 0, t);
    if (kept.defined()) checked = where(kept, checked, -1.0);  // an ignored row matches no class
    return classes == checked.unsqueeze(1);
}

// [N, C, d...] -> [N * d..., C] (the class dim last), and targets [N, d...] -> [N * d...].
// Unbatched [C] logits are one sample; sample_shape is what Reduction::none returns.
struct ClassRows {
    Tensor rows, targets;
    Shape sample_shape;  // the targets' shape: what Reduction::none returns
};
ClassRows class_rows(const Tensor& x, const Tensor& targets, bool class_targets, const char* op) {
    KILN_CHECK(x.dim() >= 1, op, ": expected input [N, C, d...] or [C], got a 0-d tensor");
    if (x.dim() == 1) {
        KILN_CHECK(targets.shape() == (class_targets ? Shape{} : x.shape()), op,
                   class_targets ? ": expected a 0-d target for unbatched input "
                                 : ": probability targets must have the logits' shape ",
                   x.shape(), ", got ", targets.shape());
        return {x.unsqueeze(0), class_targets ? targets.reshape({1}) : targets.unsqueeze(0), {}};
    }
    int64_t C = x.size(1);
    Shape samples = x.shape();
    samples.erase(samples.begin() + 1);
    if (class_targets)
        KILN_CHECK(targets.shape() == samples, op, ": expected targets of shape ", samples,
                   " for input ", x.shape(), ", got ", targets.shape());
    else
        KILN_CHECK(targets.shape() == x.shape(), op,
                   ": probability targets must have the logits' shape ", x.shape(), ", got ",
                   targets.shape());
    if (x.dim() == 2) return {x, targets, samples};
    Shape order = {0};
    for (int64_t d = 2; d < x.dim(); ++d) order.push_back(d);
    order.push_back(1);
    Tensor rows = x.permute(order).reshape({-1, C});
    Tensor t = class_targets ? targets.reshape({-1}) : targets.permute(order).reshape({-1, C});
    return {rows, t, samples};
}

Tensor reduce_rows(const Tensor& per_sample, Reduction r, const Shape& sample_shape) {
    if (r == Reduction::none) return per_sample.reshape(sample_shape);
    return reduce(per_sample, r);
}

// -weight[t] * log_probs[t] per row (0 for ignore_index), and the weight each row counts for
// in the mean.
std::pair<Tensor, Tensor> picked_loss(const Tensor& log_probs, const Tensor& targets,
                                      const Tensor& weight, int64_t ignore_index, const char* op) {
    Tensor mask = class_mask(targets, log_probs.size(1), op, ignore_index);
    // A row counts weight[t], or 1; an ignored row 0 (a row out of range has raised).
    Tensor w = weight.defined() ? where(mask, weight.unsqueeze(0), 0.0).sum({1})
                                : ne(targets, double(ignore_index)).to(log_probs.dtype());
    Tensor picked = where(mask, log_probs, 0.0).sum({1});
    Tensor loss = 0.0 - picked;  // not -picked: an ignored row is +0, as PyTorch prints it
    return {weight.defined() ? loss * w : loss, w};
}

void check_weight(const Tensor& weight, int64_t C, const char* op) {
    KILN_CHECK(!weight.defined() || weight.shape() == Shape{C}, op,
               ": expected a weight of shape [", C, "] (one per class), got ", weight.shape());
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
Tensor nll_loss(const Tensor& log_probs, const Tensor& targets, Reduction reduction,
                const Tensor& weight, int64_t ignore_index) {
    SizesUnobserved quiet;
    KILN_CHECK(targets.dtype() == int64, "nll_loss: expected int64 class indices, got ",
               targets.dtype(), " ", targets.shape());
    ClassRows r = class_rows(log_probs, targets, true, "nll_loss");
    check_weight(weight, r.rows.size(1), "nll_loss");
    auto [loss, counts] = picked_loss(r.rows, r.targets, weight, ignore_index, "nll_loss");
    if (reduction == Reduction::mean) return loss.sum() / counts.sum();
    return reduce_rows(loss, reduction, r.sample_shape);
}

// PyTorch's label smoothing: (1 - eps) * nll + eps / C * (-sum over classes of weight_c *
// log_probs_c), the second term 0 for ignored rows and, for the mean, divided by the same
// weights as the first.
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, Reduction reduction,
                     const Tensor& weight, int64_t ignore_index, double label_smoothing) {
    SizesUnobserved quiet;
    KILN_CHECK(label_smoothing >= 0 && label_smoothing <= 1,
               "cross_entropy: label_smoothing must be between 0.0 and 1.0, got ", label_smoothing);
    bool class_targets = !is_floating(targets.dtype());
    ClassRows r = class_rows(logits, targets, class_targets, "cross_entropy");
    int64_t C = r.rows.size(1);
    check_weight(weight, C, "cross_entropy");
    Tensor log_probs = r.rows.log_softmax(1);
    Tensor w_row = weight.defined() ? weight.unsqueeze(0) : Tensor();
    if (!class_targets) {  // probabilities: the mean is over samples, weighted or not
        Tensor p = label_smoothing > 0
                       ? r.targets * (1 - label_smoothing) + label_smoothing / double(C)
                       : r.targets;
        Tensor terms = p * log_probs;
        if (w_row.defined()) terms = terms * w_row;
        return reduce_rows(-terms.sum({1}), reduction, r.sample_shape);
    }
    KILN_CHECK(targets.dtype() == int64,
               "cross_entropy: expected int64 class indices or float probabilities, got ",
               targets.dtype());
    auto [loss, counts] = picked_loss(log_probs, r.targets, weight, ignore_index, "cross_entropy");
    if (label_smoothing > 0) {
        Tensor all = w_row.defined() ? (log_probs * w_row).sum({1}) : log_probs.sum({1});
        Tensor smooth = where(ne(r.targets, double(ignore_index)), -all, 0.0);
        loss = loss * (1 - label_smoothing) + smooth * (label_smoothing / double(C));
    }
    if (reduction == Reduction::mean) return loss.sum() / counts.sum();
    return reduce_rows(loss, reduction, r.sample_shape);
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

Tensor attention_weights(const Tensor& q, const Tensor& k, const Tensor& attn_mask, bool is_causal, std::optional<double> scale) {
    KILN_CHECK(q.dim() >= 2 && k.dim() >= 2, "scaled_dot_product_attention: expected q, k, v with at least 2 dims, got ", q.shape(),
               " and ", k.shape());
    KILN_CHECK(q.size(-1) == k.size(-1), "scaled_dot_product_attention: q ", q.shape(), " and k ", k.shape(),
               " must have the same last dim");
    KILN_CHECK(!(is_causal && attn_mask.defined()), "scaled_dot_product_attention: give attn_mask or is_causal, not both");
    double s = scale.value_or(1.0 / std::sqrt(double(q.size(-1))));
    Tensor scores = matmul(q, k.transpose(-2, -1)) * s;  // [..., L, S]
    int64_t L = q.size(-2), S = k.size(-2);
    if (S == 0) return scores;  // no key: no weights, and attention's result is zeros (PyTorch's)
    if (is_causal) {
        TensorOptions on = {.device = scores.device()};
        Tensor above = arange(double(L), on).unsqueeze(1) < arange(double(S), on).unsqueeze(0);  // key after the query
        scores = masked_fill(scores, above, -INFINITY);
    } else if (attn_mask.defined()) {
        scores = attn_mask.dtype() == DType::boolean ? masked_fill(scores, eq(attn_mask, 0.0), -INFINITY) : scores + attn_mask;
        // A query whose every key is masked out attends to nothing: zeros, as PyTorch's
        // _safe_softmax, not softmax's 0/0. Its scores become 0 first, so that neither the
        // softmax nor its gradient sees -inf - -inf (the where's gradient there is 0).
        Tensor none = scores.amax({-1}, true) == -INFINITY;  // [..., L, 1]
        Tensor p = kiln::softmax(masked_fill(scores, none, 0.0), -1);
        return where(none, 0.0, p);
    }
    return kiln::softmax(scores, -1);
}

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& attn_mask, bool is_causal,
                                    std::optional<double> scale, double dropout_p) {
    KILN_CHECK(q.dim() >= 2 && k.dim() >= 2 && v.dim() >= 2, "scaled_dot_product_attention: expected q, k, v with at least 2 dims, got ",
               q.shape(), ", ", k.shape(), ", ", v.shape());
    KILN_CHECK(k.size(-2) == v.size(-2), "scaled_dot_product_attention: k ", k.shape(), " and v ", v.shape(),
               " must have the same number of positions");
    KILN_CHECK(dropout_p >= 0 && dropout_p <= 1, "scaled_dot_product_attention: dropout_p must be between 0 and 1, got ", dropout_p);
    // On CUDA, without a mask tensor, dropout or a gradient to record: the table op attention,
    // one kernel with the weights never written (PyTorch's flash and memory-efficient
    // kernels). The CPU keeps the composition, which the inductor fuses into its row kernels.
    bool records_gradients = autograd::grad_enabled() && (q.requires_grad() || k.requires_grad() || v.requires_grad());
    if (q.device().type == DeviceType::cuda && !attn_mask.defined() && dropout_p == 0 && !records_gradients &&
        q.size(-1) <= kAttentionMaxFeatures && v.size(-1) <= kAttentionMaxFeatures) {
        KILN_CHECK(q.size(-1) == k.size(-1), "scaled_dot_product_attention: q ", q.shape(), " and k ", k.shape(),
                   " must have the same last dim");
        return kiln::attention(q, k, v, scale.value_or(1.0 / std::sqrt(double(q.size(-1)))), is_causal);
    }
    Tensor w = attention_weights(q, k, attn_mask, is_causal, scale);
    if (dropout_p > 0) w = dropout(w, dropout_p, true);
    return matmul(w, v);
}

}  // namespace kiln::nn::functional
