// conv2d, its two gradients and conv2d_fused (a conv2d with its pointwise epilogue) as table
// ops (tensor/ops.def). On CPU float32, where kiln is built with oneDNN (KILN_HAVE_DNNL), they
// run oneDNN's convolution primitives, created once per shape and cached, with the weights
// reordered into the primitive's layout once and cached too (tensor/conv_weight_cache.h); on
// CUDA they run cuDNN where it loads (tensor/kernels_conv_cudnn.cpp); elsewhere (CPU float64,
// a build without oneDNN, KILN_CONV=im2col, CUDA without cuDNN) they run im2col + GEMM
// as Tensor code, the reference path (tensor/composites_conv.cpp), and conv2d_fused its ops
// one by one after it.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <string_view>
#include <unordered_map>

#include "tensor/conv_weight_cache.h"
#include "tensor/onednn_signals.h"
#include "tensor/kernels.h"
#include "tensor/parallel.h"

#ifdef KILN_HAVE_DNNL
#include <omp.h>

#include <dnnl.hpp>
#endif

namespace kiln {
namespace {

std::atomic<int64_t> g_onednn_calls{0};

// attrs.shape = {kh, kw, stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w}, attrs.dim =
// groups.
struct ConvParams {
    int64_t kh, kw, sh, sw, ph, pw, dh, dw, groups;
};

ConvParams conv_params(const Attrs& a, const char* op) {
    KILN_CHECK(a.shape.size() == 8 && a.dim > 0, op,
               ": expected 8 window attributes and groups > 0, got ", a.shape, " and ", a.dim);
    return {a.shape[0], a.shape[1], a.shape[2], a.shape[3], a.shape[4],
            a.shape[5], a.shape[6], a.shape[7], a.dim};
}

Tensor as_columns(const Tensor& x, const Attrs& a) {  // [N, C * kh * kw, OH * OW]
    return dispatch(OpId::unfold2d, {x}, {.shape = a.shape, .scalar = 0});
}

// --- The reference: im2col + GEMM (groups: a batched GEMM over [N, G, ...]).
Tensor input_grad_im2col(const Tensor& g, const Tensor& w, const Attrs& a) {
    ConvParams p = conv_params(a, "conv2d_input_grad");
    int64_t N = g.size(0), O = w.size(0), G = p.groups, K = w.size(1) * p.kh * p.kw,
            L = g.size(2) * g.size(3);
    Tensor wt = w.reshape({G, O / G, K}).transpose(-1, -2);  // [G, K, O/G]
    Tensor cols = matmul(wt, g.reshape({N, G, O / G, L}));   // [N, G, K, L]
    return dispatch(OpId::fold2d, {cols.reshape({N, G * K, L})},
                    {.shape = a.shape, .dims = a.dims});
}

Tensor weight_grad_im2col(const Tensor& x, const Tensor& g, const Attrs& a) {
    ConvParams p = conv_params(a, "conv2d_weight_grad");
    int64_t N = x.size(0), C = x.size(1), O = g.size(1), G = p.groups, K = C / G * p.kh * p.kw,
            L = g.size(2) * g.size(3);
    Tensor cols = as_columns(x, a).reshape({N, G, K, L});
    Tensor gw =
        matmul(g.reshape({N, G, O / G, L}), cols.transpose(-1, -2)).sum({0});  // [G, O/G, K]
    return gw.reshape({O, C / G, p.kh, p.kw});
}

#ifdef KILN_HAVE_DNNL
using dnnl::memory;
using Tag = memory::format_tag;

dnnl::engine& engine() {
    static dnnl::engine e(dnnl::engine::kind::cpu, 0);
    return e;
}

// One primitive argument: the layout the primitive wants and the one kiln's tensor has (NCHW,
// or channels-last: below); when they differ, a cached reorder copies between them around the
// call (weights: once, into the weight cache).
enum class Role { input, weights, output };
struct Arg {
    int id;  // DNNL_ARG_SRC, ...
    memory::desc want, plain;
    Role role;
    std::optional<dnnl::reorder> reorder;
    // The output of a sum post-op starts as the residual: copied when its layout is `want`,
    // else reordered (residual -> want).
    memory::desc residual;
    std::optional<dnnl::reorder> fill;
};
struct Prim {
    dnnl::primitive prim;
    std::vector<Arg> args;
    bool sum = false;  // a sum post-op: the last tensor run_prim gets is added (a residual)
    int threads = 0;   // the OpenMP thread count it was created for (part of its cache key)
};
enum class Kind : int64_t { forward, input_grad, weight_grad };

// The layouts of kiln's activations a primitive reads and writes: kiln's NCHW, or channels-last
// (NHWC in memory, as a [N, C, H, W] view with strides [H*W*C, 1, W*C, C]), which is the layout
// oneDNN's convolutions want here, so such a tensor goes in or comes out without a reorder.
// conv2d_fused writes channels-last when the inductor says every reader is a conv
// (attrs.keepdim, codegen/fuse_conv.cpp).
struct Layouts {
    bool x = false, y = false, residual = false;  // channels-last?
};

struct Geometry {  // oneDNN's view of one convolution
    memory::dims x, w, y, b, strides, dilates, pad_l, pad_r;
    bool bias;
    std::vector<int64_t> post_ops;  // detail::ConvPostOp codes (forward only)
    Layouts layouts;
};

Geometry geometry(const Shape& x, const Shape& w, const Shape& y, const ConvParams& p, bool bias,
                  const Shape& post_ops = {}, Layouts layouts = {}) {
    Geometry g{.x = x,
               .w = w,
               .y = y,
               .b = {w[0]},
               .strides = {p.sh, p.sw},
               .dilates = {p.dh - 1, p.dw - 1},  // oneDNN counts from 0
               .pad_l = {p.ph, p.pw},
               .pad_r = {p.ph, p.pw},
               .bias = bias,
               .post_ops = post_ops,
               .layouts = layouts};
    if (p.groups > 1) g.w = {p.groups, w[0] / p.groups, w[1], w[2], w[3]};
    return g;
}

// KILN_CONV=onednn-plain keeps oneDNN on kiln's NCHW/OIHW layouts (no reorders); by default
// oneDNN picks its layouts and kiln reorders in and out, which measured faster (docs/perf-models.md).
bool plain_layouts() {
    const char* e = std::getenv("KILN_CONV");
    return e && std::string_view(e) == "onednn-plain";
}

memory::desc md(const memory::dims& d, Tag plain_tag, bool any) {
    return memory::desc(d, memory::data_type::f32, any ? Tag::any : plain_tag);
}

Arg arg(int id, const memory::desc& want, const memory::desc& plain, Role role,
        const memory::desc& residual = {}) {
    Arg a{id, want, plain, role, std::nullopt, residual, std::nullopt};
    using Pd = dnnl::reorder::primitive_desc;
    if (want != plain)
        a.reorder = dnnl::reorder(role == Role::output ? Pd(engine(), want, engine(), plain)
                                                       : Pd(engine(), plain, engine(), want));
    if (!residual.is_zero() && residual != want)
        a.fill = dnnl::reorder(Pd(engine(), residual, engine(), want));
    return a;
}

// The post-ops of a conv2d_fused, and the per-channel operands its binary post-ops read
// (index in the chain, layout).
dnnl::primitive_attr post_op_attr(const Geometry& g,
                                  std::vector<std::pair<int, memory::desc>>& binary) {
    using dnnl::algorithm;
    dnnl::post_ops po;
    memory::desc per_channel({1, g.y[1], 1, 1}, memory::data_type::f32, Tag::nchw);
    for (size_t i = 0; i < g.post_ops.size(); ++i) {
        auto op = detail::ConvPostOp(g.post_ops[i]);
        algorithm alg = op == detail::ConvPostOp::add_channel   ? algorithm::binary_add
                        : op == detail::ConvPostOp::sub_channel ? algorithm::binary_sub
                        : op == detail::ConvPostOp::mul_channel ? algorithm::binary_mul
                                                                : algorithm::binary_div;
        if (op == detail::ConvPostOp::relu) {
            po.append_eltwise(1.f, algorithm::eltwise_relu, 0.f, 0.f);
        } else if (op == detail::ConvPostOp::add_tensor) {
            po.append_sum(1.f);
        } else {
            po.append_binary(alg, per_channel);
            binary.emplace_back(int(i), per_channel);
        }
    }
    dnnl::primitive_attr attr;
    attr.set_post_ops(po);
    return attr;
}

Prim make_prim(Kind kind, const Geometry& g) {
    using namespace dnnl;
    bool any = !plain_layouts();
    Tag wtag = g.w.size() == 5 ? Tag::goihw : Tag::oihw;
    memory::desc x = md(g.x, Tag::nchw, any), w = md(g.w, wtag, any), y = md(g.y, Tag::nchw, any),
                 b = md(g.b, Tag::x, false);
    // The gradients take channels-last activations as they are: left to choose, oneDNN 2.6
    // picks nChw16c for them here and each call reorders in and out, while its NHWC kernels
    // are as fast (docs/perf-models.md, "Channels-last training graphs").
    if (kind != Kind::forward && !plain_layouts()) {
        if (g.layouts.x) x = md(g.x, Tag::nhwc, false);
        if (g.layouts.y) y = md(g.y, Tag::nhwc, false);
    }
    memory::desc px = md(g.x, g.layouts.x ? Tag::nhwc : Tag::nchw, false),
                 pw = md(g.w, wtag, false),
                 py = md(g.y, g.layouts.y ? Tag::nhwc : Tag::nchw, false),
                 pr = md(g.y, g.layouts.residual ? Tag::nhwc : Tag::nchw, false);
    auto fwd_desc = [&](prop_kind pk) {
        return g.bias ? convolution_forward::desc(pk, algorithm::convolution_direct, x, w, b, y,
                                                  g.strides, g.dilates, g.pad_l, g.pad_r)
                      : convolution_forward::desc(pk, algorithm::convolution_direct, x, w, y,
                                                  g.strides, g.dilates, g.pad_l, g.pad_r);
    };
    if (kind == Kind::forward) {
        std::vector<std::pair<int, memory::desc>> binary;
        primitive_attr attr = post_op_attr(g, binary);
        convolution_forward::primitive_desc pd(fwd_desc(prop_kind::forward_inference), attr,
                                               engine());
        bool sum = std::count(g.post_ops.begin(), g.post_ops.end(),
                              int64_t(detail::ConvPostOp::add_tensor)) > 0;
        Prim p{convolution_forward(pd),
               {arg(DNNL_ARG_SRC, pd.src_desc(), px, Role::input),
                arg(DNNL_ARG_WEIGHTS, pd.weights_desc(), pw, Role::weights),
                arg(DNNL_ARG_DST, pd.dst_desc(), py, Role::output, sum ? pr : memory::desc())},
               sum};
        if (g.bias) p.args.push_back(arg(DNNL_ARG_BIAS, pd.bias_desc(), b, Role::input));
        for (auto& [i, d] : binary)
            p.args.push_back(
                arg(DNNL_ARG_ATTR_MULTIPLE_POST_OP(i) | DNNL_ARG_SRC_1, d, d, Role::input));
        return p;
    }
    convolution_forward::primitive_desc hint(fwd_desc(prop_kind::forward_training), engine());
    if (kind == Kind::input_grad) {
        convolution_backward_data::desc d(algorithm::convolution_direct, x, w, y, g.strides,
                                          g.dilates, g.pad_l, g.pad_r);
        convolution_backward_data::primitive_desc pd(d, engine(), hint);
        return {convolution_backward_data(pd),
                {arg(DNNL_ARG_DIFF_DST, pd.diff_dst_desc(), py, Role::input),
                 arg(DNNL_ARG_WEIGHTS, pd.weights_desc(), pw, Role::weights),
                 arg(DNNL_ARG_DIFF_SRC, pd.diff_src_desc(), px, Role::output)}};
    }
    convolution_backward_weights::desc d(algorithm::convolution_direct, x, w, y, g.strides,
                                         g.dilates, g.pad_l, g.pad_r);
    convolution_backward_weights::primitive_desc pd(d, engine(), hint);
    return {convolution_backward_weights(pd),
            {arg(DNNL_ARG_SRC, pd.src_desc(), px, Role::input),
             arg(DNNL_ARG_DIFF_DST, pd.diff_dst_desc(), py, Role::input),
             arg(DNNL_ARG_DIFF_WEIGHTS, pd.diff_weights_desc(), pw, Role::output)}};
}

// OpenMP's thread count belongs to the calling thread: kiln's is set before oneDNN creates a
// primitive, not only before it runs one, because a primitive splits its work for the count
// it was created with. Set at the first run only, the first conv of a program was created for
// every core and ran a team that size on each call, and at 1 thread an OpenMP worker spun
// beside the first call (13 ms of CPU on ResNet-18 32x32; docs/perf.md, "First calls").
// The count is read back from OpenMP, not remembered: a oneDNN GEMM sets this thread's count
// to 1 (tensor/gemm.cpp), and when only the last value set here was remembered, every conv
// primitive created after a model's first GEMM (a training step's whole backward) was made
// for one thread (docs/perf-models.md, "One thread for the backward's convolutions").
int use_kiln_threads() {
    int n = num_threads();
    if (omp_get_max_threads() != n) omp_set_num_threads(n);
    return n;
}
thread_local int t_last_conv_threads = 0;  // what the calling thread's last primitive was made for

// Creating a primitive costs far more than running a small one: one per shape and thread
// count, kept.
const Prim& cached_prim(Kind kind, const Geometry& g) {
    int threads = use_kiln_threads();
    static std::mutex mu;
    static std::map<std::vector<int64_t>, std::unique_ptr<Prim>> cache;
    std::vector<int64_t> key{int64_t(kind),      g.bias, plain_layouts(), g.layouts.x, g.layouts.y,
                             g.layouts.residual, threads};
    for (const memory::dims* d :
         {&g.x, &g.w, &g.y, &g.strides, &g.dilates, &g.pad_l, &g.post_ops}) {
        key.push_back(int64_t(d->size()));
        key.insert(key.end(), d->begin(), d->end());
    }
    std::lock_guard lock(mu);
    auto& slot = cache[key];
    if (!slot) {
        slot = std::make_unique<Prim>(make_prim(kind, g));
        slot->threads = threads;
    }
    return *slot;
}

// Runs `p` over kiln tensors (contiguous float32), one per argument in p.args' order, then
// the residual of a sum post-op. Arguments in oneDNN's layouts live in kiln's buffer pool
// (recycled between calls), the weights in the weight cache.
void run_prim(const Prim& p, std::span<const Tensor> tensors) {
    // One convolution at a time: run from several threads at once, the same primitives gave
    // wrong values (the_weight_cache_serves_several_threads; with or without the weight cache,
    // never with im2col), most likely the library scratchpad Debian's oneDNN shares between
    // primitives (built without ONEDNN_ENABLE_CONCURRENT_EXEC). Each call already uses every
    // core through OpenMP, so serializing costs a program with one calling thread nothing.
    static std::mutex one_at_a_time;
    std::lock_guard serial(one_at_a_time);
    use_kiln_threads();
    t_last_conv_threads = p.threads;
    static thread_local dnnl::stream stream(engine());
    std::unordered_map<int, memory> args;
    std::vector<std::pair<const Arg*, memory>> outputs;  // plain memory the result goes back to
    std::vector<Tensor> buffers;                         // kept until the stream is done
    auto pooled = [&](const memory::desc& d) {
        buffers.push_back(empty({int64_t((d.get_size() + 3) / 4)}, DType::float32));
        return memory(d, engine(), buffers.back().raw_data());
    };
    // The output of a sum post-op starts as the residual (the last tensor).
    auto fill = [&](const Arg& a, memory& into) {
        if (a.role != Role::output || !p.sum) return;
        if (a.fill) {
            memory residual(a.residual, engine(), tensors.back().raw_data());
            a.fill->execute(stream, residual, into);
        } else
            std::memcpy(into.get_data_handle(), tensors.back().raw_data(), a.want.get_size());
    };
    for (size_t i = 0; i < p.args.size(); ++i) {
        const Arg& a = p.args[i];
        memory plain(a.plain, engine(), tensors[i].raw_data());
        if (!a.reorder) {
            fill(a, plain);
            args.emplace(a.id, plain);
        } else if (a.role == Role::weights) {
            detail::ConvWeights w =
                detail::conv_cached_weights(tensors[i], a.want, engine(), [&](memory& into) {
                    a.reorder->execute(stream, plain, into);
                    stream.wait();
                });
            buffers.push_back(w.buffer);
            args.emplace(a.id, w.memory);
        } else {
            memory want = pooled(a.want);
            if (a.role == Role::input) a.reorder->execute(stream, plain, want);
            if (a.role == Role::output) outputs.emplace_back(&a, plain);
            fill(a, want);
            args.emplace(a.id, want);
        }
    }
    detail::OneDnnSignalsBlocked no_handler_inside_onednn;  // tensor/onednn_signals.h
    p.prim.execute(stream, args);
    for (auto& [a, plain] : outputs) a->reorder->execute(stream, args.at(a->id), plain);
    stream.wait();
    ++g_onednn_calls;
}

Tensor f32(const Tensor& t) { return contiguous_as(t, DType::float32); }

// A 4-D float32 tensor laid out channels-last: NHWC memory seen as [N, C, H, W].
bool channels_last(const Tensor& t) {
    if (t.dim() != 4 || t.dtype() != DType::float32) return false;
    const Shape &s = t.shape(), &st = t.strides();
    return st == Shape{s[1] * s[2] * s[3], 1, s[3] * s[1], s[1]} && !t.is_contiguous();
}

// An activation as oneDNN reads it: a channels-last tensor as it is, else contiguous NCHW.
Tensor activation(const Tensor& t) { return channels_last(t) ? t : f32(t); }

// An empty [N, C, H, W] output, channels-last when asked.
Tensor empty_output(const Shape& s, bool nhwc) {
    if (!nhwc) return empty(s, DType::float32);
    return empty({s[0], s[2], s[3], s[1]}, DType::float32).permute({0, 3, 1, 2});
}
#endif

// attrs.keepdim on conv2d and its two gradients (set by the inductor after autograd,
// codegen/channels_last.h): their activations (input, output gradient, input gradient) are
// NHWC tensors [N, H, W, C]. Each is seen as the [N, C, H, W] view of its NHWC memory, which
// oneDNN reads and writes without a reorder; other paths take the view as any strided tensor.
Tensor nchw_view(const Tensor& nhwc, const char* op) {
    KILN_CHECK(nhwc.dim() == 4, op, ": expected a 4-D NHWC activation [N, H, W, C], got shape ",
               nhwc.shape());
    return nhwc.contiguous().permute({0, 3, 1, 2});
}
// The NHWC tensor [N, H, W, C] of an [N, C, H, W] result (free when it is channels-last).
Tensor nhwc_of(const Tensor& nchw) { return nchw.permute({0, 2, 3, 1}).contiguous(); }

#ifdef KILN_HAVE_DNNL

Shape out_shape(const Shape& x, const Shape& w, const ConvParams& p) {
    return {x[0], w[0], window_out_size(x[2], p.kh, p.sh, p.ph, p.dh),
            window_out_size(x[3], p.kw, p.sw, p.pw, p.dw)};
}

bool onednn_usable(std::span<const Tensor> in) {
    for (const Tensor& t : in)
        if (!detail::conv_uses_onednn(t)) return false;
    return true;
}
#endif

}  // namespace

bool detail::conv_onednn_enabled() {
#ifdef KILN_HAVE_DNNL
    const char* e = std::getenv("KILN_CONV");
    std::string_view v = e ? e : "";
    KILN_CHECK(v.empty() || v == "onednn" || v == "onednn-plain" || v == "im2col",
               "KILN_CONV: expected onednn, onednn-plain or im2col, got '", v, "'");
    return v != "im2col";
#else
    return false;
#endif
}

bool detail::conv_uses_onednn(const Tensor& t) {
    return t.device().type == DeviceType::cpu && t.dtype() == DType::float32 &&
           conv_onednn_enabled();
}

const char* detail::conv_backend_name() { return conv_onednn_enabled() ? "onednn" : "im2col"; }
int64_t detail::onednn_conv_calls() { return g_onednn_calls.load(); }
int detail::onednn_conv_threads() {
#ifdef KILN_HAVE_DNNL
    return t_last_conv_threads;
#else
    return 0;
#endif
}

namespace {
Tensor conv2d_nchw(std::span<const Tensor> in, const Attrs& a, bool nhwc_out);
Tensor input_grad_nchw(std::span<const Tensor> in, const Attrs& a, bool nhwc_out);
Tensor weight_grad_nchw(std::span<const Tensor> in, const Attrs& a);
Attrs without_nhwc(Attrs a) {
    a.keepdim = false;
    return a;
}
}  // namespace

Tensor forward_conv2d(std::span<const Tensor> in, const Attrs& a) {
    KILN_CHECK(in.size() == 2 || in.size() == 3,
               "conv2d: expected (input, weight) or (input, weight, bias), got ", in.size(),
               " tensors");
    if (!a.keepdim) return conv2d_nchw(in, a, false);
    std::vector<Tensor> v(in.begin(), in.end());
    v[0] = nchw_view(in[0], "conv2d");
    return nhwc_of(conv2d_nchw(v, without_nhwc(a), true));
}

namespace {
// conv2d on [N, C, H, W] tensors; `nhwc_out`: oneDNN writes the output channels-last.
Tensor conv2d_nchw(std::span<const Tensor> in, const Attrs& a, bool nhwc_out) {
    ConvParams p = conv_params(a, "conv2d");
    KILN_CHECK(in[0].dim() == 4, "conv2d: expected a 4-D input [N, C, H, W], got shape ",
               in[0].shape());
    check_conv_fits(in[0].size(2), in[0].size(3), a.shape);
    Tensor bias = in.size() == 3 ? in[2] : Tensor();
    if (Tensor y = cudnn_conv2d(in, a); y.defined()) return y;
#ifdef KILN_HAVE_DNNL
    if (onednn_usable(in)) {
        Tensor x = activation(in[0]), w = f32(in[1]);
        Tensor y = empty_output(out_shape(x.shape(), w.shape(), p), nhwc_out);
        const Prim& prim =
            cached_prim(Kind::forward, geometry(x.shape(), w.shape(), y.shape(), p, bias.defined(),
                                                {}, {.x = channels_last(x), .y = nhwc_out}));
        if (bias.defined())
            run_prim(prim, std::vector<Tensor>{x, w, y, f32(bias)});
        else
            run_prim(prim, std::vector<Tensor>{x, w, y});
        return y;
    }
#endif
    (void)nhwc_out;
    return conv2d_im2col(in[0], in[1], bias, {p.sh, p.sw}, {p.ph, p.pw}, {p.dh, p.dw}, p.groups);
}
}  // namespace

// The NHWC form (attrs.keepdim) is made after autograd: it has no derivative.
void check_no_nhwc(const Attrs& a, const char* op) {
    KILN_CHECK(!a.keepdim, op,
               " with NHWC activations has no derivative: the inductor makes it after autograd "
               "(codegen/channels_last.h)");
}

std::vector<Tensor> backward_conv2d(const BackwardArgs& b) {
    check_no_nhwc(b.attrs, "conv2d");
    const Tensor &x = b.inputs[0], &w = b.inputs[1];
    Attrs ig = b.attrs;
    ig.dims = {b.input_shapes[0][2], b.input_shapes[0][3]};
    std::vector<Tensor> out(b.inputs.size());
    if (b.needs(0)) out[0] = dispatch(OpId::conv2d_input_grad, {b.grad, w}, ig);
    if (b.needs(1)) out[1] = dispatch(OpId::conv2d_weight_grad, {x, b.grad}, b.attrs);
    if (b.inputs.size() == 3 && b.needs(2)) out[2] = b.grad.sum({0, 2, 3});
    return out;
}

Tensor forward_conv2d_input_grad(std::span<const Tensor> in, const Attrs& a) {
    KILN_CHECK(in.size() == 2, "conv2d_input_grad: expected (grad_out, weight), got ", in.size(),
               " tensors");
    if (!a.keepdim) return input_grad_nchw(in, a, false);
    Tensor v[2] = {nchw_view(in[0], "conv2d_input_grad"), in[1]};
    return nhwc_of(input_grad_nchw(v, without_nhwc(a), true));
}

namespace {
Tensor input_grad_nchw(std::span<const Tensor> in, const Attrs& a, bool nhwc_out) {
    [[maybe_unused]] ConvParams p = conv_params(a, "conv2d_input_grad");  // checks the attributes
    KILN_CHECK(a.dims.size() == 2,
               "conv2d_input_grad: expected the input's size (H, W) in attrs.dims");
    const Tensor &g = in[0], &w = in[1];
    if (Tensor gx = cudnn_conv2d_input_grad(in, a); gx.defined()) return gx;
#ifdef KILN_HAVE_DNNL
    if (onednn_usable(in)) {
        Tensor gy = activation(g), wc = f32(w);
        Tensor gx = empty_output({g.size(0), w.size(1) * p.groups, a.dims[0], a.dims[1]}, nhwc_out);
        Layouts layouts{.x = nhwc_out, .y = channels_last(gy)};
        run_prim(cached_prim(Kind::input_grad,
                             geometry(gx.shape(), wc.shape(), gy.shape(), p, false, {}, layouts)),
                 std::vector<Tensor>{gy, wc, gx});
        return gx;
    }
#endif
    (void)nhwc_out;
    return input_grad_im2col(g, w, a);
}
}  // namespace

// conv2d_input_grad is linear in each input: its gradients are the forward and the weight gradient.
std::vector<Tensor> backward_conv2d_input_grad(const BackwardArgs& b) {
    check_no_nhwc(b.attrs, "conv2d_input_grad");
    Attrs f = b.attrs;
    f.dims = {};
    std::vector<Tensor> out(2);
    if (b.needs(0)) out[0] = dispatch(OpId::conv2d, {b.grad, b.inputs[1]}, f);
    if (b.needs(1)) out[1] = dispatch(OpId::conv2d_weight_grad, {b.grad, b.inputs[0]}, f);
    return out;
}

Tensor forward_conv2d_weight_grad(std::span<const Tensor> in, const Attrs& a) {
    KILN_CHECK(in.size() == 2, "conv2d_weight_grad: expected (input, grad_out), got ", in.size(),
               " tensors");
    if (!a.keepdim) return weight_grad_nchw(in, a);
    Tensor v[2] = {nchw_view(in[0], "conv2d_weight_grad"), nchw_view(in[1], "conv2d_weight_grad")};
    return weight_grad_nchw(v, without_nhwc(a));
}

namespace {
Tensor weight_grad_nchw(std::span<const Tensor> in, const Attrs& a) {
    [[maybe_unused]] ConvParams p = conv_params(a, "conv2d_weight_grad");
    const Tensor &x = in[0], &g = in[1];
    if (Tensor gw = cudnn_conv2d_weight_grad(in, a); gw.defined()) return gw;
#ifdef KILN_HAVE_DNNL
    if (onednn_usable(in)) {
        Tensor xc = activation(x), gy = activation(g);
        Tensor gw = empty({g.size(1), x.size(1) / p.groups, p.kh, p.kw}, DType::float32);
        Layouts layouts{.x = channels_last(xc), .y = channels_last(gy)};
        run_prim(cached_prim(Kind::weight_grad,
                             geometry(xc.shape(), gw.shape(), gy.shape(), p, false, {}, layouts)),
                 std::vector<Tensor>{xc, gy, gw});
        return gw;
    }
#endif
    return weight_grad_im2col(x, g, a);
}
}  // namespace

std::vector<Tensor> backward_conv2d_weight_grad(const BackwardArgs& b) {
    check_no_nhwc(b.attrs, "conv2d_weight_grad");
    Attrs f = b.attrs, ig = b.attrs;
    ig.dims = {b.input_shapes[0][2], b.input_shapes[0][3]};
    std::vector<Tensor> out(2);
    if (b.needs(0)) out[0] = dispatch(OpId::conv2d_input_grad, {b.inputs[1], b.grad}, ig);
    if (b.needs(1)) out[1] = dispatch(OpId::conv2d, {b.inputs[0], b.grad}, f);
    return out;
}

// --- conv2d_fused: conv2d, then its epilogue (tensor/ops.h, detail::ConvPostOp) in one call.
namespace {

int operand_count(const Shape& post_ops) {
    return int(std::count_if(post_ops.begin(), post_ops.end(), [](int64_t c) {
        return detail::ConvPostOp(c) != detail::ConvPostOp::relu;
    }));
}

// The reference: conv2d, then each op through the dispatcher, as the graph had them.
Tensor fused_by_ops(Tensor y, std::span<const Tensor> operands, const Shape& post_ops) {
    size_t next = 0;
    for (int64_t code : post_ops) {
        switch (detail::ConvPostOp(code)) {
            case detail::ConvPostOp::relu:
                y = dispatch(OpId::relu, {y});
                break;
            case detail::ConvPostOp::add_channel:
            case detail::ConvPostOp::add_tensor:
                y = dispatch(OpId::add, {y, operands[next++]});
                break;
            case detail::ConvPostOp::sub_channel:
                y = dispatch(OpId::sub, {y, operands[next++]});
                break;
            case detail::ConvPostOp::mul_channel:
                y = dispatch(OpId::mul, {y, operands[next++]});
                break;
            case detail::ConvPostOp::div_channel:
                y = dispatch(OpId::div, {y, operands[next++]});
                break;
        }
    }
    return y;
}

#ifdef KILN_HAVE_DNNL
// oneDNN takes the operands as they are only when each is what the codes say: per-channel
// values of C elements ([C, 1, 1] or [1, C, 1, 1]) and a residual of the output's shape.
bool operands_fit(std::span<const Tensor> operands, const Shape& post_ops, const Shape& out) {
    size_t next = 0;
    for (int64_t code : post_ops) {
        auto op = detail::ConvPostOp(code);
        if (op == detail::ConvPostOp::relu) continue;
        const Tensor& t = operands[next++];
        if (op == detail::ConvPostOp::add_tensor) {
            if (t.shape() != out) return false;
            continue;
        }
        bool per_channel =
            (t.shape() == Shape{out[1], 1, 1}) || (t.shape() == Shape{1, out[1], 1, 1});
        if (!per_channel) return false;
    }
    return true;
}
#endif

}  // namespace

Tensor forward_conv2d_fused(std::span<const Tensor> in, const Attrs& a) {
    [[maybe_unused]] ConvParams p = conv_params(a, "conv2d_fused");
    for (int64_t code : a.dims)
        KILN_CHECK(code >= 0 && code <= int64_t(detail::ConvPostOp::add_tensor),
                   "conv2d_fused: unknown post-op code ", code, " in ", a.dims);
    int64_t n_conv = int64_t(in.size()) - operand_count(a.dims);
    KILN_CHECK(n_conv == 2 || n_conv == 3, "conv2d_fused: expected (input, weight[, bias]) and ",
               operand_count(a.dims), " operands for post-ops ", a.dims, ", got ", in.size(),
               " tensors");
    std::span<const Tensor> conv = in.first(size_t(n_conv)), operands = in.subspan(size_t(n_conv));
    Attrs conv_attrs = a;
    conv_attrs.dims = {};
#ifdef KILN_HAVE_DNNL
    int sums =
        int(std::count(a.dims.begin(), a.dims.end(), int64_t(detail::ConvPostOp::add_tensor)));
    Shape y_shape = out_shape(conv[0].shape(), conv[1].shape(), p);
    if (onednn_usable(in) && sums <= 1 && operands_fit(operands, a.dims, y_shape)) {
        Layouts layouts{.x = channels_last(conv[0]), .y = a.keepdim};
        std::vector<Tensor> tensors{activation(conv[0]), f32(conv[1]),
                                    empty_output(y_shape, layouts.y)};
        Tensor residual;
        for (size_t i = 0, next = 0; i < a.dims.size(); ++i) {
            auto op = detail::ConvPostOp(a.dims[i]);
            if (op == detail::ConvPostOp::relu) continue;
            const Tensor& t = operands[next++];
            if (op == detail::ConvPostOp::add_tensor)
                residual = activation(t);
            else
                tensors.push_back(f32(t));  // after the bias, below
        }
        if (n_conv == 3) tensors.insert(tensors.begin() + 3, f32(conv[2]));
        if (residual.defined()) {
            layouts.residual = channels_last(residual);
            tensors.push_back(residual);
        }
        const Prim& prim =
            cached_prim(Kind::forward, geometry(tensors[0].shape(), tensors[1].shape(), y_shape, p,
                                                n_conv == 3, a.dims, layouts));
        run_prim(prim, tensors);
        return tensors[2];
    }
#endif
    return fused_by_ops(forward_conv2d(conv, conv_attrs), operands, a.dims);
}

std::vector<Tensor> backward_conv2d_fused(const BackwardArgs&) {
    fail(
        "conv2d_fused has no derivative: the inductor makes it after autograd "
        "(codegen/fuse_conv.cpp); "
        "differentiate conv2d and the ops after it instead");
}

}  // namespace kiln
