// conv2d and its two gradients on CUDA tensors through cuDNN (tensor/cudnn.h): the table ops'
// kernels (tensor/kernels_conv_dnnl.cpp) call these first. Each returns an undefined tensor
// when cuDNN does not take its inputs (off, not loaded, mixed dtypes, an empty tensor, a
// geometry it cannot plan), and the caller runs im2col + GEMM, the reference path.
#include <cstdlib>

#include "tensor/cudnn.h"
#include "tensor/kernels.h"

namespace kiln {
namespace {

using cuda::detail::CudnnConv;

bool on_cuda_float(const Tensor& t) {
    return t.device().type == DeviceType::cuda &&
           (t.dtype() == DType::float32 || t.dtype() == DType::float64);
}

// Every tensor a CUDA float tensor of one dtype, none empty, and cuDNN on.
bool usable(std::initializer_list<const Tensor*> ts) {
    for (const Tensor* t : ts)
        if (!on_cuda_float(*t) || t->dtype() != (*ts.begin())->dtype() || t->numel() == 0)
            return false;
    return cuda::detail::cudnn_enabled();
}

// x [N, C, H, W], weight [O, C / groups, kh, kw]; attrs.shape = {kh, kw, sh, sw, ph, pw, dh, dw},
// attrs.dim = groups (tensor/ops.def).
CudnnConv geometry(const Shape& x, const Shape& w, const Attrs& a) {
    KILN_CHECK(a.shape.size() == 8 && a.dim > 0,
               "conv2d (cuDNN): expected 8 window attributes and groups > 0, got ", a.shape,
               " and ", a.dim);
    return {.n = x[0],
            .c = x[1],
            .h = x[2],
            .w = x[3],
            .o = w[0],
            .kh = w[2],
            .kw = w[3],
            .sh = a.shape[2],
            .sw = a.shape[3],
            .ph = a.shape[4],
            .pw = a.shape[5],
            .dh = a.shape[6],
            .dw = a.shape[7],
            .groups = a.dim,
            .f64 = false};
}

void* data(const Tensor& t) { return t.raw_data(); }

}  // namespace

bool detail::conv_uses_cudnn(const Tensor& t) {
    return on_cuda_float(t) && cuda::detail::cudnn_enabled();
}
int64_t detail::cudnn_conv_calls() { return cuda::detail::cudnn_stats().calls; }

Tensor cudnn_conv2d(std::span<const Tensor> in, const Attrs& a) {
    const Tensor& x0 = in[0];
    const Tensor& w0 = in[1];
    Tensor bias0 = in.size() == 3 ? in[2] : Tensor();
    if (!(bias0.defined() ? usable({&x0, &w0, &bias0}) : usable({&x0, &w0}))) return {};
    Tensor x = x0.contiguous(), w = w0.contiguous(),
           bias = bias0.defined() ? bias0.contiguous() : Tensor();
    CudnnConv g = geometry(x.shape(), w.shape(), a);
    g.f64 = x.dtype() == DType::float64;
    Tensor y = empty({g.n, g.o, g.out_h(), g.out_w()}, x.dtype(), x.device());
    bool ran = cuda::detail::cudnn_conv_forward(g, data(x), data(w),
                                                bias.defined() ? data(bias) : nullptr, data(y));
    return ran ? y : Tensor();
}

// (grad_out [N, O, OH, OW], weight) -> grad input [N, C, H, W], with (H, W) = attrs.dims.
Tensor cudnn_conv2d_input_grad(std::span<const Tensor> in, const Attrs& a) {
    if (!usable({&in[0], &in[1]}) || a.dims.size() != 2) return {};
    Tensor dy = in[0].contiguous(), w = in[1].contiguous();
    Shape x_shape = {dy.size(0), w.size(1) * a.dim, a.dims[0], a.dims[1]};
    CudnnConv g = geometry(x_shape, w.shape(), a);
    g.f64 = dy.dtype() == DType::float64;
    Tensor dx = empty(x_shape, dy.dtype(), dy.device());
    return cuda::detail::cudnn_conv_input_grad(g, data(dy), data(w), data(dx)) ? dx : Tensor();
}

// (x, grad_out) -> grad weight [O, C / groups, kh, kw].
Tensor cudnn_conv2d_weight_grad(std::span<const Tensor> in, const Attrs& a) {
    if (!usable({&in[0], &in[1]})) return {};
    Tensor x = in[0].contiguous(), dy = in[1].contiguous();
    Shape w_shape = {dy.size(1), x.size(1) / a.dim, a.shape[0], a.shape[1]};
    CudnnConv g = geometry(x.shape(), w_shape, a);
    g.f64 = x.dtype() == DType::float64;
    Tensor dw = empty(w_shape, x.dtype(), x.device());
    return cuda::detail::cudnn_conv_weight_grad(g, data(x), data(dy), data(dw)) ? dw : Tensor();
}

}  // namespace kiln
