// Image layers: Conv2d, MaxPool2d, AvgPool2d, AdaptiveAvgPool2d, AdaptiveMaxPool2d, Flatten —
// PyTorch's names, arguments and parameter layout, over tensor/composites_conv.cpp.
#pragma once
#include <optional>
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
    explicit MaxPool2d(Pair kernel_size, Pair stride = {0, 0}, Pair padding = {0, 0},
                       Pair dilation = {1, 1}, bool ceil_mode = false);
    Tensor forward(const Tensor& x) override;
    std::string extra_repr() const override;
    Window2d window;
};

class AvgPool2d : public Module {
   public:
    explicit AvgPool2d(Pair kernel_size, Pair stride = {0, 0}, Pair padding = {0, 0},
                       bool ceil_mode = false, bool count_include_pad = true,
                       int64_t divisor_override = 0);
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

class AdaptiveMaxPool2d : public Module {
   public:
    explicit AdaptiveMaxPool2d(Pair output_size);
    Tensor forward(const Tensor& x) override { return adaptive_max_pool2d(x, output_size); }
    std::string extra_repr() const override;
    Pair output_size;
};

// Batch normalization per channel of [N, C, H, W]: weight (ones) and bias (zeros) when
// affine; the buffers running_mean (zeros) and running_var (ones) updated by `momentum`
// while training, used in eval(), and num_batches_tracked (int64, 0-d) counting the training
// calls, as PyTorch. momentum = nullopt (PyTorch's None): the running statistics are the
// plain average of every batch so far. track_running_stats = false: no buffers, and the
// batch's statistics normalize in eval() too.
class BatchNorm2d : public Module {
   public:
    explicit BatchNorm2d(int64_t num_features, double eps = 1e-5,
                         std::optional<double> momentum = 0.1, bool affine = true,
                         bool track_running_stats = true);
    Tensor forward(const Tensor& x) override;
    std::string extra_repr() const override;
    int64_t num_features;
    double eps;
    std::optional<double> momentum;
    bool track_running_stats;
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
