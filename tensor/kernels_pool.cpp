// max_pool2d_index: for each pooling window of an [N, C, H, W] image, the index into the H*W
// plane of its first maximum (a NaN counts as the maximum, as PyTorch's pooling), int64
// [N, C, OH, OW]. max_pool2d gathers its values through it, so its gradient (gather's:
// scatter_add) goes wholly to that one element (tensor/composites_conv.cpp).
#include <algorithm>
#include <cmath>
#include <vector>

#include "tensor/kernels.h"
#include "tensor/parallel.h"

namespace kiln {
namespace {

// One window entry over a row of outputs [lo, hi): output ow's entry is row[ow * sw + off], at
// plane index h_w + ow * sw + off. It becomes the output's maximum when the output has none
// yet (best_i < 0), or is larger, or is the first NaN (a NaN maximum stays). Branch-free and
// without a carried dependence, so the compiler vectorizes it (a branch per compare is
// mispredicted half the time on random data).
template <typename T>
void window_entry(const T* __restrict row, T* __restrict best_v, int64_t* __restrict best_i,
                  int64_t lo, int64_t hi, int64_t sw, int64_t off, int64_t h_w) {
    for (int64_t ow = lo; ow < hi; ++ow) {
        T v = row[ow * sw + off], b = best_v[ow];
        int64_t i = best_i[ow];
        bool take = (i < 0) | ((b == b) & ((v > b) | (v != v)));
        best_v[ow] = take ? v : b;
        best_i[ow] = take ? h_w + ow * sw + off : i;
    }
}

}  // namespace

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
                    // One output row at a time, entry by entry in the window's order (so the
                    // first maximum wins), each entry over the outputs whose window holds it.
                    std::vector<T> best_v(static_cast<size_t>(OW));
                    std::vector<int64_t> best_i(static_cast<size_t>(OW));
                    for (int64_t nc = begin; nc < end; ++nc) {
                        const T* plane = s + nc * H * W;
                        int64_t* idx = o + nc * OH * OW;
                        for (int64_t oh = 0; oh < OH; ++oh) {
                            T* bv = best_v.data();
                            int64_t* bi = best_i.data();
                            std::fill(bi, bi + OW, int64_t(-1));
                            std::fill(bv, bv + OW, T(0));
                            for (int64_t i = 0; i < kh; ++i) {
                                int64_t h = oh * sh - ph + i * dh;
                                if (h < 0 || h >= H) continue;
                                const T* row = plane + h * W;
                                for (int64_t j = 0; j < kw; ++j) {
                                    // the outputs ow with 0 <= ow * sw - pw + j * dw < W
                                    int64_t off = j * dw - pw;
                                    int64_t lo = off >= 0 ? 0 : (-off + sw - 1) / sw;
                                    int64_t hi = W - 1 - off < 0 ? 0 : (W - 1 - off) / sw + 1;
                                    hi = std::min(hi, OW);
                                    window_entry(row, bv, bi, lo, hi, sw, off, h * W);
                                }
                            }
                            for (int64_t ow = 0; ow < OW; ++ow) {
                                if (bi[ow] < 0) empty_window = true;  // only ever set to true
                                idx[oh * OW + ow] = bi[ow] < 0 ? 0 : bi[ow];
                            }
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
