// Composites: ops every tutorial reaches for, written as Tensor code over the table's ops
// (tensor/ops.def), so eager autograd and the JIT's graphs see only primitives. Each checks
// its arguments first and names itself and the values in its errors, as PyTorch does.
#include <cmath>

#include "tensor/ops.h"

namespace kiln {

Tensor stack(const std::vector<Tensor>& xs, int64_t dim) {
    KILN_CHECK(!xs.empty(), "stack: expects a non-empty list of tensors");
    int64_t d = normalize_dim(dim, xs[0].dim() + 1, "stack");
    std::vector<Tensor> rows;
    for (size_t i = 0; i < xs.size(); ++i) {
        KILN_CHECK(xs[i].shape() == xs[0].shape(), "stack: expects each tensor to be equal size, but got ", xs[0].shape(),
                   " at entry 0 and ", xs[i].shape(), " at entry ", i);
        rows.push_back(xs[i].unsqueeze(d));
    }
    return cat(rows, d);
}

Tensor clamp(const Tensor& x, std::optional<double> lo, std::optional<double> hi) {
    KILN_CHECK(lo || hi, "clamp: at least one of 'min' or 'max' must not be None");
    Tensor out = x;
    if (lo) out = maximum(out, *lo);
    if (hi) out = minimum(out, *hi);
    return out;
}

Tensor eye(int64_t n, int64_t m, TensorOptions opt) {
    if (m < 0 && m != -1) fail("eye: m must be greater or equal to 0, got ", m);
    if (m == -1) m = n;
    KILN_CHECK(n >= 0, "eye: n must be greater or equal to 0, got ", n);
    TensorOptions dtype_only{.dtype = opt.dtype};
    Tensor rows = arange(double(n), {.dtype = DType::int64}).reshape({n, 1});
    Tensor cols = arange(double(m), {.dtype = DType::int64}).reshape({1, m});
    Tensor out = (rows == cols).to(dtype_only.dtype);
    if (opt.device != out.device()) out = out.to(opt.device);
    if (opt.requires_grad) out.requires_grad_(true);
    return out;
}

Tensor linspace(double start, double end, int64_t steps, TensorOptions opt) {
    KILN_CHECK(steps >= 0, "linspace: number of steps must be non-negative, got ", steps);
    KILN_CHECK(std::isfinite(start) && std::isfinite(end), "linspace: start and end must be finite, got ", start, " and ", end);
    KILN_CHECK(is_floating(opt.dtype), "linspace: kiln makes floating point ranges only, got dtype ", opt.dtype);
    Tensor out;
    if (steps <= 1) {
        out = full({steps}, start, {.dtype = opt.dtype});
    } else {
        // As torch: the first half counts up from start, the second down from end, so both
        // ends are exact.
        double step = (end - start) / double(steps - 1);
        Tensor i = arange(double(steps), {.dtype = DType::float64});
        Tensor up = i * step + start, down = (i - double(steps - 1)) * step + end;
        out = where(i < double(steps / 2), up, down).to(opt.dtype);
    }
    if (opt.device != out.device()) out = out.to(opt.device);
    if (opt.requires_grad) out.requires_grad_(true);
    return out;
}

namespace {
// Shared by argmax/argmin: the first index along dim where x equals the row's extreme (or
// is NaN), found as the smallest such index. Not differentiable: x is detached.
Tensor arg_extreme(const Tensor& input, std::optional<int64_t> dim, bool keepdim, bool largest, const char* op) {
    Tensor x = input.detach();
    if (!dim) {
        Tensor flat = arg_extreme(x.reshape({-1}), 0, false, largest, op);
        return keepdim ? flat.reshape(Shape(size_t(x.dim()), 1)) : flat;
    }
    if (x.dim() == 0) {
        normalize_dim(*dim, 0, op);  // 0-d: dim 0 or -1 only, as torch
        return zeros({}, {.dtype = DType::int64, .device = x.device()});
    }
    int64_t d = normalize_dim(*dim, x.dim(), op);
    int64_t n = x.size(d);
    KILN_CHECK(n > 0, op, ": expected reduction dim ", d, " to have non-zero size (shape ", x.shape(), ")");
    KILN_CHECK(x.dtype() != DType::boolean, op, ": not implemented for bool tensors");
    Shape index_shape(size_t(x.dim()), 1);
    index_shape[d] = n;
    Tensor index = arange(double(n), {.dtype = DType::int64, .device = x.device()}).reshape(index_shape);
    Tensor extreme = largest ? x.amax({d}, true) : x.amin({d}, true);
    Tensor hit = where(x != x, index, where(x == extreme, index, double(n)));
    return hit.amin({d}, keepdim);
}
}  // namespace

Tensor argmax(const Tensor& x, std::optional<int64_t> dim, bool keepdim) { return arg_extreme(x, dim, keepdim, true, "argmax"); }
Tensor argmin(const Tensor& x, std::optional<int64_t> dim, bool keepdim) { return arg_extreme(x, dim, keepdim, false, "argmin"); }

Tensor round(const Tensor& x, int64_t decimals) {
    if (decimals == 0) return round(x);
    KILN_CHECK(is_floating(x.dtype()), "round: decimals=", decimals,
               " is only supported for floating point tensors, got ", x.dtype());
    double ten_pow = std::pow(10.0, double(decimals < 0 ? -decimals : decimals));
    return decimals > 0 ? round(x * ten_pow) / ten_pow : round(x / ten_pow) * ten_pow;
}

Tensor var(const Tensor& x, const Shape& dims, double correction, bool keepdim) {
    KILN_CHECK(is_floating(x.dtype()), "var: std and var only support floating point dtypes, got ", x.dtype());
    int64_t count = 1;
    if (dims.empty()) {
        count = x.numel();
    } else if (x.dim() > 0) {
        for (int64_t d : dims) count *= x.size(normalize_dim(d, x.dim(), "var"));
    }
    Tensor centered = x - x.mean(dims, true);
    // N - correction <= 0 divides by zero or less: inf or NaN, as torch (which also warns).
    return (centered * centered).sum(dims, keepdim) / (double(count) - correction);
}

Tensor std(const Tensor& x, const Shape& dims, double correction, bool keepdim) {
    return sqrt(var(x, dims, correction, keepdim));
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
    KILN_CHECK(mask.dtype() == DType::boolean, "masked_fill: only supports boolean masks, but got mask with dtype ", mask.dtype());
    KILN_CHECK(x.dtype() != DType::int64 || (std::isfinite(value) && std::trunc(value) == value), "masked_fill: value ", value,
               " cannot be converted to int64 without overflow or rounding");
    Tensor out = where(mask, value, x);
    KILN_CHECK(out.shape() == x.shape(), "masked_fill: mask of shape ", mask.shape(), " does not broadcast to the input's shape ",
               x.shape());
    return out.dtype() == x.dtype() ? out : out.to(x.dtype());
}

std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim) {
    KILN_CHECK(x.dim() > 0, "split: expects at least a 1-dimensional tensor");
    int64_t d = normalize_dim(dim, x.dim(), "split");
    int64_t total = 0;
    for (int64_t s : sizes) {
        KILN_CHECK(s >= 0, "split: split sizes must be non-negative, got ", s);
        total += s;
    }
    KILN_CHECK(total == x.size(d), "split: split sizes add up to ", total, " but the tensor has size ", x.size(d), " in dim ", d);
    std::vector<Tensor> out;
    int64_t at = 0;
    for (int64_t s : sizes) out.push_back(x.slice(d, at, at + s)), at += s;
    return out;
}

std::vector<Tensor> split(const Tensor& x, int64_t size, int64_t dim) {
    KILN_CHECK(x.dim() > 0, "split: expects at least a 1-dimensional tensor");
    int64_t d = normalize_dim(dim, x.dim(), "split");
    int64_t n = x.size(d);
    KILN_CHECK(size > 0 || (size == 0 && n == 0), "split: split_size can only be 0 if the dimension size is 0, got split_size ",
               size, " for size ", n);
    std::vector<int64_t> sizes;
    for (int64_t at = 0; at < n; at += size) sizes.push_back(std::min(size, n - at));
    if (sizes.empty()) sizes.push_back(0);
    return split(x, sizes, d);
}

std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim) {
    KILN_CHECK(x.dim() > 0, "chunk: expects at least a 1-dimensional tensor");
    KILN_CHECK(chunks > 0, "chunk: number of chunks must be greater than 0, got ", chunks);
    int64_t d = normalize_dim(dim, x.dim(), "chunk");
    int64_t n = x.size(d);
    int64_t size = (n + chunks - 1) / chunks;
    return split(x, std::max<int64_t>(size, n == 0 ? 0 : 1), d);
}

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) { return dispatch(OpId::gather, {x, index}, {.dim = dim}); }

Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
    return dispatch(OpId::scatter_add, {x, index, src}, {.dim = dim});
}

// The 1-d index laid along dim and expanded over the other dims: one gather.
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
    KILN_CHECK(index.dim() <= 1, "index_select: index should have 1 dim, got shape ", index.shape());
    KILN_CHECK(index.dtype() == DType::int64, "index_select: expected an int64 index, got ", index.dtype());
    KILN_CHECK(x.dim() > 0, "index_select: expected a tensor with at least 1 dim");
    int64_t d = normalize_dim(dim, x.dim(), "index_select");
    Shape view(size_t(x.dim()), 1), out = x.shape();
    view[d] = out[d] = index.numel();
    return gather(x, d, index.reshape(view).expand(out));
}

Tensor embedding(const Tensor& index, const Tensor& weight) {
    KILN_CHECK(weight.dim() == 2, "embedding: expected a weight of shape [num_embeddings, embedding_dim], got ", weight.shape());
    KILN_CHECK(index.dtype() == DType::int64, "embedding: expected an int64 index, got ",
               index.dtype());
    // An eager CPU call names embedding; under compile() reading the values would break the
    // graph, and on CUDA it would make the host wait for the GPU (twice, every forward):
    // gather's own check raises instead (negative indices included, as PyTorch), on CUDA at
    // the next host wait, naming embedding.
    IndexCheckCaller caller("embedding");
    if (!dispatch_hook() && index.numel() > 0 && index.device().type == DeviceType::cpu) {
        int64_t lo = index.amin().item<int64_t>(), hi = index.amax().item<int64_t>();
        KILN_CHECK_INDEX(lo >= 0 && hi < weight.size(0), "embedding: index ", lo < 0 ? lo : hi,
                         " is out of range for ", weight.size(0), " embeddings (num_embeddings)");
    }
    Shape out = index.shape();
    out.push_back(weight.size(1));
    return index_select(weight, 0, index.reshape({index.numel()})).reshape(out);
}

Tensor bmm(const Tensor& a, const Tensor& b) {
    KILN_CHECK(a.dim() == 3, "bmm: batch1 must be a 3D tensor, got shape ", a.shape());
    KILN_CHECK(b.dim() == 3, "bmm: batch2 must be a 3D tensor, got shape ", b.shape());
    KILN_CHECK(a.size(0) == b.size(0), "bmm: batch1 and batch2 must have the same batch size, got ", a.shape(), " and ", b.shape());
    KILN_CHECK(a.size(2) == b.size(1), "bmm: shapes ", a.shape(), " and ", b.shape(), " cannot be multiplied (", a.size(2), " vs ",
               b.size(1), ")");
    return matmul(a, b);
}

}  // namespace kiln
