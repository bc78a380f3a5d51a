// Sliding windows over images, the two ops convolution and pooling are built from
// (tensor/composites.cpp): unfold2d copies every kh×kw window of an [N, C, H, W] input into
// a column ("im2col"), so conv2d is one GEMM and pooling one reduction over the columns;
// fold2d is its adjoint, adding columns back into an image ("col2im").
#include "tensor/kernels.h"
#include "tensor/parallel.h"

namespace kiln {
namespace {

// attrs.shape = {kh, kw, stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w}.
struct Window {
    int64_t kh, kw, sh, sw, ph, pw, dh, dw;
    int64_t out_h(int64_t h) const { return window_out_size(h, kh, sh, ph, dh); }
    int64_t out_w(int64_t w) const { return window_out_size(w, kw, sw, pw, dw); }
};

Window window_of(const Attrs& a, const char* op) {
    KILN_CHECK(a.shape.size() == 8, op, ": expected 8 window attributes (kernel, stride, padding, dilation), got ", a.shape.size());
    Window w{a.shape[0], a.shape[1], a.shape[2], a.shape[3], a.shape[4], a.shape[5], a.shape[6], a.shape[7]};
    KILN_CHECK(w.kh > 0 && w.kw > 0, op, ": kernel size must be positive, got ", w.kh, "x", w.kw);
    KILN_CHECK(w.sh > 0 && w.sw > 0, op, ": stride must be positive, got ", w.sh, "x", w.sw);
    KILN_CHECK(w.dh > 0 && w.dw > 0, op, ": dilation must be positive, got ", w.dh, "x", w.dw);
    KILN_CHECK(w.ph >= 0 && w.pw >= 0, op, ": padding must be non-negative, got ", w.ph, "x", w.pw);
    return w;
}

void check_float(const Tensor& x, const char* op) {
    KILN_CHECK(is_floating(x.dtype()), op, ": expected a float32 or float64 tensor, got ", x.dtype());
}

}  // namespace

Tensor forward_unfold2d(std::span<const Tensor> in, const Attrs& a) {
    const Tensor& x = in[0];
    check_float(x, "unfold2d");
    KILN_CHECK(x.dim() == 4, "unfold2d: expected an [N, C, H, W] input, got shape ", x.shape());
    Window w = window_of(a, "unfold2d");
    int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
    int64_t OH = w.out_h(H), OW = w.out_w(W);
    KILN_CHECK(OH > 0 && OW > 0, "unfold2d: a ", w.kh, "x", w.kw, " window (dilation ", w.dh, "x", w.dw, ", padding ", w.ph, "x",
               w.pw, ") does not fit an input of ", H, "x", W);
    if (x.device().type == DeviceType::cuda) return cuda_unfold2d(x, a.shape, OH, OW, a.scalar);
    Tensor src = contiguous_as(x, x.dtype());
    Tensor out = empty({N, C * w.kh * w.kw, OH * OW}, x.dtype());
    visit_dtype(x.dtype(), [&](auto tag) {
        using T = decltype(tag);
        if constexpr (std::is_floating_point_v<T>) {
            const T* s = ptr<T>(src);
            T* o = ptr<T>(out);
            T pad = T(a.scalar);
            parallel_for(N * C, 1, [&](int64_t begin, int64_t end) {
                for (int64_t nc = begin; nc < end; ++nc) {
                    const T* plane = s + nc * H * W;
                    T* col = o + nc * w.kh * w.kw * OH * OW;  // rows (c, i, j) of image n, c
                    for (int64_t i = 0; i < w.kh; ++i)
                        for (int64_t j = 0; j < w.kw; ++j, col += OH * OW)
                            for (int64_t oh = 0; oh < OH; ++oh) {
                                int64_t h = oh * w.sh - w.ph + i * w.dh;
                                for (int64_t ow = 0; ow < OW; ++ow) {
                                    int64_t x_ = ow * w.sw - w.pw + j * w.dw;
                                    bool inside = h >= 0 && h < H && x_ >= 0 && x_ < W;
                                    col[oh * OW + ow] = inside ? plane[h * W + x_] : pad;
                                }
                            }
                }
            });
        }
    });
    return out;
}

// The padding positions take no gradient; every other column entry adds into its pixel.
std::vector<Tensor> backward_unfold2d(const BackwardArgs& b) {
    Attrs f = b.attrs;
    f.scalar = 0;
    f.dims = {b.input_shapes[0][2], b.input_shapes[0][3]};
    return {dispatch(OpId::fold2d, {b.grad}, f)};
}

Tensor forward_fold2d(std::span<const Tensor> in, const Attrs& a) {
    const Tensor& cols = in[0];
    check_float(cols, "fold2d");
    Window w = window_of(a, "fold2d");
    KILN_CHECK(a.dims.size() == 2, "fold2d: expected the image size (H, W) in attrs.dims");
    int64_t H = a.dims[0], W = a.dims[1], OH = w.out_h(H), OW = w.out_w(W);
    KILN_CHECK(OH > 0 && OW > 0 && cols.dim() == 3 && cols.size(1) % (w.kh * w.kw) == 0 &&
                   cols.size(2) == OH * OW,
               "fold2d: columns of shape ", cols.shape(), " do not match a ", w.kh, "x", w.kw,
               " window over ", H, "x", W);
    int64_t N = cols.size(0), C = cols.size(1) / (w.kh * w.kw);
    if (cols.device().type == DeviceType::cuda) return cuda_fold2d(cols, a.shape, C, H, W, OH, OW);
    Tensor src = contiguous_as(cols, cols.dtype());
    Tensor out = zeros({N, C, H, W}, {.dtype = cols.dtype()});
    visit_dtype(cols.dtype(), [&](auto tag) {
        using T = decltype(tag);
        if constexpr (std::is_floating_point_v<T>) {
            const T* s = ptr<T>(src);
            T* o = ptr<T>(out);
            parallel_for(N * C, 1, [&](int64_t begin, int64_t end) {  // each (n, c) owns its plane
                for (int64_t nc = begin; nc < end; ++nc) {
                    T* plane = o + nc * H * W;
                    const T* col = s + nc * w.kh * w.kw * OH * OW;
                    for (int64_t i = 0; i < w.kh; ++i)
                        for (int64_t j = 0; j < w.kw; ++j, col += OH * OW)
                            for (int64_t oh = 0; oh < OH; ++oh) {
                                int64_t h = oh * w.sh - w.ph + i * w.dh;
                                if (h < 0 || h >= H) continue;
                                for (int64_t ow = 0; ow < OW; ++ow) {
                                    int64_t x_ = ow * w.sw - w.pw + j * w.dw;
                                    if (x_ >= 0 && x_ < W) plane[h * W + x_] += col[oh * OW + ow];
                                }
                            }
                }
            });
        }
    });
    return out;
}

std::vector<Tensor> backward_fold2d(const BackwardArgs& b) {
    Attrs u = b.attrs;
    u.scalar = 0;
    u.dims = {};
    return {dispatch(OpId::unfold2d, {b.grad}, u)};
}

}  // namespace kiln
