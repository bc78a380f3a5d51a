// Reductions (sum, amax, amin) over any set of dims, and matmul through BLAS.
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "tensor/kernels.h"
#include "tensor/parallel.h"
#include "tensor/pointwise_math.h"

namespace kiln {

ReducePlan plan_reduce(const Tensor& x, const Attrs& a, const char* op) {
    ReducePlan p;
    int64_t rank = x.dim();
    p.reduced.assign(rank, a.dims.empty());
    bool scalar_dim_seen = false;  // a 0-d tensor reduces over dim 0/-1 to itself (as torch), once
    for (int64_t d : a.dims) {
        int64_t n = normalize_dim(d, rank, op);
        bool twice = rank == 0 ? scalar_dim_seen : bool(p.reduced[n]);
        KILN_CHECK(!twice, op, ": dim ", n, " appears twice in ", a.dims);
        if (rank == 0) scalar_dim_seen = true;
        else p.reduced[n] = true;
    }
    for (int64_t i = 0; i < rank; ++i) {
        int64_t n = x.shape()[i];
        p.kept_shape.push_back(p.reduced[i] ? 1 : n);
        if (!p.reduced[i]) p.out_shape.push_back(n);
        else if (a.keepdim) p.out_shape.push_back(1);
        (p.reduced[i] ? p.inner : p.outer) *= n;
    }
    return p;
}

namespace {

enum class Reduce { sum, max, min };

template <class T>
T reduce_init(Reduce r) {
    if (r == Reduce::sum) return T(0);
    if constexpr (std::numeric_limits<T>::has_infinity)
        return r == Reduce::max ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::infinity();
    else return r == Reduce::max ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max();
}

template <class T>
T combine(Reduce r, T acc, T v) {
    if constexpr (std::is_same_v<T, int64_t>)  // wraps on overflow, as torch (signed overflow is UB)
        if (r == Reduce::sum) return int64_t(uint64_t(acc) + uint64_t(v));
    if (r == Reduce::sum) return acc + v;
    return r == Reduce::max ? kiln_math::maximum(acc, v) : kiln_math::minimum(acc, v);
}

// Reduces one contiguous row with four xsimd accumulators (float) or a scalar loop.
template <class T>
T reduce_row(Reduce r, const T* row, int64_t inner) {
    int64_t i = 0;
    T acc = reduce_init<T>(r);
    if constexpr (std::is_same_v<T, float>) {
        using B = xsimd::batch<float>;
        constexpr int64_t W = B::size;
        if (inner >= 4 * W) {
            B a0(acc), a1(acc), a2(acc), a3(acc);
            for (; i + 4 * W <= inner; i += 4 * W) {
                a0 = combine(r, a0, B::load_unaligned(row + i));
                a1 = combine(r, a1, B::load_unaligned(row + i + W));
                a2 = combine(r, a2, B::load_unaligned(row + i + 2 * W));
                a3 = combine(r, a3, B::load_unaligned(row + i + 3 * W));
            }
            B all = combine(r, combine(r, a0, a1), combine(r, a2, a3));
            alignas(64) float lanes[W];
            all.store_aligned(lanes);
            for (int64_t k = 0; k < W; ++k) acc = combine(r, acc, lanes[k]);
        }
    }
    for (; i < inner; ++i) acc = combine(r, acc, row[i]);
    return acc;
}

// Reduces each contiguous row of `inner` elements: rows over threads, or, for fewer rows
// than threads (a full reduction), fixed blocks of each row over threads, folded in block
// order so the result does not depend on scheduling.
template <class T>
void reduce_rows(Reduce r, const T* x, T* out, int64_t outer, int64_t inner) {
    int blocks = num_threads();
    if (outer < blocks && inner >= 4 * kParallelGrain) {
        int64_t chunk = (inner + blocks - 1) / blocks;
        std::vector<T> partial(size_t(blocks), reduce_init<T>(r));
        for (int64_t o = 0; o < outer; ++o) {
            const T* row = x + o * inner;
            parallel_for(blocks, 1, [&](int64_t b, int64_t e) {
                for (int64_t k = b; k < e; ++k) {
                    int64_t begin = k * chunk, n = std::min(chunk, inner - begin);
                    partial[k] = n > 0 ? reduce_row(r, row + begin, n) : reduce_init<T>(r);
                }
            });
            T acc = reduce_init<T>(r);
            for (T p : partial) acc = combine(r, acc, p);
            out[o] = acc;
        }
        return;
    }
    parallel_for(outer, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(inner, 1)), [&](int64_t b, int64_t e) {
        for (int64_t o = b; o < e; ++o) out[o] = reduce_row(r, x + o * inner, inner);
    });
}

// Reduces the leading `lead` elements-of-rows: out[j] = op over i of x[i * cols + j].
template <class T>
void reduce_columns(Reduce r, const T* x, T* out, int64_t rows, int64_t cols) {
    parallel_for(cols, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(rows, 1)), [&](int64_t b, int64_t e) {
        for (int64_t j = b; j < e; ++j) out[j] = reduce_init<T>(r);
        for (int64_t i = 0; i < rows; ++i)
            for (int64_t j = b; j < e; ++j) out[j] = combine(r, out[j], x[i * cols + j]);
    });
}

Tensor reduce_forward(const Tensor& x, const Attrs& a, Reduce r, const char* op) {
    ReducePlan p = plan_reduce(x, a, op);
    DType dt = x.dtype();
    if ((r == Reduce::sum && !is_floating(dt)) || dt == DType::boolean) dt = DType::int64;  // bools reduce as 0/1
    KILN_CHECK(r == Reduce::sum || x.numel() > 0 || p.inner > 0, op, ": cannot reduce an empty tensor of shape ", x.shape());
    // Is the reduced set a prefix of the dims (e.g. bias grad over the batch)?
    int64_t rank = x.dim(), k = 0;
    while (k < rank && p.reduced[k]) ++k;
    bool prefix = std::all_of(p.reduced.begin() + k, p.reduced.end(), [](bool v) { return !v; }) && k > 0 && k < rank;
    Tensor src;
    if (prefix) {
        src = contiguous_as(x, dt);
    } else {
        Shape perm;
        for (int64_t i = 0; i < rank; ++i) if (!p.reduced[i]) perm.push_back(i);
        for (int64_t i = 0; i < rank; ++i) if (p.reduced[i]) perm.push_back(i);
        src = contiguous_as(rank ? x.detach().permute(perm) : x, dt);
    }
    Tensor out = empty(p.out_shape, dt);
    visit_dtype(dt, [&](auto tag) {
        using T = decltype(tag);
        if constexpr (!std::is_same_v<T, bool>) {
            if (prefix) reduce_columns<T>(r, ptr<T>(src), ptr<T>(out), p.inner, p.outer);
            else reduce_rows<T>(r, ptr<T>(src), ptr<T>(out), p.outer, p.inner);
        }
    });
    return x.dtype() == DType::boolean && r != Reduce::sum ? contiguous_as(out, DType::boolean) : out;  // any/all
}

// The gradient of amax/amin: split evenly among the elements equal to the extreme.
std::vector<Tensor> extreme_backward(const BackwardArgs& b) {
    const Tensor& x = b.inputs[0];
    Shape kept = plan_reduce(x, b.attrs, "amax").kept_shape;
    Tensor mask = (x == b.out.reshape(kept)).to(b.grad.dtype());
    Tensor count = mask.sum(b.attrs.dims, true);
    return {b.grad.reshape(kept) * mask / count};
}

}  // namespace

Tensor forward_sum(std::span<const Tensor> in, const Attrs& a) { return reduce_forward(in[0], a, Reduce::sum, "sum"); }
Tensor forward_amax(std::span<const Tensor> in, const Attrs& a) { return reduce_forward(in[0], a, Reduce::max, "amax"); }
Tensor forward_amin(std::span<const Tensor> in, const Attrs& a) { return reduce_forward(in[0], a, Reduce::min, "amin"); }

std::vector<Tensor> backward_sum(const BackwardArgs& b) {
    Attrs a = b.attrs;
    Tensor probe = empty(b.input_shapes[0], b.grad.dtype());  // shapes only; never read
    Shape kept = plan_reduce(probe, a, "sum").kept_shape;
    return {b.grad.reshape(kept).expand(b.input_shapes[0])};
}
std::vector<Tensor> backward_amax(const BackwardArgs& b) { return extreme_backward(b); }
std::vector<Tensor> backward_amin(const BackwardArgs& b) { return extreme_backward(b); }

// --- matmul

namespace {

// One operand of a GEMM: a row-major matrix, possibly transposed, at `offset` elements.
struct GemmOperand {
    bool trans = false;
    int64_t ld = 0;
};
// A 2-D [r, c] slice with strides (s0, s1) is usable if one stride is 1.
bool gemm_layout(int64_t r, int64_t c, int64_t s0, int64_t s1, GemmOperand& g) {
    if (s1 == 1 && s0 >= std::max<int64_t>(c, 1)) return g = {false, s0}, true;
    if (s0 == 1 && s1 >= std::max<int64_t>(r, 1)) return g = {true, s1}, true;
    return false;
}

}  // namespace

Tensor forward_matmul(std::span<const Tensor> in, const Attrs&) {
    Tensor a = in[0], b = in[1];
    KILN_CHECK(a.dim() >= 1 && b.dim() >= 1, "matmul: both arguments need at least 1 dim, got ", a.shape(), " and ", b.shape());
    KILN_CHECK(a.dtype() == b.dtype() && is_floating(a.dtype()), "matmul: expected two float32 or two float64 tensors, got ", a.dtype(), " and ", b.dtype());
    bool a_vec = a.dim() == 1, b_vec = b.dim() == 1;
    if (a_vec) a = a.detach().unsqueeze(0);
    if (b_vec) b = b.detach().unsqueeze(1);
    int64_t M = a.size(-2), K = a.size(-1), N = b.size(-1);
    KILN_CHECK(b.size(-2) == K, "matmul: shapes ", in[0].shape(), " and ", in[1].shape(), " cannot be multiplied (", K, " vs ", b.size(-2), ")");
    Shape batch = broadcast_shapes(Shape(a.shape().begin(), a.shape().end() - 2), Shape(b.shape().begin(), b.shape().end() - 2), "matmul");
    Shape ea = batch, eb = batch, oshape = batch;
    ea.insert(ea.end(), {M, K});
    eb.insert(eb.end(), {K, N});
    a = a.detach().expand(ea);
    b = b.detach().expand(eb);
    GemmOperand ga, gb;
    if (!gemm_layout(M, K, a.strides()[a.dim() - 2], a.strides()[a.dim() - 1], ga)) a = materialize(a), gemm_layout(M, K, K, 1, ga);
    if (!gemm_layout(K, N, b.strides()[b.dim() - 2], b.strides()[b.dim() - 1], gb)) b = materialize(b), gemm_layout(K, N, N, 1, gb);
    oshape.insert(oshape.end(), {M, N});
    Tensor out = empty(oshape, a.dtype());
    int64_t batches = shape_numel(batch);
    auto offset_of = [&](const Tensor& t, int64_t idx) {
        int64_t off = t.offset();
        for (int64_t d = int64_t(batch.size()) - 1; d >= 0; --d) {
            off += (idx % batch[d]) * t.strides()[d];
            idx /= batch[d];
        }
        return off;
    };
    auto ta = ga.trans ? CblasTrans : CblasNoTrans, tb = gb.trans ? CblasTrans : CblasNoTrans;
    sync_blas_threads();
    for (int64_t i = 0; i < batches; ++i) {
        if (a.dtype() == DType::float32) {
            const float* pa = static_cast<const float*>(a.impl()->storage->data) + offset_of(a, i);
            const float* pb = static_cast<const float*>(b.impl()->storage->data) + offset_of(b, i);
            cblas_sgemm(CblasRowMajor, ta, tb, M, N, K, 1.f, pa, ga.ld, pb, gb.ld, 0.f, ptr<float>(out) + i * M * N, std::max<int64_t>(N, 1));
        } else {
            const double* pa = static_cast<const double*>(a.impl()->storage->data) + offset_of(a, i);
            const double* pb = static_cast<const double*>(b.impl()->storage->data) + offset_of(b, i);
            cblas_dgemm(CblasRowMajor, ta, tb, M, N, K, 1.0, pa, ga.ld, pb, gb.ld, 0.0, ptr<double>(out) + i * M * N, std::max<int64_t>(N, 1));
        }
    }
    if (K == 0) out.fill_(0);
    if (a_vec) oshape.erase(oshape.end() - 2);
    if (b_vec) oshape.erase(oshape.end() - 1);
    return out.detach().reshape(oshape);
}

std::vector<Tensor> backward_matmul(const BackwardArgs& b) {
    Tensor a = b.inputs[0], c = b.inputs[1];
    Tensor A = a.dim() == 1 ? a.unsqueeze(0) : a;
    Tensor B = c.dim() == 1 ? c.unsqueeze(1) : c;
    Shape full = broadcast_shapes(Shape(A.shape().begin(), A.shape().end() - 2), Shape(B.shape().begin(), B.shape().end() - 2), "matmul");
    full.insert(full.end(), {A.size(-2), B.size(-1)});
    Tensor G = b.grad.reshape(full);
    Tensor da, db;
    if (b.needs(0)) da = sum_to(matmul(G, B.transpose(-1, -2)), A.shape()).reshape(a.shape());
    if (b.needs(1)) db = sum_to(matmul(A.transpose(-1, -2), G), B.shape()).reshape(c.shape());
    return {da, db};
}

}  // namespace kiln
