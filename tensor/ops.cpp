// Free functions over the op table: what users call (exp(x), x + 1, zeros({2, 3}) ...).
#include "tensor/ops.h"

#include <cmath>

#include "autograd/node.h"
#include "tensor/kernels.h"

namespace kiln {

#define KILN_UNARY(name, ...) \
    Tensor name(const Tensor& x) { return dispatch(OpId::name, {x}); }
#define KILN_BINARY(name, ...)                                                                 \
    Tensor name(const Tensor& x, const Tensor& y) { return dispatch(OpId::name, {x, y}); }    \
    Tensor name(const Tensor& x, double y) {                                                   \
        return dispatch(OpId::name, {x}, {.scalar = y, .scalar_pos = ScalarPos::right});       \
    }                                                                                          \
    Tensor name(double x, const Tensor& y) {                                                   \
        return dispatch(OpId::name, {y}, {.scalar = x, .scalar_pos = ScalarPos::left});        \
    }
#define KILN_COMPARE(name, ...)                                                                \
    Tensor name(const Tensor& x, const Tensor& y) { return dispatch(OpId::name, {x, y}); }    \
    Tensor name(const Tensor& x, double y) {                                                   \
        return dispatch(OpId::name, {x}, {.scalar = y, .scalar_pos = ScalarPos::right});       \
    }
#include "tensor/ops.def"

Tensor operator-(const Tensor& x) { return neg(x); }

Tensor where(const Tensor& c, const Tensor& a, const Tensor& b) { return dispatch(OpId::where, {c, a, b}); }
Tensor where(const Tensor& c, const Tensor& a, double b) { return where(c, a, scalar_tensor(b, a.dtype())); }
Tensor where(const Tensor& c, double a, const Tensor& b) { return where(c, scalar_tensor(a, b.dtype()), b); }
#define KILN_REDUCTION(name, ...) \
    Tensor name(const Tensor& x, const Shape& d, bool k) { return x.name(d, k); }
#include "tensor/reductions.def"
Tensor mean(const Tensor& x, const Shape& d, bool k) { return x.mean(d, k); }
Tensor matmul(const Tensor& a, const Tensor& b) { return a.matmul(b); }
Tensor softmax(const Tensor& x, int64_t d) { return x.softmax(d); }
Tensor log_softmax(const Tensor& x, int64_t d) { return x.log_softmax(d); }
Tensor transpose(const Tensor& x, int64_t d0, int64_t d1) { return x.transpose(d0, d1); }
Tensor cat(const std::vector<Tensor>& xs, int64_t d) {
    return dispatch(OpId::cat, std::span<const Tensor>(xs), {.dim = d});
}

Tensor sum_to(const Tensor& x, const Shape& shape) {
    if (x.shape() == shape) return x;
    int64_t lead = x.dim() - int64_t(shape.size());
    KILN_CHECK(lead >= 0, "sum_to: cannot reduce ", x.shape(), " to ", shape);
    Shape dims;
    for (int64_t i = 0; i < x.dim(); ++i)
        if (i < lead || (shape[i - lead] == 1 && x.shape()[i] != 1)) dims.push_back(i);
    Tensor s = dims.empty() ? x : x.sum(dims, true);
    return s.reshape(shape);
}

// --- factories
// Factories fill on the host and copy to a CUDA device (the same numbers for one seed on
// either device); requires_grad applies to the tensor on its final device.
static Tensor finish(Tensor t, const TensorOptions& opt) {
    if (opt.device != t.device()) t = t.to(opt.device);
    if (opt.requires_grad) {
        Tensor leaf = t.is_leaf() ? t : t.detach();
        leaf.requires_grad_(true);
        return leaf;
    }
    return t;
}
Tensor full(const Shape& s, double v, TensorOptions o) {
    return finish(dispatch(OpId::full, {}, {.shape = s, .scalar = v, .dtype = o.dtype, .device = o.device}), o);
}
Tensor zeros(const Shape& s, TensorOptions o) { return full(s, 0.0, o); }
Tensor ones(const Shape& s, TensorOptions o) { return full(s, 1.0, o); }
// The *_like factories take x's sizes as attributes, with their origin (dispatch_sized).
Tensor full_like(const Tensor& x, double v) {
    std::vector<SizeOrigin> o = shape_origins(x);
    return dispatch_sized(OpId::full, {}, {.shape = x.impl()->shape, .scalar = v, .dtype = x.dtype(), .device = x.device()}, o);
}
Tensor zeros_like(const Tensor& x) { return full_like(x, 0.0); }
Tensor ones_like(const Tensor& x) { return full_like(x, 1.0); }
Tensor scalar_tensor(double v, DType dt) { return full({}, v, {.dtype = dt}); }
Tensor arange(double end, TensorOptions o) { return arange(0, end, 1, o); }
Tensor arange(double start, double end, double step, TensorOptions o) {
    return finish(dispatch(OpId::arange, {}, {.scalar = step, .lo = start, .hi = end, .dtype = o.dtype, .device = o.device}), o);
}
Tensor rand(const Shape& s, TensorOptions o) {
    return finish(dispatch(OpId::rand, {}, {.shape = s, .lo = 0, .hi = 1, .dtype = o.dtype, .device = o.device}), o);
}
Tensor randn(const Shape& s, TensorOptions o) {
    return finish(dispatch(OpId::randn, {}, {.shape = s, .dtype = o.dtype, .device = o.device}), o);
}
Tensor randint(int64_t low, int64_t high, const Shape& s, TensorOptions o) {
    return finish(dispatch(OpId::randint, {}, {.shape = s, .lo = double(low), .hi = double(high), .dtype = o.dtype, .device = o.device}), o);
}
Tensor randn_like(const Tensor& x) {
    std::vector<SizeOrigin> o = shape_origins(x);
    return dispatch_sized(OpId::randn, {}, {.shape = x.impl()->shape, .dtype = x.dtype(), .device = x.device()}, o);
}

template <class T>
Tensor tensor(const std::vector<T>& values, const Shape& shape, TensorOptions opt) {
    Shape s = shape.empty() && values.size() != 1 ? Shape{int64_t(values.size())} : shape;
    KILN_CHECK(shape_numel(s) == int64_t(values.size()), "tensor: ", values.size(), " values do not fill shape ", s);
    Tensor t = empty(s, dtype_of<T>());
    T* p = static_cast<T*>(t.raw_data());
    for (size_t i = 0; i < values.size(); ++i) p[i] = values[i];
    if (opt.dtype != dtype_of<T>()) t = contiguous_as(t, opt.dtype);
    return finish(t, opt);
}
template Tensor tensor<float>(const std::vector<float>&, const Shape&, TensorOptions);
template Tensor tensor<double>(const std::vector<double>&, const Shape&, TensorOptions);
template Tensor tensor<int64_t>(const std::vector<int64_t>&, const Shape&, TensorOptions);
template Tensor tensor<bool>(const std::vector<bool>&, const Shape&, TensorOptions);

Tensor tensor(std::initializer_list<double> values, TensorOptions opt) {
    return tensor(std::vector<double>(values), {int64_t(values.size())}, opt);
}
Tensor tensor(std::initializer_list<std::initializer_list<double>> rows, TensorOptions opt) {
    std::vector<double> flat;
    int64_t cols = rows.size() ? int64_t(rows.begin()->size()) : 0;
    for (const auto& r : rows) {
        KILN_CHECK(int64_t(r.size()) == cols, "tensor: ragged rows (", r.size(), " vs ", cols, " values)");
        flat.insert(flat.end(), r.begin(), r.end());
    }
    return tensor(flat, {int64_t(rows.size()), cols}, opt);
}

bool equal(const Tensor& a, const Tensor& b) {
    KILN_CHECK(a.device() == b.device(), "equal: expected both tensors on the same device, got ",
               a.device(), " and ", b.device());
    NoGradGuard g;
    if (a.shape() != b.shape()) return false;
    if (!is_floating(a.dtype()) && !is_floating(b.dtype()))
        return contiguous_as(a.detach(), int64).to_vector<int64_t>() ==
               contiguous_as(b.detach(), int64).to_vector<int64_t>();
    return contiguous_as(a.detach(), float64).to_vector<double>() ==
           contiguous_as(b.detach(), float64).to_vector<double>();
}

bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol) {
    NoGradGuard g;
    if (a.shape() != b.shape()) return false;
    std::vector<double> x = contiguous_as(a.detach(), float64).to_vector<double>();
    std::vector<double> y = contiguous_as(b.detach(), float64).to_vector<double>();
    for (size_t i = 0; i < x.size(); ++i) {
        if (std::isnan(x[i]) || std::isnan(y[i])) {
            if (std::isnan(x[i]) != std::isnan(y[i])) return false;
            continue;
        }
        if (std::isinf(x[i]) || std::isinf(y[i])) {
            if (x[i] != y[i]) return false;
            continue;
        }
        if (std::abs(x[i] - y[i]) > atol + rtol * std::abs(y[i])) return false;
    }
    return true;
}

}  // namespace kiln
