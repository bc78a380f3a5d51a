// The op table as C++: OpId, OpInfo, Attrs, the dispatcher, and the free functions users call.
#pragma once
#include <functional>
#include <optional>
#include <span>

#include "tensor/tensor.h"

namespace kiln {

enum class OpId : uint16_t {
#define KILN_UNARY(name, ...) name,
#define KILN_BINARY(name, ...) name,
#define KILN_COMPARE(name, ...) name,
#define KILN_OP(name, ...) name,
#include "tensor/ops.def"
    count_
};
inline constexpr int kOpCount = int(OpId::count_);

enum class OpKind : uint8_t { pointwise, reduction, view, matmul, factory, random, other };
const char* op_kind_name(OpKind k);

// For a binary op with one scalar operand: which side the scalar sits on.
enum class ScalarPos : uint8_t { none, right, left };

// Non-tensor arguments of an op. Each op reads only the fields its ops.def comment names.
struct Attrs {
    Shape shape;                 // reshape/expand/full/rand target; slice_backward input shape
    Shape dims;                  // reduction dims (empty: all), permutation
    int64_t dim = 0;             // slice, cat
    int64_t start = 0, end = 0, step = 1;  // slice
    double scalar = 0;           // scalar operand, fill value, arange step
    double lo = 0, hi = 0;       // arange / rand / randint range
    ScalarPos scalar_pos = ScalarPos::none;
    bool keepdim = false;
    DType dtype = DType::float32;
    Device device = cpu;         // factories: where the tensor is made; to_device: the target
    Device from = cpu;           // to_device: the source (where its gradient goes back to)
    bool operator==(const Attrs&) const = default;
};
std::string attrs_print(OpId op, const Attrs& a);

struct BackwardArgs {
    std::span<const Tensor> inputs;  // only the tensors in the op's `saves` are defined
    const Tensor& out;               // defined only if `saves` names out
    const Tensor& grad;
    const Attrs& attrs;
    std::span<const Shape> input_shapes;
    std::span<const DType> input_dtypes;
    uint32_t needs_grad;             // bit i: input i wants a gradient
    bool needs(int i) const { return needs_grad >> i & 1u; }
};

// Where an operand of a pointwise op is defined (tan: accurate in float32): the `domain`
// columns of tensor/ops.def. Tests sample each operand inside its domain.
enum class Domain : uint8_t {
    any,
    positive,         // x > 0
    above_minus_one,  // x > -1
    inside_unit,      // |x| < 1
    inside_half_pi,   // |x| < pi/2
    nonzero,
};
const char* domain_name(Domain d);

using ForwardFn = Tensor (*)(std::span<const Tensor>, const Attrs&);
using BackwardFn = std::vector<Tensor> (*)(const BackwardArgs&);

struct OpInfo {
    const char* name;
    OpKind kind;
    int arity;               // tensor inputs; -1 = variadic
    const char* math;        // pointwise expression text (x, y), or nullptr
    const char* derivative;  // derivative text, for printing, or nullptr
    bool recompute;          // cheap enough for the min-cut partitioner to recompute
    bool ints;               // keeps integer dtypes
    bool saves_x, saves_y, saves_out;
    ForwardFn forward;
    BackwardFn backward;     // nullptr: not differentiable
    Domain domain[2] = {};   // pointwise ops: where operands x and y are sampled by tests
};
const OpInfo& op_info(OpId op);
const char* op_name(OpId op);              // op_info(op).name: the table row without its formulas
OpId op_by_name(const std::string& name);  // throws on unknown

// A comparison of the table (KILN_COMPARE): a bool result of its operands promoted together.
constexpr bool is_compare(OpId op) {
    switch (op) {
#define KILN_COMPARE(name, math) case OpId::name:
#include "tensor/ops.def"
        return true;
        default:
            return false;
    }
}

// --- The dispatcher: every op call goes through here.
// A hook (installed per thread by the JIT tracer) may take the call over; it calls
// dispatch_eager to run the kernel with autograd recording.
// Where a size-valued attribute came from: the product of some tensors' sizes, or its
// reciprocal (mean's 1/n). A composite that turns sizes into an attribute passes this with
// the op (dispatch_sized), so that a recording with symbolic sizes re-evaluates the
// attribute on every call instead of baking in the number it saw.
enum class AttrField : uint8_t { shape, scalar, end, hi };
struct SizeOrigin {
    AttrField field = AttrField::shape;
    int index = 0;                                  // element of attrs.shape, for AttrField::shape
    std::vector<std::pair<Tensor, int64_t>> dims;   // the value is the product of these sizes
    bool reciprocal = false;                        // ... or 1 / that product
};
// One origin per dim of `x`: attrs.shape[i] is x.size(i) (zeros_like, fill_, copy_).
std::vector<SizeOrigin> shape_origins(const Tensor& x);

struct DispatchHook {
    virtual ~DispatchHook() = default;
    virtual Tensor call(OpId op, std::span<const Tensor> inputs, const Attrs& attrs) = 0;
    // An op whose attributes carry sizes of other tensors (see SizeOrigin).
    virtual Tensor call_sized(OpId op, std::span<const Tensor> inputs, const Attrs& attrs, std::span<const SizeOrigin> origins) {
        (void)origins;
        return call(op, inputs, attrs);
    }
    // fn's code read size `dim` of `t` (-1: all of them) as a plain number.
    virtual void size_read(const Tensor& t, int64_t dim, const std::source_location& loc) { (void)t, (void)dim, (void)loc; }
    // A value leaves the framework (item, bool, data access); `t` is the tensor read.
    virtual void escape(const Tensor& t, Escape kind, const std::source_location& loc) = 0;
    // Tensor::detach() made `out` from `src` outside the dispatcher; the JIT records it.
    virtual void detached(const Tensor& src, const Tensor& out) { (void)src, (void)out; }
    // An in-place op: `target` takes `value` (same shape and dtype), which was just computed
    // out of place through the dispatcher. The JIT functionalizes it; eager: assign_eager.
    virtual void assign(const Tensor& target, const Tensor& value) = 0;
    // Host code did something the recorded graphs cannot replay (a side effect on a
    // non-tensor value, a backward pass): the JIT re-runs fn's host code on every call.
    virtual void host_effect(const std::string& what, const std::source_location& loc) { (void)what, (void)loc; }
    // autograd::Function::apply with an input that needs grad: its backward is user code.
    // True: the hook made it a graph break (report it as Escape::autograd_function), and
    // apply runs eagerly with no hook; false: its forward's ops reach the hook as usual.
    virtual bool custom_function(const Tensor& input, const std::source_location& loc) {
        (void)input, (void)loc;
        return false;
    }
    // Host code read a non-tensor value the recording depends on (a module's training
    // flag, a global): the JIT guards it, calling `read` on every call to compare.
    virtual void guard_value(const std::string& what, std::function<int64_t()> read) { (void)what, (void)read; }
};
DispatchHook* dispatch_hook();
void set_dispatch_hook(DispatchHook* hook);  // returns nothing; per thread

Tensor dispatch(OpId op, std::span<const Tensor> inputs, const Attrs& attrs = {});
Tensor dispatch(OpId op, std::initializer_list<Tensor> inputs, const Attrs& attrs = {});
Tensor dispatch_eager(OpId op, std::span<const Tensor> inputs, const Attrs& attrs);
// dispatch() for an op whose attributes are sizes of other tensors (SizeOrigin).
Tensor dispatch_sized(OpId op, std::span<const Tensor> inputs, const Attrs& attrs, std::span<const SizeOrigin> origins);
Tensor dispatch_sized(OpId op, std::initializer_list<Tensor> inputs, const Attrs& attrs, std::span<const SizeOrigin> origins);
void report_escape(const Tensor& t, Escape kind, const std::source_location& loc);
// In-place write `target <- value` (Tensor::assign_): through the hook when one is set.
void dispatch_assign(const Tensor& target, const Tensor& value);
// Copies src's elements into dst's storage (through a copy when they overlap) and bumps
// the storage's version: the write of an in-place op, and the JIT's write-backs.
void write_values(const Tensor& dst, const Tensor& src);
// The eager in-place write: copies value's elements into target's storage, bumps the
// storage's version, and under grad mode rebases target's history onto value's.
void assign_eager(const Tensor& target, const Tensor& value);
// Runs its scope with no dispatch hook (the autograd engine inside a compiled function).
struct NoDispatchHook {
    DispatchHook* prev;
    NoDispatchHook();
    ~NoDispatchHook();
    NoDispatchHook(const NoDispatchHook&) = delete;
    NoDispatchHook& operator=(const NoDispatchHook&) = delete;
};
// Tell an active JIT recording about host behaviour (no-ops when nothing records).
void report_host_effect(const std::string& what, const std::source_location& loc = std::source_location::current());
void report_guard_value(const std::string& what, std::function<int64_t()> read);

// --- Free functions, generated from the table.
#define KILN_UNARY(name, ...) Tensor name(const Tensor& x);
#define KILN_BINARY(name, ...)                     \
    Tensor name(const Tensor& x, const Tensor& y); \
    Tensor name(const Tensor& x, double y);        \
    Tensor name(double x, const Tensor& y);
#define KILN_COMPARE(name, ...)                    \
    Tensor name(const Tensor& x, const Tensor& y); \
    Tensor name(const Tensor& x, double y);
#include "tensor/ops.def"

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, double b);
Tensor where(const Tensor& cond, double a, const Tensor& b);
// sum(x), amax(x, {1}, true) ...: one per line of tensor/reductions.def.
#define KILN_REDUCTION(name, ...) \
    Tensor name(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
#include "tensor/reductions.def"
Tensor mean(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
Tensor matmul(const Tensor& a, const Tensor& b);
Tensor softmax(const Tensor& x, int64_t dim);
// The table op attention: softmax(q k^T * scale [causal: key j > query i masked]) v over the
// last two dims, batch dims broadcast (tensor/kernels_attention.cpp). nn::functional::
// scaled_dot_product_attention calls it where it applies (docs/models.md).
Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, double scale, bool causal);
// The most features (q's and k's, v's) CUDA's attention kernel holds in registers; beyond, the
// op runs the composition on either device.
inline constexpr int64_t kAttentionMaxFeatures = 128;
Tensor log_softmax(const Tensor& x, int64_t dim);
Tensor cat(const std::vector<Tensor>& xs, int64_t dim = 0);
Tensor sum_to(const Tensor& x, const Shape& shape);  // reduce broadcast dims back to `shape`
Tensor transpose(const Tensor& x, int64_t d0, int64_t d1);
inline Tensor square(const Tensor& x) { return mul(x, x); }

// --- Composites every tutorial reaches for (tensor/composites.cpp): Tensor code over the
// table's ops, so autograd and the JIT see only primitives. Errors and results as PyTorch's.
Tensor stack(const std::vector<Tensor>& xs, int64_t dim = 0);
// min(max(x, lo), hi); either bound may be absent. lo > hi gives hi everywhere (as torch).
Tensor clamp(const Tensor& x, std::optional<double> lo, std::optional<double> hi);
Tensor eye(int64_t n, int64_t m = -1, TensorOptions opt = {});
Tensor linspace(double start, double end, int64_t steps, TensorOptions opt = {});
// Index (int64) of the first largest/smallest element along dim (NaN counts as largest for
// argmax, smallest for argmin, as torch); without a dim, over the flattened tensor.
Tensor argmax(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
Tensor argmin(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
// torch.round(x, decimals=d): to d decimal places (tens for d < 0), half to even, as
// torch computes it: round(x * 10^d) / 10^d, or round(x / 10^-d) * 10^-d.
Tensor round(const Tensor& x, int64_t decimals);
// sum((x - mean)^2) / (N - correction) over dims (all when empty); std = sqrt(var).
Tensor var(const Tensor& x, const Shape& dims = {}, double correction = 1, bool keepdim = false);
Tensor std(const Tensor& x, const Shape& dims = {}, double correction = 1, bool keepdim = false);
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);
// Views: n pieces of ceil(size/n) (the last smaller, maybe fewer pieces), or pieces of
// `size`, or of the given sizes (which must add up to the dim's size).
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& x, int64_t size, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim = 0);
Tensor bmm(const Tensor& a, const Tensor& b);  // [B, n, m] @ [B, m, p]

// Indexing along a dim (table ops gather and scatter_add, int64 indices; tensor/composites.cpp).
// gather: out[..., j, ...] = x[..., index[..., j, ...], ...]; the index has x's rank and sizes
// outside dim. scatter_add: x with src added at the indexed places. index_select: whole
// slices at a 1-d index. embedding: rows of weight [V, D] for an index of any shape.
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
Tensor embedding(const Tensor& index, const Tensor& weight);

// Convolution and pooling over [N, C, H, W] or unbatched [C, H, W] (tensor/composites_conv.cpp),
// as torch.nn.functional.
// Pairs are (height, width). bias may be undefined.
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = {}, std::pair<int64_t, int64_t> stride = {1, 1},
              std::pair<int64_t, int64_t> padding = {0, 0}, std::pair<int64_t, int64_t> dilation = {1, 1}, int64_t groups = 1);
namespace detail {
// Which library a CPU float32 conv2d runs through now: "onednn" where kiln is built with it
// (KILN_HAVE_DNNL), unless KILN_CONV=im2col asks for the im2col + GEMM composite; else "im2col".
const char* conv_backend_name();
bool conv_onednn_enabled();
bool conv_uses_onednn(const Tensor& t);  // t is CPU float32 and oneDNN is enabled
int64_t onednn_conv_calls();             // oneDNN convolution primitives run so far (for tests)
// The OpenMP thread count the calling thread's last oneDNN convolution primitive was created
// for (0 before any, or without oneDNN): kiln's num_threads() then (for tests).
int onednn_conv_threads();
// Whether a CUDA conv2d runs through cuDNN now (tensor/cudnn.h): t is a CUDA float32/float64
// tensor, KILN_CUDNN is not 0 and libcudnn.so.9 loads (else one note, and im2col + GEMM).
bool conv_uses_cudnn(const Tensor& t);
int64_t cudnn_conv_calls();  // cuDNN convolutions run so far, each direction one (for tests)
// What the op conv2d_fused applies to the convolution's output, in order (its attrs.dims):
// codegen/fuse_conv.cpp writes them, the kernel runs them as oneDNN post-ops. Each one but
// relu reads the next tensor after (x, weight[, bias]): a per-channel [1, C, 1, 1] or
// [C, 1, 1] value, or for add_tensor a value of the output's shape (a residual).
enum class ConvPostOp : int64_t {
    relu = 0,
    add_channel,
    sub_channel,
    mul_channel,
    div_channel,
    add_tensor
};
// The cache of weights reordered into oneDNN's layouts (tensor/kernels_conv_dnnl.cpp): hits,
// misses (reorders run), entries held now and their bytes. KILN_CONV_CACHE=0 turns it off.
struct ConvWeightCacheStats {
    int64_t hits = 0, misses = 0, entries = 0, bytes = 0;
};
ConvWeightCacheStats conv_weight_cache_stats();
void conv_weight_cache_clear();
}  // namespace detail
// Pooling over [N, C, H, W] or unbatched [C, H, W] inputs, with PyTorch's options.
struct Window2d {
    std::pair<int64_t, int64_t> kernel{1, 1};
    std::pair<int64_t, int64_t> stride{1, 1};  // PyTorch's default is the kernel size: say so
    std::pair<int64_t, int64_t> padding{0, 0};
    std::pair<int64_t, int64_t> dilation{1, 1};  // max_pool2d only
    bool ceil_mode = false;  // round the output size up: a last window may hang over the end
    // avg_pool2d: divide by the window's size including the padding (PyTorch's default), or
    // by the count of input elements in it; divisor_override > 0 divides by that instead.
    bool count_include_pad = true;
    int64_t divisor_override = 0;
};
// The first maximum of each window takes the whole gradient (PyTorch's rule for ties).
Tensor max_pool2d(const Tensor& x, const Window2d& window);
// return_indices=True: also each maximum's index into its H*W input plane (int64).
std::pair<Tensor, Tensor> max_pool2d_with_indices(const Tensor& x, const Window2d& window);
Tensor avg_pool2d(const Tensor& x, const Window2d& window);
Tensor adaptive_avg_pool2d(const Tensor& x, std::pair<int64_t, int64_t> output_size);
Tensor adaptive_max_pool2d(const Tensor& x, std::pair<int64_t, int64_t> output_size);

// Operators (thin names over the table ops).
Tensor operator-(const Tensor& x);
#define KILN_OPERATOR(sym, op)                                              \
    inline Tensor operator sym(const Tensor& a, const Tensor& b) { return op(a, b); } \
    inline Tensor operator sym(const Tensor& a, double b) { return op(a, b); }        \
    inline Tensor operator sym(double a, const Tensor& b) { return op(a, b); }
KILN_OPERATOR(+, add)
KILN_OPERATOR(-, sub)
KILN_OPERATOR(*, mul)
KILN_OPERATOR(/, div)
#undef KILN_OPERATOR
#define KILN_COMPARE_OPERATOR(sym, op, flipped)                                        \
    inline Tensor operator sym(const Tensor& a, const Tensor& b) { return op(a, b); } \
    inline Tensor operator sym(const Tensor& a, double b) { return op(a, b); }        \
    inline Tensor operator sym(double a, const Tensor& b) { return flipped(b, a); }
KILN_COMPARE_OPERATOR(<, lt, gt)
KILN_COMPARE_OPERATOR(<=, le, ge)
KILN_COMPARE_OPERATOR(>, gt, lt)
KILN_COMPARE_OPERATOR(>=, ge, le)
KILN_COMPARE_OPERATOR(==, eq, eq)
KILN_COMPARE_OPERATOR(!=, ne, ne)
#undef KILN_COMPARE_OPERATOR

// --- Factories.
Tensor full(const Shape& shape, double value, TensorOptions opt = {});
Tensor zeros(const Shape& shape, TensorOptions opt = {});
Tensor ones(const Shape& shape, TensorOptions opt = {});
Tensor full_like(const Tensor& x, double value);  // x's shape and dtype
Tensor zeros_like(const Tensor& x);
Tensor ones_like(const Tensor& x);
Tensor scalar_tensor(double value, DType dtype = float32);
Tensor arange(double end, TensorOptions opt = {});
Tensor arange(double start, double end, double step = 1, TensorOptions opt = {});
Tensor rand(const Shape& shape, TensorOptions opt = {});
Tensor randn(const Shape& shape, TensorOptions opt = {});
Tensor randint(int64_t low, int64_t high, const Shape& shape, TensorOptions opt = {.dtype = DType::int64});
Tensor randn_like(const Tensor& x);
void manual_seed(uint64_t seed);
// The global generator's state (PyTorch's get_rng_state/set_rng_state): Philox's key and
// the counter of the next draw (tensor/philox.h).
inline constexpr uint64_t kDefaultSeed = 0x6b696c6e;  // "kiln"
struct RngState {
    uint64_t seed = kDefaultSeed;
    uint64_t offset = 0;  // draws made since manual_seed
};
RngState get_rng_state();
void set_rng_state(const RngState& state);
// Takes the next `count` draws for one random op: element i uses (seed, offset + i).
RngState reserve_random(uint64_t count);
template <class T>
Tensor tensor(const std::vector<T>& values, const Shape& shape = {}, TensorOptions opt = {.dtype = dtype_of<T>()});
Tensor tensor(std::initializer_list<double> values, TensorOptions opt = {});
Tensor tensor(std::initializer_list<std::initializer_list<double>> rows, TensorOptions opt = {});

bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8);
// torch.equal: the same sizes and the same values (NaN equals nothing). Integer and bool
// tensors compare exactly as int64; a floating one makes both compare as float64.
bool equal(const Tensor& a, const Tensor& b);

}  // namespace kiln
