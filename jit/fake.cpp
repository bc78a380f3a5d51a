// Shape-only tracing: fake tensors and the ops' shape rules (jit/fake.h). Each rule says
// what the op's kernel (tensor/kernels_*.cpp) would return — shape, dtype, device — and
// checks nothing the kernel checks only on values. A wrong rule cannot go unnoticed: the
// compiled graph's outputs are checked against the fake tensors they replace
// (jit/segments.cpp, adopt).
#include "jit/fake.h"

#include <algorithm>
#include <array>
#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "autograd/node.h"
#include "tensor/kernels.h"
#include "tensor/reductions.h"

namespace kiln::jit {

namespace {

int& fake_switch() {
    static int on = [] {
        const char* v = std::getenv("KILN_FAKE_TRACE");
        return v && std::strcmp(v, "0") == 0 ? 0 : 1;
    }();
    return on;
}

std::array<bool, kOpCount>& rule_off() {
    static std::array<bool, kOpCount> off{};
    return off;
}

Tensor fake_strided(const Shape& shape, const Shape& strides, DType dtype, Device device) {
    auto st = std::make_shared<Storage>();
    st->fake = true;
    st->device = device;
    auto impl = std::make_shared<TensorImpl>();
    impl->storage = std::move(st);
    impl->shape = shape;
    impl->strides = strides;
    impl->dtype = dtype;
    return Tensor(std::move(impl));
}

int& fake_cuda_switch() {
    static int on = [] {
        const char* v = std::getenv("KILN_FAKE_TRACE_CUDA");
        return v && std::strcmp(v, "0") == 0 ? 0 : 1;
    }();
    return on;
}

// The device of an op's result, as dispatch_eager picks its kernel: the last CUDA input's
// (tensor/kernels_cuda.cpp, cuda_forward), else the first input's; a factory's from its
// attributes (the rules of full, arange and the random ops set it).
Device result_device(std::span<const Tensor> in) {
    Device d = in.empty() ? cpu : in[0].device();
    for (const Tensor& t : in)
        if (t.device().type == DeviceType::cuda) d = t.device();
    return d;
}

// reshape's target with a -1 filled in (tensor/kernels_shape.cpp's infer_shape).
Shape reshape_target(const Shape& want, int64_t numel) {
    Shape s = want;
    int64_t known = 1, hole = -1;
    for (size_t i = 0; i < s.size(); ++i) {
        if (s[i] == -1) {
            KILN_CHECK(hole < 0, "reshape: only one dimension can be -1, got ", want);
            hole = int64_t(i);
        } else {
            known *= s[i];
        }
    }
    if (hole >= 0) {
        KILN_CHECK(known != 0 && numel % known == 0, "reshape: shape ", want,
                   " is invalid for input of size ", numel);
        s[size_t(hole)] = numel / known;
    }
    KILN_CHECK(checked_numel(s, "reshape") == numel, "reshape: shape ", want,
               " is invalid for input of size ", numel);
    return s;
}

// gather's and scatter_add's shape checks (tensor/kernels_index.cpp, plan_index); where
// they fail the op runs for real and raises the kernel's error.
bool index_fits(const Tensor& data, const Tensor& index, int64_t dim) {
    if (index.dtype() != DType::int64 || index.dim() != data.dim() ||
        index.device() != data.device() || dim < -std::max<int64_t>(data.dim(), 1) ||
        dim >= std::max<int64_t>(data.dim(), 1))
        return false;
    int64_t d0 = normalize_dim(dim, std::max<int64_t>(data.dim(), 1), "gather");
    for (int64_t d = 0; d < data.dim(); ++d)
        if (d != d0 && index.size(d) != data.size(d)) return false;
    return true;
}

constexpr double kTwo63 = 9223372036854775808.0;

// tensor/kernels_factory.cpp's check_fits, as a test: where it fails the op runs for real.
bool fits(double v, DType t) {
    if (t == DType::int64) return v >= -kTwo63 && v < kTwo63;
    if (t == DType::float32) return !std::isfinite(v) || std::abs(v) <= double(FLT_MAX);
    return true;
}

bool is_unary_pointwise(const OpInfo& info) {
    return info.kind == OpKind::pointwise && info.math && info.arity == 1;
}

// The output's shape, dtype and device by the op's rule; false where there is none.
// Views are handled by the caller (they alias their input).
bool rule(OpId op, std::span<const Tensor> in, const Attrs& a, Shape& shape, DType& dtype,
          Device& device) {
    const OpInfo& info = op_info(op);
    device = result_device(in);
    if (info.kind == OpKind::pointwise && info.math) {
        if (is_unary_pointwise(info)) {
            shape = in[0].shape();
            dtype = pointwise_result_dtype(in[0].dtype(), info.ints);
            return true;
        }
        bool compare = info.derivative == nullptr;
        BinaryPlan p = plan_binary(in, a, compare ? true : info.ints, info.name);
        shape = p.shape;
        dtype = compare ? DType::boolean : p.dtype;
        return true;
    }
    if (info.kind == OpKind::reduction) {
        ReducePlan p = plan_reduce(in[0], a, info.name);
        shape = p.out_shape;
        dtype = reduction_dtype(op, in[0].dtype());
        if (reduction_picks_a_value(op) && in[0].numel() == 0) return false;  // the kernel's error
        return true;
    }
    switch (op) {
        case OpId::where:
            shape = broadcast_shapes(broadcast_shapes(in[0].shape(), in[1].shape(), "where"),
                                     in[2].shape(), "where");
            dtype = promote(in[1].dtype(), in[2].dtype());
            return true;
        case OpId::cast:
            shape = in[0].shape();
            dtype = a.dtype;
            return true;
        case OpId::matmul: {
            const Tensor &x = in[0], &y = in[1];
            if (x.dim() < 1 || y.dim() < 1 || x.dtype() != y.dtype() || !is_floating(x.dtype()))
                return false;  // the kernel's error message
            Shape xs = x.shape(), ys = y.shape();
            bool xv = xs.size() == 1, yv = ys.size() == 1;
            if (xv) xs.insert(xs.begin(), 1);
            if (yv) ys.push_back(1);
            int64_t M = xs[xs.size() - 2], K = xs.back(), N = ys.back();
            if (ys[ys.size() - 2] != K) return false;
            shape = broadcast_shapes(Shape(xs.begin(), xs.end() - 2),
                                     Shape(ys.begin(), ys.end() - 2), "matmul");
            if (!xv) shape.push_back(M);
            if (!yv) shape.push_back(N);
            dtype = x.dtype();
            return true;
        }
        case OpId::slice_backward:
            shape = a.shape;
            dtype = in[0].dtype();
            return true;
        case OpId::cat: {
            if (in.empty() || in[0].dim() == 0) return false;
            int64_t d = normalize_dim(a.dim, in[0].dim(), "cat");
            shape = in[0].shape();
            dtype = in[0].dtype();
            shape[size_t(d)] = 0;
            for (const Tensor& t : in) {
                if (t.dim() != in[0].dim()) return false;
                for (int64_t i = 0; i < t.dim(); ++i)
                    if (i != d && t.shape()[size_t(i)] != in[0].shape()[size_t(i)]) return false;
                shape[size_t(d)] += t.shape()[size_t(d)];
                dtype = promote(dtype, t.dtype());
            }
            device = in[0].device();
            return true;
        }
        case OpId::full:
            if (!fits(a.scalar, a.dtype)) return false;
            shape = a.shape;
            dtype = a.dtype;
            device = a.device;
            return true;
        case OpId::arange: {  // tensor/kernels_factory.cpp's count, to the bit
            if (!std::isfinite(a.lo) || !std::isfinite(a.hi) || !std::isfinite(a.scalar) ||
                a.scalar == 0)
                return false;
            double n = std::ceil((a.hi - a.lo) / a.scalar);
            if (!(n >= 0) || !(n < kTwo63)) return false;
            int64_t count = int64_t(n);
            if (count > 0 &&
                (!fits(a.lo, a.dtype) || !fits(a.lo + double(count - 1) * a.scalar, a.dtype)))
                return false;
            shape = {count};
            dtype = a.dtype;
            device = a.device;
            return true;
        }
        case OpId::rand:
        case OpId::randn:
        case OpId::randint:
            if (op != OpId::randint && !is_floating(a.dtype)) return false;
            shape = a.shape;
            dtype = op == OpId::randint ? DType::int64 : a.dtype;
            device = a.device;
            return true;
        case OpId::conv2d:
        case OpId::conv2d_input_grad:
        case OpId::conv2d_weight_grad: {
            if (a.shape.size() != 8 || a.dim <= 0 || in[0].dtype() != in[1].dtype() ||
                !is_floating(in[0].dtype()) || in[0].dim() != 4 || in[1].dim() != 4)
                return false;
            int64_t kh = a.shape[0], kw = a.shape[1], sh = a.shape[2], sw = a.shape[3],
                    ph = a.shape[4], pw = a.shape[5], dh = a.shape[6], dw = a.shape[7];
            const Shape &x = in[0].shape(), &w = in[1].shape();
            if (op == OpId::conv2d) {
                int64_t oh = window_out_size(x[2], kh, sh, ph, dh),
                        ow = window_out_size(x[3], kw, sw, pw, dw);
                if (oh <= 0 || ow <= 0 || x[1] != w[1] * a.dim) return false;
                shape = {x[0], w[0], oh, ow};
            } else if (op == OpId::conv2d_input_grad) {
                if (a.dims.size() != 2) return false;
                shape = {x[0], w[1] * a.dim, a.dims[0], a.dims[1]};  // (grad_out, weight)
            } else {
                shape = {w[1], x[1] / a.dim, kh, kw};  // (x, grad_out)
            }
            dtype = in[0].dtype();
            return true;
        }
        case OpId::attention: {  // tensor/kernels_attention.cpp; bad shapes run for real (its errors)
            const Tensor &q = in[0], &k = in[1], &v = in[2];
            if (q.dim() < 2 || k.dim() < 2 || v.dim() < 2 || q.size(-1) != k.size(-1) ||
                k.size(-2) != v.size(-2) || !is_floating(q.dtype()) || q.dtype() != k.dtype() ||
                q.dtype() != v.dtype() || q.device() != k.device() || q.device() != v.device())
                return false;
            auto batch_of = [](const Tensor& t) { return Shape(t.shape().begin(), t.shape().end() - 2); };
            Shape batch = batch_of(q);
            for (const Tensor* t : {&k, &v}) {  // broadcast, or the real run's error
                Shape b = batch_of(*t);
                if (b != batch) return false;
            }
            if (a.keepdim && batch.size() != 2) return false;
            shape = a.keepdim ? Shape{batch[0], q.size(-2), batch[1], v.size(-1)} : batch;
            if (!a.keepdim) shape.push_back(q.size(-2)), shape.push_back(v.size(-1));
            dtype = q.dtype();
            device = q.device();
            return true;
        }
        case OpId::gather:  // index values are checked by the kernel on the real run
            if (!index_fits(in[0], in[1], a.dim)) return false;
            shape = in[1].shape();
            dtype = in[0].dtype();
            device = in[0].device();
            return true;
        case OpId::scatter_add:
            if (!index_fits(in[0], in[1], a.dim) || in[2].shape() != in[1].shape() ||
                in[2].dtype() != in[0].dtype())
                return false;
            shape = in[0].shape();
            dtype = in[0].dtype();
            device = in[0].device();
            return true;
        case OpId::unfold2d:
        case OpId::fold2d: {  // tensor/kernels_conv.cpp; bad windows run for real (its errors)
            if (a.shape.size() != 8 || !is_floating(in[0].dtype())) return false;
            int64_t kh = a.shape[0], kw = a.shape[1], sh = a.shape[2], sw = a.shape[3],
                    ph = a.shape[4], pw = a.shape[5], dh = a.shape[6], dw = a.shape[7];
            if (kh <= 0 || kw <= 0 || sh <= 0 || sw <= 0 || dh <= 0 || dw <= 0 || ph < 0 || pw < 0)
                return false;
            const Shape& x = in[0].shape();
            if (op == OpId::unfold2d) {
                if (x.size() != 4) return false;
                int64_t oh = window_out_size(x[2], kh, sh, ph, dh),
                        ow = window_out_size(x[3], kw, sw, pw, dw);
                if (oh <= 0 || ow <= 0) return false;
                shape = {x[0], x[1] * kh * kw, oh * ow};
            } else {
                if (a.dims.size() != 2 || x.size() != 3) return false;
                int64_t oh = window_out_size(a.dims[0], kh, sh, ph, dh),
                        ow = window_out_size(a.dims[1], kw, sw, pw, dw);
                if (oh <= 0 || ow <= 0 || x[1] % (kh * kw) != 0 || x[2] != oh * ow) return false;
                shape = {x[0], x[1] / (kh * kw), a.dims[0], a.dims[1]};
            }
            dtype = in[0].dtype();
            return true;
        }
        case OpId::max_pool2d_index:
            if (in[0].dim() != 4 || a.dims.size() != 2 || !is_floating(in[0].dtype())) return false;
            shape = {in[0].size(0), in[0].size(1), a.dims[0], a.dims[1]};
            dtype = DType::int64;
            return true;
        case OpId::to_device:  // a copy on a.device (tensor/kernels_cuda.cpp, forward_to_device)
            shape = in[0].shape();
            dtype = in[0].dtype();
            device = a.device;
            return true;
        default:
            return false;  // conv2d_fused: real tensors
    }
}

}  // namespace

bool fake_trace_enabled() { return fake_switch() != 0; }
void set_fake_trace(bool on) { fake_switch() = on ? 1 : 0; }
bool fake_trace_cuda_enabled() { return fake_cuda_switch() != 0; }
void set_fake_trace_cuda(bool on) { fake_cuda_switch() = on ? 1 : 0; }

bool fake_trace_for(std::span<const Tensor> tensors) {
    if (!fake_trace_enabled()) return false;
    if (fake_trace_cuda_enabled()) return true;
    for (const Tensor& t : tensors)
        if (t.defined() && t.device().type != DeviceType::cpu) return false;
    return true;
}

bool is_fake(const Tensor& t) {
    return t.defined() && t.impl()->storage && t.impl()->storage->fake;
}

bool any_fake(std::span<const Tensor> ts) {
    for (const Tensor& t : ts)
        if (is_fake(t)) return true;
    return false;
}

Tensor fake_empty(const Shape& shape, DType dtype, Device device) {
    return fake_strided(shape, contiguous_strides(shape), dtype, device);
}

void set_fake_rule(OpId op, bool on) { rule_off()[size_t(op)] = !on; }

Tensor fake_call(OpId op, std::span<const Tensor> in, const Attrs& a) {
    const OpInfo& info = op_info(op);
    if (info.kind == OpKind::view && !any_fake(in) && op != OpId::contiguous) {
        // A view of a real tensor is eager's (metadata only). Where eager copies (a reshape
        // no strides can say), the copy would read values a deferred write has not
        // reached: a fake tensor instead.
        Tensor out = dispatch_eager(op, in, a);
        if (out.impl()->storage == in[0].impl()->storage) return out;
    }
    for (const Tensor& t : in)
        KILN_CHECK(t.defined(), info.name, ": an input is an undefined tensor");
    Tensor out;
    {
        autograd::NoGradGuard no_grad;
        if (info.kind == OpKind::view) {
            const Tensor& x = in[0];
            if (op == OpId::reshape) {
                Shape s = reshape_target(a.shape, x.numel());
                out = fake_empty(s, x.dtype(), x.device());
                if (x.is_contiguous()) {  // a view, as the kernel's
                    out.impl()->storage = x.impl()->storage;
                    out.impl()->offset = x.impl()->offset;
                }
            } else if (op == OpId::contiguous) {
                out = x.is_contiguous() ? x.detach() : fake_empty(x.shape(), x.dtype(), x.device());
            } else {
                out = info.forward(in, a);  // permute, expand, slice: metadata only
            }
        } else {
            // The kernel's inputs: a 0-d tensor on another device than the result's moves to
            // it, as cuda_forward's on_device moves a 0-d CPU tensor beside CUDA ones (a
            // scalar_tensor in a derivative formula); any other mixes devices, which the
            // kernel's real run reports.
            Device on = result_device(in);
            std::vector<Tensor> moved;
            std::span<const Tensor> kin = in;
            for (size_t i = 0; i < in.size(); ++i) {
                if (in[i].device() == on) continue;
                if (in[i].dim() != 0) return Tensor();
                if (moved.empty()) moved.assign(in.begin(), in.end());
                moved[i] = fake_strided(in[i].shape(), in[i].strides(), in[i].dtype(), on);
            }
            if (!moved.empty()) kin = moved;
            Shape shape;
            DType dtype;
            Device device;
            if (rule_off()[size_t(op)] || !rule(op, kin, a, shape, dtype, device)) return Tensor();
            checked_numel(shape, info.name);
            out = fake_empty(shape, dtype, device);
        }
    }
    autograd::record_op(op, in, a, out);
    return out;
}

}  // namespace kiln::jit
