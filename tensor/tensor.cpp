// Tensor methods and the free functions of the op table: thin wrappers over dispatch().
#include "tensor/tensor.h"

#include <cmath>
#include <cstring>

#include "autograd/node.h"
#include "tensor/cuda.h"
#include "tensor/kernels.h"
#include "tensor/ops.h"

namespace kiln {

Shape contiguous_strides(const Shape& shape) {
    Shape strides(shape.size());
    int64_t s = 1;
    for (int64_t i = int64_t(shape.size()) - 1; i >= 0; --i) {
        strides[i] = s;
        s *= std::max<int64_t>(shape[i], 1);
    }
    return strides;
}

int64_t checked_numel(const Shape& shape, const char* op) {
    int64_t n = 1;
    for (int64_t d : shape) {
        KILN_CHECK(d >= 0, op, ": negative size ", d, " in shape ", shape);
        KILN_CHECK(!__builtin_mul_overflow(n, d, &n), op, ": shape ", shape, " has more elements than int64 can count");
    }
    int64_t bytes;  // at the widest dtype, so that numel * dtype_bytes never overflows either
    KILN_CHECK(!__builtin_mul_overflow(n, int64_t(8), &bytes), op, ": shape ", shape, " has ", n, " elements, too many to address in bytes");
    return n;
}

int64_t normalize_dim(int64_t dim, int64_t rank, const char* op) {
    int64_t r = std::max<int64_t>(rank, 1);  // a 0-d tensor takes dim 0 or -1, as in torch
    KILN_CHECK(dim >= -r && dim < r, op, ": dimension out of range (expected to be in range of [", -r, ", ", r - 1, "], but got ", dim, ")");
    return dim < 0 ? dim + r : dim;
}

int64_t index_dim(int64_t dim, int64_t rank, const char* op) {
    KILN_CHECK(rank > 0, op, ": cannot be applied to a 0-dim tensor (dimension specified as ", dim, " but tensor has no dimensions)");
    return normalize_dim(dim, rank, op);
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
    size_t n = std::max(a.size(), b.size());
    Shape out(n);
    for (size_t i = 0; i < n; ++i) {
        int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
        int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
        KILN_CHECK(da == db || da == 1 || db == 1, op, ": shapes ", a, " and ", b, " cannot be broadcast (dim ", i, ": ", da, " vs ", db, ")");
        out[i] = da == 1 ? db : da;
    }
    return out;
}

Tensor make_tensor(std::shared_ptr<Storage> storage, Shape shape, DType dtype) {
    int64_t numel = checked_numel(shape, "make_tensor");
    KILN_CHECK(storage && size_t(numel) * dtype_bytes(dtype) <= storage->bytes, "make_tensor: shape ", shape, " of ", dtype,
               " needs ", size_t(numel) * dtype_bytes(dtype), " bytes, the storage holds ", storage ? storage->bytes : 0);
    auto impl = std::make_shared<TensorImpl>();
    impl->storage = std::move(storage);
    impl->strides = contiguous_strides(shape);
    impl->shape = std::move(shape);
    impl->dtype = dtype;
    return Tensor(impl);
}

Tensor empty(const Shape& shape, DType dtype, Device device) {
    int64_t numel = checked_numel(shape, "empty");
    return make_tensor(storage_allocate(size_t(numel) * dtype_bytes(dtype), device), shape, dtype);
}

int64_t Tensor::size(int64_t d, Loc loc) const {
    int64_t n = index_dim(d, dim(), "size");
    return observed(n, loc).shape[n];
}

// Contiguity does not depend on the values of sizes >= 2 (symbolic sizes), so it reads them unobserved.
bool Tensor::is_contiguous() const {
    const auto& s = checked().shape;
    const auto& st = checked().strides;
    if (shape_numel(s) == 0) return true;  // nothing to lay out (else [3, 0] would count as strided)
    int64_t expect = 1;
    for (int64_t i = int64_t(s.size()) - 1; i >= 0; --i) {
        if (s[i] == 1) continue;
        if (st[i] != expect) return false;
        expect *= s[i];
    }
    return true;
}

void* Tensor::raw_data() const {
    auto& impl = checked();
    if (impl.storage->fake)
        fail_as<FakeTensorRead>(
            "a read of the values of a ", impl.dtype, shape(),
            " tensor recorded shape-only (jit shape-only tracing): it has none; "
            "KILN_FAKE_TRACE=0 traces with real tensors");
    return static_cast<char*>(impl.storage->data) + impl.offset * int64_t(dtype_bytes(impl.dtype));
}

template <class T>
T* Tensor::data_ptr(std::source_location loc) const {
    KILN_CHECK(dtype() == dtype_of<T>(), "data_ptr: tensor has dtype ", dtype(), ", asked for ", dtype_of<T>());
    report_escape(*this, Escape::data_access, loc);
    KILN_CHECK(device().type == DeviceType::cpu, "data_ptr: the tensor is on ", device(),
               ", where the host cannot read it; copy it with .cpu() first");
    return static_cast<T*>(raw_data());
}

// A CUDA tensor's values, copied to the host for reading (item, bool, to_vector): a read,
// not an op, so nothing is recorded and no second escape is reported for the copy.
static Tensor host_view(const Tensor& t) {
    if (t.device().type != DeviceType::cuda) return t;
    NoDispatchHook none;
    return cuda::to_device(t.detach(), kiln::cpu);
}

template <class T>
T Tensor::item(std::source_location loc) const {
    SizesUnobserved quiet;  // a value leaves: the JIT re-runs host code from here (an escape)
    KILN_CHECK(numel() == 1, "item: a Tensor with ", numel(), " elements cannot be converted to a scalar (shape ", shape(), ")");
    report_escape(*this, Escape::item, loc);
    Tensor host = host_view(*this);
    T v{};
    visit_dtype(dtype(), [&](auto tag) { v = cast_value<T>(*static_cast<const decltype(tag)*>(host.raw_data())); });
    return v;
}

template <class T>
std::vector<T> Tensor::to_vector(std::source_location loc) const {
    report_escape(*this, Escape::data_access, loc);
    SizesUnobserved quiet;
    Tensor c = contiguous_as(host_view(*this), dtype_of<T>());
    const T* p = static_cast<const T*>(c.raw_data());
    return std::vector<T>(p, p + numel());
}

Tensor::operator bool() const {
    SizesUnobserved quiet;
    KILN_CHECK(numel() == 1, "bool: a Tensor with ", numel(), " elements is ambiguous as a condition (shape ", shape(), "); use .any() style reductions first");
    report_escape(*this, Escape::bool_conversion, std::source_location::current());
    Tensor host = host_view(*this);
    bool v = false;
    visit_dtype(dtype(), [&](auto tag) { v = *static_cast<const decltype(tag)*>(host.raw_data()) != decltype(tag)(0); });
    return v;
}

#define KILN_INSTANTIATE(T)                                                      \
    template T* Tensor::data_ptr<T>(std::source_location) const;                 \
    template T Tensor::item<T>(std::source_location) const;                      \
    template std::vector<T> Tensor::to_vector<T>(std::source_location) const;
KILN_INSTANTIATE(float)
KILN_INSTANTIATE(double)
KILN_INSTANTIATE(int64_t)
KILN_INSTANTIATE(bool)
#undef KILN_INSTANTIATE

// --- autograd surface
Tensor& Tensor::requires_grad_(bool on) {
    KILN_CHECK(!on || is_floating(dtype()), "requires_grad_: only floating point tensors can require gradients, got ", dtype());
    KILN_CHECK(is_leaf() || on, "requires_grad_: cannot turn off requires_grad on a non-leaf tensor; use detach()");
    checked().requires_grad = on;
    return *this;
}
Tensor Tensor::grad() const { return Tensor(checked().grad); }
void Tensor::set_grad(const Tensor& g) { checked().grad = g.impl_ptr(); }
void Tensor::zero_grad() { checked().grad.reset(); }
void Tensor::backward(const Tensor& grad, bool retain_graph, std::source_location loc) const {
    report_escape(*this, Escape::backward, loc);  // under compile(): ends the graph; host code re-runs
    NoDispatchHook engine_runs_eagerly;
    autograd::run_backward(*this, grad, retain_graph);
}
Tensor Tensor::detach() const {
    auto impl = std::make_shared<TensorImpl>();
    impl->storage = checked().storage;
    impl->shape = checked().shape;
    impl->strides = checked().strides;
    impl->offset = offset();
    impl->dtype = dtype();
    Tensor out(impl);
    if (DispatchHook* hook = dispatch_hook()) hook->detached(*this, out);  // the JIT sees detach
    return out;
}

// --- views and shapes
Tensor Tensor::reshape(const Shape& s) const { return dispatch(OpId::reshape, {*this}, {.shape = s}); }
Tensor Tensor::view(const Shape& s) const {
    KILN_CHECK(is_contiguous(), "view: tensor of shape ", checked().shape, " with strides ", checked().strides, " is not contiguous; use reshape()");
    return reshape(s);
}
Tensor Tensor::permute(const Shape& d) const { return dispatch(OpId::permute, {*this}, {.dims = d}); }
Tensor Tensor::transpose(int64_t d0, int64_t d1) const {
    Shape perm(dim());
    for (int64_t i = 0; i < dim(); ++i) perm[i] = i;
    int64_t n0 = normalize_dim(d0, dim(), "transpose"), n1 = normalize_dim(d1, dim(), "transpose");
    if (dim() > 0) std::swap(perm[n0], perm[n1]);  // a 0-d tensor transposes to itself
    return permute(perm);
}
Tensor Tensor::expand(const Shape& s) const { return dispatch(OpId::expand, {*this}, {.shape = s}); }
// A reshape to the sizes of this tensor's dims `keep` (in order), 1 where keep[i] is -1:
// squeeze, unsqueeze and flatten say which dims the new shape came from (dispatch_sized),
// so they stay symbolic under compile(dynamic).
static Tensor reshape_to_dims(const Tensor& x, const std::vector<int64_t>& keep) {
    Shape s;
    std::vector<SizeOrigin> origins;
    for (int64_t d : keep) {
        if (d >= 0) origins.push_back({.field = AttrField::shape, .index = int(s.size()), .dims = {{x, d}}});
        s.push_back(d >= 0 ? x.impl()->shape[d] : 1);
    }
    return dispatch_sized(OpId::reshape, {x}, {.shape = s}, origins);
}
// Squeezing tests sizes against 1; symbolic sizes are never 1, so the test reads them unobserved.
Tensor Tensor::squeeze(int64_t d) const {
    int64_t n = normalize_dim(d, dim(), "squeeze");
    std::vector<int64_t> keep;
    for (int64_t i = 0; i < dim(); ++i)
        if (i != n || checked().shape[i] != 1) keep.push_back(i);
    return reshape_to_dims(*this, keep);
}
Tensor Tensor::squeeze() const {
    std::vector<int64_t> keep;
    for (int64_t i = 0; i < dim(); ++i)
        if (checked().shape[i] != 1) keep.push_back(i);
    return reshape_to_dims(*this, keep);
}
Tensor Tensor::unsqueeze(int64_t d) const {
    int64_t n = normalize_dim(d, dim() + 1, "unsqueeze");
    std::vector<int64_t> keep;
    for (int64_t i = 0; i < dim(); ++i) keep.push_back(i);
    keep.insert(keep.begin() + n, -1);
    return reshape_to_dims(*this, keep);
}
Tensor Tensor::flatten() const {
    SizeOrigin all{.field = AttrField::shape, .index = 0};
    for (int64_t i = 0; i < dim(); ++i) all.dims.push_back({*this, i});
    return dispatch_sized(OpId::reshape, {*this}, {.shape = {shape_numel(checked().shape)}}, std::span(&all, 1));
}
Tensor Tensor::narrow(int64_t d, int64_t start, int64_t length) const {
    int64_t n = index_dim(d, dim(), "narrow");
    KILN_CHECK(start >= 0 && length >= 0 && length <= shape()[n] - start, "narrow: start (", start, ") + length (", length, ") exceeds dimension size (", shape()[n], ") of dim ", n);
    return slice(n, start, start + length);
}
Tensor Tensor::slice(int64_t d, int64_t start, int64_t end, int64_t step) const {
    index_dim(d, dim(), "slice");  // checked here too, so the JIT never records a bad slice
    return dispatch(OpId::slice, {*this}, {.dim = d, .start = start, .end = end, .step = step});
}
Tensor Tensor::select(int64_t d, int64_t index) const {
    int64_t n = index_dim(d, dim(), "select");
    int64_t size = shape()[n];
    KILN_CHECK(index >= -size && index < size, "select: index ", index, " is out of bounds for dimension ", n, " with size ", size);
    if (index < 0) index += size;
    return slice(n, index, index + 1).squeeze(n);
}
Tensor Tensor::contiguous() const { return is_contiguous() ? *this : dispatch(OpId::contiguous, {*this}); }
Tensor Tensor::to(DType t) const { return t == dtype() ? *this : dispatch(OpId::cast, {*this}, {.dtype = t}); }
// An op of the table (to_device): differentiable, and recorded by the JIT like any other.
Tensor Tensor::to(Device d) const {
    if (device() == d) return *this;
    return dispatch(OpId::to_device, {*this}, {.device = d, .from = device()});
}
Tensor Tensor::clone() const { return dispatch(OpId::cast, {*this}, {.dtype = dtype()}); }

// --- reductions
#define KILN_REDUCTION(name, ...)                                        \
    Tensor Tensor::name(const Shape& d, bool k) const {                  \
        return dispatch(OpId::name, {*this}, {.dims = d, .keepdim = k}); \
    }
#include "tensor/reductions.def"
// sum * (1/n): the scale 1/n is a size-derived attribute, passed with its origin so that a
// symbolic recording computes it per call (dispatch_sized).
Tensor Tensor::mean(const Shape& d, bool k) const {
    KILN_CHECK(is_floating(dtype()), "mean: expected a floating point tensor, got ", dtype());
    SizeOrigin n{.field = AttrField::scalar, .reciprocal = true};  // a 0-d tensor averages its one element
    if (d.empty()) {
        for (int64_t i = 0; i < dim(); ++i) n.dims.push_back({*this, i});
    } else if (dim() > 0) {
        for (int64_t x : d) {
            int64_t i = normalize_dim(x, dim(), "mean");
            for (const auto& seen : n.dims) KILN_CHECK(seen.second != i, "mean: dim ", i, " appears twice in ", d);
            n.dims.push_back({*this, i});
        }
    }
    int64_t count = 1;
    for (const auto& [t, i] : n.dims) count *= checked().shape[i];
    Tensor s = sum(d, k);
    // Over nothing (count 0) the mean is NaN, as in torch.
    if (count == 0) return s * std::numeric_limits<double>::quiet_NaN();
    Attrs scale{.scalar = 1.0 / double(count), .scalar_pos = ScalarPos::right};
    return dispatch_sized(OpId::mul, {s}, scale, std::span(&n, 1));
}
Tensor Tensor::matmul(const Tensor& o) const { return dispatch(OpId::matmul, {*this, o}); }
// Over an empty dim amax has nothing to shift by; the result is empty too (as torch), so any
// pointwise op of x gives it.
// (Symbolic sizes are never 0, so the test reads the size unobserved.)
static bool reduces_nothing(const Tensor& x, int64_t d, const char* op) {
    int64_t n = normalize_dim(d, x.dim(), op);
    return x.dim() > 0 && x.impl()->shape[n] == 0;
}

Tensor Tensor::softmax(int64_t d) const {
    if (reduces_nothing(*this, d, "softmax")) return kiln::exp(*this);
    Tensor shifted = *this - amax({d}, true).detach();
    Tensor e = kiln::exp(shifted);
    return e / e.sum({d}, true);
}
Tensor Tensor::log_softmax(int64_t d) const {
    if (reduces_nothing(*this, d, "log_softmax")) return kiln::exp(*this);
    Tensor shifted = *this - amax({d}, true).detach();
    return shifted - kiln::log(kiln::exp(shifted).sum({d}, true));
}

#define KILN_UNARY(name, ...) \
    Tensor Tensor::name() const { return dispatch(OpId::name, {*this}); }
#include "tensor/ops.def"

// --- in-place ops: the new value is computed out of place through the dispatcher (so
// autograd and the JIT see ordinary ops), then assign_() writes it into this tensor.
// copy_ reshapes or expands src to this tensor's shape, passing the sizes' origins (the
// shapes' agreement is checked again by the JIT, structurally, when it records the write).
Tensor& Tensor::copy_(const Tensor& src) {
    KILN_CHECK(src.defined(), "copy_: the source is an undefined tensor");
    SizesUnobserved quiet;
    KILN_CHECK(src.numel() == numel() || src.numel() == 1, "copy_: source shape ", src.shape(), " does not match ", shape());
    Tensor v = src.dtype() == dtype() ? src : src.to(dtype());
    if (v.shape() != shape()) {
        std::vector<SizeOrigin> to_this = shape_origins(*this);
        if (v.numel() != numel()) v = v.reshape({});
        v = dispatch_sized(v.numel() == numel() ? OpId::reshape : OpId::expand, {v}, {.shape = shape()}, to_this);
    }
    if (v.same(src) && dispatch_hook()) v = v.clone();  // the JIT gives the new value a node of its own
    return assign_(v);
}
Tensor& Tensor::add_(const Tensor& other, double alpha) {
    return assign_(alpha == 1.0 ? *this + other : *this + other * alpha);
}
Tensor& Tensor::mul_(double s) { return assign_(*this * s); }
Tensor& Tensor::fill_(double v) {
    KILN_CHECK(dtype() != DType::int64 || std::isfinite(v), "fill_: can't fill an int64 tensor with ", v);
    return assign_(full_like(*this, v));
}
Tensor& Tensor::assign_(const Tensor& value) {
    SizesUnobserved quiet;  // the JIT checks target and value shapes structurally (Tracer::assign)
    KILN_CHECK(value.defined() && value.shape() == shape(), "in-place op: the new value has shape ",
               value.defined() ? value.shape() : Shape{}, ", the tensor ", shape());
    Tensor v = value.dtype() == dtype() ? value : value.to(dtype());
    dispatch_assign(*this, v);
    return *this;
}

}  // namespace kiln
