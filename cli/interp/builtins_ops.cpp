// Builtins for the composites every tutorial reaches for (tensor/composites.cpp and the
// nn layers built from them): torch.stack, clamp, argmax, var/std, masked_fill, chunk/split,
// bmm, F.gelu/silu/dropout/layer_norm, nn.LayerNorm/Dropout/GELU/SiLU, as functions and as
// Tensor methods, with PyTorch's parameter names. (Factories such as eye and linspace are
// with the others in builtins_tensor.cpp.)
#include "cli/interp/builtins.h"
#include "cli/interp/operators.h"
#include "nn/conv.h"
#include "nn/functional.h"
#include "nn/layers.h"

namespace kiln::interp {
namespace {

namespace Fn = kiln::nn::functional;

// Functions take `input` first; a method's receiver stands for it, so parameter i of the
// function is parameter i-1 of the method.
Tensor input(Bound& b) { return b.self.is<Tensor>() ? b.self_tensor() : b.tensor(0); }
size_t arg(Bound& b, size_t i) { return b.self.is<Tensor>() ? i - 1 : i; }

Value tensors_tuple(const std::vector<Tensor>& ts) {
    std::vector<Value> items(ts.begin(), ts.end());
    return make_tuple(std::move(items));
}
std::optional<double> optional_number(Bound& b, size_t i) {
    if (!b.has(i)) return std::nullopt;
    const Value& v = b.value(i);
    if (auto t = v.as<Tensor>(); t && t->numel() == 1) return t->item<double>();
    return b.number(i);
}

Value b_stack(Bound& b) {
    std::vector<Tensor> ts;
    for (const Value& v : iterate(b.in, b.value(0))) ts.push_back(to_tensor(b.in, v, "stack() element"));
    return stack(ts, b.integer_or(1, 0));
}
Value b_clamp(Bound& b) { return clamp(input(b), optional_number(b, arg(b, 1)), optional_number(b, arg(b, 2))); }
Value m_round(Bound& b) { return kiln::round(b.self_tensor(), b.has(0) ? b.integer(0) : 0); }
Value b_argmax(Bound& b) {
    std::optional<int64_t> dim;
    if (b.has(arg(b, 1))) dim = b.integer(arg(b, 1));
    bool keep = b.flag_or(arg(b, 2), false);
    return b.fn.name.ends_with("argmax") ? argmax(input(b), dim, keep) : argmin(input(b), dim, keep);
}
// var/std(input, dim=None, unbiased=None, keepdim=False, correction=None): PyTorch's two forms.
Value b_var(Bound& b) {
    Shape dims = b.has(arg(b, 1)) ? b.dims(arg(b, 1)) : Shape{};
    double correction = 1;
    if (b.has(arg(b, 2))) correction = b.in.truthy(b.value(arg(b, 2))) ? 1 : 0;
    if (b.has(arg(b, 4))) correction = b.number(arg(b, 4));
    bool keep = b.flag_or(arg(b, 3), false);
    return b.fn.name.ends_with("std") ? kiln::std(input(b), dims, correction, keep) : var(input(b), dims, correction, keep);
}
Value b_masked_fill(Bound& b) {
    std::optional<double> v = optional_number(b, arg(b, 2));
    if (!v) b.type_error(arg(b, 2), "a number or a 0-d tensor");
    return masked_fill(input(b), b.tensor(arg(b, 1)), *v);
}
Value b_chunk(Bound& b) { return tensors_tuple(chunk(input(b), b.integer(arg(b, 1)), b.integer_or(arg(b, 2), 0))); }
Value b_split(Bound& b) {
    const Value& how = b.value(arg(b, 1));
    int64_t dim = b.integer_or(arg(b, 2), 0);
    if (auto n = as_int(how)) return tensors_tuple(split(input(b), *n, dim));
    std::vector<int64_t> sizes;
    for (const Value& v : iterate(b.in, how)) {
        auto n = as_int(v);
        if (!n) b.in.raise("TypeError", "split(): split sizes must be ints, not " + type_name(v));
        sizes.push_back(*n);
    }
    return tensors_tuple(split(input(b), sizes, dim));
}
Value b_bmm(Bound& b) { return bmm(input(b), b.tensor(arg(b, 1))); }

Value b_gelu(Bound& b) { return Fn::gelu(b.tensor(0), b.has(1) ? b.string(1) : "none"); }
Value b_silu(Bound& b) { return Fn::silu(b.tensor(0)); }
Value b_dropout(Bound& b) { return Fn::dropout(b.tensor(0), b.number_or(1, 0.5), b.flag_or(2, true)); }
Shape shape_arg(Bound& b, size_t i) {
    if (auto n = as_int(b.value(i))) return {*n};
    return b.dims(i);
}
Value b_layer_norm(Bound& b) {
    Tensor w = b.has(2) ? b.tensor(2) : Tensor(), bias = b.has(3) ? b.tensor(3) : Tensor();
    return Fn::layer_norm(b.tensor(0), shape_arg(b, 1), w, bias, b.number_or(4, 1e-5));
}
Value b_layer_norm_module(Bound& b) {
    return ModulePtr(std::make_shared<nn::LayerNorm>(shape_arg(b, 0), b.number_or(1, 1e-5), b.flag_or(2, true)));
}
Value b_dropout_module(Bound& b) { return ModulePtr(std::make_shared<nn::Dropout>(b.number_or(0, 0.5))); }
Value b_gelu_module(Bound& b) { return ModulePtr(std::make_shared<nn::GELU>(b.has(0) ? b.string(0) : "none")); }
Value b_silu_module(Bound&) { return ModulePtr(std::make_shared<nn::SiLU>()); }

// An int n (n, n) or a pair (h, w), as PyTorch's _pair; `fallback` when the argument is absent or None.
nn::Pair pair_arg(Bound& b, size_t i, nn::Pair fallback) {
    if (!b.has(i) || b.value(i).is<None>()) return fallback;
    if (auto n = as_int(b.value(i))) return {*n, *n};
    std::vector<int64_t> v;
    for (const Value& item : iterate(b.in, b.value(i))) {
        auto n = as_int(item);
        if (!n) b.type_error(i, "an int or a tuple of 2 ints");
        v.push_back(*n);
    }
    if (v.size() != 2) b.type_error(i, "an int or a tuple of 2 ints");
    return {v[0], v[1]};
}
Value b_conv2d(Bound& b) {
    Tensor bias = b.has(2) && !b.value(2).is<None>() ? b.tensor(2) : Tensor();
    return conv2d(b.tensor(0), b.tensor(1), bias, pair_arg(b, 3, {1, 1}), pair_arg(b, 4, {0, 0}), pair_arg(b, 5, {1, 1}),
                  b.integer_or(6, 1));
}
// max: kernel_size, stride=None (the kernel), padding=0, dilation=1, ceil_mode=False,
// return_indices=False
Window2d max_window(Bound& b, size_t first) {
    nn::Pair k = pair_arg(b, first, {0, 0});
    return {k, pair_arg(b, first + 1, k), pair_arg(b, first + 2, {0, 0}),
            pair_arg(b, first + 3, {1, 1}), b.flag_or(first + 4, false)};
}
// avg: kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
// divisor_override=None
Window2d avg_window(Bound& b, size_t first) {
    nn::Pair k = pair_arg(b, first, {0, 0});
    return {k,
            pair_arg(b, first + 1, k),
            pair_arg(b, first + 2, {0, 0}),
            {1, 1},
            b.flag_or(first + 3, false),
            b.flag_or(first + 4, true),
            b.integer_or(first + 5, 0)};
}
Value b_max_pool2d(Bound& b) {
    if (!b.flag_or(6, false)) return max_pool2d(b.tensor(0), max_window(b, 1));
    auto [values, indices] = max_pool2d_with_indices(b.tensor(0), max_window(b, 1));
    return make_tuple({Value(values), Value(indices)});
}
Value b_avg_pool2d(Bound& b) { return avg_pool2d(b.tensor(0), avg_window(b, 1)); }
Value b_adaptive_avg_pool2d(Bound& b) { return adaptive_avg_pool2d(b.tensor(0), pair_arg(b, 1, {1, 1})); }
Value b_adaptive_max_pool2d(Bound& b) {
    return adaptive_max_pool2d(b.tensor(0), pair_arg(b, 1, {1, 1}));
}
Value b_conv2d_module(Bound& b) {
    return ModulePtr(std::make_shared<nn::Conv2d>(b.integer(0), b.integer(1), pair_arg(b, 2, {1, 1}), pair_arg(b, 3, {1, 1}),
                                                  pair_arg(b, 4, {0, 0}), pair_arg(b, 5, {1, 1}), b.integer_or(6, 1), b.flag_or(7, true)));
}
Value b_max_pool2d_module(Bound& b) {
    Window2d w = max_window(b, 0);
    return ModulePtr(
        std::make_shared<nn::MaxPool2d>(w.kernel, w.stride, w.padding, w.dilation, w.ceil_mode));
}
Value b_avg_pool2d_module(Bound& b) {
    Window2d w = avg_window(b, 0);
    return ModulePtr(std::make_shared<nn::AvgPool2d>(w.kernel, w.stride, w.padding, w.ceil_mode,
                                                     w.count_include_pad, w.divisor_override));
}
Value b_adaptive_avg_pool2d_module(Bound& b) { return ModulePtr(std::make_shared<nn::AdaptiveAvgPool2d>(pair_arg(b, 0, {1, 1}))); }
Value b_adaptive_max_pool2d_module(Bound& b) {
    return ModulePtr(std::make_shared<nn::AdaptiveMaxPool2d>(pair_arg(b, 0, {1, 1})));
}
Value b_gather(Bound& b) { return gather(input(b), b.integer(arg(b, 1)), b.tensor(arg(b, 2))); }
Value b_scatter_add(Bound& b) { return scatter_add(input(b), b.integer(arg(b, 1)), b.tensor(arg(b, 2)), b.tensor(arg(b, 3))); }
Value b_index_select(Bound& b) { return index_select(input(b), b.integer(arg(b, 1)), b.tensor(arg(b, 2))); }
Value b_embedding(Bound& b) { return embedding(b.tensor(0), b.tensor(1)); }
Value b_embedding_module(Bound& b) { return ModulePtr(std::make_shared<nn::Embedding>(b.integer(0), b.integer(1))); }
Value b_batch_norm(Bound& b) {
    auto opt = [&](size_t i) { return b.has(i) && !b.value(i).is<None>() ? b.tensor(i) : Tensor(); };
    return Fn::batch_norm(b.tensor(0), opt(1), opt(2), opt(3), opt(4), b.flag_or(5, false), b.number_or(6, 0.1), b.number_or(7, 1e-5));
}
Value b_batch_norm_module(Bound& b) {  // momentum=None: the cumulative average
    bool none = b.params.size() > 2 && b.params[2] && b.params[2]->is_none();
    std::optional<double> momentum =
        none ? std::nullopt : std::optional<double>(b.number_or(2, 0.1));
    return ModulePtr(std::make_shared<nn::BatchNorm2d>(b.integer(0), b.number_or(1, 1e-5), momentum,
                                                       b.flag_or(3, true), b.flag_or(4, true)));
}
// PyTorch's positions: (query, key, value, attn_mask, dropout_p, is_causal, scale); dropout_p
// applies whenever it is > 0, as PyTorch's function (pass 0 in eval).
Value b_sdpa(Bound& b) {
    Tensor mask = b.has(3) ? b.tensor(3) : Tensor();
    std::optional<double> scale;
    if (b.has(6)) scale = b.number(6);
    return Fn::scaled_dot_product_attention(b.tensor(0), b.tensor(1), b.tensor(2), mask, b.flag_or(5, false), scale,
                                            b.number_or(4, 0.0));
}
Value b_flatten_module(Bound& b) { return ModulePtr(std::make_shared<nn::Flatten>(b.integer_or(0, 1), b.integer_or(1, -1))); }

const Builtin kOps[] = {
    {"stack", "tensors, dim=0", b_stack, "join tensors of one shape along a new dim"},
    // Python's round and torch.round share the name; this entry replaces the table op's.
    {"round", "number, ndigits=None, decimals=None", b_round,
     "round half to even (a tensor: elementwise, to decimals places)"},
    {"Tensor.round", "decimals=0", m_round, ""},
    {"clamp", "input, min=None, max=None", b_clamp, "min(max(x, min), max)"},
    {"clip", "input, min=None, max=None", b_clamp, "clamp"},
    {"Tensor.clamp", "min=None, max=None", b_clamp, ""},
    {"Tensor.clip", "min=None, max=None", b_clamp, ""},
    {"argmax", "input, dim=None, keepdim=False", b_argmax,
     "index of the first largest element (int64)"},
    {"argmin", "input, dim=None, keepdim=False", b_argmax,
     "index of the first smallest element (int64)"},
    {"Tensor.argmax", "dim=None, keepdim=False", b_argmax, ""},
    {"Tensor.argmin", "dim=None, keepdim=False", b_argmax, ""},
    {"var", "input, dim=None, unbiased=None, keepdim=False, correction=None", b_var,
     "variance (correction 1 by default)"},
    {"std", "input, dim=None, unbiased=None, keepdim=False, correction=None", b_var,
     "standard deviation"},
    {"Tensor.var", "dim=None, unbiased=None, keepdim=False, correction=None", b_var, ""},
    {"Tensor.std", "dim=None, unbiased=None, keepdim=False, correction=None", b_var, ""},
    {"masked_fill", "input, mask, value", b_masked_fill, "value where mask is True"},
    {"Tensor.masked_fill", "mask, value", b_masked_fill, ""},
    {"chunk", "input, chunks, dim=0", b_chunk, "a tuple of views: chunks pieces along dim"},
    {"Tensor.chunk", "chunks, dim=0", b_chunk, ""},
    {"split", "tensor, split_size_or_sections, dim=0", b_split,
     "a tuple of views of the given size(s)"},
    {"Tensor.split", "split_size_or_sections, dim=0", b_split, ""},
    {"bmm", "input, mat2", b_bmm, "batched matrix product of 3-d tensors"},
    {"Tensor.bmm", "mat2", b_bmm, ""},
    {"F.gelu", "input, approximate='none'", b_gelu, "x * Phi(x) (erf, or the tanh approximation)"},
    {"F.silu", "input", b_silu, "x * sigmoid(x)"},
    {"F.dropout", "input, p=0.5, training=True", b_dropout,
     "zero with probability p, scale the rest by 1/(1-p)"},
    {"F.layer_norm", "input, normalized_shape, weight=None, bias=None, eps=1e-05", b_layer_norm,
     "normalize the last dims"},
    {"nn.LayerNorm", "normalized_shape, eps=1e-05, elementwise_affine=True", b_layer_norm_module,
     "layer normalization"},
    {"nn.Dropout", "p=0.5", b_dropout_module, "dropout while training"},
    {"nn.GELU", "approximate='none'", b_gelu_module, "GELU as a module"},
    {"nn.SiLU", "", b_silu_module, "SiLU as a module"},
    {"F.conv2d", "input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1", b_conv2d,
     "2-d convolution over [N, C, H, W]"},
    {"F.max_pool2d",
     "input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, "
     "return_indices=False",
     b_max_pool2d, "max over each window"},
    {"F.avg_pool2d",
     "input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True, "
     "divisor_override=None",
     b_avg_pool2d, "mean over each window"},
    {"F.adaptive_avg_pool2d", "input, output_size", b_adaptive_avg_pool2d,
     "mean over PyTorch's bins for the output size"},
    {"F.adaptive_max_pool2d", "input, output_size", b_adaptive_max_pool2d,
     "max over PyTorch's bins for the output size"},
    {"nn.Conv2d",
     "in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True",
     b_conv2d_module, "2-d convolution layer"},
    {"nn.MaxPool2d", "kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False",
     b_max_pool2d_module, "max pooling layer"},
    {"nn.AvgPool2d",
     "kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True, "
     "divisor_override=None",
     b_avg_pool2d_module, "average pooling layer"},
    {"nn.AdaptiveAvgPool2d", "output_size", b_adaptive_avg_pool2d_module,
     "adaptive average pooling layer"},
    {"nn.AdaptiveMaxPool2d", "output_size", b_adaptive_max_pool2d_module,
     "adaptive max pooling layer"},
    {"nn.Flatten", "start_dim=1, end_dim=-1", b_flatten_module, "flatten dims into one"},
    {"gather", "input, dim, index", b_gather, "values at an int64 index along dim"},
    {"Tensor.gather", "dim, index", b_gather, ""},
    {"scatter_add", "input, dim, index, src", b_scatter_add,
     "input with src added at the indexed places"},
    {"Tensor.scatter_add", "dim, index, src", b_scatter_add, ""},
    {"index_select", "input, dim, index", b_index_select, "slices at a 1-d int64 index"},
    {"Tensor.index_select", "dim, index", b_index_select, ""},
    {"F.embedding", "input, weight", b_embedding, "rows of weight for an int64 index"},
    {"nn.Embedding", "num_embeddings, embedding_dim", b_embedding_module,
     "a lookup table of vectors"},
    {"F.batch_norm",
     "input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1, "
     "eps=1e-05",
     b_batch_norm, "normalize per channel (batch or running statistics)"},
    {"nn.BatchNorm2d",
     "num_features, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True",
     b_batch_norm_module, "batch normalization layer"},
    {"F.scaled_dot_product_attention",
     "query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None", b_sdpa,
     "softmax(q k^T * scale) v, optionally causal, with dropout on the weights"},
};

}  // namespace

std::span<const Builtin> ops_builtins() { return kOps; }

}  // namespace kiln::interp
