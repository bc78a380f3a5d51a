// Convolution and pooling as Tensor code over two table ops (tensor/kernels_conv.cpp):
// unfold2d lays every window out as a column, so conv2d is one matmul (groups: a batched
// one) and pooling one reduction over the window's entries; max pooling is the table op
// max_pool2d_index (each window's first maximum, tensor/kernels_pool.cpp) and a gather. Autograd
// and the JIT see only primitives: the derivative of unfold2d is fold2d, gather's scatter_add,
// and the rest is matmul, where, sum, mean.
// A CPU float32 conv2d built with oneDNN, and a CUDA conv2d where cuDNN loads, is instead the
// table op conv2d (tensor/kernels_conv_dnnl.cpp, tensor/kernels_conv_cudnn.cpp).
#include <algorithm>
#include <limits>

#include "autograd/node.h"  // grad_enabled(): whether max_pool2d must route a gradient
#include "tensor/kernels.h"

namespace kiln {
namespace {

Attrs window_attrs(std::pair<int64_t, int64_t> k, std::pair<int64_t, int64_t> stride,
                   std::pair<int64_t, int64_t> pad, std::pair<int64_t, int64_t> dilation,
                   double pad_value) {
    return {.shape = {k.first, k.second, stride.first, stride.second, pad.first, pad.second,
                      dilation.first, dilation.second},
            .scalar = pad_value};
}

// Before any size arithmetic (a stride of 0 would divide by zero): the values PyTorch accepts.
void check_window(const char* op, std::pair<int64_t, int64_t> k, std::pair<int64_t, int64_t> s,
                  std::pair<int64_t, int64_t> p, std::pair<int64_t, int64_t> d) {
    KILN_CHECK(k.first > 0 && k.second > 0, op, ": kernel size must be positive, got ", k.first,
               "x", k.second);
    KILN_CHECK(s.first > 0 && s.second > 0, op, ": stride must be positive, got ", s.first, "x",
               s.second);
    KILN_CHECK(p.first >= 0 && p.second >= 0, op, ": padding must be non-negative, got ", p.first,
               "x", p.second);
    KILN_CHECK(d.first > 0 && d.second > 0, op, ": dilation must be positive, got ", d.first, "x",
               d.second);
}

void check_image(const Tensor& x, const char* op) {
    KILN_CHECK(x.dim() == 4, op, ": expected a 3-D [C, H, W] or 4-D [N, C, H, W] input, got shape ",
               x.shape());
}

// PyTorch's pooling size: floor division, or with ceil_mode rounded up unless the last window
// would start in the right padding.
int64_t pooled_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode) {
    int64_t out = window_out_size(in + (ceil_mode ? s - 1 : 0), k, s, p, d);
    if (ceil_mode && (out - 1) * s >= in + p) --out;
    return out;
}

Shape pooled_shape(const Tensor& x, const Window2d& w) {
    return {x.size(0), x.size(1),
            pooled_size(x.size(2), w.kernel.first, w.stride.first, w.padding.first,
                        w.dilation.first, w.ceil_mode),
            pooled_size(x.size(3), w.kernel.second, w.stride.second, w.padding.second,
                        w.dilation.second, w.ceil_mode)};
}

// Rows (cols) of padding beyond the symmetric padding that ceil_mode's last windows reach.
std::pair<int64_t, int64_t> ceil_extra(const Tensor& x, const Window2d& w) {
    Shape out = pooled_shape(x, w);
    auto extra = [](int64_t in, int64_t out, int64_t k, int64_t s, int64_t p, int64_t d) {
        return std::max<int64_t>(0, (out - 1) * s + d * (k - 1) + 1 - (in + 2 * p));
    };
    return {
        extra(x.size(2), out[2], w.kernel.first, w.stride.first, w.padding.first, w.dilation.first),
        extra(x.size(3), out[3], w.kernel.second, w.stride.second, w.padding.second,
              w.dilation.second)};
}

// x with `before` and `after` rows (dim 2) or columns (dim 3) of `value` around it.
Tensor grow(const Tensor& x, int64_t dim, int64_t before, int64_t after, double value) {
    auto block = [&](int64_t n) {
        Shape shape = x.shape();
        shape[size_t(dim)] = n;
        return full(shape, value, {.dtype = x.dtype(), .device = x.device()});
    };
    std::vector<Tensor> parts;
    if (before > 0) parts.push_back(block(before));
    parts.push_back(x);
    if (after > 0) parts.push_back(block(after));
    return parts.size() == 1 ? x : cat(parts, dim);
}

// unfold2d of x, [N, C, k_h * k_w, OH * OW]; the padding, and the rows and columns that
// ceil_mode's last windows reach beyond it, hold pad_value.
Tensor unfold_windows(const Tensor& x, const Window2d& w, double pad_value,
                      std::pair<int64_t, int64_t> extra) {
    Tensor grown = grow(grow(x, 2, 0, extra.first, pad_value), 3, 0, extra.second, pad_value);
    Tensor cols = dispatch(OpId::unfold2d, {grown},
                           window_attrs(w.kernel, w.stride, w.padding, w.dilation, pad_value));
    return cols.reshape({x.size(0), x.size(1), w.kernel.first * w.kernel.second, cols.size(2)});
}

// avg_pool2d's divisor per window, [1, 1, OH * OW] (PyTorch's): the window sums of an image
// of ones over the input and, with count_include_pad, over the padding; ceil_mode's extra
// rows and columns, beyond the padding, count nothing.
Tensor window_counts(const Tensor& x, const Window2d& w, std::pair<int64_t, int64_t> extra) {
    auto [ph, pw] = w.padding;
    double border = w.count_include_pad ? 1.0 : 0.0;
    Tensor image = ones({1, 1, x.size(2), x.size(3)}, {.dtype = x.dtype(), .device = x.device()});
    image = grow(grow(image, 2, ph, ph, border), 3, pw, pw, border);
    image = grow(grow(image, 2, 0, extra.first, 0.0), 3, 0, extra.second, 0.0);
    Window2d unpadded = w;
    unpadded.padding = {0, 0};
    return unfold_windows(image, unpadded, 0.0, {0, 0}).sum({2});
}

// PyTorch's pooling checks; the output shape.
Shape checked_pool_shape(const Tensor& x, const Window2d& w, const char* op) {
    check_image(x, op);
    check_window(op, w.kernel, w.stride, w.padding, w.dilation);
    KILN_CHECK(w.padding.first * 2 <= w.kernel.first && w.padding.second * 2 <= w.kernel.second, op,
               ": padding should be at most half of the kernel size, got padding ", w.padding.first,
               "x", w.padding.second, " for a ", w.kernel.first, "x", w.kernel.second, " kernel");
    Shape out = pooled_shape(x, w);
    KILN_CHECK(out[2] > 0 && out[3] > 0, op, ": given input size: (", x.size(1), "x", x.size(2),
               "x", x.size(3), "). Calculated output size: (", x.size(1), "x", out[2], "x", out[3],
               "). Output size is too small (a ", w.kernel.first, "x", w.kernel.second,
               " window, stride ", w.stride.first, "x", w.stride.second, ", padding ",
               w.padding.first, "x", w.padding.second, ", dilation ", w.dilation.first, "x",
               w.dilation.second, ")");
    return out;
}

// The windows of x, [N, C, k_h * k_w, OH * OW], after PyTorch's checks.
Tensor windows(const Tensor& x, const Window2d& w, double pad_value, const char* op) {
    checked_pool_shape(x, w, op);
    return unfold_windows(x, w, pad_value, ceil_extra(x, w));
}

// Each window's first maximum (a NaN, if any) as an index into its H*W plane, [N, C, OH, OW]:
// the table op max_pool2d_index, one pass over the input.
Tensor max_index(const Tensor& x, const Window2d& w) {
    Shape out = checked_pool_shape(x, w, "max_pool2d");
    Attrs a = window_attrs(w.kernel, w.stride, w.padding, w.dilation, 0.0);
    a.dims = {out[2], out[3]};
    return dispatch(OpId::max_pool2d_index, {x}, a);
}

// x's values at a plane index [N, C, OH, OW]: a gather, whose gradient (scatter_add) sends
// each output's whole gradient to that one element, as PyTorch's max pooling.
Tensor gather_plane(const Tensor& x, const Tensor& index) {
    int64_t N = x.size(0), C = x.size(1);
    Tensor flat = dispatch(OpId::gather,
                           {x.reshape({N, C, x.size(2) * x.size(3)}),
                            index.reshape({N, C, index.size(2) * index.size(3)})},
                           {.dim = 2, .scalar = kIndexInRange});  // max_pool2d_index's: in range
    return flat.reshape(index.shape());
}

// True at the first maximum along dim (a NaN, if any: argmax's rule). Picking by this mask
// sends a max's whole gradient to that one element, as PyTorch's pooling does; amax's
// gradient would be split evenly among tied maxima.
Tensor first_max_mask(const Tensor& t, int64_t dim) {
    Shape at(size_t(t.dim()), 1);
    at[size_t(dim)] = t.size(dim);
    Tensor slot =
        arange(double(t.size(dim)), {.dtype = DType::int64, .device = t.device()}).reshape(at);
    return slot == argmax(t, dim, true);
}

Tensor pick(const Tensor& mask, const Tensor& t, int64_t dim) {
    return where(mask, t, 0.0).sum({dim});
}

// [C, H, W] runs as a batch of one, as PyTorch's unbatched inputs.
bool unbatched(const Tensor& x) { return x.dim() == 3; }

}  // namespace

void check_conv_fits(int64_t H, int64_t W, const Shape& window) {  // window: unfold2d's attrs.shape
    int64_t kh = window[0], kw = window[1], ph = window[4], pw = window[5], dh = window[6],
            dw = window[7];
    bool fits = window_out_size(H, kh, window[2], ph, dh) > 0 &&
                window_out_size(W, kw, window[3], pw, dw) > 0;
    KILN_CHECK(fits, "conv2d: calculated padded input size per channel: (", H + 2 * ph, " x ",
               W + 2 * pw, "). Kernel size: (", dh * (kh - 1) + 1, " x ", dw * (kw - 1) + 1,
               "). Kernel size can't be greater than actual input size (a ", kh, "x", kw,
               " kernel, padding ", ph, "x", pw, ", dilation ", dh, "x", dw, ", over an input of ",
               H, "x", W, ")");
}

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias,
              std::pair<int64_t, int64_t> stride, std::pair<int64_t, int64_t> padding,
              std::pair<int64_t, int64_t> dilation, int64_t groups) {
    if (unbatched(x))
        return conv2d(x.unsqueeze(0), weight, bias, stride, padding, dilation, groups).squeeze(0);
    check_image(x, "conv2d");
    KILN_CHECK(
        weight.dim() == 4,
        "conv2d: expected a 4-D weight [out_channels, in_channels / groups, kH, kW], got shape ",
        weight.shape());
    KILN_CHECK(groups > 0, "conv2d: groups must be positive, got ", groups);
    int64_t C = x.size(1), O = weight.size(0), kh = weight.size(2), kw = weight.size(3);
    KILN_CHECK(C % groups == 0 && O % groups == 0, "conv2d: in_channels (", C,
               ") and out_channels (", O, ") must both be divisible by groups (", groups, ")");
    KILN_CHECK(weight.size(1) * groups == C, "conv2d: expected input with ",
               weight.size(1) * groups, " channels (weight ", weight.shape(), ", groups ", groups,
               "), but got input of shape ", x.shape());
    KILN_CHECK(!bias.defined() || (bias.dim() == 1 && bias.size(0) == O),
               "conv2d: expected a bias of shape [", O, "], got ",
               bias.defined() ? bias.shape() : Shape{});
    check_window("conv2d", {kh, kw}, stride, padding, dilation);
    Attrs a = window_attrs({kh, kw}, stride, padding, dilation, 0.0);
    check_conv_fits(x.size(2), x.size(3), a.shape);
    a.dim = groups;
    bool onednn = detail::conv_uses_onednn(x) && detail::conv_uses_onednn(weight) &&
                  (!bias.defined() || detail::conv_uses_onednn(bias));
    bool same_dtype = x.dtype() == weight.dtype() && (!bias.defined() || bias.dtype() == x.dtype());
    bool cudnn = same_dtype && x.device().type == DeviceType::cuda && detail::conv_uses_cudnn(x) &&
                 detail::conv_uses_cudnn(weight) &&
                 (!bias.defined() || detail::conv_uses_cudnn(bias));
    if (onednn || cudnn)
        return bias.defined() ? dispatch(OpId::conv2d, {x, weight, bias}, a)
                              : dispatch(OpId::conv2d, {x, weight}, a);
    return conv2d_im2col(x, weight, bias, stride, padding, dilation, groups);
}

Tensor conv2d_im2col(const Tensor& x, const Tensor& weight, const Tensor& bias,
                     std::pair<int64_t, int64_t> stride, std::pair<int64_t, int64_t> padding,
                     std::pair<int64_t, int64_t> dilation, int64_t groups) {
    int64_t N = x.size(0), C = x.size(1), O = weight.size(0), kh = weight.size(2),
            kw = weight.size(3);
    int64_t OH = window_out_size(x.size(2), kh, stride.first, padding.first, dilation.first);
    int64_t OW = window_out_size(x.size(3), kw, stride.second, padding.second, dilation.second);
    Tensor cols =
        dispatch(OpId::unfold2d, {x},
                 window_attrs({kh, kw}, stride, padding, dilation, 0.0));  // [N, C*kh*kw, L]
    int64_t K = C / groups * kh * kw, L = OH * OW;
    Tensor out;
    if (groups == 1) {
        out = matmul(weight.reshape({O, K}), cols);  // [O, K] @ [N, K, L] -> [N, O, L]
    } else {
        Tensor w = weight.reshape({groups, O / groups, K});                   // [G, O/G, K]
        out = matmul(w, cols.reshape({N, groups, K, L})).reshape({N, O, L});  // [N, G, O/G, L]
    }
    out = out.reshape({N, O, OH, OW});
    return bias.defined() ? out + bias.reshape({1, O, 1, 1}) : out;
}

// max_pool2d_index (one pass over the input, a kernel on each device) and a gather, whose
// gradient (scatter_add) goes wholly to each window's first maximum. On the CPU without a
// gradient, while the windows' columns are small (kSmallPoolColumns), amax over unfold2d's
// columns: the first maximum is the maximum, and the inductor fuses the two into one kernel,
// faster there than the index op and the gather (ResNet-18 32x32's stem pool: 0.6 ms of a
// 6.5 ms compiled call). Past that the index op: ResNet-18 224's stem pool has 231 MB of
// columns, whose unfold2d the inductor ran as a fallback (45-60 ms of a 280 ms compiled call
// at 1 thread; docs/perf-models.md). The choice reads sizes unobserved: a graph recorded on
// one side of it and run on the other gives the same values.
constexpr int64_t kSmallPoolColumns = int64_t(1) << 22;  // float32: 16 MB
Tensor max_pool2d(const Tensor& x, const Window2d& w) {
    if (unbatched(x)) return max_pool2d(x.unsqueeze(0), w).squeeze(0);
    bool grad = autograd::grad_enabled() && x.requires_grad();
    bool small = false;
    if (!grad && x.device().type == DeviceType::cpu) {
        SizesUnobserved unobserved;
        small = shape_numel(checked_pool_shape(x, w, "max_pool2d")) * w.kernel.first *
                    w.kernel.second <=
                kSmallPoolColumns;
    }
    if (!small) return gather_plane(x, max_index(x, w));
    Tensor cols =
        windows(x, w, -std::numeric_limits<double>::infinity(), "max_pool2d");  // [N, C, K, L]
    return cols.amax({2}).reshape(pooled_shape(x, w));
}

std::pair<Tensor, Tensor> max_pool2d_with_indices(const Tensor& x, const Window2d& w) {
    if (unbatched(x)) {
        auto [v, i] = max_pool2d_with_indices(x.unsqueeze(0), w);
        return {v.squeeze(0), i.squeeze(0)};
    }
    Tensor index = max_index(x, w);
    return {gather_plane(x, index), index};
}

// count_include_pad divides by the window's size within the padded input (ceil_mode's extra
// rows and columns not counted), else by its count of input elements: both are the window
// sums of an image of ones.
Tensor avg_pool2d(const Tensor& x, const Window2d& w) {
    if (unbatched(x)) return avg_pool2d(x.unsqueeze(0), w).squeeze(0);
    Tensor cols = windows(x, w, 0.0, "avg_pool2d");
    Shape out = pooled_shape(x, w);
    if (w.divisor_override != 0) return (cols.sum({2}) / double(w.divisor_override)).reshape(out);
    std::pair<int64_t, int64_t> extra = ceil_extra(x, w);
    bool whole_windows = extra == std::pair<int64_t, int64_t>{0, 0};
    if (w.count_include_pad && whole_windows) return cols.mean({2}).reshape(out);
    return (cols.sum({2}) / window_counts(x, w, extra)).reshape(out);
}

// PyTorch's bins: output cell i covers [floor(i * H / oh), ceil((i + 1) * H / oh)). When the
// sizes divide, that is one pooling window per cell; otherwise each cell is a slice.
template <class Cell>
Tensor adaptive_pool2d(const Tensor& x, std::pair<int64_t, int64_t> size, const char* op,
                       Cell&& cell) {
    check_image(x, op);
    auto [oh, ow] = size;
    KILN_CHECK(oh > 0 && ow > 0, op, ": output size must be positive, got ", oh, "x", ow);
    int64_t H = x.size(2), W = x.size(3);
    std::vector<Tensor> rows;
    for (int64_t i = 0; i < oh; ++i) {
        int64_t h0 = i * H / oh, h1 = ((i + 1) * H + oh - 1) / oh;
        std::vector<Tensor> cells;
        for (int64_t j = 0; j < ow; ++j) {
            int64_t w0 = j * W / ow, w1 = ((j + 1) * W + ow - 1) / ow;
            cells.push_back(cell(x.slice(2, h0, h1).slice(3, w0, w1)));  // [N, C]
        }
        rows.push_back(stack(cells, -1));  // [N, C, ow]
    }
    return stack(rows, -2);  // [N, C, oh, ow]
}

Tensor adaptive_avg_pool2d(const Tensor& x, std::pair<int64_t, int64_t> size) {
    if (unbatched(x)) return adaptive_avg_pool2d(x.unsqueeze(0), size).squeeze(0);
    auto [oh, ow] = size;
    if (x.dim() == 4 && oh > 0 && ow > 0 && x.size(2) % oh == 0 && x.size(3) % ow == 0)
        return avg_pool2d(x, {.kernel = {x.size(2) / oh, x.size(3) / ow},
                              .stride = {x.size(2) / oh, x.size(3) / ow}});
    return adaptive_pool2d(x, size, "adaptive_avg_pool2d", [](const Tensor& c) {
        return c.mean({2, 3});
    });
}

Tensor adaptive_max_pool2d(const Tensor& x, std::pair<int64_t, int64_t> size) {
    if (unbatched(x)) return adaptive_max_pool2d(x.unsqueeze(0), size).squeeze(0);
    auto [oh, ow] = size;
    if (x.dim() == 4 && oh > 0 && ow > 0 && x.size(2) % oh == 0 && x.size(3) % ow == 0)
        return max_pool2d(x, {.kernel = {x.size(2) / oh, x.size(3) / ow},
                              .stride = {x.size(2) / oh, x.size(3) / ow}});
    return adaptive_pool2d(x, size, "adaptive_max_pool2d", [](const Tensor& c) {
        Tensor flat = c.reshape({c.size(0), c.size(1), c.size(2) * c.size(3)});
        return pick(first_max_mask(flat, 2), flat, 2);
    });
}

}  // namespace kiln
