// The CUDA side of the window and indexing ops (kernels_conv.cpp, kernels_index.cpp): those
// files check the arguments and work out the sizes once for both devices, then call here
// for the loops. One thread per output element; fold2d sums a pixel's window entries in a
// fixed order (no atomics, so it repeats exactly); scatter_add adds with atomics, so float
// sums may round differently from run to run, as PyTorch's CUDA scatter_add does.
#include <sstream>

#include "tensor/cuda_runtime.h"
#include "tensor/kernels.h"

namespace kiln {
namespace {

using cuda::detail::kernel;
using cuda::detail::launch;

const char* c_type(DType d) { return cuda_c_type(d); }

void* data(const Tensor& t) { return t.numel() ? t.raw_data() : nullptr; }

// kh kw sh sw ph pw dh dw and the image and column sizes, passed by value.
struct WindowArgs {
    long long kh, kw, sh, sw, ph, pw, dh, dw, C, H, W, OH, OW;
};
const char* kWindowStruct =
    "struct WindowArgs { long long kh, kw, sh, sw, ph, pw, dh, dw, C, H, W, OH, OW; };\n";

std::string unfold_source(DType t) {
    std::ostringstream s;
    s << kWindowStruct
      << "extern \"C\" __global__ void kiln_unfold2d(WindowArgs a, long long n, const " << c_type(t)
      << "* x, " << c_type(t) << "* out, double pad) {\n"
      << "    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < n; e += "
         "(long long)blockDim.x * gridDim.x) {\n"
      << "        long long ow = e % a.OW, oh = e / a.OW % a.OH, r = e / (a.OW * a.OH);  // r = "
         "(n, c, i, j)\n"
      << "        long long j = r % a.kw, i = r / a.kw % a.kh, nc = r / (a.kw * a.kh);\n"
      << "        long long h = oh * a.sh - a.ph + i * a.dh, w = ow * a.sw - a.pw + j * a.dw;\n"
      << "        bool inside = h >= 0 && h < a.H && w >= 0 && w < a.W;\n"
      << "        out[e] = inside ? x[(nc * a.H + h) * a.W + w] : (" << c_type(t) << ")pad;\n"
      << "    }\n}\n";
    return s.str();
}

// Each pixel gathers the column entries that cover it: window offsets i, j with
// h + ph - i*dh on the stride grid, in increasing (i, j) as the CPU loop adds them.
std::string fold_source(DType t) {
    std::ostringstream s;
    s << kWindowStruct
      << "extern \"C\" __global__ void kiln_fold2d(WindowArgs a, long long n, const " << c_type(t)
      << "* cols, " << c_type(t) << "* out) {\n"
      << "    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < n; e += "
         "(long long)blockDim.x * gridDim.x) {\n"
      << "        long long w = e % a.W, h = e / a.W % a.H, nc = e / (a.W * a.H);\n"
      << "        " << c_type(t) << " acc = 0;\n"
      << "        for (long long i = 0; i < a.kh; ++i) {\n"
      << "            long long oh = h + a.ph - i * a.dh;\n"
      << "            if (oh < 0 || oh % a.sh) continue;\n"
      << "            oh /= a.sh;\n"
      << "            if (oh >= a.OH) continue;\n"
      << "            for (long long j = 0; j < a.kw; ++j) {\n"
      << "                long long ow = w + a.pw - j * a.dw;\n"
      << "                if (ow < 0 || ow % a.sw) continue;\n"
      << "                ow /= a.sw;\n"
      << "                if (ow >= a.OW) continue;\n"
      << "                acc += cols[((nc * a.kh + i) * a.kw + j) * a.OH * a.OW + oh * a.OW + "
         "ow];\n"
      << "            }\n"
      << "        }\n"
      << "        out[e] = acc;\n"
      << "    }\n}\n";
    return s.str();
}

// max_pool2d_index: one thread per output, the window's first maximum in (i, j) order (the
// first NaN wins), as the CPU loop in kernels_pool.cpp; a window with no pixel in the image
// (which pooled_shape's rules exclude) gives index 0 there too.
std::string pool_index_source(DType t) {
    std::ostringstream s;
    s << kWindowStruct
      << "extern \"C\" __global__ void kiln_max_pool2d_index(WindowArgs a, long long n, const "
      << c_type(t) << "* x, long long* out) {\n"
      << "    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < n; e += "
         "(long long)blockDim.x * gridDim.x) {\n"
      << "        long long ow = e % a.OW, oh = e / a.OW % a.OH, nc = e / (a.OW * a.OH);\n"
      << "        const " << c_type(t) << "* plane = x + nc * a.H * a.W;\n"
      << "        long long best = -1;\n"
      << "        " << c_type(t) << " best_v = 0;\n"
      << "        for (long long i = 0; i < a.kh; ++i) {\n"
      << "            long long h = oh * a.sh - a.ph + i * a.dh;\n"
      << "            if (h < 0 || h >= a.H) continue;\n"
      << "            for (long long j = 0; j < a.kw; ++j) {\n"
      << "                long long w = ow * a.sw - a.pw + j * a.dw;\n"
      << "                if (w < 0 || w >= a.W) continue;\n"
      << "                " << c_type(t) << " v = plane[h * a.W + w];\n"
      << "                bool take = best < 0 || (best_v == best_v && (v > best_v || v != v));\n"
      << "                if (take) { best = h * a.W + w; best_v = v; }\n"
      << "            }\n"
      << "        }\n"
      << "        out[e] = best < 0 ? 0 : best;\n"
      << "    }\n}\n";
    return s.str();
}

// gather (scatter = false) and scatter_add over index[outer, n_index, inner] and
// data[outer, n_data, inner]. An index out of range is not used; the first one seen is
// kept in *bad for the host to report.
std::string index_source(DType t, bool scatter) {
    std::ostringstream s;
    s << "extern \"C\" __global__ void kiln_" << (scatter ? "scatter_add" : "gather")
      << "(long long n, long long n_index, long long n_data, "
      << "long long inner, const long long* index, const " << c_type(t) << "* src, " << c_type(t)
      << "* out, unsigned long long* bad) {\n"
      << "    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < n; e += "
         "(long long)blockDim.x * gridDim.x) {\n"
      << "        long long k = e % inner, o = e / (inner * n_index), i = index[e];\n"
      << "        if (i < 0 || i >= n_data) { if (bad) atomicCAS(bad, 0x8000000000000000ull, "
         "(unsigned long long)index[e]); continue; }\n"
      << "        const long long at = (o * n_data + i) * inner + k;\n";
    if (!scatter)
        s << "        out[e] = src[at];\n";
    else if (t == DType::int64)
        s << "        atomicAdd((unsigned long long*)&out[at], (unsigned long long)src[e]);\n";
    else
        s << "        atomicAdd(&out[at], src[e]);\n";
    s << "    }\n}\n";
    return s.str();
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
    void* fn = kernel(index_source(t, scatter), scatter ? "kiln_scatter_add" : "kiln_gather");
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

std::vector<std::pair<std::string, std::string>> cuda_index_kernel_sources() {
    std::vector<std::pair<std::string, std::string>> out;
    for (DType t : {DType::float32, DType::float64}) {
        out.emplace_back(std::string("unfold2d ") + dtype_name(t), unfold_source(t));
        out.emplace_back(std::string("fold2d ") + dtype_name(t), fold_source(t));
        out.emplace_back(std::string("max_pool2d_index ") + dtype_name(t), pool_index_source(t));
    }
    for (DType t : {DType::float32, DType::float64, DType::int64, DType::boolean}) {
        out.emplace_back(std::string("gather ") + dtype_name(t), index_source(t, false));
        if (t != DType::boolean)
            out.emplace_back(std::string("scatter_add ") + dtype_name(t), index_source(t, true));
    }
    return out;
}

Tensor cuda_unfold2d(const Tensor& x, const Shape& window, int64_t OH, int64_t OW, double pad) {
    int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
    Tensor src = contiguous_as(x, x.dtype());
    Tensor out = empty({N, C * window[0] * window[1], OH * OW}, x.dtype(), x.device());
    int64_t n = out.numel();
    if (n == 0) return out;
    WindowArgs a = window_args(window, C, H, W, OH, OW);
    long long count = n;
    void *sp = data(src), *op = data(out);
    void* args[] = {&a, &count, &sp, &op, &pad};
    launch(kernel(unfold_source(x.dtype()), "kiln_unfold2d"), n, args);
    return out;
}

Tensor cuda_max_pool2d_index(const Tensor& x, const Shape& window, int64_t OH, int64_t OW) {
    int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
    Tensor src = contiguous_as(x, x.dtype());
    Tensor out = empty({N, C, OH, OW}, DType::int64, x.device());
    int64_t n = out.numel();
    if (n == 0) return out;
    WindowArgs a = window_args(window, C, H, W, OH, OW);
    long long count = n;
    void *sp = data(src), *op = data(out);
    void* args[] = {&a, &count, &sp, &op};
    launch(kernel(pool_index_source(x.dtype()), "kiln_max_pool2d_index"), n, args);
    return out;
}

Tensor cuda_fold2d(const Tensor& cols, const Shape& window, int64_t C, int64_t H, int64_t W,
                   int64_t OH, int64_t OW) {
    Tensor src = contiguous_as(cols, cols.dtype());
    Tensor out = empty({cols.size(0), C, H, W}, cols.dtype(), cols.device());
    int64_t n = out.numel();
    if (n == 0) return out;
    WindowArgs a = window_args(window, C, H, W, OH, OW);
    long long count = n;
    void *sp = data(src), *op = data(out);
    void* args[] = {&a, &count, &sp, &op};
    launch(kernel(fold_source(cols.dtype()), "kiln_fold2d"), n, args);
    return out;
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
