// Reductions (the lines of tensor/reductions.def) over any set of dims, their gradients, and matmul
// through BLAS (tensor/gemm.h).
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "tensor/gemm.h"
#include "tensor/kernels.h"
#include "tensor/parallel.h"
#include "tensor/pointwise_math.h"
#include "tensor/reductions.h"

namespace kiln_math {
// One functor per line of tensor/reductions.def, defined here so that `maximum`, ... resolve
// to the kiln_math vocabulary rather than to kiln's Tensor functions.
#define KILN_REDUCTION(name, combine, identity, kind) \
    struct Combine_##name {                           \
        template <class T>                            \
        static T f(T x, T y) {                        \
            return combine;                           \
        }                                             \
    };
#include "tensor/reductions.def"
}  // namespace kiln_math

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

// A reduction is its row of tensor/reductions.def: `op` names it.
using Reduce = OpId;

template <class T>
T reduce_init(Reduce r) {
    return reduction_identity_value<T>(r);
}

// The table's combine, compiled for T (int64 on wrap_int64: a sum wraps on overflow, as torch).
template <class T>
T combine(Reduce r, T acc, T v) {
    if constexpr (std::is_same_v<T, int64_t>) {
        return int64_t(combine(r, kiln_math::wrap_int64(acc), kiln_math::wrap_int64(v)));
    } else {
        switch (r) {
#define KILN_REDUCTION(name, combine, identity, kind) \
    case OpId::name:                                  \
        return kiln_math::Combine_##name::f(acc, v);
#include "tensor/reductions.def"
            default:
                fail(op_name(r), ": not a reduction of tensor/reductions.def");
        }
    }
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
    DType result = reduction_dtype(r, x.dtype());
    DType dt = x.dtype() == DType::boolean ? DType::int64 : result;  // bools reduce as 0/1
    KILN_CHECK(!reduction_picks_a_value(r) || x.numel() > 0 || p.inner > 0, op,
               ": cannot reduce an empty tensor of shape ", x.shape());
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
    return result == dt ? out : contiguous_as(out, result);  // bool amax/amin: any/all
}

// The gradient of an additive reduction: every element gets its row's gradient.
Tensor additive_backward(const BackwardArgs& b) {
    Tensor probe = empty(b.input_shapes[0], b.grad.dtype());  // shapes only; never read
    Shape kept = plan_reduce(probe, b.attrs, "reduction backward").kept_shape;
    return b.grad.reshape(kept).expand(b.input_shapes[0]);
}

// The gradient of an extremum: split evenly among the elements equal to the result.
Tensor extremum_backward(const BackwardArgs& b) {
    const Tensor& x = b.inputs[0];
    Shape kept = plan_reduce(x, b.attrs, "reduction backward").kept_shape;
    Tensor mask = (x == b.out.reshape(kept)).to(b.grad.dtype());
    Tensor count = mask.sum(b.attrs.dims, true);
    return b.grad.reshape(kept) * mask / count;
}

// The gradient of a product: each element gets the product of the others. Not out / x, which
// is NaN at a zero: with no zero in the row that is what it is; with one zero, the zero gets
// the product of the rest and the others 0; with two or more, every element gets 0.
Tensor product_backward(OpId op, const BackwardArgs& b) {
    const Tensor& x = b.inputs[0];
    Shape kept = plan_reduce(x, b.attrs, op_name(op)).kept_shape;
    Tensor zero = x == 0.0;
    Tensor nonzero = where(zero, ones_like(x), x);
    Tensor rest =
        dispatch(op, {nonzero}, {.dims = b.attrs.dims, .keepdim = true});  // of the nonzeros
    Tensor zeros = zero.to(b.grad.dtype()).sum(b.attrs.dims, true);
    Tensor none = zeros == 0.0, one = zeros == 1.0;
    Tensor others =
        where(zero, where(one, rest, zeros_like(rest)), where(none, rest / nonzero, zeros_like(x)));
    return b.grad.reshape(kept) * others;
}

Tensor reduction_backward(OpId op, const BackwardArgs& b) {
    switch (reduction_info(op).kind) {
        case ReductionKind::additive:
            return additive_backward(b);
        case ReductionKind::extremum:
            return extremum_backward(b);
        case ReductionKind::product:
            return product_backward(op, b);
    }
    fail(op_name(op), ": no gradient for this reduction kind");
}

}  // namespace

// forward_<name> and backward_<name> for every line of tensor/reductions.def.
#define KILN_REDUCTION(name, combine, identity, kind)                   \
    Tensor forward_##name(std::span<const Tensor> in, const Attrs& a) { \
        return reduce_forward(in[0], a, OpId::name, #name);             \
    }                                                                   \
    std::vector<Tensor> backward_##name(const BackwardArgs& b) {        \
        return {reduction_backward(OpId::name, b)};                     \
    }
#include "tensor/reductions.def"

// --- matmul (the BLAS calls are tensor/gemm.cpp's, shared with the code generator)

Tensor forward_matmul(std::span<const Tensor> in, const Attrs&) {
    GemmPlan p = plan_gemm(in[0], in[1]);
    Tensor out = empty(p.full_shape, p.a.dtype());
    // Several GEMMs on oneDNN (attention's per-head products): each thread runs whole ones on
    // its own, as the code generator's blas kernels do (codegen/cpu_epilogue.cpp), instead of
    // each small GEMM split over the threads. OpenBLAS keeps its threads inside each GEMM,
    // as before oneDNN ran these: with its count switched to 1 and back around each batched
    // call, GPT inference at 2 threads took 237 ms of CPU per step against 150 (one loaded run).
    if (p.batches > 1 && num_threads() > 1 && p.library == GemmLibrary::onednn) {
        parallel_for(p.batches, 1, [&](int64_t b0, int64_t b1) {
            for (int64_t i = b0; i < b1; ++i) gemm_rows(p, i, 0, p.M, out.raw_data());
        });
    } else {
        sync_blas_threads();
        for (int64_t i = 0; i < p.batches; ++i) gemm_rows(p, i, 0, p.M, out.raw_data());
    }
    return out.reshape(p.out_shape);
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
    // One matrix B for a batch of A (a Linear on [B, T, E]): one GEMM over all the batch's
    // rows, A^T [K, B*T] @ G [B*T, N], instead of a GEMM per batch and a sum over them.
    if (b.needs(1) && B.dim() == 2 && A.dim() > 2) {
        int64_t rows = shape_numel(Shape(A.shape().begin(), A.shape().end() - 1));
        db = matmul(A.reshape({rows, A.size(-1)}).transpose(0, 1), G.reshape({rows, B.size(-1)}))
                 .reshape(c.shape());
    } else if (b.needs(1)) {
        db = sum_to(matmul(A.transpose(-1, -2), G), B.shape()).reshape(c.shape());
    }
    return {da, db};
}

}  // namespace kiln
