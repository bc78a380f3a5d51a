// Linear through cublasLt's bias epilogue (nn/linear_cuda.h): the forward is one GEMM; the
// gradients are Tensor code, as matmul's and add's would be.
#include "nn/linear_cuda.h"

#include <cstdint>

#include "autograd/function.h"
#include "tensor/cublaslt.h"

namespace kiln::nn::detail {
namespace {

bool aligned(const Tensor& t, uintptr_t bytes) {
    return reinterpret_cast<uintptr_t>(t.raw_data()) % bytes == 0;
}

// inputs: x [..., k], weight [n, k], bias [n].
struct LinearBiasEpilogue : autograd::Function<LinearBiasEpilogue> {
    static Tensor forward(const Tensor& x, const Tensor& weight, const Tensor& bias) {
        int64_t k = x.size(-1), n = weight.size(0), m = x.numel() / k;
        Shape out_shape = x.shape();
        out_shape.back() = n;
        Tensor out = empty(out_shape, DType::float32, x.device());
        cuda::detail::gemm_epilogue(m, n, k, static_cast<const float*>(x.raw_data()),
                                    static_cast<const float*>(weight.raw_data()),
                                    static_cast<const float*>(bias.raw_data()),
                                    static_cast<float*>(out.raw_data()),
                                    cuda::detail::Epilogue::bias);
        return out;
    }
    static void setup_context(autograd::Ctx& ctx, const std::vector<Tensor>& inputs,
                              const Tensor&) {
        ctx.save_for_backward(inputs[0], inputs[1]);
    }
    static std::vector<Tensor> backward(autograd::Ctx& ctx, const Tensor& grad) {
        const Tensor &x = ctx.saved_tensors()[0], &weight = ctx.saved_tensors()[1];
        int64_t k = x.size(-1), n = weight.size(0);
        Tensor g2 = grad.reshape({grad.numel() / n, n});
        std::vector<Tensor> out(3);
        if (ctx.needs_input_grad(0)) out[0] = matmul(grad, weight);  // [..., k]
        if (ctx.needs_input_grad(1))
            out[1] = matmul(g2.t(), x.reshape({x.numel() / k, k}));  // [n, k]
        if (ctx.needs_input_grad(2)) out[2] = g2.sum({0});           // [n]
        return out;
    }
};

}  // namespace

Tensor linear_cublaslt(const Tensor& x, const Tensor& weight, const Tensor& bias) {
    if (!bias.defined() || dispatch_hook() != nullptr) return {};
    for (const Tensor* t : {&x, &weight, &bias})
        if (t->device().type != DeviceType::cuda || t->dtype() != DType::float32 ||
            !t->is_contiguous() || t->numel() == 0)
            return {};
    if (weight.dim() != 2 || bias.dim() != 1 || x.dim() < 1) return {};
    // cublasLt's heuristic assumes 256-byte aligned operands (its default preference).
    if (!aligned(x, 256) || !aligned(weight, 256) || !aligned(bias, 256)) return {};
    if (!cuda::detail::cublaslt_enabled()) return {};
    return LinearBiasEpilogue::apply(x, weight, bias);
}

}  // namespace kiln::nn::detail
