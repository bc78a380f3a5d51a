// Eager CUDA kernels: what each op's kernel computes (dtypes, shapes, the geometry of its
// arrays), launching, and dispatch. Their sources are the first rung of the CUDA dialect
// (codegen/emit_eager_cuda.h): every pointwise op's kernel is written from its math text in
// tensor/ops.def exactly as the generated kernels write it, so an op added to the table runs
// on the GPU with no extra code. NVRTC compiles each source on first use, once for any shape
// (tensor/cuda_runtime.cpp); one elementwise kernel shape serves pointwise ops, where, casts
// and strided copies; reductions are one block per output row; matmul is cuBLAS.
// View ops need no kernel: their CPU forward only rewrites shape and strides, and the copies
// they may need (contiguous, cat, slice_backward) go through strided_copy, which comes here.
#include <cmath>
#include <cstdlib>
#include <optional>
#include <string_view>

#include "autograd/node.h"
#include "codegen/emit_eager_cuda.h"
#include "tensor/cuda.h"
#include "tensor/cuda_prelude.h"
#include "tensor/cuda_runtime.h"
#include "tensor/gemm.h"
#include "tensor/kernels.h"
#include "tensor/philox.h"
#include "tensor/reductions.h"

namespace kiln {
namespace {

using cuda::detail::kernel;
using cuda::detail::launch;

// The vocabulary of ops.def's math (tensor/pointwise_math.h) for scalars under NVRTC.
const std::string kPrelude =
    std::string(cuda_prelude::kHead) + cuda_prelude::kMathFunctions + cuda_prelude::kTail;

constexpr int kMaxDims = codegen::kEagerMaxDims;
// Sizes of the loop and, per array (0: the output, 1..3: inputs), element strides; a
// broadcast dim has stride 0. Passed to the kernel by value, laid out as the kernel's own
// struct Geometry (codegen/emit_eager_cuda.h).
struct Geometry {
    int ndim = 0;
    long long size[kMaxDims] = {};
    long long stride[4][kMaxDims] = {};
};

void* data(const Tensor& t) { return t.numel() ? t.raw_data() : nullptr; }

using ElementwiseKernel = codegen::EagerElementwise;

// Runs kernel `k` (its inputs' dtypes those of `inputs`) once per element of `out`'s shape.
// Arrays: out (written, any strides) and up to 3 inputs already expanded to out's shape.
void elementwise(const std::string& label, const Tensor& out, const std::vector<Tensor>& inputs,
                 ElementwiseKernel k, double scalar = 0) {
    int64_t n = out.numel();
    if (n == 0) return;
    // Dims that every array walks as one (stride[d] == stride[d+1] * size[d+1]) merge, so a
    // contiguous op is a 1-d loop with no index arithmetic per dim.
    Geometry g;
    int arrays = 1 + int(inputs.size());
    auto stride_of = [&](int i, int64_t d) { return i == 0 ? out.strides()[d] : inputs[i - 1].strides()[d]; };
    for (int64_t d = 0; d < out.dim(); ++d) {
        if (out.shape()[d] == 1) continue;  // size-1 dims add nothing
        bool merges = g.ndim > 0;
        for (int i = 0; i < arrays && merges; ++i) merges = g.stride[i][g.ndim - 1] == stride_of(i, d) * out.shape()[d];
        if (merges) {
            g.size[g.ndim - 1] *= out.shape()[d];
            for (int i = 0; i < arrays; ++i) g.stride[i][g.ndim - 1] = stride_of(i, d);
            continue;
        }
        KILN_CHECK(g.ndim < kMaxDims, label, " on CUDA: at most ", kMaxDims, " dims after merging, got shape ", out.shape());
        g.size[g.ndim] = out.shape()[d];
        for (int i = 0; i < arrays; ++i) g.stride[i][g.ndim] = stride_of(i, d);
        ++g.ndim;
    }
    k.flat = g.ndim == 0;
    if (g.ndim == 1) {
        k.flat = true;
        for (int i = 0; i < arrays; ++i) k.flat = k.flat && g.stride[i][0] == 1;
    }
    void* fn = kernel(codegen::eager_cuda_elementwise(k), "kiln_elementwise");
    void* out_ptr = data(out);
    void* in_ptr[3] = {nullptr, nullptr, nullptr};
    for (size_t i = 0; i < inputs.size(); ++i) in_ptr[i] = data(inputs[i]);
    long long count = n;
    void* args[] = {&g, &count, &out_ptr, &in_ptr[0], &in_ptr[1], &in_ptr[2], &scalar};
    launch(fn, n, args);
}

ElementwiseKernel cast_kernel(DType from, DType to) { return {OpId::cast, to, to, {from}}; }
// `full`: the kernel's double `scalar` converted to the dtype, its only operand.
ElementwiseKernel full_kernel(DType dtype, bool flat = false) {
    return {OpId::full, dtype, dtype, {}, ScalarPos::right, flat};
}
// out = (type of out) in, element by element (any strides, any dtypes, same shape).
void convert(const Tensor& out, const Tensor& in) {
    elementwise("copy", out, {in}, cast_kernel(in.dtype(), out.dtype()));
}

// A 0-d CPU tensor used with CUDA tensors moves to the GPU, as in PyTorch (a CPU scalar
// mixes with tensors of any device); any other CPU tensor is a device mismatch. Its value is
// read on the host and written by a fill kernel (the value a kernel argument, as PyTorch
// passes CPU scalars): no copy from host memory, so the step never waits for the GPU here.
std::vector<Tensor> on_device(OpId op, std::span<const Tensor> in, Device device) {
    std::vector<Tensor> out;
    for (const Tensor& t : in) {
        if (t.device() == device) out.push_back(t);
        else {
            KILN_CHECK(t.dim() == 0, op_info(op).name, ": expected all tensors on one device, got ", device, " and ",
                       t.device(), " (a tensor of shape ", t.shape(), ")");
            constexpr int64_t kExact = int64_t(1) << 53;  // int64s a double holds exactly
            bool exact = t.dtype() != DType::int64 || (t.item<int64_t>() >= -kExact && t.item<int64_t>() <= kExact);
            out.push_back(exact ? cuda_full({}, t.item<double>(), t.dtype(), device) : cuda::to_device(t, device));
        }
    }
    return out;
}

// What a pointwise op computes, worked out from its inputs' shapes and dtypes alone (no
// data is read, so compile-only tests plan with CPU tensors): the output's shape, the
// kernel, and the operands expanded to the output's shape.
struct PointwisePlan {
    Shape shape;
    ElementwiseKernel kernel;
    std::vector<Tensor> operands;
};

PointwisePlan plan_pointwise(OpId op, std::span<const Tensor> in, const Attrs& a) {
    const OpInfo& info = op_info(op);
    if (op == OpId::cast) return {in[0].shape(), cast_kernel(in[0].dtype(), a.dtype), {in[0]}};
    if (op == OpId::where) {
        Shape shape = broadcast_shapes(broadcast_shapes(in[0].shape(), in[1].shape(), "where"), in[2].shape(), "where");
        DType dt = promote(in[1].dtype(), in[2].dtype());
        return {shape,
                {op, dt, dt, {in[0].dtype(), in[1].dtype(), in[2].dtype()}},
                {in[0].expand(shape), in[1].expand(shape), in[2].expand(shape)}};
    }
    if (info.arity == 1) {
        DType dt = pointwise_result_dtype(in[0].dtype(), info.ints);
        return {in[0].shape(), {op, dt, dt, {in[0].dtype()}}, {in[0]}};
    }
    // Comparisons compute in their operands' promoted dtype (bool: int64) and return bool.
    bool compare = is_compare(op);
    BinaryPlan p = plan_binary(in, a, compare || info.ints, info.name);
    DType compute = compare && p.dtype == DType::boolean ? DType::int64 : p.dtype;
    std::vector<Tensor> operands = {in[0].expand(p.shape)};
    if (a.scalar_pos == ScalarPos::none) operands.push_back(in[1].expand(p.shape));
    std::vector<DType> dtypes;
    for (const Tensor& t : operands) dtypes.push_back(t.dtype());
    return {
        p.shape, {op, compare ? DType::boolean : p.dtype, compute, dtypes, a.scalar_pos}, operands};
}

Tensor pointwise(OpId op, std::span<const Tensor> in, const Attrs& a) {
    PointwisePlan p = plan_pointwise(op, in, a);
    Tensor out = empty(p.shape, p.kernel.out, in[0].device());
    elementwise(op_info(op).name, out, p.operands, p.kernel, a.scalar);
    return out;
}

// Reductions: the reduced dims permuted last and made contiguous (as on the CPU), then one
// block per output row (or row slice) combines its row (codegen/emit_eager_cuda.h).
Tensor reduce(OpId op, const Tensor& x, const Attrs& a) {
    const char* name = op_info(op).name;
    ReducePlan p = plan_reduce(x, a, name);
    DType dt = x.dtype() == DType::boolean ? DType::int64 : reduction_dtype(op, x.dtype());
    KILN_CHECK(!reduction_picks_a_value(op) || x.numel() > 0 || p.inner > 0, name,
               ": cannot reduce an empty tensor of shape ", x.shape());
    Shape perm;
    for (int64_t i = 0; i < x.dim(); ++i) if (!p.reduced[i]) perm.push_back(i);
    for (int64_t i = 0; i < x.dim(); ++i) if (p.reduced[i]) perm.push_back(i);
    Tensor src = contiguous_as(x.dim() ? x.detach().permute(perm) : x, dt);
    Tensor out = empty(p.out_shape, dt, x.device());
    if (p.outer > 0) {
        void* fn = kernel(codegen::eager_cuda_reduce(op, dt), "kiln_reduce");
        auto run = [&](const Tensor& from, const Tensor& to, long long rows, long long inner, long long splits) {
            void* xp = data(from);
            void* op_ = data(to);
            void* args[] = {&xp, &op_, &rows, &inner, &splits};
            cuda::detail::launch_grid(fn, unsigned(std::min<int64_t>(rows * splits, 65535)), 256, 0, args);
        };
        // Few long rows: first each row's slices over many blocks, then the slices' results.
        int64_t sms = cuda::detail::multiprocessor_count();
        int64_t splits = p.outer < sms && p.inner >= 65536 ? std::min<int64_t>(p.inner / 16384, 4 * sms / p.outer) : 1;
        if (splits > 1) {
            Tensor partial = empty({p.outer * splits}, dt, x.device());
            run(src, partial, p.outer, p.inner, splits);
            run(partial, out, p.outer, splits, 1);
        } else {
            run(src, out, p.outer, p.inner, 1);
        }
    }
    DType result = reduction_dtype(op, x.dtype());
    return result == dt ? out : contiguous_as(out, result);  // bool amax/amin: any/all
}

// One operand of a GEMM as cuBLAS reads it in place: its last two dims as gemm_layout reads
// them (tensor/gemm.h, the CPU plan's rule), its batch dims one stride apart (0: the same
// matrix for every batch), which a strided-batched GEMM needs. PyTorch's at::cuda::blas reads
// transposed and expanded operands the same way instead of copying them.
struct CublasOperand {
    GemmOperand layout;
    int64_t batch_stride = 0;
};

std::optional<CublasOperand> cublas_operand(const Tensor& x) {
    const Shape& size = x.shape();
    const Shape& stride = x.strides();
    const int64_t d = x.dim();
    CublasOperand g;
    if (!gemm_layout(size[d - 2], size[d - 1], stride[d - 2], stride[d - 1], g.layout)) return std::nullopt;
    // The batch dims (those of size > 1) must step by one stride: s, s * size, ... or all 0.
    int64_t expect = -1;
    for (int64_t i = d - 3; i >= 0; --i) {
        if (size[i] == 1) continue;
        if (expect < 0) g.batch_stride = stride[i];
        else if (stride[i] != expect) return std::nullopt;
        expect = stride[i] * size[i];
    }
    return g;
}

// matmul through cuBLAS: the operands broadcast to the batch shape and read in place where
// their strides allow (transposed, expanded), copied contiguous where not; a 2-d right operand
// under a batch of row-major left matrices is one GEMM with the batch folded into the rows
// (Linear on [batch, tokens, features]), else one strided-batched GEMM.
Tensor matmul(std::span<const Tensor> in) {
    Tensor a = in[0], b = in[1];
    KILN_CHECK(a.dim() >= 1 && b.dim() >= 1, "matmul: both arguments need at least 1 dim, got ", a.shape(), " and ", b.shape());
    KILN_CHECK(a.dtype() == b.dtype() && is_floating(a.dtype()), "matmul: expected two float32 or two float64 tensors, got ",
               a.dtype(), " and ", b.dtype());
    bool a_vec = a.dim() == 1, b_vec = b.dim() == 1;
    if (a_vec) a = a.detach().unsqueeze(0);
    if (b_vec) b = b.detach().unsqueeze(1);
    int64_t M = a.size(-2), K = a.size(-1), N = b.size(-1);
    KILN_CHECK(b.size(-2) == K, "matmul: shapes ", in[0].shape(), " and ", in[1].shape(), " cannot be multiplied (", K, " vs ",
               b.size(-2), ")");
    Shape batch = broadcast_shapes(Shape(a.shape().begin(), a.shape().end() - 2), Shape(b.shape().begin(), b.shape().end() - 2), "matmul");
    Shape ea = batch, eb = batch, oshape = batch;
    ea.insert(ea.end(), {M, K});
    eb.insert(eb.end(), {K, N});
    oshape.insert(oshape.end(), {M, N});
    Tensor out = empty(oshape, a.dtype(), a.device());
    if (out.numel() > 0 && K == 0) cuda::detail::memset_zero(out.raw_data(), out.nbytes());
    if (out.numel() > 0 && K > 0) {  // every size >= 1: a contiguous operand is always readable
        a = a.detach().expand(ea);
        b = b.detach().expand(eb);
        std::optional<CublasOperand> ga = cublas_operand(a), gb = cublas_operand(b);
        if (!ga) a = contiguous_as(a, a.dtype()), ga = cublas_operand(a);
        if (!gb) b = contiguous_as(b, b.dtype()), gb = cublas_operand(b);
        const GemmOperand &la = ga->layout, &lb = gb->layout;
        int64_t batches = shape_numel(batch);
        bool f64 = a.dtype() == DType::float64;
        if (batches > 1 && gb->batch_stride == 0 && !la.trans && la.ld == K && ga->batch_stride == M * K)
            // The same right matrix for every batch, the left ones back to back: one GEMM.
            cuda::detail::gemm(f64, false, lb.trans, batches * M, N, K, a.raw_data(), K, 0, b.raw_data(), lb.ld, 0,
                               out.raw_data(), N, 0, 1);
        else
            cuda::detail::gemm(f64, la.trans, lb.trans, M, N, K, a.raw_data(), la.ld, ga->batch_stride,
                               b.raw_data(), lb.ld, gb->batch_stride, out.raw_data(), N, M * N, batches);
    }
    if (a_vec) oshape.erase(oshape.end() - 2);
    if (b_vec) oshape.erase(oshape.end() - 1);
    return out.detach().reshape(oshape);
}

}  // namespace

const char* cuda_math_prelude() { return kPrelude.c_str(); }

const char* cuda_c_type(DType d) {
    switch (d) {
        case DType::float32: return "float";
        case DType::float64: return "double";
        case DType::int64: return "long long";
        case DType::boolean: return "bool";
    }
    return "?";
}

std::vector<std::pair<std::string, std::string>> cuda_eager_kernel_sources() {
    std::vector<std::pair<std::string, std::string>> out;
    auto add = [&](const std::string& label, const PointwisePlan& p) {
        out.emplace_back(label, codegen::eager_cuda_elementwise(p.kernel));
    };
    const DType dtypes[] = {DType::float32, DType::float64, DType::int64, DType::boolean};
    for (int i = 0; i < kOpCount; ++i) {
        OpId op = OpId(i);
        const OpInfo& info = op_info(op);
        if (info.kind != OpKind::pointwise || !info.math) continue;
        for (DType dt : dtypes) {
            Tensor x = empty({2, 3}, dt), y = empty({3}, dt);
            std::string label = std::string(info.name) + " " + dtype_name(dt);
            if (info.arity == 1) {
                add(label, plan_pointwise(op, std::vector<Tensor>{x}, {}));
                continue;
            }
            add(label, plan_pointwise(op, std::vector<Tensor>{x, y}, {}));
            add(label + " tensor-scalar", plan_pointwise(op, std::vector<Tensor>{x}, {.scalar = 2, .scalar_pos = ScalarPos::right}));
            add(label + " scalar-tensor", plan_pointwise(op, std::vector<Tensor>{x}, {.scalar = 2, .scalar_pos = ScalarPos::left}));
            add(label + " with float64", plan_pointwise(op, std::vector<Tensor>{x, empty({3}, DType::float64)}, {}));
        }
    }
    for (DType from : dtypes)
        for (DType to : dtypes) {
            Tensor x = empty({2}, from);
            add(std::string("cast ") + dtype_name(from) + " to " + dtype_name(to), plan_pointwise(OpId::cast, std::vector<Tensor>{x}, {.dtype = to}));
        }
    PointwisePlan flat = plan_pointwise(OpId::sigmoid, std::vector<Tensor>{empty({2}, DType::float32)}, {});
    flat.kernel.flat = true;
    add("sigmoid float32 contiguous", flat);
    add("where", plan_pointwise(OpId::where, std::vector<Tensor>{empty({2}, DType::boolean), empty({2}), empty({2}, DType::float64)}, {}));
    for (DType dt : dtypes)  // cuda_full's kernels: the scalar argument alone
        for (bool contiguous : {false, true})
            out.emplace_back(std::string("full ") + dtype_name(dt) + (contiguous ? " contiguous" : ""),
                             codegen::eager_cuda_elementwise(full_kernel(dt, contiguous)));
    for (OpId op : reduction_ops())
        for (DType dt : {DType::float32, DType::float64, DType::int64})
            out.emplace_back(std::string(op_info(op).name) + " " + dtype_name(dt),
                             codegen::eager_cuda_reduce(op, dt));
    for (OpId op : {OpId::rand, OpId::randn, OpId::randint})
        for (DType dt : {DType::float32, DType::float64, DType::int64})
            if (op == OpId::randint || dt != DType::int64)
                out.emplace_back(std::string(op_info(op).name) + " " + dtype_name(dt),
                                 codegen::eager_cuda_random(op, dt));
    return out;
}

std::vector<std::pair<std::string, std::string>> cuda_index_kernel_sources() {
    std::vector<std::pair<std::string, std::string>> out;
    for (DType t : {DType::float32, DType::float64}) {
        out.emplace_back(std::string("unfold2d ") + dtype_name(t), codegen::eager_cuda_unfold2d(t));
        out.emplace_back(std::string("fold2d ") + dtype_name(t), codegen::eager_cuda_fold2d(t));
        out.emplace_back(std::string("max_pool2d_index ") + dtype_name(t),
                         codegen::eager_cuda_max_pool2d_index(t));
    }
    for (DType t : {DType::float32, DType::float64, DType::int64})
        out.emplace_back(std::string("arange ") + dtype_name(t), codegen::eager_cuda_arange(t));
    for (DType t : {DType::float32, DType::float64, DType::int64, DType::boolean}) {
        out.emplace_back(std::string("gather ") + dtype_name(t),
                         codegen::eager_cuda_index(t, false));
        if (t != DType::boolean)
            out.emplace_back(std::string("scatter_add ") + dtype_name(t),
                             codegen::eager_cuda_index(t, true));
    }
    return out;
}

std::pair<std::string, int64_t> cuda_attention_source(DType dtype, int64_t d, int64_t dv) {
    // KILN_ATTENTION_QUERIES=16: blocks of 16 queries (twice the blocks, each thread one query
    // row) instead of 32; docs/env.md.
    const char* e = std::getenv("KILN_ATTENTION_QUERIES");
    std::string_view v = e ? e : "";
    KILN_CHECK(v.empty() || v == "16" || v == "32", "KILN_ATTENTION_QUERIES: expected 16 or 32, got '", v, "'");
    codegen::AttentionSource k = codegen::eager_cuda_attention(dtype, d, dv, v == "16" ? 16 : 32);
    return {std::move(k.source), k.queries_per_block};
}

Tensor cuda_arange(const Attrs& a);  // below, beside the other factories

Tensor cuda_forward(OpId op, std::span<const Tensor> raw, const Attrs& a) {
    if (raw.empty()) {  // a factory, filled on the device
        if (op == OpId::full) return cuda_full(a.shape, a.scalar, a.dtype, a.device);
        if (op_info(op).kind == OpKind::random) return cuda_random(op, a);
        return cuda_arange(a);
    }
    if (op == OpId::to_device) return forward_to_device(raw, a);
    Device device = raw[0].device();
    for (const Tensor& t : raw)
        if (t.device().type == DeviceType::cuda) device = t.device();
    std::vector<Tensor> in = on_device(op, raw, device);
    switch (op_info(op).kind) {
        case OpKind::pointwise: return pointwise(op, in, a);
        case OpKind::reduction: return reduce(op, in[0], a);
        case OpKind::matmul: return matmul(in);
        default: return op_info(op).forward(in, a);  // views, contiguous, cat, slice_backward
    }
}

// rand, randn and randint on the device: each element's draw from tensor/philox.h, the same
// function of (seed, offset + i) as the CPU kernel, so a seed gives the same numbers on
// either device (to the last ulp of the device's log and cos for randn).
Tensor cuda_random(OpId op, const Attrs& a) {
    Attrs host = a;  // the CPU kernel checks the arguments: an empty draw of the same request
    host.device = cpu;
    host.shape = Shape(a.shape.size(), 0);
    Tensor checked = op_info(op).forward({}, host);
    Tensor out = empty(a.shape, checked.dtype(), a.device);
    int64_t n = out.numel();
    if (n == 0) return out;
    void* fn = kernel(codegen::eager_cuda_random(op, out.dtype()), "kiln_draw");
    cuda::detail::RandomDraws d = cuda::detail::reserve_random_draws(uint64_t(n));
    long long count = n, int_lo = 0;
    unsigned long long range = 0;
    if (op == OpId::randint) int_lo = int64_t(a.lo), range = randint_range(a);
    void* out_ptr = data(out);
    double lo = a.lo, hi = a.hi;
    void* args[] = {&count, &out_ptr, &d.seed, &d.offset, &d.graph_state, &lo, &hi, &int_lo, &range};
    launch(fn, n, args);
    return out;
}

// arange filled on the device where every value is an integer of magnitude below 2^53 (a
// position, a causal mask: exact in double, so equal to the CPU's values whatever either side
// rounds), in float32, float64 or int64: no copy from host memory, so a CUDA graph can
// capture it. Other ranges are made on the host and copied, as before.
Tensor cuda_arange(const Attrs& a) {
    int64_t n = arange_count(a);
    constexpr double kExact = 9007199254740992.0;  // 2^53
    bool integral = a.lo == std::floor(a.lo) && a.scalar == std::floor(a.scalar) &&
                    std::abs(a.lo) + std::abs(a.scalar) * double(n) < kExact;
    bool on_device = integral && (a.dtype == DType::float32 || a.dtype == DType::float64 ||
                                  a.dtype == DType::int64);
    if (!on_device) {
        Attrs host = a;
        host.device = cpu;
        return cuda::to_device(op_info(OpId::arange).forward({}, host), a.device);
    }
    Tensor out = empty({n}, a.dtype, a.device);
    if (n == 0) return out;
    void* fn = kernel(codegen::eager_cuda_arange(a.dtype), "kiln_arange");
    long long count = n;
    void* out_ptr = data(out);
    double lo = a.lo, delta = a.scalar;
    void* args[] = {&count, &out_ptr, &lo, &delta};
    launch(fn, n, args);
    return out;
}

Tensor cuda_full(const Shape& shape, double value, DType dtype, Device device) {
    check_fits(value, dtype, "full");
    checked_numel(shape, "full");
    Tensor out = empty(shape, dtype, device);
    elementwise("full", out, {}, full_kernel(dtype), value);
    return out;
}

// x.to(device) as an op: a copy to the other device; its gradient is copied back.
Tensor forward_to_device(std::span<const Tensor> in, const Attrs& a) {
    return in[0].device() == a.device ? materialize(in[0]) : cuda::to_device(in[0], a.device);  // a copy either way
}
std::vector<Tensor> backward_to_device(const BackwardArgs& b) { return {b.grad.to(b.attrs.from)}; }

void cuda_strided_copy(const Tensor& dst, const Tensor& src) {
    bool dst_dev = dst.device().type == DeviceType::cuda, src_dev = src.device().type == DeviceType::cuda;
    if (dst_dev && src_dev && dst.is_contiguous() && src.is_contiguous() && dst.dtype() == src.dtype())
        return cuda::detail::copy_bytes(data(dst), true, data(src), true, dst.nbytes());  // a plain device memcpy
    if (dst_dev && src_dev) return convert(dst, src);
    // Between host and device: contiguous bytes on both sides, then one copy.
    Tensor from = contiguous_as(src, dst.dtype());
    if (dst.is_contiguous()) return cuda::detail::copy_bytes(data(dst), dst_dev, data(from), src_dev, dst.nbytes());
    strided_copy(dst, cuda::to_device(from, dst.device()));  // moved first, then laid out on dst's side
}

namespace cuda {

Tensor to_device(const Tensor& x, Device device) {
    if (x.device() == device) return x;
    KILN_CHECK(device.type == DeviceType::cpu || device.index == 0, "to(", device, "): kiln uses cuda:0 only so far");
    detail::require("to(cuda)");
    NoDispatchHook raw;  // a copy of the data: nothing here is an op a recording should see
    Tensor src = contiguous_as(x.detach(), x.dtype());
    Tensor out = empty(x.shape(), x.dtype(), device);
    detail::copy_bytes(data(out), device.type == DeviceType::cuda, data(src), src.device().type == DeviceType::cuda, out.nbytes());
    return out;
}

}  // namespace cuda
}  // namespace kiln
