// Image layers: Conv2d, MaxPool2d, AvgPool2d, AdaptiveAvgPool2d, Flatten — PyTorch's names,
// arguments and parameter layout, over tensor/composites_conv.cpp.
#pragma once
#include <utility>

#include "nn/module.h"

namespace kiln::nn {

using Pair = std::pair<int64_t, int64_t>;

// weight [out, in / groups, kH, kW] and bias [out] start uniform in +-1/sqrt(fan_in), fan_in
// = in / groups * kH * kW, as PyTorch's default initialization gives.
class Conv2d : public Module {
   public:
    Conv2d(int64_t in_channels, int64_t out_channels, Pair kernel_size, Pair stride = {1, 1}, Pair padding = {0, 0},
           Pair dilation = {1, 1}, int64_t groups = 1, bool bias = true);
    Tensor forward(const Tensor& x) override;
    std::string extra_repr() const override;

    int64_t in_channels, out_channels;
    Pair kernel_size, stride, padding, dilation;
    int64_t groups;
    Tensor weight, bias;
};

class MaxPool2d : public Module {
   public:
    // stride {0, 0} means the kernel size, PyTorch's default.
    explicit MaxPool2d(Pair kernel_size, Pair stride = {0, 0}, Pair padding = {0, 0}, Pair dilation = {1, 1});
    Tensor forward(const Tensor& x) override;
    std::string extra_repr() const override;
    Window2d window;
};

class AvgPool2d : public Module {
   public:
    explicit AvgPool2d(Pair kernel_size, Pair stride = {0, 0}, Pair padding = {0, 0});
    Tensor forward(const Tensor& x) override;
    std::string extra_repr() const override;
    Window2d window;
};

class AdaptiveAvgPool2d : public Module {
   public:
    explicit AdaptiveAvgPool2d(Pair output_size);
    Tensor forward(const Tensor& x) override { return adaptive_avg_pool2d(x, output_size); }
    std::string extra_repr() const override;
    Pair output_size;
};

// Batch normalization per channel of [N, C, H, W]: weight (ones) and bias (zeros) when
// affine; the buffers running_mean (zeros) and running_var (ones) updated by `momentum`
// while training, used in eval(), and num_batches_tracked (int64, 0-d) counting the training
// calls, as PyTorch.
class BatchNorm2d : public Module {
   public:
    explicit BatchNorm2d(int64_t num_features, double eps = 1e-5, double momentum = 0.1, bool affine = true);
    Tensor forward(const Tensor& x) override;
    std::string extra_repr() const override;
    int64_t num_features;
    double eps, momentum;
    Tensor weight, bias, running_mean, running_var, num_batches_tracked;
};

// Flattens dims start_dim..end_dim into one (default: everything but the batch dim).
class Flatten : public Module {
   public:
    explicit Flatten(int64_t start_dim = 1, int64_t end_dim = -1) : start_dim(start_dim), end_dim(end_dim) {}
    Tensor forward(const Tensor& x) override;
    std::string extra_repr() const override;
    int64_t start_dim, end_dim;
};

}  // namespace kiln::nn
