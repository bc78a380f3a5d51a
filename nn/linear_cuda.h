// Linear's forward on CUDA as one cublasLt GEMM with its bias epilogue (tensor/cublaslt.h),
// for nn::Linear (nn/layers.cpp). Eager only: under a JIT recording Linear stays matmul + add,
// which the inductor fuses itself.
#pragma once
#include "tensor/ops.h"

namespace kiln::nn::detail {

// y = x @ weight^T + bias through cublasLt when it takes these tensors (CUDA float32, bias
// defined, no recording, KILN_CUBLASLT not 0, aligned), with autograd's gradients; an undefined
// tensor otherwise (the caller runs matmul and add, the reference).
Tensor linear_cublaslt(const Tensor& x, const Tensor& weight, const Tensor& bias);

}  // namespace kiln::nn::detail
