// kiln::cuda::GraphedStep: a whole training step (forward, loss.backward(), the optimizer's
// step) captured as one CUDA graph and replayed with one launch per call, as PyTorch's
// torch.cuda.graph does for a training loop (and torch.compile's mode="reduce-overhead" with
// compiled autograd). docs/cuda.md, "Whole-step capture".
//
//   Device gpu{DeviceType::cuda, 0};
//   Tensor x = zeros({64, 20}, {.device = gpu}), y = zeros({64, 4}, {.device = gpu});
//   optim::Adam opt(net->parameters(), 1e-3);
//   cuda::GraphedStep step([&] {
//       opt.zero_grad();
//       Tensor loss = nn::functional::mse_loss((*net)(x), y);
//       loss.backward();
//       opt.step();
//       return loss;
//   });
//   for (auto& [xb, yb] : batches) {
//       x.copy_(xb), y.copy_(yb);     // the step's inputs: static tensors refilled in place
//       Tensor loss = step()[0];      // the same tensor every call, rewritten by each replay
//   }
//
// The first `warmup` calls run the step eagerly (optimizer state made, kernels compiled,
// cuBLAS/cuDNN ready, compiled functions built); the next captures it and replays it once;
// every later call only replays. A replay repeats the captured kernels on the same memory:
// what the step reads must stay at its address (parameters, optimizer state, the inputs the
// caller refills with copy_), and host values are those of the capture (a learning rate, a
// Python-side count). Random ops draw fresh numbers each replay.
#pragma once
#include <concepts>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace kiln::cuda {

class Graph;

struct GraphedStepOptions {
    // Eager calls before the capture (at least 1: the capture must find optimizer state and
    // gradients made, or it would record their creation and replay it every step). PyTorch's
    // make_graphed_callables warms up 3 times; DDP wants 11 (its docs) where buckets rebuild.
    int warmup = 3;
};

class GraphedStep {
   public:
    using Fn = std::function<std::vector<Tensor>()>;
    explicit GraphedStep(Fn step, GraphedStepOptions options = {});
    // A step that returns one tensor (the loss).
    template <class F>
    requires std::convertible_to<std::invoke_result_t<F&>, Tensor>
    explicit GraphedStep(F step, GraphedStepOptions options = {})
        : GraphedStep(Fn([step]() mutable { return std::vector<Tensor>{Tensor(step())}; }),
                      options) {}
    ~GraphedStep();
    GraphedStep(const GraphedStep&) = delete;
    GraphedStep& operator=(const GraphedStep&) = delete;

    // Runs one step: eagerly while warming up, then captured (and replayed once), then
    // replayed. Returns the step's outputs, detached: from the capture on, the same static
    // tensors every call, rewritten by each replay (clone one to keep it). Raises a
    // kiln::Error without a usable GPU, when the step cannot be captured (naming what: a
    // host read such as item(), a copy from host memory, synchronize()) and on every call
    // after such a failure; nothing captured runs, so parameters and optimizer state keep
    // their values (parameters' .grad may hold a recorded, never computed backward's
    // buffers: zero_grad() before training on eagerly).
    std::vector<Tensor> operator()();

    bool captured() const { return graph_ != nullptr; }
    int64_t calls() const { return calls_; }      // including warm-up and the capture
    int64_t replays() const { return replays_; }  // including the capture call's own replay

   private:
    std::vector<Tensor> run_eagerly();
    Fn step_;
    GraphedStepOptions options_;
    int64_t calls_ = 0, replays_ = 0;
    std::unique_ptr<Graph> graph_;
    std::vector<Tensor> outputs_;  // the capture's, rewritten by each replay
    std::string failed_;           // why the capture failed: every later call raises it
};

}  // namespace kiln::cuda
