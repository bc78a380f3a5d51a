// Optimizers: update parameters in place from their .grad (PyTorch's torch.optim).
// Updates use the in-place Tensor methods under NoGradGuard, so autograd never sees them.
#pragma once
#include <utility>
#include <vector>

#include "tensor/ops.h"

namespace kiln::optim {

class Optimizer {
   public:
    explicit Optimizer(std::vector<Tensor> params, const char* name);
    virtual ~Optimizer() = default;
    virtual void step() = 0;  // parameters without a .grad are skipped
    void zero_grad();         // drops each parameter's .grad (PyTorch's set_to_none=True)
    const std::vector<Tensor>& params() const { return params_; }

   protected:
    std::vector<Tensor> params_;
};

// p -= lr * d, where d = g + weight_decay * p, through a momentum buffer when momentum > 0:
// buf = g on the first step, then buf = momentum * buf + g; d = buf.
class SGD : public Optimizer {
   public:
    SGD(std::vector<Tensor> params, double lr, double momentum = 0, double weight_decay = 0);
    void step() override;

    double lr, momentum, weight_decay;

   private:
    std::vector<Tensor> momentum_buffers_;  // undefined until a parameter's first step
};

// Adam (Kingma & Ba), with PyTorch's bias correction and L2 weight decay added to the gradient.
class Adam : public Optimizer {
   public:
    Adam(std::vector<Tensor> params, double lr = 1e-3, std::pair<double, double> betas = {0.9, 0.999},
         double eps = 1e-8, double weight_decay = 0);
    void step() override;

    double lr, beta1, beta2, eps, weight_decay;

   private:
    // The step count is a tensor on the parameter's device (PyTorch's capturable Adam): the
    // bias corrections are then tensor ops (or read by the multi-tensor kernel from device
    // memory), so a compiled training step records the same graph on every call instead of a
    // new constant 1 - beta^t each step, and a CUDA graph that captured the step
    // (cuda::GraphedStep) counts on every replay. lr and the other hyper-parameters are read
    // on the host: a captured step keeps the values it was captured with.
    struct State {
        Tensor step;                 // float64 0-d: steps taken (undefined before the first)
        Tensor exp_avg, exp_avg_sq;  // first and second moment estimates
    };
    std::vector<State> state_;
};

}  // namespace kiln::optim
