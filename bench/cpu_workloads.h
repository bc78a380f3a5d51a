// The CPU micro-benchmarks' workloads, shared by bench_cpu_codegen (run time against
// torch.compile: bench/torch_cpu.py has the same functions) and bench_first_compile
// (compiler time per graph). Each takes two tensors of one shape; some ignore the second.
#pragma once
#include "kiln.h"

namespace kiln_bench {

using kiln::Tensor;

inline Tensor sin_cos(Tensor x, Tensor y) { return sin(x) + cos(y); }
inline Tensor gelu_tanh(Tensor x, Tensor) {
    return 0.5 * x * (1.0 + tanh(0.7978845608 * (x + 0.044715 * x * x * x)));
}
inline Tensor gelu_erf(Tensor x, Tensor) { return 0.5 * x * (1.0 + erf(x * 0.7071067811865476)); }
inline Tensor modified_sigmoid(Tensor x, Tensor y) {
    x = 1.0 / (exp(-x) + 5);
    if (x.mean() > 0.5) x = x / 1.1;
    return x * y;
}
inline Tensor exp_chain(Tensor x, Tensor) { return exp(exp(x * 0.1) * 0.1 - 1.0); }
inline Tensor softmax_rows(Tensor x, Tensor) {
    Tensor e = exp(x - x.amax({1}, true));
    return e / e.sum({1}, true);
}
inline Tensor log_softmax_rows(Tensor x, Tensor) {
    Tensor shifted = x - x.amax({1}, true);
    return shifted - log(exp(shifted).sum({1}, true));
}
inline Tensor layernorm_rows(Tensor x, Tensor) {
    Tensor mu = x.mean({1}, true);
    Tensor d = x - mu;
    return d * rsqrt((d * d).mean({1}, true) + 1e-5);
}

}  // namespace kiln_bench
