// max_pool2d_index: for each pooling window of an [N, C, H, W] image, the index into the H*W
// plane of its first maximum (a NaN counts as the maximum, as PyTorch's pooling), int64
// [N, C, OH, OW]. max_pool2d gathers its values through it, so its gradient (gather's:
// scatter_add) goes wholly to that one element (tensor/composites_conv.cpp).
#include <algorithm>
#include <cmath>

#include "tensor/kernels.h"
#include "tensor/parallel.h"

namespace kiln {

// attrs.shape = {kh, kw, stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w} (unfold2d's);
// attrs.dims = {OH, OW}: the output size (ceil_mode's included), which the composite computes.
// Window positions outside the image take no part (the -inf padding of PyTorch's pooling).
Tensor forward_max_pool2d_index(std::span<const Tensor> in, const Attrs& a) {
    const Tensor& x = in[0];
    KILN_CHECK(is_floating(x.dtype()), "max_pool2d: expected a float32 or float64 tensor, got ",
               x.dtype());
    KILN_CHECK(x.dim() == 4, "max_pool2d: expected an [N, C, H, W] input, got shape ", x.shape());
    KILN_CHECK(a.shape.size() == 8 && a.dims.size() == 2,
               "max_pool2d_index: expected 8 window attributes and the output size, got ",
               a.shape.size(), " and ", a.dims.size());
    int64_t kh = a.shape[0], kw = a.shape[1], sh = a.shape[2], sw = a.shape[3], ph = a.shape[4],
            pw = a.shape[5], dh = a.shape[6], dw = a.shape[7];
    int64_t OH = a.dims[0], OW = a.dims[1];
    KILN_CHECK(kh > 0 && kw > 0 && sh > 0 && sw > 0 && dh > 0 && dw > 0 && ph >= 0 && pw >= 0 &&
                   OH > 0 && OW > 0,
               "max_pool2d_index: bad window ", a.shape, " or output size ", a.dims);
    if (x.device().type == DeviceType::cuda)  // kernels_cuda_index.cpp, the same loop per output
        return cuda_max_pool2d_index(x, a.shape, OH, OW);
    int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
    Tensor src = contiguous_as(x, x.dtype());
    Tensor out = empty({N, C, OH, OW}, DType::int64);
    bool empty_window = false;
    visit_dtype(x.dtype(), [&](auto tag) {
        using T = decltype(tag);
        if constexpr (std::is_floating_point_v<T>) {
            const T* s = ptr<T>(src);
            int64_t* o = ptr<int64_t>(out);
            parallel_for(
                N * C,
                std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, OH * OW * kh * kw)),
                [=, &empty_window](int64_t begin,
                                   int64_t end) {  // by value: no aliasing with the stores
                    for (int64_t nc = begin; nc < end; ++nc) {
                        const T* plane = s + nc * H * W;
                        int64_t* idx = o + nc * OH * OW;
                        for (int64_t oh = 0; oh < OH; ++oh)
                            for (int64_t ow = 0; ow < OW; ++ow) {
                                // the first maximum in window order; the first NaN wins.
                                // Branch-free updates: on random data a branch per compare is
                                // mispredicted half the time.
                                int64_t best = -1;
                                T best_v = 0;
                                for (int64_t i = 0; i < kh; ++i) {
                                    int64_t h = oh * sh - ph + i * dh;
                                    if (h < 0 || h >= H) continue;
                                    for (int64_t j = 0; j < kw; ++j) {
                                        int64_t w = ow * sw - pw + j * dw;
                                        if (w < 0 || w >= W) continue;
                                        T v = plane[h * W + w];
                                        bool take = (best < 0) | ((best_v == best_v) &
                                                                  ((v > best_v) | (v != v)));
                                        best = take ? h * W + w : best;
                                        best_v = take ? v : best_v;
                                    }
                                }
                                if (best < 0) empty_window = true;  // only ever set to true
                                idx[oh * OW + ow] = best < 0 ? 0 : best;
                            }
                    }
                });
        }
    });
    KILN_CHECK(!empty_window, "max_pool2d: a window lies wholly in the padding (window ", a.shape,
               ", input ", x.shape(), ")");
    return out;
}

std::vector<Tensor> backward_max_pool2d_index(const BackwardArgs&) {
    return {};
}  // int64: no gradient

}  // namespace kiln
