// Internal to tensor/: one GEMM with its epilogue (bias, bias + ReLU, bias + tanh-GELU) through
// cublasLt, opened with dlopen on first use like cuBLAS (tensor/cuda_runtime.h says why no
// header is used): Linear's y = act(x @ W^T + b) as one kernel that writes y once, instead of
// a GEMM and an elementwise kernel that reads it back. KILN_CUBLASLT=0 turns it off.
#pragma once
#include <cstdint>
#include <string>

namespace kiln::cuda::detail {

enum class Epilogue {
    bias,       // out = a @ w^T + bias
    bias_relu,  // out = relu(a @ w^T + bias)
    bias_gelu,  // out = gelu(a @ w^T + bias), GELU's tanh approximation (cublasLt's)
};

// Whether cublasLt is used now: KILN_CUBLASLT is not 0 and libcublasLt loads (when it does
// not, the first call prints one note naming why).
bool cublaslt_enabled();
std::string cublaslt_unavailable_reason();  // "" when loaded (or not tried yet)

// Row-major float32, contiguous: out[m, n] = epilogue(a[m, k] @ w[n, k]^T + bias[n]), on kiln's
// stream. The matmul plan (layouts, algorithm) is chosen once per (m, n, k, epilogue) and cached.
void gemm_epilogue(int64_t m, int64_t n, int64_t k, const float* a, const float* w,
                   const float* bias, float* out, Epilogue e);

int64_t cublaslt_calls();  // GEMMs run through cublasLt so far (for tests)

}  // namespace kiln::cuda::detail
