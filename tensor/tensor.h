// Tensor: a cheap handle to a shared TensorImpl (storage + shape + strides + autograd state).
#pragma once
#include <initializer_list>
#include <memory>
#include <source_location>
#include <string>
#include <vector>

#include "tensor/dtype.h"
#include "tensor/error.h"
#include "tensor/storage.h"

namespace kiln {

namespace autograd {
struct Node;
}
class Tensor;

struct TensorImpl {
    std::shared_ptr<Storage> storage;
    Shape shape;                   // sizes, in elements
    Shape strides;                 // strides, in elements (0 for broadcast dims)
    int64_t offset = 0;            // first element, in elements from storage start
    DType dtype = DType::float32;
    bool requires_grad = false;
    std::shared_ptr<TensorImpl> grad;          // accumulated gradient (leaves)
    std::shared_ptr<autograd::Node> grad_fn;   // the node that produced this tensor
    int output_nr = 0;                         // which of grad_fn's outputs this is
    std::shared_ptr<void> tracer_state;        // owned by the active tracer (jit/)
};

// Options for factories: randn({10}, {.requires_grad = true}).
struct TensorOptions {
    DType dtype = DType::float32;
    Device device = cpu;
    bool requires_grad = false;
};

// How a value leaves the framework into host code, or where a graph must end (a graph break
// under the JIT; jit/tracer.cpp's describe_escape says why each one breaks).
enum class Escape { item, bool_conversion, data_access, print, backward, autograd_function };

class Tensor {
   public:
    Tensor() = default;
    explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

    bool defined() const { return impl_ != nullptr; }
    TensorImpl* impl() const { return impl_.get(); }
    const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }

    // --- metadata. Reading sizes (shape, size, numel, strides) while compile() records
    // with symbolic sizes tells the recording which symbols fn's code turned into plain
    // numbers: those get pinned by a guard (docs/jit.md, "Sizes read as numbers"). The
    // rank (dim) and dtype are always guarded, so reading them tells nothing.
    using Loc = std::source_location;
    const Shape& shape(Loc loc = Loc::current()) const { return observed(-1, loc).shape; }
    const Shape& sizes(Loc loc = Loc::current()) const { return observed(-1, loc).shape; }
    int64_t size(int64_t dim, Loc loc = Loc::current()) const;
    const Shape& strides(Loc loc = Loc::current()) const { return observed(-1, loc).strides; }
    int64_t offset() const { return checked().offset; }
    int64_t dim() const { return int64_t(checked().shape.size()); }
    int64_t numel(Loc loc = Loc::current()) const { return shape_numel(observed(-1, loc).shape); }
    DType dtype() const { return checked().dtype; }
    Device device() const { return checked().storage ? checked().storage->device : kiln::cpu; }
    bool is_contiguous() const;
    size_t nbytes() const { return size_t(shape_numel(checked().shape)) * dtype_bytes(dtype()); }

    // --- values leaving the framework (each is a graph break under the JIT)
    template <class T>
    T item(std::source_location loc = std::source_location::current()) const;
    template <class T>
    std::vector<T> to_vector(std::source_location loc = std::source_location::current()) const;
    explicit operator bool() const;
    // Raw pointer to the first element; requires a matching dtype.
    template <class T>
    T* data_ptr(std::source_location loc = std::source_location::current()) const;
    void* raw_data() const;  // no dtype check, no escape report: for kernels

    // --- autograd
    bool requires_grad() const { return checked().requires_grad; }
    Tensor& requires_grad_(bool on = true);
    Tensor grad() const;
    void set_grad(const Tensor& g);
    void zero_grad();
    bool is_leaf() const { return checked().grad_fn == nullptr; }
    std::shared_ptr<autograd::Node> grad_fn() const { return checked().grad_fn; }
    void backward(const Tensor& grad = Tensor(), bool retain_graph = false,
                  std::source_location loc = std::source_location::current()) const;
    Tensor detach() const;  // shares storage, no history

    // --- shape and view ops (all go through the dispatcher)
    Tensor reshape(const Shape& shape) const;
    Tensor view(const Shape& shape) const;
    Tensor permute(const Shape& dims) const;
    Tensor transpose(int64_t d0, int64_t d1) const;
    Tensor t() const { return dim() < 2 ? *this : transpose(0, 1); }  // as torch: 0-d and 1-d unchanged
    Tensor expand(const Shape& shape) const;
    Tensor squeeze(int64_t dim) const;
    Tensor squeeze() const;
    Tensor unsqueeze(int64_t dim) const;
    Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
    Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
    Tensor select(int64_t dim, int64_t index) const;
    Tensor operator[](int64_t index) const { return select(0, index); }
    Tensor contiguous() const;
    Tensor flatten() const;
    Tensor to(DType dtype) const;
    // A copy on `device` (this tensor when already there); not differentiable yet (tensor/cuda.h).
    Tensor to(Device device) const;
    Tensor cuda() const { return to(Device{DeviceType::cuda, 0}); }
    Tensor cpu() const { return to(kiln::cpu); }
    Tensor clone() const;

    // --- reductions: x.sum(), x.amax({1}, true) ... (tensor/reductions.def), and mean
#define KILN_REDUCTION(name, ...) Tensor name(const Shape& dims = {}, bool keepdim = false) const;
#include "tensor/reductions.def"
    Tensor mean(const Shape& dims = {}, bool keepdim = false) const;
    Tensor matmul(const Tensor& other) const;
    Tensor softmax(int64_t dim) const;
    Tensor log_softmax(int64_t dim) const;

    // --- unary pointwise ops as methods: x.cos(), x.exp() ...
#define KILN_UNARY(name, ...) Tensor name() const;
#include "tensor/ops.def"

    // --- in-place updates: the new value is computed by ordinary ops, then written into
    // this tensor's storage (dispatch_assign). Autograd rebases the history as PyTorch
    // does; under compile() they are functionalized (docs/jit.md).
    Tensor& copy_(const Tensor& src);
    Tensor& add_(const Tensor& other, double alpha = 1.0);
    Tensor& mul_(double s);
    Tensor& fill_(double v);
    Tensor& assign_(const Tensor& value);  // this <- value (same shape; cast to this dtype)

    bool same(const Tensor& o) const { return impl_ == o.impl_; }

   private:
    TensorImpl& checked() const {
        KILN_CHECK(impl_, "use of an undefined Tensor");
        return *impl_;
    }
    TensorImpl& observed(int64_t dim, const Loc& loc) const;
    std::shared_ptr<TensorImpl> impl_;
};

// Size reads and the JIT: while a symbolic recording runs, t_observe_sizes is set and
// every size read from fn's code reaches the recording (observe_size). kiln's own
// composites that read sizes only to check them, or that pass size-derived attributes
// with their origin (dispatch_sized), run under SizesUnobserved.
namespace detail {
extern thread_local constinit bool t_observe_sizes;
void observe_size(const Tensor& t, int64_t dim, const std::source_location& loc);  // dim -1: all
}  // namespace detail
inline TensorImpl& Tensor::observed(int64_t dim, const Loc& loc) const {
    TensorImpl& impl = checked();
    if (detail::t_observe_sizes) detail::observe_size(*this, dim, loc);
    return impl;
}
struct SizesUnobserved {
    bool prev;
    SizesUnobserved() : prev(detail::t_observe_sizes) { detail::t_observe_sizes = false; }
    ~SizesUnobserved() { detail::t_observe_sizes = prev; }
    SizesUnobserved(const SizesUnobserved&) = delete;
    SizesUnobserved& operator=(const SizesUnobserved&) = delete;
};

// Wraps an existing allocation with a shape; contiguous strides.
Tensor make_tensor(std::shared_ptr<Storage> storage, Shape shape, DType dtype);
Tensor empty(const Shape& shape, DType dtype = float32, Device device = cpu);
Shape contiguous_strides(const Shape& shape);
// The element count of a shape a tensor or view is about to take; throws kiln::Error naming
// `op` if a size is negative or the count (or its bytes, at 8 per element) overflows int64.
// Every shape that is made (factories, reshape/expand targets, .npy headers, cat) passes here.
int64_t checked_numel(const Shape& shape, const char* op);
// A dim argument in [-rank, rank) made non-negative. As in PyTorch, a 0-d tensor accepts
// dim 0 and -1 (reductions, softmax, squeeze, transpose): the result is 0, which is NOT an
// index into its empty shape. Code that reads shape()[dim] uses index_dim instead.
int64_t normalize_dim(int64_t dim, int64_t rank, const char* op);
// Like normalize_dim, but for ops that pick a dim of the shape (size, narrow, select, slice):
// a 0-d tensor has none, so it throws ("dimension specified as 0 but tensor has no dimensions").
int64_t index_dim(int64_t dim, int64_t rank, const char* op);
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

}  // namespace kiln
