// The CUDA side of the window and indexing ops (kernels_conv.cpp, kernels_index.cpp): those
// files check the arguments and work out the sizes once for both devices, then call here
// to launch. One thread per output element; fold2d sums a pixel's window entries in a
// fixed order (no atomics, so it repeats exactly); scatter_add adds with atomics, so float
// sums may round differently from run to run, as PyTorch's CUDA scatter_add does. The
// kernels' sources are the CUDA dialect's first rung (codegen/emit_eager_cuda.h), which
// kernels_cuda.cpp hands out as cuda_index_kernel_sources().
#include <map>

#include "tensor/cuda_runtime.h"
#include "tensor/kernels.h"

namespace kiln {
namespace {

using cuda::detail::kernel;
using cuda::detail::launch;

void* data(const Tensor& t) { return t.numel() ? t.raw_data() : nullptr; }

// kh kw sh sw ph pw dh dw and the image and column sizes, passed by value: laid out as the
// kernels' struct WindowArgs (codegen/emit_eager_cuda.h).
struct WindowArgs {
    long long kh, kw, sh, sw, ph, pw, dh, dw, C, H, W, OH, OW;
};
// The source of the kernel `label` names ("gather float32"), from
// cuda_index_kernel_sources() (made once).
const std::string& source(const std::string& label) {
    static const auto* sources = [] {
        auto* m = new std::map<std::string, std::string>;  // leaked, as the other caches
        for (auto& [name, text] : cuda_index_kernel_sources()) m->emplace(name, std::move(text));
        return m;
    }();
    auto it = sources->find(label);
    KILN_CHECK(it != sources->end(), "CUDA window and index kernels: none named ", label);
    return it->second;
}

WindowArgs window_args(const Shape& window, int64_t C, int64_t H, int64_t W, int64_t OH,
                       int64_t OW) {
    return {window[0], window[1], window[2], window[3], window[4], window[5], window[6],
            window[7], C,         H,         W,         OH,        OW};
}

// Runs an index kernel, then raises if it met an index out of range (a copy to the host:
// the error names the index, as on the CPU).
void run_index(DType t, bool scatter, const IndexSizes& p, const Tensor& index, const Tensor& src,
               const Tensor& out, const char* op) {
    int64_t n = index.numel();
    if (n == 0) return;
    // An index kiln made in range itself needs no check: no flag, no copy to the host (so
    // max_pool2d's gather runs inside a captured CUDA graph and never waits for the device).
    Tensor bad = p.in_range ? Tensor()
                            : full({1}, -9223372036854775807.0 - 1.0,
                                   {.dtype = DType::int64, .device = index.device()});
    void* fn = kernel(source(std::string(scatter ? "scatter_add " : "gather ") + dtype_name(t)),
                      scatter ? "kiln_scatter_add" : "kiln_gather");
    long long count = n, n_index = p.n_index, n_data = p.n_data, inner = p.inner;
    void *ip = data(index), *sp = data(src), *op_ = data(out),
         *bp = p.in_range ? nullptr : data(bad);
    void* args[] = {&count, &n_index, &n_data, &inner, &ip, &sp, &op_, &bp};
    launch(fn, n, args);
    if (p.in_range) return;
    int64_t first_bad = bad.cpu().item<int64_t>();
    KILN_CHECK(first_bad == std::numeric_limits<int64_t>::min(), op, ": index ", first_bad,
               " is out of bounds for dim ", p.dim, " with size ", p.n_data, kIndexUsers);
}

}  // namespace

namespace {

// Launches the window kernel `name` ("unfold2d", "fold2d", "max_pool2d_index"; the source for
// src's dtype), one thread per element of out, over the window and the image's sizes; `pad`
// only for unfold2d. Returns out.
Tensor run_window(const char* name, const Tensor& src, Tensor out, const Shape& window, int64_t C,
                  int64_t H, int64_t W, int64_t OH, int64_t OW, double* pad = nullptr) {
    int64_t n = out.numel();
    if (n == 0) return out;
    WindowArgs a = window_args(window, C, H, W, OH, OW);
    long long count = n;
    void *sp = data(src), *op = data(out);
    void* args[] = {&a, &count, &sp, &op, pad};
    std::string label = std::string(name) + " " + dtype_name(src.dtype());
    launch(kernel(source(label), std::string("kiln_") + name), n, args);
    return out;
}

}  // namespace

Tensor cuda_unfold2d(const Tensor& x, const Shape& window, int64_t OH, int64_t OW, double pad) {
    int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
    Tensor src = contiguous_as(x, x.dtype());
    return run_window("unfold2d", src,
                      empty({N, C * window[0] * window[1], OH * OW}, x.dtype(), x.device()), window,
                      C, H, W, OH, OW, &pad);
}

Tensor cuda_max_pool2d_index(const Tensor& x, const Shape& window, int64_t OH, int64_t OW) {
    int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
    Tensor src = contiguous_as(x, x.dtype());
    return run_window("max_pool2d_index", src, empty({N, C, OH, OW}, DType::int64, x.device()),
                      window, C, H, W, OH, OW);
}

Tensor cuda_fold2d(const Tensor& cols, const Shape& window, int64_t C, int64_t H, int64_t W,
                   int64_t OH, int64_t OW) {
    Tensor src = contiguous_as(cols, cols.dtype());
    return run_window("fold2d", src, empty({cols.size(0), C, H, W}, cols.dtype(), cols.device()),
                      window, C, H, W, OH, OW);
}

Tensor cuda_gather(const Tensor& x, const Tensor& index, const IndexSizes& p) {
    Tensor src = contiguous_as(x, x.dtype());
    Tensor idx = contiguous_as(index, DType::int64);
    Tensor out = empty(index.shape(), x.dtype(), x.device());
    run_index(x.dtype(), false, p, idx, src, out, "gather");
    return out;
}

Tensor cuda_scatter_add(const Tensor& base, const Tensor& index, const Tensor& src_in,
                        const IndexSizes& p) {
    KILN_CHECK(base.dtype() != DType::boolean,
               "scatter_add: bool tensors are not supported on CUDA");
    Tensor out = materialize(base);
    Tensor src = contiguous_as(src_in, src_in.dtype());
    Tensor idx = contiguous_as(index, DType::int64);
    run_index(base.dtype(), true, p, idx, src, out, "scatter_add");
    return out;
}

}  // namespace kiln
