// Convolution and pooling as Tensor code over two table ops (tensor/kernels_conv.cpp):
// unfold2d lays every window out as a column, so conv2d is one matmul (groups: a batched
// one) and pooling one reduction over the window's entries. Autograd and the JIT see only
// primitives: the derivative of unfold2d is fold2d, and the rest is matmul, amax, mean.
// A CPU float32 conv2d built with oneDNN is instead the table op conv2d
// (tensor/kernels_conv_dnnl.cpp).
#include <limits>

#include "tensor/kernels.h"

namespace kiln {
namespace {

Attrs window_attrs(std::pair<int64_t, int64_t> k, std::pair<int64_t, int64_t> stride, std::pair<int64_t, int64_t> pad,
                   std::pair<int64_t, int64_t> dilation, double pad_value) {
    return {.shape = {k.first, k.second, stride.first, stride.second, pad.first, pad.second, dilation.first, dilation.second},
            .scalar = pad_value};
}

// Before any size arithmetic (a stride of 0 would divide by zero): the values PyTorch accepts.
void check_window(const char* op, std::pair<int64_t, int64_t> k, std::pair<int64_t, int64_t> s, std::pair<int64_t, int64_t> p,
                  std::pair<int64_t, int64_t> d) {
    KILN_CHECK(k.first > 0 && k.second > 0, op, ": kernel size must be positive, got ", k.first, "x", k.second);
    KILN_CHECK(s.first > 0 && s.second > 0, op, ": stride must be positive, got ", s.first, "x", s.second);
    KILN_CHECK(p.first >= 0 && p.second >= 0, op, ": padding must be non-negative, got ", p.first, "x", p.second);
    KILN_CHECK(d.first > 0 && d.second > 0, op, ": dilation must be positive, got ", d.first, "x", d.second);
}

int64_t out_size(int64_t in, int64_t k, int64_t stride, int64_t pad, int64_t dilation) {
    return (in + 2 * pad - dilation * (k - 1) - 1) / stride + 1;
}

void check_image(const Tensor& x, const char* op) {
    KILN_CHECK(x.dim() == 4, op, ": expected a 4-D input [N, C, H, W], got shape ", x.shape());
}

// The windows of x, [N, C, k_h * k_w, OH * OW].
Tensor windows(const Tensor& x, const Window2d& w, double pad_value, const char* op) {
    check_image(x, op);
    check_window(op, w.kernel, w.stride, w.padding, w.dilation);
    KILN_CHECK(w.padding.first * 2 <= w.kernel.first && w.padding.second * 2 <= w.kernel.second, op,
               ": padding should be at most half of the kernel size, got padding ", w.padding.first, "x", w.padding.second,
               " for a ", w.kernel.first, "x", w.kernel.second, " kernel");
    Tensor cols = dispatch(OpId::unfold2d, {x}, window_attrs(w.kernel, w.stride, w.padding, w.dilation, pad_value));
    return cols.reshape({x.size(0), x.size(1), w.kernel.first * w.kernel.second, cols.size(2)});
}

Shape pooled_shape(const Tensor& x, const Window2d& w) {
    return {x.size(0), x.size(1), out_size(x.size(2), w.kernel.first, w.stride.first, w.padding.first, w.dilation.first),
            out_size(x.size(3), w.kernel.second, w.stride.second, w.padding.second, w.dilation.second)};
}

}  // namespace

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, std::pair<int64_t, int64_t> stride,
              std::pair<int64_t, int64_t> padding, std::pair<int64_t, int64_t> dilation, int64_t groups) {
    check_image(x, "conv2d");
    KILN_CHECK(weight.dim() == 4, "conv2d: expected a 4-D weight [out_channels, in_channels / groups, kH, kW], got shape ",
               weight.shape());
    KILN_CHECK(groups > 0, "conv2d: groups must be positive, got ", groups);
    int64_t C = x.size(1), O = weight.size(0), kh = weight.size(2), kw = weight.size(3);
    KILN_CHECK(C % groups == 0 && O % groups == 0, "conv2d: in_channels (", C, ") and out_channels (", O,
               ") must both be divisible by groups (", groups, ")");
    KILN_CHECK(weight.size(1) * groups == C, "conv2d: expected input with ", weight.size(1) * groups, " channels (weight ",
               weight.shape(), ", groups ", groups, "), but got input of shape ", x.shape());
    KILN_CHECK(!bias.defined() || (bias.dim() == 1 && bias.size(0) == O), "conv2d: expected a bias of shape [", O, "], got ",
               bias.defined() ? bias.shape() : Shape{});
    check_window("conv2d", {kh, kw}, stride, padding, dilation);
    int64_t OH = out_size(x.size(2), kh, stride.first, padding.first, dilation.first);
    int64_t OW = out_size(x.size(3), kw, stride.second, padding.second, dilation.second);
    KILN_CHECK(OH > 0 && OW > 0, "conv2d: the ", kh, "x", kw, " kernel (padding ", padding.first, "x", padding.second,
               ", dilation ", dilation.first, "x", dilation.second, ") is larger than the input ", x.size(2), "x", x.size(3));
    Attrs a = window_attrs({kh, kw}, stride, padding, dilation, 0.0);
    a.dim = groups;
    bool onednn = detail::conv_uses_onednn(x) && detail::conv_uses_onednn(weight) &&
                  (!bias.defined() || detail::conv_uses_onednn(bias));
    if (onednn)
        return bias.defined() ? dispatch(OpId::conv2d, {x, weight, bias}, a)
                              : dispatch(OpId::conv2d, {x, weight}, a);
    return conv2d_im2col(x, weight, bias, stride, padding, dilation, groups);
}

Tensor conv2d_im2col(const Tensor& x, const Tensor& weight, const Tensor& bias,
                     std::pair<int64_t, int64_t> stride, std::pair<int64_t, int64_t> padding,
                     std::pair<int64_t, int64_t> dilation, int64_t groups) {
    int64_t N = x.size(0), C = x.size(1), O = weight.size(0), kh = weight.size(2),
            kw = weight.size(3);
    int64_t OH = out_size(x.size(2), kh, stride.first, padding.first, dilation.first);
    int64_t OW = out_size(x.size(3), kw, stride.second, padding.second, dilation.second);
    Tensor cols = dispatch(OpId::unfold2d, {x}, window_attrs({kh, kw}, stride, padding, dilation, 0.0));  // [N, C*kh*kw, L]
    int64_t K = C / groups * kh * kw, L = OH * OW;
    Tensor out;
    if (groups == 1) {
        out = matmul(weight.reshape({O, K}), cols);  // [O, K] @ [N, K, L] -> [N, O, L]
    } else {
        Tensor w = weight.reshape({groups, O / groups, K});                      // [G, O/G, K]
        out = matmul(w, cols.reshape({N, groups, K, L})).reshape({N, O, L});     // [N, G, O/G, L]
    }
    out = out.reshape({N, O, OH, OW});
    return bias.defined() ? out + bias.reshape({1, O, 1, 1}) : out;
}

Tensor max_pool2d(const Tensor& x, const Window2d& w) {
    return windows(x, w, -std::numeric_limits<double>::infinity(), "max_pool2d").amax({2}).reshape(pooled_shape(x, w));
}

Tensor avg_pool2d(const Tensor& x, const Window2d& w) {  // count_include_pad=True, as PyTorch's default
    return windows(x, w, 0.0, "avg_pool2d").mean({2}).reshape(pooled_shape(x, w));
}

// PyTorch's bins: output cell i covers [floor(i * H / oh), ceil((i + 1) * H / oh)). When the
// sizes divide, that is one avg_pool2d; otherwise each cell is a slice and a mean.
Tensor adaptive_avg_pool2d(const Tensor& x, std::pair<int64_t, int64_t> size) {
    check_image(x, "adaptive_avg_pool2d");
    auto [oh, ow] = size;
    KILN_CHECK(oh > 0 && ow > 0, "adaptive_avg_pool2d: output size must be positive, got ", oh, "x", ow);
    int64_t H = x.size(2), W = x.size(3);
    if (H % oh == 0 && W % ow == 0) return avg_pool2d(x, {.kernel = {H / oh, W / ow}, .stride = {H / oh, W / ow}});
    std::vector<Tensor> rows;
    for (int64_t i = 0; i < oh; ++i) {
        int64_t h0 = i * H / oh, h1 = ((i + 1) * H + oh - 1) / oh;
        std::vector<Tensor> cells;
        for (int64_t j = 0; j < ow; ++j) {
            int64_t w0 = j * W / ow, w1 = ((j + 1) * W + ow - 1) / ow;
            cells.push_back(x.slice(2, h0, h1).slice(3, w0, w1).mean({2, 3}));
        }
        rows.push_back(stack(cells, -1));  // [N, C, ow]
    }
    return stack(rows, -2);  // [N, C, oh, ow]
}

}  // namespace kiln
