// Optimizer, SGD and Adam: the update rules of PyTorch's single-tensor implementations. CUDA
// float parameters are updated by one multi-tensor kernel per 64 (tensor/cuda_optim.h), and
// SGD's contiguous float32 CPU parameters after their first step by one pass each
// (cpu_sgd_step), when no JIT recording is watching (a compiled step records the per-tensor
// ops) and KILN_FUSED_OPTIM is not 0; the rest take the per-tensor path, the reference.
#include "optim/optimizer.h"

#include <algorithm>
#include <cmath>

#include "autograd/node.h"
#include "tensor/cuda_optim.h"
#include "tensor/parallel.h"

namespace kiln::optim {
namespace {

// Whether this step may hand parameters to the multi-tensor kernels (CUDA) or the one-pass
// CPU loop.
bool fused_now() { return dispatch_hook() == nullptr && cuda::fused_optim_enabled(); }

// The one-pass CPU SGD update takes contiguous float32 CPU tensors of one shape.
bool cpu_sgd_takes(const Tensor& t, const Tensor& like) {
    return t.defined() && t.device().type == DeviceType::cpu && t.dtype() == DType::float32 &&
           t.shape() == like.shape() && t.is_contiguous() && !t.requires_grad();
}

// The per-tensor update (d = g + p * wd; buf = buf * m + d; p = p + buf * (-lr)) in one pass
// over blocks that stay in L1, each op its own loop over the block with its float32 result
// stored, so the values are the per-tensor ops' bits (one rounding per op: no loop makes
// a * b + c, which GCC would fuse into an FMA). The per-tensor path ran each op over the whole
// tensor into a fresh one, then copied it back (docs/perf-models.md, "GPT at 2 threads").
void cpu_sgd_step(float* p, const float* g, float* buf, int64_t n, float lr_neg, float momentum,
                  float weight_decay) {
    parallel_for(n, kParallelGrain, [&](int64_t begin, int64_t end) {
        constexpr int64_t kBlock = 1024;
        alignas(64) float d[kBlock], step[kBlock];
        for (int64_t b = begin; b < end; b += kBlock) {
            const int64_t m = std::min(kBlock, end - b);
            float *pb = p + b, *bb = buf ? buf + b : nullptr;
            const float* gb = g + b;
            const float* dd = gb;
            if (weight_decay != 0) {
                for (int64_t j = 0; j < m; ++j) d[j] = pb[j] * weight_decay;
                for (int64_t j = 0; j < m; ++j) d[j] = gb[j] + d[j];
                dd = d;
            }
            if (bb) {
                for (int64_t j = 0; j < m; ++j) bb[j] = bb[j] * momentum;
                for (int64_t j = 0; j < m; ++j) bb[j] = bb[j] + dd[j];
                dd = bb;
            }
            for (int64_t j = 0; j < m; ++j) step[j] = dd[j] * lr_neg;
            for (int64_t j = 0; j < m; ++j) pb[j] = pb[j] + step[j];
        }
    });
}

}  // namespace

Optimizer::Optimizer(std::vector<Tensor> params, const char* name) : params_(std::move(params)) {
    KILN_CHECK(!params_.empty(), name, ": got an empty parameter list");
    for (size_t i = 0; i < params_.size(); ++i) {
        const Tensor& p = params_[i];
        KILN_CHECK(p.defined(), name, ": parameter ", i, " is an undefined tensor");
        KILN_CHECK(p.is_leaf(), name, ": can't optimize a non-leaf tensor (parameter ", i, ", shape ", p.shape(),
                   "); pass leaves such as module->parameters()");
        KILN_CHECK(p.requires_grad(), name, ": parameter ", i, " (shape ", p.shape(), ") does not require grad");
    }
}

void Optimizer::zero_grad() {
    for (Tensor& p : params_) p.zero_grad();
}

// --- SGD
SGD::SGD(std::vector<Tensor> params, double lr, double momentum, double weight_decay)
    : Optimizer(std::move(params), "SGD"), lr(lr), momentum(momentum), weight_decay(weight_decay) {
    KILN_CHECK(lr >= 0 && momentum >= 0 && weight_decay >= 0, "SGD: invalid hyper-parameters (lr ", lr, ", momentum ",
               momentum, ", weight_decay ", weight_decay, ")");
    momentum_buffers_.resize(params_.size());
}

void SGD::step() {
    NoGradGuard no_grad;
    bool fused = fused_now();
    std::vector<Tensor> fp, fg, fb;  // the parameters the multi-tensor kernel takes
    for (size_t i = 0; i < params_.size(); ++i) {
        Tensor& p = params_[i];
        Tensor d = p.grad();
        if (!d.defined()) continue;
        Tensor& buf = momentum_buffers_[i];
        if (fused && cuda::fused_optim_takes(p, d) &&
            (!buf.defined() || cuda::fused_optim_takes(buf, d))) {
            if (momentum != 0 && !buf.defined())
                buf = zeros_like(p.detach());  // momentum * 0 + d = d
            fp.push_back(p.detach()), fg.push_back(d);
            if (momentum != 0) fb.push_back(buf);
            continue;
        }
        if (fused && cpu_sgd_takes(p.detach(), d) && cpu_sgd_takes(d, d) &&
            (momentum == 0 || cpu_sgd_takes(buf, d))) {
            float* pp = static_cast<float*>(p.raw_data());
            float* bp = momentum != 0 ? static_cast<float*>(buf.raw_data()) : nullptr;
            cpu_sgd_step(pp, static_cast<const float*>(d.raw_data()), bp, p.numel(), float(-lr),
                         float(momentum), float(weight_decay));
            ++p.impl()->storage->version;
            if (bp) ++buf.impl()->storage->version;
            continue;
        }
        if (weight_decay != 0) d = d + p.detach() * weight_decay;
        if (momentum != 0) {
            if (!buf.defined()) buf = d.clone();
            else buf.mul_(momentum).add_(d);
            d = buf;
        }
        p.add_(d, -lr);
    }
    if (!fp.empty()) cuda::fused_sgd_step(fp, fg, fb, lr, momentum, weight_decay);
}

// --- Adam
Adam::Adam(std::vector<Tensor> params, double lr, std::pair<double, double> betas, double eps, double weight_decay)
    : Optimizer(std::move(params), "Adam"), lr(lr), beta1(betas.first), beta2(betas.second), eps(eps),
      weight_decay(weight_decay) {
    KILN_CHECK(lr >= 0 && eps >= 0 && weight_decay >= 0, "Adam: invalid hyper-parameters (lr ", lr, ", eps ", eps,
               ", weight_decay ", weight_decay, ")");
    KILN_CHECK(beta1 >= 0 && beta1 < 1 && beta2 >= 0 && beta2 < 1, "Adam: betas must lie in [0, 1), got (", beta1,
               ", ", beta2, ")");
    state_.resize(params_.size());
}

void Adam::step() {
    NoGradGuard no_grad;
    bool fused = fused_now();
    std::vector<Tensor> fp, fg, fm, fv, fs;  // the parameters the multi-tensor kernel takes
    for (size_t i = 0; i < params_.size(); ++i) {
        Tensor& p = params_[i];
        Tensor g = p.grad();
        if (!g.defined()) continue;
        State& s = state_[i];
        if (!s.step.defined()) {
            // On the parameter's device (PyTorch's capturable Adam): a CUDA parameter's count
            // is counted by the GPU, so a CUDA graph that captured the step counts on replay.
            s.step = zeros({}, {.dtype = float64, .device = p.device()});
            s.exp_avg = zeros_like(p.detach());
            s.exp_avg_sq = zeros_like(p.detach());
        }
        if (fused && cuda::fused_optim_takes(p, g) && cuda::fused_optim_takes(s.exp_avg, g) &&
            cuda::fused_optim_takes(s.exp_avg_sq, g) && s.step.dtype() == float64) {
            if (s.step.device() != p.device())
                s.step = s.step.to(p.device());  // an older CPU count
            fp.push_back(p.detach()), fg.push_back(g), fm.push_back(s.exp_avg),
                fv.push_back(s.exp_avg_sq), fs.push_back(s.step);
            continue;
        }
        // Counted where it lives (a CUDA count counts on the GPU: no copy from host memory, so
        // a CUDA graph can capture this path too).
        s.step.add_(ones({}, {.dtype = float64, .device = s.step.device()}));
        if (weight_decay != 0) g = g + p.detach() * weight_decay;
        s.exp_avg.add_(g - s.exp_avg, 1 - beta1);           // lerp toward g, as torch's lerp_
        s.exp_avg_sq.mul_(beta2).add_(g * g, 1 - beta2);
        // In float64, then to the parameter's dtype, as torch computes them in double.
        Tensor bias_correction1 = (1.0 - pow(beta1, s.step)).to(p.dtype());
        Tensor bias_correction2 = (1.0 - pow(beta2, s.step)).to(p.dtype());
        Tensor step_size = bias_correction1.reciprocal() * lr;
        Tensor denom = s.exp_avg_sq.sqrt() / bias_correction2.sqrt() + eps;
        p.add_(s.exp_avg / denom * step_size, -1.0);
    }
    if (!fp.empty())
        cuda::fused_adam_step(fp, fg, fm, fv, fs, {lr, beta1, beta2, eps, weight_decay});
}

}  // namespace kiln::optim
