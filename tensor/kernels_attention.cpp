// The table op attention: softmax(q k^T * scale) v over the last two dims, in one op.
// On CUDA one kernel (kernels_cuda_attention.cpp; its source codegen/emit_eager_cuda.h) walks
// the keys in tiles with a running maximum and sum (flash attention's online softmax), so the
// [L, S] weights are never written, and reads q, k and v through their strides: the heads of
// a projection, [B, L, H, d] viewed as [B, H, L, d], need no copy. On the CPU, and for more
// features than the kernel holds, it is the composition of matmul, the mask and softmax,
// which is also the reference the CUDA kernel is tested against. The gradient recomputes the
// weights from the saved q and k (what flash attention's backward does), then is the usual
// softmax-and-matmul chain.
#include <cmath>

#include "tensor/kernels.h"
#include "tensor/ops.h"

namespace kiln {
namespace {

struct AttentionShape {
    Shape batch;  // q's, k's and v's batch dims, broadcast
    int64_t L, S, d, dv;
};

AttentionShape check_attention(std::span<const Tensor> in, const Attrs& a) {
    KILN_CHECK(in.size() == 3, "attention: expected q, k and v, got ", in.size(), " tensors");
    const Tensor &q = in[0], &k = in[1], &v = in[2];
    KILN_CHECK(q.dim() >= 2 && k.dim() >= 2 && v.dim() >= 2,
               "attention: expected q, k, v with at least 2 dims, got ", q.shape(), ", ",
               k.shape(), ", ", v.shape());
    KILN_CHECK(q.size(-1) == k.size(-1), "attention: q ", q.shape(), " and k ", k.shape(),
               " must have the same last dim");
    KILN_CHECK(k.size(-2) == v.size(-2), "attention: k ", k.shape(), " and v ", v.shape(),
               " must have the same number of positions");
    KILN_CHECK(is_floating(q.dtype()) && q.dtype() == k.dtype() && q.dtype() == v.dtype(),
               "attention: expected q, k, v of one float dtype, got ", q.dtype(), ", ", k.dtype(),
               ", ", v.dtype());
    KILN_CHECK(q.device() == k.device() && q.device() == v.device(),
               "attention: expected q, k, v on one device, got ", q.device(), ", ", k.device(),
               ", ", v.device());
    auto batch_of = [](const Tensor& t) { return Shape(t.shape().begin(), t.shape().end() - 2); };
    Shape batch = broadcast_shapes(broadcast_shapes(batch_of(q), batch_of(k), "attention"),
                                   batch_of(v), "attention");
    KILN_CHECK(!a.keepdim || batch.size() == 2,
               "attention: the heads-last result needs q [B, H, L, d], got ", q.shape());
    return {batch, q.size(-2), k.size(-2), q.size(-1), v.size(-1)};
}

// softmax(q k^T * scale), key j > query i masked where causal: the weights [..., L, S].
Tensor attention_weights(const Tensor& q, const Tensor& k, double scale, bool causal) {
    Tensor scores = matmul(q, k.transpose(-2, -1)) * scale;
    if (k.size(-2) == 0) return scores;  // no key: no weights, and the result is zeros
    if (causal) {
        TensorOptions on = {.device = scores.device()};
        Tensor above = arange(double(q.size(-2)), on).unsqueeze(1) < arange(double(k.size(-2)), on).unsqueeze(0);
        scores = masked_fill(scores, above, -INFINITY);
    }
    return softmax(scores, -1);
}

// t with its batch dims made [B0, B1] (views where they merge): the kernel's four dims.
Tensor as_four_dims(const Tensor& t, const Shape& batch) {
    Shape to = batch;
    to.push_back(t.size(-2));
    to.push_back(t.size(-1));
    Tensor x = t.expand(to);
    if (batch.size() == 2) return x;
    int64_t b1 = batch.empty() ? 1 : batch.back();
    return x.reshape({-1, b1, t.size(-2), t.size(-1)});
}

}  // namespace

Tensor forward_attention(std::span<const Tensor> in, const Attrs& a) {
    AttentionShape sh = check_attention(in, a);
    const Tensor &q = in[0], &k = in[1], &v = in[2];
    const bool causal = a.dim != 0;
    Shape out_shape = sh.batch;
    out_shape.push_back(sh.L);
    out_shape.push_back(sh.dv);
    if (q.device().type == DeviceType::cuda && sh.d <= kAttentionMaxFeatures &&
        sh.dv <= kAttentionMaxFeatures) {
        // keepdim: [B, L, H, dv] in memory, written through its [B, H, L, dv] view.
        Tensor out = a.keepdim ? empty({sh.batch[0], sh.L, sh.batch[1], sh.dv}, q.dtype(), q.device())
                               : empty(out_shape, q.dtype(), q.device());
        if (out.numel() == 0) return out;
        Tensor view = a.keepdim ? out.transpose(1, 2) : out;
        cuda_attention(as_four_dims(q, sh.batch), as_four_dims(k, sh.batch), as_four_dims(v, sh.batch),
                       as_four_dims(view, sh.batch), a.scalar, causal);
        return out;
    }
    Tensor out = matmul(attention_weights(q, k, a.scalar, causal), v).expand(out_shape);
    return a.keepdim ? out.transpose(1, 2).contiguous() : out.contiguous();
}

std::vector<Tensor> backward_attention(const BackwardArgs& b) {
    const Tensor &q = b.inputs[0], &k = b.inputs[1], &v = b.inputs[2];
    const double scale = b.attrs.scalar;
    Tensor g = b.attrs.keepdim ? b.grad.transpose(1, 2) : b.grad;
    Tensor p = attention_weights(q, k, scale, b.attrs.dim != 0);
    std::vector<Tensor> grads(3);
    if (b.needs(2)) grads[2] = sum_to(matmul(p.transpose(-2, -1), g), b.input_shapes[2]);
    if (b.needs(0) || b.needs(1)) {
        Tensor dp = matmul(g, v.transpose(-2, -1));
        Tensor ds = p * (dp - sum(dp * p, {-1}, true)) * scale;  // softmax's gradient, then the scale's
        if (b.needs(0)) grads[0] = sum_to(matmul(ds, k), b.input_shapes[0]);
        if (b.needs(1)) grads[1] = sum_to(matmul(ds.transpose(-2, -1), q), b.input_shapes[1]);
    }
    return grads;
}

Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, double scale, bool causal) {
    return dispatch(OpId::attention, {q, k, v}, {.dim = causal ? 1 : 0, .scalar = scale});
}

}  // namespace kiln
