// Views (reshape, permute, expand, slice) share storage and only rewrite shape/strides;
// contiguous/cat copy. Strided copies go through xtensor adaptors over kiln storage.
#include <cstring>
#include <numeric>
#include <optional>

#include <xtensor/xadapt.hpp>
#include <xtensor/xarray.hpp>

#include "tensor/kernels.h"
#include "tensor/parallel.h"

namespace kiln {
namespace {

Tensor make_view(const Tensor& base, Shape shape, Shape strides, int64_t offset) {
    auto impl = std::make_shared<TensorImpl>();
    impl->storage = base.impl()->storage;
    impl->shape = std::move(shape);
    impl->strides = std::move(strides);
    impl->offset = offset;
    impl->dtype = base.dtype();
    return Tensor(impl);
}

template <class T>
auto xt_view(const Tensor& t) {
    std::vector<size_t> shape(t.shape().begin(), t.shape().end());
    std::vector<std::ptrdiff_t> strides(t.strides().begin(), t.strides().end());
    // xtensor sizes an adaptor's buffer as the product of the shape, whatever the strides.
    return xt::adapt(ptr<T>(t), size_t(t.numel()), xt::no_ownership(), shape, strides);
}

// Resolves one -1 in a requested shape and checks the element count.
Shape infer_shape(const Shape& want, int64_t numel, const Shape& from) {
    Shape out = want;
    int64_t known = 1, infer = -1;
    for (size_t i = 0; i < out.size(); ++i) {
        if (out[i] == -1) {
            KILN_CHECK(infer < 0, "reshape: only one dimension can be -1, got ", want);
            infer = int64_t(i);
        } else {
            KILN_CHECK(out[i] >= 0, "reshape: invalid size ", out[i], " in ", want);
            KILN_CHECK(!__builtin_mul_overflow(known, out[i], &known), "reshape: shape ", want, " has more elements than int64 can count");
        }
    }
    if (infer >= 0) {
        KILN_CHECK(known != 0 && numel % known == 0, "reshape: shape ", want, " is invalid for input of size ", numel, " (shape ", from, ")");
        out[infer] = numel / known;
    }
    KILN_CHECK(checked_numel(out, "reshape") == numel, "reshape: shape ", want, " is invalid for input of size ", numel, " (shape ", from, ")");
    return out;
}

// The fast path of strided_copy into a contiguous destination: one odometer step per row of
// the innermost dim, then a tight loop whose source stride is 1 (a row copy), 0 (a broadcast
// fill) or anything else. xtensor's element-wise iterator costs ~5 ns/element; this runs at
// close to memcpy speed for the broadcasts every binary op with mixed shapes needs.
template <class T>
void copy_rows(T* out, const Tensor& src) {
    const Shape& shape = src.shape();
    const Shape& strides = src.strides();
    int64_t rank = src.dim(), cols = shape[rank - 1], step = strides[rank - 1];
    int64_t rows = src.numel() / std::max<int64_t>(cols, 1);
    const T* base = ptr<T>(src);
    parallel_for(rows, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(cols, 1)), [&](int64_t b, int64_t e) {
        for (int64_t r = b; r < e; ++r) {
            int64_t offset = 0;  // source offset of row r: unravel r over the outer dims
            for (int64_t d = rank - 2, rest = r; d >= 0; --d) {
                offset += (rest % shape[d]) * strides[d];
                rest /= shape[d];
            }
            const T* in = base + offset;
            T* o = out + r * cols;
            if (step == 1) std::memcpy(o, in, size_t(cols) * sizeof(T));
            else if (step == 0) std::fill(o, o + cols, *in);
            else for (int64_t c = 0; c < cols; ++c) o[c] = in[c * step];
        }
    });
}

// A copy whose source walks its last dim with a stride but some other dim p contiguously (a
// permutation of a contiguous tensor: NHWC <-> NCHW, codegen/channels_last.h): copy_rows
// would read one element a cache line; this copies 16 x 16 tiles of (p, last dim) instead,
// reading and writing whole lines. Returns false when the source is not such a view.
template <class T>
bool copy_transposed(T* out, const Tensor& src) {
    const Shape& shape = src.shape();
    const Shape& strides = src.strides();
    int64_t rank = src.dim(), last = rank - 1, p = -1;
    if (rank < 2 || strides[last] == 1 || shape[last] < 4) return false;
    for (int64_t d = last - 1; d >= 0; --d)
        if (strides[d] == 1 && shape[d] >= 4) p = d;
    if (p < 0) return false;
    int64_t dst_p = 1;  // out's stride along p
    for (int64_t d = p + 1; d < rank; ++d) dst_p *= shape[d];
    int64_t outer = src.numel() / (shape[p] * shape[last]);
    int64_t P = shape[p], L = shape[last], step = strides[last];
    int64_t blocks = (P + 15) / 16;
    const T* base = ptr<T>(src);
    parallel_for(
        outer * blocks, std::max<int64_t>(1, kParallelGrain / (16 * L)), [&](int64_t b, int64_t e) {
            for (int64_t task = b; task < e; ++task) {
                int64_t o = task / blocks, i0 = task % blocks * 16, i1 = std::min(P, i0 + 16);
                // o unravelled over the dims but p and last
                int64_t src_off = 0, dst_off = 0, dst_stride = 1;
                for (int64_t d = last, rest = o; d >= 0; --d) {
                    if (d != p && d != last) {
                        int64_t k = rest % shape[d];
                        rest /= shape[d];
                        src_off += k * strides[d];
                        dst_off += k * dst_stride;
                    }
                    dst_stride *= shape[d];
                }
                for (int64_t j0 = 0; j0 < L; j0 += 16) {
                    int64_t j1 = std::min(L, j0 + 16);
                    for (int64_t i = i0; i < i1; ++i) {
                        const T* in = base + src_off + i;
                        T* to = out + dst_off + i * dst_p;
                        for (int64_t j = j0; j < j1; ++j) to[j] = in[j * step];
                    }
                }
            }
        });
    return true;
}

}  // namespace

std::optional<Shape> view_strides(const Shape& have, const Shape& strides, const Shape& want) {
    if (have.empty()) return Shape(want.size(), 1);
    if (shape_numel(have) == 0) return std::nullopt;  // a copy of nothing is free
    Shape out(want.size());
    int64_t view_d = int64_t(want.size()) - 1;
    int64_t chunk_stride = strides.back(), chunk_numel = 1, view_numel = 1;
    for (int64_t d = int64_t(have.size()) - 1; d >= 0; --d) {
        chunk_numel *= have[d];
        // A chunk ends where the next-outer dim is not laid out right after this one.
        if (d == 0 || (have[d - 1] != 1 && strides[d - 1] != chunk_numel * chunk_stride)) {
            while (view_d >= 0 && (view_numel < chunk_numel || want[view_d] == 1)) {
                out[view_d] = view_numel * chunk_stride;
                view_numel *= want[view_d];
                --view_d;
            }
            if (view_numel != chunk_numel) return std::nullopt;
            if (d > 0) chunk_stride = strides[d - 1], chunk_numel = 1, view_numel = 1;
        }
    }
    if (view_d != -1) return std::nullopt;
    return out;
}


void strided_copy(const Tensor& dst, const Tensor& src) {
    KILN_CHECK(dst.shape() == src.shape() && dst.dtype() == src.dtype(), "strided_copy: ", dst.shape(), " ", dst.dtype(), " vs ", src.shape(), " ", src.dtype());
    if (src.numel() == 0) return;
    if (dst.device().type == DeviceType::cuda || src.device().type == DeviceType::cuda) return cuda_strided_copy(dst, src);
    if (dst.is_contiguous() && src.is_contiguous()) {
        std::memcpy(dst.raw_data(), src.raw_data(), dst.nbytes());
        return;
    }
    visit_dtype(src.dtype(), [&](auto tag) {
        using T = decltype(tag);
        if (dst.is_contiguous() && copy_transposed<T>(ptr<T>(dst), src)) return;
        if (dst.is_contiguous() && src.dim() >= 1) return copy_rows<T>(ptr<T>(dst), src);
        auto d = xt_view<T>(dst);
        auto s = xt_view<T>(src);
        std::copy(s.cbegin(), s.cend(), d.begin());  // row-major walk of both strided views
    });
}

Tensor materialize(const Tensor& x) {
    Tensor out = empty(x.shape(), x.dtype(), x.device());
    strided_copy(out, x);
    return out;
}

Tensor contiguous_as(const Tensor& x, DType dtype) {
    Tensor c = x.is_contiguous() ? x : materialize(x);
    if (dtype == c.dtype()) return c;
    if (c.device().type == DeviceType::cuda) {  // a converting copy on the device
        Tensor out = empty(c.shape(), dtype, c.device());
        cuda_strided_copy(out, c);
        return out;
    }
    Tensor out = empty(c.shape(), dtype);
    visit_dtype(c.dtype(), [&](auto from) {
        visit_dtype(dtype, [&](auto to) {
            using F = decltype(from);
            using T = decltype(to);
            const F* s = ptr<F>(c);
            T* d = ptr<T>(out);
            parallel_for(c.numel(), kParallelGrain, [&](int64_t b, int64_t e) {
                for (int64_t i = b; i < e; ++i) d[i] = cast_value<T>(s[i]);
            });
        });
    });
    return out;
}

Tensor forward_contiguous(std::span<const Tensor> in, const Attrs&) {
    return in[0].is_contiguous() ? in[0].detach() : materialize(in[0]);
}
std::vector<Tensor> backward_contiguous(const BackwardArgs& b) { return {b.grad}; }

Tensor forward_reshape(std::span<const Tensor> in, const Attrs& a) {
    const Tensor& x = in[0];
    Shape shape = infer_shape(a.shape, x.numel(), x.shape());
    if (x.is_contiguous()) return make_view(x, shape, contiguous_strides(shape), x.offset());
    if (auto strides = view_strides(x.shape(), x.strides(), shape)) return make_view(x, shape, *strides, x.offset());
    Tensor base = materialize(x);
    return make_view(base, shape, contiguous_strides(shape), base.offset());
}
std::vector<Tensor> backward_reshape(const BackwardArgs& b) { return {b.grad.reshape(b.input_shapes[0])}; }

Tensor forward_permute(std::span<const Tensor> in, const Attrs& a) {
    const Tensor& x = in[0];
    int64_t rank = x.dim();
    KILN_CHECK(int64_t(a.dims.size()) == rank, "permute: got ", a.dims.size(), " dims ", a.dims, " for a tensor of rank ", rank, " (shape ", x.shape(), ")");
    Shape shape(rank), strides(rank);
    std::vector<bool> seen(rank, false);
    for (int64_t i = 0; i < rank; ++i) {
        int64_t d = normalize_dim(a.dims[i], rank, "permute");
        KILN_CHECK(!seen[d], "permute: dim ", d, " repeated in ", a.dims);
        seen[d] = true;
        shape[i] = x.shape()[d];
        strides[i] = x.strides()[d];
    }
    return make_view(x, shape, strides, x.offset());
}
std::vector<Tensor> backward_permute(const BackwardArgs& b) {
    Shape inverse(b.attrs.dims.size());
    int64_t rank = int64_t(inverse.size());
    for (int64_t i = 0; i < rank; ++i) inverse[normalize_dim(b.attrs.dims[i], rank, "permute")] = i;
    return {b.grad.permute(inverse)};
}

Tensor forward_expand(std::span<const Tensor> in, const Attrs& a) {
    const Tensor& x = in[0];
    int64_t rank = int64_t(a.shape.size()), lead = rank - x.dim();
    KILN_CHECK(lead >= 0, "expand: target ", a.shape, " has fewer dims than input ", x.shape());
    Shape shape(rank), strides(rank, 0);
    for (int64_t i = 0; i < rank; ++i) {
        int64_t want = a.shape[i];
        if (i < lead) {
            KILN_CHECK(want >= 0, "expand: size -1 not allowed for new leading dim ", i, " in ", a.shape);
            shape[i] = want;
            continue;
        }
        int64_t have = x.shape()[i - lead];
        if (want == -1) want = have;
        KILN_CHECK(want >= 0, "expand: invalid size ", want, " for dim ", i, " in ", a.shape);
        KILN_CHECK(have == want || have == 1, "expand: input ", x.shape(), " cannot expand to ", a.shape, " (dim ", i, ": ", have, " vs ", want, ")");
        shape[i] = want;
        strides[i] = have == want ? x.strides()[i - lead] : 0;
    }
    checked_numel(shape, "expand");
    return make_view(x, shape, strides, x.offset());
}
std::vector<Tensor> backward_expand(const BackwardArgs& b) { return {sum_to(b.grad, b.input_shapes[0])}; }

Tensor forward_slice(std::span<const Tensor> in, const Attrs& a) {
    const Tensor& x = in[0];
    int64_t d = index_dim(a.dim, x.dim(), "slice");
    int64_t n = x.shape()[d];
    KILN_CHECK(a.step > 0, "slice: step must be positive, got ", a.step);
    // Clamped before any arithmetic, so start/end near INT64_MIN/MAX cannot overflow.
    auto clamp = [n](int64_t v) { return v < 0 ? std::max(v, -n) + n : std::min(v, n); };
    int64_t start = clamp(a.start), end = std::max(clamp(a.end), start);
    Shape shape = x.shape(), strides = x.strides();
    shape[d] = end == start ? 0 : 1 + (end - start - 1) / a.step;
    if (shape[d] > 1) strides[d] *= a.step;  // else unused, and a huge step could overflow it
    return make_view(x, shape, strides, x.offset() + start * x.strides()[d]);
}
std::vector<Tensor> backward_slice(const BackwardArgs& b) {
    Attrs a = b.attrs;
    a.shape = b.input_shapes[0];
    return {dispatch(OpId::slice_backward, {b.grad}, a)};
}

// Writes grad into the sliced positions of a zero tensor of the original shape.
Tensor forward_slice_backward(std::span<const Tensor> in, const Attrs& a) {
    Tensor out = zeros(a.shape, {.dtype = in[0].dtype(), .device = in[0].device()});
    Attrs s = a;
    Tensor window = forward_slice(std::span<const Tensor>(&out, 1), s);
    strided_copy(window, in[0]);
    return out;
}
std::vector<Tensor> backward_slice_backward(const BackwardArgs& b) {
    return {dispatch(OpId::slice, {b.grad}, b.attrs)};
}

Tensor forward_cat(std::span<const Tensor> in, const Attrs& a) {
    KILN_CHECK(!in.empty(), "cat: expected a non-empty list of tensors");
    const Tensor& first = in[0];
    KILN_CHECK(first.dim() > 0, "cat: zero-dimensional tensor (at position 0) cannot be concatenated");
    int64_t d = normalize_dim(a.dim, first.dim(), "cat");
    Shape shape = first.shape();
    DType dt = first.dtype();
    shape[d] = 0;
    for (const Tensor& t : in) {
        KILN_CHECK(t.dim() == first.dim(), "cat: tensors must have the same rank, got ", first.shape(), " and ", t.shape());
        for (int64_t i = 0; i < t.dim(); ++i)
            KILN_CHECK(i == d || t.shape()[i] == first.shape()[i], "cat: sizes must match except in dim ", d, ", got ", first.shape(), " and ", t.shape());
        KILN_CHECK(!__builtin_add_overflow(shape[d], t.shape()[d], &shape[d]), "cat: the sizes along dim ", d, " add up to more than int64 can count");
        dt = promote(dt, t.dtype());
    }
    Tensor out = empty(shape, dt, first.device());
    int64_t at = 0;
    for (const Tensor& t : in) {
        Attrs s;
        s.dim = d, s.start = at, s.end = at + t.shape()[d];
        strided_copy(forward_slice(std::span<const Tensor>(&out, 1), s), contiguous_as(t, dt));
        at = s.end;
    }
    return out;
}
std::vector<Tensor> backward_cat(const BackwardArgs& b) {
    std::vector<Tensor> grads;
    int64_t d = normalize_dim(b.attrs.dim, b.grad.dim(), "cat"), at = 0;
    for (size_t i = 0; i < b.input_shapes.size(); ++i) {
        int64_t n = b.input_shapes[i][d];
        grads.push_back(b.needs(int(i)) ? b.grad.slice(d, at, at + n) : Tensor());
        at += n;
    }
    return grads;
}

}  // namespace kiln
