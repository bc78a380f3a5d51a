// The optimizers' step on CUDA parameters as one kernel launch per 64 parameters (PyTorch's
// multi-tensor "foreach" step) instead of several launches per parameter: optim/optimizer.cpp
// calls these for the CUDA float parameters it can hand over; KILN_FUSED_OPTIM=0 keeps the
// per-tensor path (the reference). Kernels are CUDA C++ built by NVRTC (tensor/cuda_optim.cpp).
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tensor/tensor.h"

namespace kiln::cuda {

// Whether the optimizers use the kernels below now: KILN_FUSED_OPTIM is not 0 (read per call).
bool fused_optim_enabled();
// p, its gradient and each state tensor (same dtype and shape, contiguous, on cuda:0,
// float32 or float64) can be updated by these kernels.
bool fused_optim_takes(const Tensor& p, const Tensor& grad);

// SGD over params[i] with grads[i]: d = g + weight_decay * p; with momentum,
// bufs[i] = momentum * bufs[i] + d and d = bufs[i] (a new buffer must hold zeros, which makes
// it d, as the per-tensor first step); p -= lr * d. bufs is empty when momentum is 0.
void fused_sgd_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                    const std::vector<Tensor>& bufs, double lr, double momentum,
                    double weight_decay);

// Adam over params[i] with grads[i], moments exp_avgs[i] and exp_avg_sqs[i] and step count
// steps[i] (a float64 scalar on the parameters' device, steps taken before this one): one
// launch counts this step on the device, the next reads the counts for the bias corrections,
// as PyTorch's capturable Adam does. So no step count is baked into the launch arguments: a
// CUDA graph that captured the step replays the right update on every step. lr, the betas,
// eps and weight_decay are launch arguments (a captured graph keeps those it was captured with).
struct AdamHyper {
    double lr, beta1, beta2, eps, weight_decay;
};
void fused_adam_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                     const std::vector<Tensor>& exp_avgs, const std::vector<Tensor>& exp_avg_sqs,
                     const std::vector<Tensor>& steps, const AdamHyper& h);

int64_t fused_optim_launches();  // kernel launches so far (for tests)

// The kernels' sources with their entry names, for compile-only tests (NVRTC needs no GPU).
std::vector<std::pair<std::string, std::string>> fused_optim_kernel_sources();

}  // namespace kiln::cuda
