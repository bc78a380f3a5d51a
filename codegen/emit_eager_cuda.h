// The first rung of the CUDA dialect (docs/codegen.md, "Eager CUDA: the first rung"): the
// sources of eager CUDA's kernels, which the generated kernels (emit_cuda.cpp) are tested
// against. One kernel per op and dtypes, for any shape: sizes and strides arrive at run time,
// so NVRTC compiles each once. The statements come from the same place as the generated
// kernels' (emit_expr.h: the op table's math, converted as the CUDA dialect spells it), the
// loops and block-wide combines from cuda_dialect.h.
//
// Layering: tensor/kernels_cuda.cpp (launching, geometry, dispatch) includes this header, the
// one place tensor/ reaches into codegen/. It may, because this rung and what it includes
// (cuda_dialect.h, emit_expr.h) stand below the Schedule: they read only tensor/ (the op
// table, tensor/reductions.def, the CUDA prelude), never jit/ or the scheduler.
#pragma once
#include <string>
#include <vector>

#include "tensor/ops.h"

namespace kiln::codegen {

// Dims of the run-time geometry, after merging the dims every array walks as one.
constexpr int kEagerMaxDims = 8;

// One elementwise kernel, `kiln_elementwise(Geometry g, long long n, Out* out, const In1* in1,
// const In2* in2, const In3* in3, double scalar)`: out[i] = op(in1[i], ...) for n elements,
// where struct Geometry { int ndim; long long size[kEagerMaxDims]; long long
// stride[4][kEagerMaxDims]; } holds the loop's sizes and each array's element strides (0: out,
// 1..3: inputs; a broadcast dim has stride 0). Unused inputs are `const char*`.
struct EagerElementwise {
    OpId op;        // a pointwise op of ops.def, cast, where, or full (the scalar alone)
    DType out;      // the output array's dtype
    DType compute;  // the dtype the math runs in (eager's promotion decides it)
    std::vector<DType> inputs;               // the input arrays' dtypes, at most 3
    ScalarPos scalar_pos = ScalarPos::none;  // where `scalar` is an operand (full: right)
    bool flat = false;  // every array contiguous: element i is at i, no index math
};
std::string eager_cuda_elementwise(const EagerElementwise& k);

// `kiln_reduce(const T* x, T* out, long long rows, long long row_size, long long splits)`:
// block task folds slice task % splits of contiguous row task / splits into out[task], through
// the block combine of the generated row kernels (launched with 256 threads). T is `dtype`;
// float32 sums accumulate in double.
std::string eager_cuda_reduce(OpId op, DType dtype);

// `kiln_draw(long long n, T* out, unsigned long long seed, unsigned long long offset, const
// unsigned long long* graph_state, double lo, double hi, long long int_lo, unsigned long long
// range)`: element i of rand/randn/randint draws with (seed, offset + i) from tensor/philox.h;
// under a CUDA graph (seed, offset) are read from graph_state, which each replay fills.
std::string eager_cuda_random(OpId op, DType dtype);

// `kiln_arange(long long n, T* out, double lo, double delta)`: element i is lo + i * delta in
// double, converted to T. tensor/kernels_cuda.cpp launches it only where every value is an
// integer below 2^53 (positions, causal masks), so each element is exact on either device.
std::string eager_cuda_arange(DType dtype);

// The window ops' kernels (im2col and its adjoint), one thread per element of `out`, over
// `WindowArgs a`: struct WindowArgs { long long kh, kw, sh, sw, ph, pw, dh, dw, C, H, W, OH, OW; }
// (the window, the image's channels and size, the columns' output size), passed by value.
// `kiln_unfold2d(WindowArgs a, long long n, const T* x, T* out, double pad)`: each column
// entry is its window's pixel, or `pad` outside the image. T is `dtype`.
std::string eager_cuda_unfold2d(DType dtype);
// `kiln_fold2d(WindowArgs a, long long n, const T* cols, T* out)`: each pixel sums the column
// entries that cover it in increasing window offset (i, j), as the CPU loop adds them: no
// atomics, so it repeats exactly.
std::string eager_cuda_fold2d(DType dtype);
// `kiln_max_pool2d_index(WindowArgs a, long long n, const T* x, long long* out)`: one thread
// per output, its window's first maximum in (i, j) order (the first NaN wins) as an index
// into the H*W plane, as the CPU loop (tensor/kernels_pool.cpp); a window with no pixel in
// the image (which pooled_shape's rules exclude) gives 0.
std::string eager_cuda_max_pool2d_index(DType dtype);

// `kiln_gather` (or, with `scatter_add`, `kiln_scatter_add`)`(long long n, long long n_index,
// long long n_data, long long inner, const long long* index, const T* src, T* out, unsigned
// long long* bad)` over index[outer, n_index, inner] and data[outer, n_data, inner], one thread
// per index entry. scatter_add adds with atomics (float sums may round differently from run to
// run, as PyTorch's). An index out of range is not used; the first one seen is kept in *bad
// (bad may be null where the caller made the index in range: tensor/kernels.h, kIndexInRange).
std::string eager_cuda_index(DType dtype, bool scatter_add);

// Attention over tiles (flash attention's online softmax): `kiln_attention(AttentionArgs a,
// const T* q, const T* k, const T* v, T* o)` with struct AttentionArgs { long long B1, L, S,
// tiles; long long q[4], k[4], v[4], o[4]; double scale; int causal; } (tensor/
// kernels_cuda_attention.cpp): each array's element strides over (batch 0, batch 1, position,
// feature). A block of 128 threads takes `queries_per_block` queries of one batch entry and
// walks the keys a tile at a time through shared memory, the scores and the output computed
// as small GEMMs (each thread a block of rows by every 8th column, GEMM-style register tiles);
// the running maximum and sum stay in registers, so no [L, S] matrix is written. `causal`: key
// j > query i is masked, and the key tiles after a block's last query are not read. `d`: q's
// and k's features, `dv`: v's, each at most kAttentionMaxFeatures (tensor/ops.h); the tiles
// are the largest that fit static shared memory, `queries` (16 or 32) a block where they fit.
// T is `dtype` (float32, float64).
struct AttentionSource {
    std::string source;
    int64_t queries_per_block;  // grid: one block per this many queries of each batch entry
};
AttentionSource eager_cuda_attention(DType dtype, int64_t d, int64_t dv, int64_t queries = 32);

}  // namespace kiln::codegen
