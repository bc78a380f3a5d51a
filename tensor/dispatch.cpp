// The op table and the dispatcher that every op call passes through.
#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <sstream>
#include <string_view>

#include "autograd/node.h"
#include "tensor/cuda_runtime.h"
#include "tensor/kernels.h"

namespace kiln {

#define KILN_UNARY(name, ...) std::vector<Tensor> backward_##name(const BackwardArgs& b); \
    Tensor forward_##name(std::span<const Tensor> in, const Attrs& attrs);
#define KILN_BINARY(name, ...) KILN_UNARY(name)
#define KILN_COMPARE(name, ...) Tensor forward_##name(std::span<const Tensor> in, const Attrs& attrs);
#include "tensor/ops.def"

namespace {

// `list` names what a derivative reads, e.g. "xyout": x, y and out.
constexpr bool saves(std::string_view list, std::string_view what) {
    if (what == "out") return list.find("out") != std::string_view::npos;
    return list.find(what) != std::string_view::npos;  // "out" contains neither x nor y
}

#define SAVES(list) saves(list, "x"), saves(list, "y"), saves(list, "out")
const OpInfo kOps[] = {
#define KILN_UNARY(name, math, dx, sv, ints, domain)                                                 \
    {#name, OpKind::pointwise, 1, #math, #dx, true, ints, SAVES(sv), forward_##name, backward_##name, \
     {Domain::domain, Domain::any}},
#define KILN_BINARY(name, math, dx, dy, sv, ints, domain_x, domain_y)                                           \
    {#name, OpKind::pointwise, 2, #math, #dx " ; " #dy, true, ints, SAVES(sv), forward_##name, backward_##name, \
     {Domain::domain_x, Domain::domain_y}},
#define KILN_COMPARE(name, math) \
    {#name, OpKind::pointwise, 2, #math, nullptr, true, true, false, false, false, forward_##name, nullptr},
#define KILN_OP(name, kind, arity, recompute, sv) \
    {#name, OpKind::kind, arity, nullptr, nullptr, recompute, true, SAVES(sv), forward_##name, backward_##name},
#include "tensor/ops.def"
};
static_assert(sizeof(kOps) / sizeof(kOps[0]) == kOpCount);

thread_local DispatchHook* t_hook = nullptr;
thread_local int t_kernel_depth = 0;  // > 0 while a kernel runs: nested op calls are plain

}  // namespace

const char* op_kind_name(OpKind k) {
    static const char* names[] = {"pointwise", "reduction", "view", "matmul", "factory", "random", "other"};
    return names[int(k)];
}

const char* domain_name(Domain d) {
    static const char* names[] = {"any", "positive", "above_minus_one", "inside_unit", "inside_half_pi", "nonzero"};
    return names[int(d)];
}

const OpInfo& op_info(OpId op) { return kOps[int(op)]; }
const char* op_name(OpId op) { return kOps[int(op)].name; }

OpId op_by_name(const std::string& name) {
    for (int i = 0; i < kOpCount; ++i)
        if (name == kOps[i].name) return OpId(i);
    fail("unknown op '", name, "'");
}

std::string attrs_print(OpId op, const Attrs& a) {
    std::ostringstream os;
    const OpInfo& info = op_info(op);
    auto sep = [&, first = true]() mutable -> std::ostream& { os << (first ? "" : ", "); first = false; return os; };
    if (a.scalar_pos == ScalarPos::right) sep() << "other=" << a.scalar;
    if (a.scalar_pos == ScalarPos::left) sep() << "self=" << a.scalar;
    if (info.kind == OpKind::reduction)
        sep() << "dims=" << a.dims << ", keepdim=" << (a.keepdim ? "True" : "False");
    switch (op) {
        case OpId::permute: sep() << "dims=" << a.dims; break;
        case OpId::reshape: case OpId::expand: sep() << "shape=" << a.shape; break;
        case OpId::slice: sep() << "dim=" << a.dim << ", start=" << a.start << ", end=" << a.end << ", step=" << a.step; break;
        case OpId::slice_backward: sep() << "shape=" << a.shape << ", dim=" << a.dim << ", start=" << a.start << ", end=" << a.end << ", step=" << a.step; break;
        case OpId::cat: sep() << "dim=" << a.dim; break;
        case OpId::cast: sep() << "dtype=" << a.dtype; break;
        case OpId::full: sep() << "shape=" << a.shape << ", value=" << a.scalar << ", dtype=" << a.dtype; break;
        case OpId::arange: sep() << "start=" << a.lo << ", end=" << a.hi << ", step=" << a.scalar << ", dtype=" << a.dtype; break;
        case OpId::rand: case OpId::randint: sep() << "shape=" << a.shape << ", low=" << a.lo << ", high=" << a.hi; break;
        case OpId::randn: sep() << "shape=" << a.shape; break;
        case OpId::to_device: sep() << "device=" << a.device; break;
        case OpId::unfold2d: sep() << "window=" << a.shape << ", pad=" << a.scalar; break;
        case OpId::fold2d: sep() << "window=" << a.shape << ", size=" << a.dims; break;
        case OpId::max_pool2d_index:
            sep() << "window=" << a.shape << ", out=" << a.dims;
            break;
        case OpId::conv2d:
        case OpId::conv2d_weight_grad:
            sep() << "window=" << a.shape << ", groups=" << a.dim << (a.keepdim ? ", nhwc" : "");
            break;
        case OpId::conv2d_input_grad:
            sep() << "window=" << a.shape << ", groups=" << a.dim << ", size=" << a.dims
                  << (a.keepdim ? ", nhwc" : "");
            break;
        case OpId::conv2d_fused:
            sep() << "window=" << a.shape << ", groups=" << a.dim << ", post_ops=" << a.dims;
            break;
        case OpId::gather: case OpId::scatter_add: sep() << "dim=" << a.dim; break;
        case OpId::attention:
            sep() << "scale=" << a.scalar << ", causal=" << (a.dim ? "True" : "False")
                  << (a.keepdim ? ", heads_last" : "");
            break;
        default: break;
    }
    if (op_info(op).kind == OpKind::factory || op_info(op).kind == OpKind::random)
        if (a.device != cpu) sep() << "device=" << a.device;
    (void)info;
    return os.str();
}

DispatchHook* dispatch_hook() { return t_kernel_depth ? nullptr : t_hook; }
void set_dispatch_hook(DispatchHook* hook) { t_hook = hook; }

static void check_inputs(OpId op, std::span<const Tensor> inputs) {
    const OpInfo& info = op_info(op);
    KILN_CHECK(info.arity < 0 || int(inputs.size()) == info.arity || (info.kind == OpKind::pointwise && int(inputs.size()) == info.arity - 1),
               info.name, ": expected ", info.arity, " tensor inputs, got ", inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
        KILN_CHECK(inputs[i].defined(), info.name, ": input ", i, " is an undefined tensor");
        // A 0-d CPU tensor mixes with tensors of any device, as in PyTorch (kernels_cuda.cpp).
        bool scalar = inputs[i].dim() == 0 || inputs[0].dim() == 0;
        KILN_CHECK(inputs[i].device() == inputs[0].device() || scalar, info.name, ": expected all tensors on one device, got ",
                   inputs[0].device(), " and ", inputs[i].device(), " (input 0 of shape ", inputs[0].shape(), ", input ", i,
                   " of shape ", inputs[i].shape(), ")");
    }
}

Tensor dispatch_eager(OpId op, std::span<const Tensor> inputs, const Attrs& attrs) {
    check_inputs(op, inputs);
    Tensor out;
    {
        ++t_kernel_depth;
        struct Leave { ~Leave() { --t_kernel_depth; } } leave;
        autograd::NoGradGuard no_grad;  // kernels' inner op calls are not recorded
        bool on_cuda = std::any_of(inputs.begin(), inputs.end(), [](const Tensor& t) { return t.device().type == DeviceType::cuda; }) ||
                       (inputs.empty() && attrs.device.type == DeviceType::cuda);  // a factory making a CUDA tensor
        std::optional<cuda::detail::OpScope>
            named;  // what a CUDA graph capture refuses names the op
        if (on_cuda || (op == OpId::to_device && attrs.device.type == DeviceType::cuda))
            named.emplace(op_info(op).name);
        out = on_cuda ? cuda_forward(op, inputs, attrs) : op_info(op).forward(inputs, attrs);
    }
    if (t_kernel_depth == 0) autograd::record_op(op, inputs, attrs, out);
    return out;
}

Tensor dispatch_sized(OpId op, std::span<const Tensor> inputs, const Attrs& attrs, std::span<const SizeOrigin> origins) {
    if (DispatchHook* hook = dispatch_hook()) return hook->call_sized(op, inputs, attrs, origins);
    return dispatch_eager(op, inputs, attrs);
}

Tensor dispatch_sized(OpId op, std::initializer_list<Tensor> inputs, const Attrs& attrs, std::span<const SizeOrigin> origins) {
    return dispatch_sized(op, std::span<const Tensor>(inputs.begin(), inputs.size()), attrs, origins);
}

std::vector<SizeOrigin> shape_origins(const Tensor& x) {
    std::vector<SizeOrigin> out;
    for (int64_t i = 0; i < x.dim(); ++i) out.push_back({.field = AttrField::shape, .index = int(i), .dims = {{x, i}}});
    return out;
}

thread_local constinit bool detail::t_observe_sizes = false;

void detail::observe_size(const Tensor& t, int64_t dim, const std::source_location& loc) {
    if (DispatchHook* hook = dispatch_hook()) {
        SizesUnobserved quiet;  // the hook's own size reads are not fn's
        hook->size_read(t, dim, loc);
    }
}

Tensor dispatch(OpId op, std::span<const Tensor> inputs, const Attrs& attrs) {
    if (DispatchHook* hook = dispatch_hook()) return hook->call(op, inputs, attrs);
    return dispatch_eager(op, inputs, attrs);
}
Tensor dispatch(OpId op, std::initializer_list<Tensor> inputs, const Attrs& attrs) {
    return dispatch(op, std::span<const Tensor>(inputs.begin(), inputs.size()), attrs);
}

void report_escape(const Tensor& t, Escape kind, const std::source_location& loc) {
    if (DispatchHook* hook = dispatch_hook()) hook->escape(t, kind, loc);
}

NoDispatchHook::NoDispatchHook() : prev(t_hook) { t_hook = nullptr; }
NoDispatchHook::~NoDispatchHook() { t_hook = prev; }

void dispatch_assign(const Tensor& target, const Tensor& value) {
    if (DispatchHook* hook = dispatch_hook()) return hook->assign(target, value);
    assign_eager(target, value);
}

void write_values(const Tensor& dst, const Tensor& src) {
    Tensor from = src.detach();
    if (from.impl()->storage == dst.impl()->storage) {  // overlapping: through a fresh copy
        Tensor copy = empty(from.shape(), from.dtype(), from.device());
        strided_copy(copy, from);
        from = copy;
    }
    strided_copy(dst.detach(), from);
    ++dst.impl()->storage->version;
}

void assign_eager(const Tensor& target, const Tensor& value) {
    KILN_CHECK(value.shape() == target.shape() && value.dtype() == target.dtype(), "in-place op: value ", value.dtype(),
               value.shape(), " does not fit tensor ", target.dtype(), target.shape());
    // Saved tensors the write invalidates are caught by backward (storage versions). Views
    // of a base that requires grad do not rebase the base's history (no CopySlices): docs/jit.md.
    bool grad = autograd::grad_enabled() && (target.requires_grad() || value.requires_grad());
    KILN_CHECK(!(grad && target.is_leaf() && target.requires_grad()), "in-place op: a leaf tensor that requires grad (shape ",
               target.shape(), ") is used in an in-place operation; do it under NoGradGuard (as optimizers do)");
    write_values(target, value);
    if (grad && value.requires_grad()) {
        Tensor h = value;
        if (!h.grad_fn()) h = dispatch_eager(OpId::cast, std::span<const Tensor>(&value, 1), {.dtype = value.dtype()});
        autograd::set_history(target, h.grad_fn(), h.impl()->output_nr);
    }
}

void report_host_effect(const std::string& what, const std::source_location& loc) {
    if (DispatchHook* hook = dispatch_hook()) hook->host_effect(what, loc);
}

void report_guard_value(const std::string& what, std::function<int64_t()> read) {
    if (DispatchHook* hook = dispatch_hook()) hook->guard_value(what, std::move(read));
}

}  // namespace kiln
