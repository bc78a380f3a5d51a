// gather and scatter_add along a dim, the two indexing ops the rest are built from
// (index_select, embedding: tensor/composites_conv.cpp's neighbour composites.cpp).
//   gather:      out[i][j][k] = x[i][index[i][j][k]][k]            (dim 1)
//   scatter_add: out = base; out[i][index[i][j][k]][k] += src[i][j][k]
// Each is the other's derivative. Indices are int64 and checked against the dim's size
// (negative indices too, as PyTorch's gather: a kiln::Error, PyTorch's RuntimeError) on every
// path: here, on the device (kernels_cuda_index.cpp), and under compile(), which runs these
// kernels.
#include <atomic>
#include <cstring>
#include <mutex>

#include "tensor/kernels.h"
#include "tensor/parallel.h"

namespace kiln {
namespace {

using IndexPlan = IndexSizes;

// The index has the data's rank and, outside `dim`, the data's sizes (PyTorch also allows
// smaller ones; kiln asks for equal).
IndexPlan plan_index(const Tensor& data, const Tensor& index, int64_t dim, const char* op) {
    KILN_CHECK(data.device() == index.device(), op, ": index on ", index.device(), " and input on ",
               data.device(), " must share a device");
    KILN_CHECK(index.dtype() == DType::int64, op, ": expected an int64 index, got ", index.dtype());
    KILN_CHECK(index.dim() == data.dim(), op, ": index ", index.shape(), " and input ",
               data.shape(), " must have the same number of dims");
    IndexPlan p;
    p.dim = normalize_dim(dim, std::max<int64_t>(data.dim(), 1), op);
    for (int64_t d = 0; d < data.dim(); ++d) {
        if (d != p.dim)
            KILN_CHECK(index.size(d) == data.size(d), op, ": index ", index.shape(),
                       " must match input ", data.shape(), " in every dim but ", p.dim);
        if (d < p.dim) p.outer *= data.size(d);
        if (d > p.dim) p.inner *= data.size(d);
    }
    p.n_index = data.dim() ? index.size(p.dim) : 1;
    p.n_data = data.dim() ? data.size(p.dim) : 1;
    return p;
}

// fn(at, from) for every index entry: `at` its flat position, `from` the flat position of the
// data element it names. Split over kiln's threads by rows: with per_outer_row (scatter_add)
// whole `outer` rows, which never name the same element, else (gather) each (outer, index)
// pair. A worker cannot throw, so each keeps its first bad index and the one at the lowest
// position is raised after: the one a serial loop would name.
template <class Fn>
void for_each_index(const IndexPlan& p, const Tensor& index, const char* op, bool per_outer_row,
                    Fn&& fn) {
    Tensor idx = contiguous_as(index, DType::int64);
    const int64_t* ip = ptr<int64_t>(idx);
    std::mutex mu;
    int64_t bad_at = -1;
    // Copies the loop reads without reloading them after each store through fn.
    const int64_t inner = p.inner, n_index = p.n_index, n_data = p.n_data;
    auto row = [&](int64_t o, int64_t j0, int64_t j1) {  // entries (o, j0..j1, all k)
        int64_t row_data = o * n_data * inner;
        for (int64_t j = j0; j < j1; ++j) {
            int64_t at = (o * n_index + j) * inner;
            for (int64_t k = 0; k < inner; ++k) {
                int64_t i = ip[at + k];  // negative: out of range too, as PyTorch's gather
                if (i < 0 || i >= n_data) [[unlikely]] {
                    std::lock_guard lock(mu);
                    if (bad_at < 0 || at + k < bad_at) bad_at = at + k;
                    return false;
                }
                fn(at + k, row_data + i * inner + k);
            }
        }
        return true;
    };
    // Rows are (outer, index) pairs (gather) or whole outer rows (scatter_add); a range of
    // them is walked as runs of one outer row each.
    int64_t per_row = per_outer_row ? p.n_index : 1;
    int64_t rows = p.outer * p.n_index / std::max<int64_t>(per_row, 1);
    int64_t row_elems = std::max<int64_t>(1, per_row * p.inner);
    parallel_for(rows, std::max<int64_t>(1, kParallelGrain / row_elems),
                 [&](int64_t r0, int64_t r1) {
                     for (int64_t first = r0 * per_row, last = r1 * per_row; first < last;) {
                         int64_t o = first / p.n_index, j0 = first % p.n_index;
                         int64_t j1 = std::min(p.n_index, j0 + (last - first));
                         if (!row(o, j0, j1)) return;
                         first += j1 - j0;
                     }
                 });
    KILN_CHECK(bad_at < 0, op, ": index ", ip[bad_at], " is out of bounds for dim ", p.dim,
               " with size ", p.n_data, kIndexUsers);
}

// A gather whose index repeats one value along every dim after `dim` (embedding's and
// index_select's index: [N, 1] expanded, stride 0 there) copies whole rows of `inner`
// elements: one index read per row, no expanded int64 index materialized (GPT's token
// lookup: [1024, 256], 2 MB) and no per-element loop. The same values, and the same error
// for a bad index (the lowest row's, as for_each_index names the lowest position).
bool gathers_rows(const IndexPlan& p, const Tensor& index) {
    if (p.inner <= 1) return false;
    for (int64_t d = p.dim + 1; d < index.dim(); ++d)
        if (index.size(d) > 1 && index.strides()[d] != 0) return false;
    return true;
}

template <class T>
void gather_rows(const IndexPlan& p, const Tensor& index, const T* s, T* o) {
    Tensor first = index;  // one entry per (outer, j) row
    for (int64_t d = p.dim + 1; d < first.dim(); ++d) first = first.slice(d, 0, 1);
    Tensor idx = contiguous_as(first, DType::int64);
    const int64_t* ip = ptr<int64_t>(idx);
    const int64_t inner = p.inner, n_index = p.n_index, n_data = p.n_data;
    std::atomic<int64_t> bad_row{-1};
    parallel_for(
        p.outer * n_index, std::max<int64_t>(1, kParallelGrain / inner),
        [&](int64_t r0, int64_t r1) {
            for (int64_t r = r0; r < r1; ++r) {
                int64_t i = ip[r];
                if (i < 0 || i >= n_data) [[unlikely]] {
                    int64_t seen = bad_row.load();
                    while ((seen < 0 || r < seen) && !bad_row.compare_exchange_weak(seen, r)) {
                    }
                    return;
                }
                std::memcpy(o + r * inner, s + ((r / n_index) * n_data + i) * inner,
                            size_t(inner) * sizeof(T));
            }
        });
    int64_t bad = bad_row.load();
    KILN_CHECK(bad < 0, "gather: index ", bad < 0 ? 0 : ip[bad], " is out of bounds for dim ",
               p.dim, " with size ", p.n_data, kIndexUsers);
}

}  // namespace

Tensor forward_gather(std::span<const Tensor> in, const Attrs& a) {
    const Tensor& x = in[0];
    IndexPlan p = plan_index(x, in[1], a.dim, "gather");
    p.in_range = a.scalar == kIndexInRange;
    if (x.device().type == DeviceType::cuda) return cuda_gather(x, in[1], p);
    Tensor src = contiguous_as(x, x.dtype());
    Tensor out = empty(in[1].shape(), x.dtype());
    if (gathers_rows(p, in[1])) {
        visit_dtype(x.dtype(), [&](auto tag) {
            using T = decltype(tag);
            gather_rows<T>(p, in[1], ptr<T>(src), ptr<T>(out));
        });
        return out;
    }
    visit_dtype(x.dtype(), [&](auto tag) {
        using T = decltype(tag);
        const T* s = ptr<T>(src);
        T* o = ptr<T>(out);
        for_each_index(p, in[1], "gather", false,
                       [&](int64_t at, int64_t from) { o[at] = s[from]; });
    });
    return out;
}

std::vector<Tensor> backward_gather(const BackwardArgs& b) {
    if (!b.needs(0)) return {Tensor(), Tensor()};
    Tensor base = zeros(b.input_shapes[0], {.dtype = b.grad.dtype(), .device = b.grad.device()});
    return {dispatch(OpId::scatter_add, {base, b.inputs[1], b.grad}, b.attrs), Tensor()};
}

Tensor forward_scatter_add(std::span<const Tensor> in, const Attrs& a) {
    const Tensor &base = in[0], &index = in[1], &src_in = in[2];
    IndexPlan p = plan_index(base, index, a.dim, "scatter_add");
    p.in_range = a.scalar == kIndexInRange;
    KILN_CHECK(src_in.shape() == index.shape(), "scatter_add: src ", src_in.shape(),
               " must have the index's shape ", index.shape());
    KILN_CHECK(src_in.dtype() == base.dtype(), "scatter_add: src (", src_in.dtype(),
               ") and input (", base.dtype(), ") must have one dtype");
    if (base.device().type == DeviceType::cuda) return cuda_scatter_add(base, index, src_in, p);
    Tensor out = materialize(base);
    Tensor src = contiguous_as(src_in, src_in.dtype());
    visit_dtype(base.dtype(), [&](auto tag) {
        using T = decltype(tag);
        const T* s = ptr<T>(src);
        T* o = ptr<T>(out);
        for_each_index(p, index, "scatter_add", true,
                       [&](int64_t at, int64_t to) { o[to] = T(o[to] + s[at]); });
    });
    return out;
}

std::vector<Tensor> backward_scatter_add(const BackwardArgs& b) {
    Tensor grad_src =
        b.needs(2) ? dispatch(OpId::gather, {b.grad, b.inputs[1]}, b.attrs) : Tensor();
    return {b.needs(0) ? b.grad : Tensor(), Tensor(), grad_src};
}

}  // namespace kiln
