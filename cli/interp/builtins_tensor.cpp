// Tensor builtins: factories (randn, zeros, tensor ...), the ops of tensor/ops.def as
// functions and as Tensor methods (generated from the op table, so a new op appears here
// by itself), shape methods and attributes.
#include <cmath>
#include <functional>

#include "autograd/node.h"
#include "cli/interp/builtins.h"
#include "cli/interp/limits.h"
#include "cli/interp/operators.h"
#include "tensor/cuda.h"
#include "tensor/ops.h"

namespace kiln::interp {
namespace {

// The tensor an op applies to: the receiver of a method, else the first argument.
Tensor input(Bound& b) { return b.self.is<Tensor>() ? b.self_tensor() : b.tensor(0); }
// Parameter i of a function is parameter i-1 of the method (the method has no `input`).
size_t arg(Bound& b, size_t i) { return b.self.is<Tensor>() ? i - 1 : i; }

// ---- devices. torch.device names a device as in PyTorch (torch.device("cuda:0") is a value
// like any other); tensors go to cuda:0 when kiln finds a usable GPU (docs/cuda.md), and a
// tensor asked to move to CUDA without one raises, as PyTorch without a GPU does.
struct DeviceObj : Object {
    std::string type;    // "cpu" or "cuda"
    int64_t index = -1;  // -1: none given
    std::string type_name() const override { return "device"; }
    std::string str() const override {
        return index < 0 ? type : type + ":" + std::to_string(index);
    }
    std::string repr() const override {
        return "device(type='" + type + "'" +
               (index < 0 ? std::string() : ", index=" + std::to_string(index)) + ")";
    }
    std::optional<Value> attr(Interp&, const ObjectPtr&, const std::string& name) override {
        if (name == "type") return Value(type);
        if (name == "index") return index < 0 ? Value(None{}) : Value(index);
        return std::nullopt;
    }
    bool equals(const Object& other) const override {
        auto d = dynamic_cast<const DeviceObj*>(&other);
        return d && d->type == type && d->index == index;
    }
};

// "cpu", "cuda", "cuda:1" or a torch.device, as the device argument of `op`.
std::shared_ptr<DeviceObj> to_device(Interp& in, const Value& v, const std::string& op) {
    if (auto d = v.object<DeviceObj>()) return d;
    auto s = v.as<std::string>();
    if (!s)
        in.raise("TypeError",
                 op + "(): device must be a string such as 'cpu' or a torch.device, not " +
                     type_name(v));
    auto d = std::make_shared<DeviceObj>();
    size_t colon = s->find(':');
    d->type = s->substr(0, colon);
    if (d->type != "cpu" && d->type != "cuda")
        in.raise("RuntimeError", op + "(): unknown device type '" + d->type +
                                     "' in device string '" + *s + "' (kiln knows cpu and cuda)");
    if (colon != std::string::npos) {
        std::string digits = s->substr(colon + 1);
        if (digits.empty() || digits.size() > 9 ||
            !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
            in.raise("RuntimeError", op + "(): invalid device string '" + *s +
                                         "': the index after ':' must be a non-negative integer");
        d->index = std::stoll(digits);
    }
    return d;
}
// The kiln device a torch.device names, where tensors can go: the CPU, and cuda:0 when
// kiln::cuda::is_available() (tensor/cuda.h); otherwise a RuntimeError naming the call.
Device require_device(Interp& in, const DeviceObj& d, const std::string& op) {
    if (d.type == "cpu") return kiln::cpu;
    if (!cuda::is_available())
        in.raise("RuntimeError", op + "(): cannot place a tensor on " + d.str() +
                                     ": there is no usable CUDA device here (torch.cuda.is_available() is False: " +
                                     cuda::unavailable_reason() + "); leave out the device, or use 'cpu'");
    if (d.index > 0) in.raise("RuntimeError", op + "(): kiln uses cuda:0 only so far, got " + d.str());
    return Device{DeviceType::cuda, 0};
}
std::shared_ptr<DeviceObj> device_value(Device d) {
    auto v = std::make_shared<DeviceObj>();
    v->type = d.type == DeviceType::cuda ? "cuda" : "cpu";
    if (d.type == DeviceType::cuda) v->index = d.index;
    return v;
}
Value b_device(
    Bound& b) {  // torch.device("cuda:0") or torch.device("cuda", 0) or device(type="cpu")
    auto d = to_device(b.in, b.value(0), "torch.device");
    if (b.has(1)) {
        if (d->index >= 0)
            b.in.raise("RuntimeError",
                       "torch.device(): type (string) must not include an index because index was "
                       "passed explicitly: " +
                           d->str());
        int64_t i = b.integer(1);
        if (i < 0)
            b.in.raise("RuntimeError", "torch.device(): device index must not be negative, got " +
                                           std::to_string(i));
        d = std::make_shared<DeviceObj>(*d), d->index = i;
    }
    return d;
}

TensorOptions options(Bound& b, size_t requires_grad, size_t dtype, size_t device = size_t(-1)) {
    TensorOptions opt;
    if (device != size_t(-1) && b.has(device)) opt.device = require_device(b.in, *to_device(b.in, b.value(device), b.fn.name), b.fn.name);
    opt.requires_grad = b.flag_or(requires_grad, false);
    if (b.has(dtype)) {
        auto d = b.value(dtype).as<DType>();
        if (!d) b.type_error(dtype, "a dtype such as torch.float32");
        opt.dtype = *d;
    }
    return opt;
}
// A factory's shape, refused before allocating when its bytes (counted in 128 bits, so
// zeros(2**40, 2**40) cannot wrap around) pass kiln script's memory limit. A RuntimeError,
// as PyTorch's allocator raises.
Shape checked_shape(Bound& b) {
    Shape s = b.shape_from_rest();
    unsigned __int128 numel = 1;
    for (int64_t d : s) numel = std::min<unsigned __int128>(numel * uint64_t(d), (unsigned __int128)(1) << 100);
    unsigned __int128 bytes = numel * 8;  // the widest dtype
    if (bytes > script_memory_limit()) {
        std::string shown;
        for (int64_t d : s) shown += (shown.empty() ? "" : ", ") + std::to_string(d);
        b.in.raise("RuntimeError", b.fn.name + "(): a tensor of shape [" + shown + "] would need more than kiln script's memory limit of " +
                                       std::to_string(script_memory_limit()) + " bytes (KILN_SCRIPT_MEMORY_LIMIT)");
    }
    return s;
}

// ---- factories: params "*size, requires_grad=False, dtype=None"
template <Tensor (*F)(const Shape&, TensorOptions)>
Value factory(Bound& b) { return F(checked_shape(b), options(b, 0, 1, 2)); }
Value b_full(Bound& b) {
    b.rest = {b.value(0)};
    return full(checked_shape(b), b.number(1), options(b, 2, 3, 4));
}
Value b_arange(Bound& b) {
    std::vector<double> a;
    for (const Value& v : b.rest) {
        auto d = as_double(v);
        if (!d) b.in.raise("TypeError", "arange(): arguments must be numbers, not " + type_name(v));
        a.push_back(*d);
    }
    if (a.empty() || a.size() > 3) b.in.raise("TypeError", "arange() takes 1 to 3 numbers");
    bool ints = std::all_of(b.rest.begin(), b.rest.end(), [](const Value& v) { return as_int(v).has_value(); });
    TensorOptions opt = options(b, 1, 0, 2);
    if (!b.has(0) && ints) opt.dtype = int64;  // as in PyTorch: integer arguments, integer tensor
    if (a.size() == 1) return arange(a[0], opt);
    return arange(a[0], a[1], a.size() > 2 ? a[2] : 1.0, opt);
}
Value b_eye(Bound& b) {
    int64_t n = b.integer(0);
    return eye(n, b.has(1) ? b.integer(1) : n, options(b, 3, 2, 4));
}
Value b_linspace(Bound& b) { return linspace(b.number(0), b.number(1), b.integer(2), options(b, 4, 3, 5)); }
Value b_randint(Bound& b) {
    // randint(high, size) or randint(low, high, size)
    if (b.rest.size() < 2 || b.rest.size() > 3) b.in.raise("TypeError", "randint(low=0, high, size): expected 2 or 3 arguments");
    auto num = [&](const Value& v) {
        auto i = as_int(v);
        if (!i) b.in.raise("TypeError", "randint(): low and high must be ints, not " + type_name(v));
        return *i;
    };
    int64_t low = b.rest.size() == 3 ? num(b.rest[0]) : 0, high = num(b.rest[b.rest.size() - 2]);
    b.rest = {b.rest.back()};
    return randint(low, high, checked_shape(b));
}
Value b_tensor(Bound& b) {
    std::optional<DType> dtype;
    TensorOptions opt = options(b, 2, 1, 3);
    if (b.has(1)) dtype = opt.dtype;
    Tensor t = tensor_from_data(b.in, b.value(0), dtype, false);
    if (opt.device != t.device()) t = t.to(opt.device);  // then requires_grad, on its device
    if (opt.requires_grad) t.requires_grad_(true);
    return t;
}
// *_like: "input, dtype=None, device=None, requires_grad=False". Another dtype is a cast of
// the like-tensor, so the result keeps its symbolic sizes under compile().
template <Tensor (*F)(const Tensor&)>
Value like(Bound& b) {
    TensorOptions opt = options(b, 3, 1, 2);
    Tensor t = F(b.tensor(0));
    if (b.has(1) && opt.dtype != t.dtype()) t = t.to(opt.dtype);
    if (b.has(2) && opt.device != t.device()) t = t.to(opt.device);  // else input's device
    if (opt.requires_grad) t.requires_grad_(true);
    return t;
}
Value b_manual_seed(Bound& b) {
    manual_seed(uint64_t(b.integer(0)));
    return None{};
}
Value b_equal(Bound& b) { return equal(input(b), b.tensor(arg(b, 1))); }
Value b_allclose(Bound& b) { return allclose(b.tensor(0), b.tensor(1), b.number_or(2, 1e-5), b.number_or(3, 1e-8)); }

// ---- ops from the table
template <Tensor (*F)(const Tensor&)>
Value unary(Bound& b) { return F(input(b)); }

using TT = Tensor (*)(const Tensor&, const Tensor&);
using TS = Tensor (*)(const Tensor&, double);
template <TT F, TS G>
Value binary(Bound& b) {
    Tensor x = input(b);
    const Value& other = b.value(arg(b, 1));
    if (auto t = other.as<Tensor>()) return F(x, *t);
    if (auto d = as_double(other)) return G(x, *d);
    b.type_error(arg(b, 1), "a Tensor or a number");
}

// Reductions: "input, dim=None, keepdim=False"; method form without input.
template <Tensor (*F)(const Tensor&, const Shape&, bool)>
Value reduction(Bound& b) {
    if (!b.self.is<Tensor>() && !b.value(0).is<Tensor>() && b.fn.name == "sum") {
        Value total = int64_t(0);  // Python's sum over a list of numbers
        for (const Value& v : iterate(b.in, b.value(0))) total = binary_op(b.in, script::BinaryOperator::add, total, v);
        return total;
    }
    Tensor x = input(b);
    Shape dims = b.has(arg(b, 1)) ? b.dims(arg(b, 1)) : Shape{};
    return F(x, dims, b.flag_or(arg(b, 2), false));
}

Value b_matmul(Bound& b) { return matmul(input(b), b.tensor(arg(b, 1))); }
Value b_softmax(Bound& b) { return softmax(input(b), b.integer(arg(b, 1))); }
Value b_log_softmax(Bound& b) { return log_softmax(input(b), b.integer(arg(b, 1))); }
Value b_where(Bound& b) {
    Tensor c = b.tensor(0);
    const Value& x = b.value(1);
    const Value& y = b.value(2);
    if (x.is<Tensor>() && y.is<Tensor>()) return where(c, *x.as<Tensor>(), *y.as<Tensor>());
    if (x.is<Tensor>() && as_double(y)) return where(c, *x.as<Tensor>(), *as_double(y));
    if (as_double(x) && y.is<Tensor>()) return where(c, *as_double(x), *y.as<Tensor>());
    b.in.raise("TypeError", "where(condition, input, other): input or other must be a Tensor");
}
Value b_cat(Bound& b) {
    std::vector<Tensor> ts;
    for (const Value& v : iterate(b.in, b.value(0))) ts.push_back(to_tensor(b.in, v, "cat() element"));
    if (ts.empty()) b.in.raise("ValueError", "cat() needs at least one tensor");
    return cat(ts, b.integer_or(1, 0));
}
Value b_transpose(Bound& b) { return input(b).transpose(b.integer(arg(b, 1)), b.integer(arg(b, 2))); }

// ---- Tensor methods
Value m_reshape(Bound& b) {
    Shape s;
    std::vector<Value> items = b.rest.size() == 1 && as_sequence(b.rest[0]) ? *as_sequence(b.rest[0]) : b.rest;
    for (const Value& v : items) {
        auto n = as_int(v);
        if (!n) b.in.raise("TypeError", b.fn.name + "(): sizes must be ints, not " + type_name(v));
        s.push_back(*n);
    }
    // -1 is the tensor ops' to resolve: reshape/view infer it (one at most), expand keeps that size.
    Tensor x = input(b);
    if (b.fn.name == "Tensor.permute") return x.permute(s);
    if (b.fn.name == "Tensor.expand") return x.expand(s);
    if (b.fn.name == "Tensor.view") return x.view(s);
    return x.reshape(s);
}
Value m_t(Bound& b) { return b.self_tensor().t(); }
Value m_squeeze(Bound& b) { return b.has(0) ? b.self_tensor().squeeze(b.integer(0)) : b.self_tensor().squeeze(); }
Value m_unsqueeze(Bound& b) { return input(b).unsqueeze(b.integer(arg(b, 1))); }
Value m_narrow(Bound& b) { return b.self_tensor().narrow(b.integer(0), b.integer(1), b.integer(2)); }
Value m_contiguous(Bound& b) { return b.self_tensor().contiguous(); }
Value m_clone(Bound& b) { return input(b).clone(); }
Value m_detach(Bound& b) { return input(b).detach(); }
Value m_flatten(Bound& b) { return input(b).flatten(); }
// x.to(dtype), x.to(device), x.to(device, dtype), x.to(other), x.to(dtype=..., device=...),
// params "*args, dtype=None, device=None, non_blocking=False, copy=False". As in PyTorch the
// tensor itself comes back when nothing changes (unless copy=True).
Value m_to(Bound& b) {
    const Tensor& self = b.self_tensor();
    std::optional<DType> dtype;
    std::optional<Device> device;
    auto set_dtype = [&](DType d) {
        if (dtype) b.in.raise("TypeError", "Tensor.to(): dtype given twice");
        dtype = d;
    };
    for (const Value& v : b.rest) {
        if (auto d = v.as<DType>()) set_dtype(*d);
        else if (auto t = v.as<Tensor>()) set_dtype(t->dtype()), device = t->device();
        else if (v.is<std::string>() || v.object<DeviceObj>()) device = require_device(b.in, *to_device(b.in, v, "Tensor.to"), "Tensor.to");
        else b.in.raise("TypeError", "Tensor.to(): expected a dtype, a device or a Tensor, not " + type_name(v));
    }
    if (b.has(0)) {
        auto d = b.value(0).as<DType>();
        if (!d) b.type_error(0, "a dtype such as torch.float32");
        set_dtype(*d);
    }
    if (b.has(1)) device = require_device(b.in, *to_device(b.in, b.value(1), "Tensor.to"), "Tensor.to");
    Tensor out = dtype && *dtype != self.dtype() ? self.to(*dtype) : self;
    if (device && *device != out.device()) out = out.to(*device);
    if (b.flag_or(3, false) && out.same(self)) out = self.clone();
    return out;
}
template <DType D>
Value m_cast(Bound& b) { return b.self_tensor().to(D); }
Value m_cpu(Bound& b) { return b.self_tensor().to(kiln::cpu); }
Value m_cuda(Bound& b) {
    auto cuda = std::make_shared<DeviceObj>();
    cuda->type = "cuda";
    return b.self_tensor().to(require_device(b.in, *cuda, "Tensor.cuda"));
}
Value m_item(Bound& b) {
    b.in.note_escape();
    const Tensor& t = b.self_tensor();
    if (t.numel() != 1) b.in.raise("RuntimeError", "a Tensor with " + std::to_string(t.numel()) + " elements cannot be converted to a number");
    if (is_floating(t.dtype())) return t.item<double>();
    if (t.dtype() == boolean) return t.item<bool>();
    return t.item<int64_t>();
}
// Nested lists as in PyTorch: one level per dim, a 0-d tensor gives its number.
Value m_tolist(Bound& b) {
    const Tensor& t = b.self_tensor();
    std::vector<Value> flat;
    if (is_floating(t.dtype())) {
        for (double d : t.to(float64).contiguous().to_vector<double>()) flat.emplace_back(d);
    } else if (t.dtype() == boolean) {
        for (int64_t i : t.to(int64).contiguous().to_vector<int64_t>()) flat.emplace_back(i != 0);
    } else {  // ints stay exact: through int64, not a double
        for (int64_t i : t.to(int64).contiguous().to_vector<int64_t>()) flat.emplace_back(i);
    }
    if (t.dim() == 0) return flat.at(0);
    size_t next = 0;  // the next item of `flat`, in row-major order
    std::function<Value(int64_t)> nest = [&](int64_t d) {
        std::vector<Value> items;
        for (int64_t i = 0; i < t.size(d); ++i)
            items.push_back(d + 1 == t.dim() ? flat[next++] : nest(d + 1));
        return make_list(std::move(items));
    };
    return nest(0);
}
Value m_numel(Bound& b) { return b.self_tensor().numel(); }
Value m_dim(Bound& b) { return b.self_tensor().dim(); }
Value m_size(Bound& b) {
    const Tensor& t = b.self_tensor();
    if (!b.has(0)) return make_size(t.shape());
    return t.size(b.integer(0));
}
Value m_backward(Bound& b) {
    Tensor g = b.has(0) ? b.tensor(0) : Tensor();
    b.self_tensor().backward(g, b.flag_or(1, false));
    return None{};
}
Value m_requires_grad_(Bound& b) {
    Tensor t = b.self_tensor();
    t.requires_grad_(b.flag_or(0, true));
    return t;
}
Value m_zero_(Bound& b) {
    Tensor t = b.self_tensor();
    t.fill_(0);
    return t;
}

#define KILN_UNARY(name, ...) {#name, "input", unary<kiln::name>, "elementwise " #name}, {"Tensor." #name, "", unary<kiln::name>, ""},
#define KILN_BINARY(name, ...)                                                                                  \
    {#name, "input, other", binary<static_cast<TT>(kiln::name), static_cast<TS>(kiln::name)>, "elementwise " #name}, \
        {"Tensor." #name, "other", binary<static_cast<TT>(kiln::name), static_cast<TS>(kiln::name)>, ""},
#define KILN_COMPARE(name, ...) KILN_BINARY(name)
const Builtin kTensor[] = {
#include "tensor/ops.def"
    {"randn", "*size, requires_grad=False, dtype=None, device=None", factory<randn>, "normal(0, 1) samples"},
    {"rand", "*size, requires_grad=False, dtype=None, device=None", factory<rand>, "uniform [0, 1) samples"},
    {"zeros", "*size, requires_grad=False, dtype=None, device=None", factory<zeros>, "a tensor of zeros"},
    {"ones", "*size, requires_grad=False, dtype=None, device=None", factory<ones>, "a tensor of ones"},
    {"full", "size, fill_value, requires_grad=False, dtype=None, device=None", b_full, "a tensor filled with one value"},
    {"arange", "*args, dtype=None, requires_grad=False, device=None", b_arange, "arange(end) or arange(start, end, step)"},
    {"empty", "*size, requires_grad=False, dtype=None, device=None", factory<zeros>, "a new tensor (zeros in kiln; torch leaves it uninitialized)"},
    {"eye", "n, m=None, dtype=None, requires_grad=False, device=None", b_eye, "ones on the diagonal"},
    {"linspace", "start, end, steps, dtype=None, requires_grad=False, device=None", b_linspace, "steps evenly spaced values from start to end"},
    {"randint", "*args", b_randint, "randint(high, size) or randint(low, high, size): int64"},
    {"tensor", "data, dtype=None, requires_grad=False, device=None", b_tensor, "a tensor from (nested) lists of numbers"},
    {"zeros_like", "input, dtype=None, device=None, requires_grad=False", like<zeros_like>, "zeros of input's shape"},
    {"ones_like", "input, dtype=None, device=None, requires_grad=False", like<ones_like>, "ones of input's shape"},
    {"randn_like", "input, dtype=None, device=None, requires_grad=False", like<randn_like>, "normal samples of input's shape"},
    {"device", "type, index=None", b_device, "a device: torch.device('cpu'), torch.device('cuda', 0)"},
    {"manual_seed", "seed", b_manual_seed, "seed the random generator"},
    {"allclose", "input, other, rtol=1e-05, atol=1e-08", b_allclose, "elementwise |a - b| <= atol + rtol * |b|"},
    {"equal", "input, other", b_equal, "same sizes and the same values (NaN equals nothing)"},
    {"Tensor.equal", "other", b_equal, ""},
// sum(x, dim), x.amax(dim, keepdim=True) ...: one pair per line of tensor/reductions.def.
#define KILN_REDUCTION(name, ...)                                    \
    {#name, "input, dim=None, keepdim=False", reduction<kiln::name>, \
     #name " over dims (all when none)"},                            \
        {"Tensor." #name, "dim=None, keepdim=False", reduction<kiln::name>, ""},
#include "tensor/reductions.def"
    {"mean", "input, dim=None, keepdim=False", reduction<kiln::mean>, "mean over dims"},
    {"Tensor.mean", "dim=None, keepdim=False", reduction<kiln::mean>, ""},
    {"Tensor.max", "dim=None, keepdim=False", reduction<kiln::amax>, ""},
    {"Tensor.min", "dim=None, keepdim=False", reduction<kiln::amin>, ""},
    {"matmul", "input, other", b_matmul, "matrix product (also a @ b)"},
    {"mm", "input, other", b_matmul, "matrix product"},
    {"Tensor.matmul", "other", b_matmul, ""},
    {"softmax", "input, dim", b_softmax, "softmax along dim"},
    {"log_softmax", "input, dim", b_log_softmax, "log of softmax along dim"},
    {"Tensor.softmax", "dim", b_softmax, ""},
    {"Tensor.log_softmax", "dim", b_log_softmax, ""},
    {"where", "condition, input, other", b_where, "input where condition, else other"},
    {"cat", "tensors, dim=0", b_cat, "concatenate along dim"},
    {"transpose", "input, dim0, dim1", b_transpose, "swap two dims"},
    {"Tensor.transpose", "dim0, dim1", b_transpose, ""},
    {"flatten", "input", m_flatten, "a 1-d view"},
    {"unsqueeze", "input, dim", m_unsqueeze, "insert a dim of size 1"},
    {"clone", "input", m_clone, "a copy"},
    {"detach", "input", m_detach, "the same data, without history"},
    {"Tensor.reshape", "*shape", m_reshape, ""},
    {"Tensor.view", "*shape", m_reshape, ""},
    {"Tensor.permute", "*dims", m_reshape, ""},
    {"Tensor.expand", "*sizes", m_reshape, ""},
    {"Tensor.t", "", m_t, ""},
    {"Tensor.squeeze", "dim=None", m_squeeze, ""},
    {"Tensor.unsqueeze", "dim", m_unsqueeze, ""},
    {"Tensor.narrow", "dim, start, length", m_narrow, ""},
    {"Tensor.contiguous", "", m_contiguous, ""},
    {"Tensor.clone", "", m_clone, ""},
    {"Tensor.detach", "", m_detach, ""},
    {"Tensor.flatten", "", m_flatten, ""},
    {"Tensor.to", "*args, dtype=None, device=None, non_blocking=False, copy=False", m_to, ""},
    {"Tensor.float", "", m_cast<float32>, ""},
    {"Tensor.double", "", m_cast<float64>, ""},
    {"Tensor.long", "", m_cast<int64>, ""},
    {"Tensor.int", "", m_cast<int64>, ""},
    {"Tensor.bool", "", m_cast<boolean>, ""},
    {"Tensor.cpu", "", m_cpu, ""},
    {"Tensor.cuda", "device=None, non_blocking=False", m_cuda, ""},
    {"Tensor.item", "", m_item, ""},
    {"Tensor.tolist", "", m_tolist, ""},
    {"Tensor.numel", "", m_numel, ""},
    {"Tensor.dim", "", m_dim, ""},
    {"Tensor.size", "dim=None", m_size, ""},
    {"Tensor.backward", "gradient=None, retain_graph=False", m_backward, ""},
    {"Tensor.requires_grad_", "requires_grad=True", m_requires_grad_, ""},
    {"Tensor.zero_", "", m_zero_, ""},
};
#undef KILN_UNARY
#undef KILN_BINARY
#undef KILN_COMPARE

void flatten_data(Interp& in, const Value& v, size_t depth, Shape& shape, std::vector<double>& out, bool& ints, bool& bools) {
    if (const std::vector<Value>* seq = as_sequence(v)) {
        RecursionGuard guard("while converting nested lists to a tensor");
        if (shape.size() == depth) shape.push_back(int64_t(seq->size()));
        else if (shape.size() < depth || shape[depth] != int64_t(seq->size()))
            in.raise("ValueError", "tensor(): ragged nested lists (expected " + std::to_string(shape.size() > depth ? shape[depth] : 0) +
                                       " items at depth " + std::to_string(depth) + ", got " + std::to_string(seq->size()) + ")");
        for (const Value& x : *seq) flatten_data(in, x, depth + 1, shape, out, ints, bools);
        return;
    }
    if (shape.size() != depth) in.raise("ValueError", "tensor(): ragged nested lists");
    std::optional<double> d = as_double(v);
    if (!d) in.raise("TypeError", "tensor(): expected numbers, got " + type_name(v));
    ints = ints && as_int(v).has_value();
    bools = bools && v.is<bool>();
    out.push_back(*d);
}

// The ints of nested lists already checked by flatten_data, exactly (2**53 + 1 stays odd).
std::vector<int64_t> exact_ints(const Value& v) {
    std::vector<int64_t> out;
    std::vector<const Value*> todo{&v};  // depth-first, in order
    while (!todo.empty()) {
        const Value* x = todo.back();
        todo.pop_back();
        if (const std::vector<Value>* seq = as_sequence(*x)) {
            for (auto it = seq->rbegin(); it != seq->rend(); ++it) todo.push_back(&*it);
        } else {
            out.push_back(*as_int(*x));
        }
    }
    return out;
}

}  // namespace

std::span<const Builtin> tensor_builtins() { return kTensor; }

Tensor tensor_from_data(Interp& in, const Value& data, std::optional<DType> dtype, bool requires_grad) {
    if (auto t = data.as<Tensor>()) return t->clone();
    Shape shape;
    std::vector<double> values;
    bool ints = true, bools = true;
    flatten_data(in, data, 0, shape, values, ints, bools);
    DType d = dtype.value_or(bools && !values.empty() ? boolean : ints ? int64 : float32);
    Tensor t = d == int64 && ints ? tensor(exact_ints(data), shape, {.dtype = int64})  // not through a double
                                  : tensor(values, shape, {.dtype = d});
    if (requires_grad) t.requires_grad_(true);
    return t;
}

Tensor to_tensor(Interp& in, const Value& v, const char* what) {
    if (auto t = v.as<Tensor>()) return *t;
    if (auto b = v.as<bool>()) return scalar_tensor(*b, boolean);
    if (auto i = v.as<int64_t>()) return scalar_tensor(double(*i), int64);
    if (auto d = v.as<double>()) return scalar_tensor(*d);
    in.raise("TypeError", std::string(what) + " must be a Tensor or a number, not " + type_name(v));
}

Device device_arg(Interp& in, const Value& v, const std::string& op) { return require_device(in, *to_device(in, v, op), op); }

std::optional<Value> tensor_attr(const Tensor& t, const std::string& name) {
    if (name == "shape") return make_size(t.shape());
    if (name == "grad") return t.grad().defined() ? Value(t.grad()) : Value(None{});
    if (name == "requires_grad") return t.requires_grad();
    if (name == "dtype") return Value(t.dtype());
    if (name == "ndim") return t.dim();
    if (name == "T") return t.dim() < 2 ? t : t.t();
    if (name == "is_leaf") return t.is_leaf();
    if (name == "data") return t.detach();
    if (name == "device") return Value(device_value(t.device()));
    if (name == "is_cuda") return t.device().type == DeviceType::cuda;
    if (name == "grad_fn") return t.grad_fn() ? Value(std::string("<grad_fn>")) : Value(None{});
    return std::nullopt;
}

bool set_tensor_attr(Interp& in, Tensor& t, const std::string& name, const Value& v) {
    if (name == "grad") {
        if (v.is_none()) t.set_grad(Tensor());
        else t.set_grad(to_tensor(in, v, "grad"));
        return true;
    }
    if (name == "requires_grad") {
        t.requires_grad_(in.truthy(v));
        return true;
    }
    return false;
}

}  // namespace kiln::interp
