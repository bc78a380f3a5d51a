// Optimizer, SGD and Adam: the update rules of PyTorch's single-tensor implementations.
#include "optim/optimizer.h"

#include <cmath>

#include "autograd/node.h"

namespace kiln::optim {

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
    for (size_t i = 0; i < params_.size(); ++i) {
        Tensor& p = params_[i];
        Tensor d = p.grad();
        if (!d.defined()) continue;
        if (weight_decay != 0) d = d + p.detach() * weight_decay;
        if (momentum != 0) {
            Tensor& buf = momentum_buffers_[i];
            if (!buf.defined()) buf = d.clone();
            else buf.mul_(momentum).add_(d);
            d = buf;
        }
        p.add_(d, -lr);
    }
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
    for (size_t i = 0; i < params_.size(); ++i) {
        Tensor& p = params_[i];
        Tensor g = p.grad();
        if (!g.defined()) continue;
        State& s = state_[i];
        if (!s.step.defined()) {
            s.step = zeros({}, {.dtype = float64});
            s.exp_avg = zeros_like(p.detach());
            s.exp_avg_sq = zeros_like(p.detach());
        }
        s.step.add_(ones({}, {.dtype = float64}));
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
}

}  // namespace kiln::optim
