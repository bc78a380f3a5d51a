// Conv2d, the pooling layers and Flatten.
#include "nn/conv.h"

#include <cmath>
#include <sstream>

#include "autograd/node.h"
#include "nn/functional.h"

namespace kiln::nn {
namespace {
std::string pair_text(Pair p) { return "(" + std::to_string(p.first) + ", " + std::to_string(p.second) + ")"; }
Pair or_kernel(Pair stride, Pair kernel) { return stride == Pair{0, 0} ? kernel : stride; }
}  // namespace

Conv2d::Conv2d(int64_t in, int64_t out, Pair k, Pair s, Pair p, Pair d, int64_t g, bool with_bias)
    : in_channels(in), out_channels(out), kernel_size(k), stride(s), padding(p), dilation(d), groups(g) {
    KILN_CHECK(in > 0 && out > 0, "Conv2d: in_channels and out_channels must be positive, got ", in, " and ", out);
    KILN_CHECK(g > 0 && in % g == 0 && out % g == 0, "Conv2d: in_channels (", in, ") and out_channels (", out,
               ") must be divisible by groups (", g, ")");
    KILN_CHECK(k.first > 0 && k.second > 0, "Conv2d: kernel_size must be positive, got ", pair_text(k));
    double bound = 1.0 / std::sqrt(double(in / g * k.first * k.second));
    weight = register_parameter("weight", rand({out, in / g, k.first, k.second}) * (2 * bound) - bound);
    if (with_bias) bias = register_parameter("bias", rand({out}) * (2 * bound) - bound);
}

Tensor Conv2d::forward(const Tensor& x) { return conv2d(x, weight, bias, stride, padding, dilation, groups); }

std::string Conv2d::extra_repr() const {
    std::string s = std::to_string(in_channels) + ", " + std::to_string(out_channels) + ", kernel_size=" + pair_text(kernel_size) +
                    ", stride=" + pair_text(stride);
    if (padding != Pair{0, 0}) s += ", padding=" + pair_text(padding);
    if (dilation != Pair{1, 1}) s += ", dilation=" + pair_text(dilation);
    if (groups != 1) s += ", groups=" + std::to_string(groups);
    if (!bias.defined()) s += ", bias=False";
    return s;
}

MaxPool2d::MaxPool2d(Pair k, Pair s, Pair p, Pair d, bool ceil_mode)
    : window{k, or_kernel(s, k), p, d, ceil_mode} {}
Tensor MaxPool2d::forward(const Tensor& x) { return max_pool2d(x, window); }
std::string MaxPool2d::extra_repr() const {
    return "kernel_size=" + pair_text(window.kernel) + ", stride=" + pair_text(window.stride) +
           ", padding=" + pair_text(window.padding) + ", dilation=" + pair_text(window.dilation) +
           ", ceil_mode=" + (window.ceil_mode ? "True" : "False");
}

AvgPool2d::AvgPool2d(Pair k, Pair s, Pair p, bool ceil_mode, bool count_include_pad,
                     int64_t divisor_override)
    : window{k, or_kernel(s, k), p, {1, 1}, ceil_mode, count_include_pad, divisor_override} {}
Tensor AvgPool2d::forward(const Tensor& x) { return avg_pool2d(x, window); }
std::string AvgPool2d::extra_repr() const {
    std::string s = "kernel_size=" + pair_text(window.kernel) +
                    ", stride=" + pair_text(window.stride) +
                    ", padding=" + pair_text(window.padding);
    if (window.ceil_mode) s += ", ceil_mode=True";
    if (!window.count_include_pad) s += ", count_include_pad=False";
    if (window.divisor_override != 0)
        s += ", divisor_override=" + std::to_string(window.divisor_override);
    return s;
}

AdaptiveAvgPool2d::AdaptiveAvgPool2d(Pair size) : output_size(size) {}
std::string AdaptiveAvgPool2d::extra_repr() const { return "output_size=" + pair_text(output_size); }

AdaptiveMaxPool2d::AdaptiveMaxPool2d(Pair size) : output_size(size) {}
std::string AdaptiveMaxPool2d::extra_repr() const {
    return "output_size=" + pair_text(output_size);
}

BatchNorm2d::BatchNorm2d(int64_t c, double eps_, std::optional<double> momentum_, bool affine,
                         bool track)
    : num_features(c), eps(eps_), momentum(momentum_), track_running_stats(track) {
    KILN_CHECK(c > 0, "BatchNorm2d: num_features must be positive, got ", c);
    if (affine) {
        weight = register_parameter("weight", ones({c}));
        bias = register_parameter("bias", zeros({c}));
    }
    if (!track) return;  // PyTorch's None buffers: not in state_dict()
    running_mean = register_buffer("running_mean", zeros({c}));
    running_var = register_buffer("running_var", ones({c}));
    num_batches_tracked = register_buffer("num_batches_tracked", zeros({}, {.dtype = DType::int64}));
}

Tensor BatchNorm2d::forward(const Tensor& x) {
    KILN_CHECK(x.dim() == 4, "BatchNorm2d: expected a 4-D input [N, C, H, W], got shape ", x.shape());
    KILN_CHECK(x.size(1) == num_features, "BatchNorm2d: expected ", num_features, " channels, got input of shape ", x.shape());
    bool training = is_training();
    if (!track_running_stats)  // the batch's statistics in training and eval alike
        return functional::batch_norm(x, {}, {}, weight, bias, true, 0.0, eps);
    if (training) {
        autograd::NoGradGuard no_grad;
        num_batches_tracked.assign_(num_batches_tracked + 1.0);
    }
    if (momentum || !training)
        return functional::batch_norm(x, running_mean, running_var, weight, bias, training,
                                      momentum.value_or(0.1), eps);
    // momentum=None: the running statistics average every batch so far, each weighing
    // 1/num_batches_tracked, as PyTorch (tensor math: the count is never read on the host).
    Tensor out = functional::batch_norm(x, {}, {}, weight, bias, true, 0.0, eps);
    autograd::NoGradGuard no_grad;
    KILN_CHECK(
        x.numel() / num_features > 1,
        "BatchNorm2d: expected more than 1 value per channel when training, got input of shape ",
        x.shape());
    Tensor factor = num_batches_tracked.to(running_mean.dtype()).reciprocal();
    Tensor xd = x.detach();
    Tensor mean = xd.mean({0, 2, 3}), var = kiln::var(xd, {0, 2, 3}, 1);
    Tensor(running_mean).assign_(running_mean * (1.0 - factor) + mean * factor);
    Tensor(running_var).assign_(running_var * (1.0 - factor) + var * factor);
    return out;
}

std::string BatchNorm2d::extra_repr() const {
    std::ostringstream os;
    os << num_features << ", eps=" << eps << ", momentum=";
    if (momentum)
        os << *momentum;
    else
        os << "None";
    os << ", affine=" << (weight.defined() ? "True" : "False")
       << ", track_running_stats=" << (track_running_stats ? "True" : "False");
    return os.str();
}

Tensor Flatten::forward(const Tensor& x) {
    int64_t rank = std::max<int64_t>(x.dim(), 1);
    int64_t s = normalize_dim(start_dim, rank, "Flatten"), e = normalize_dim(end_dim, rank, "Flatten");
    KILN_CHECK(s <= e, "Flatten: start_dim (", start_dim, ") cannot come after end_dim (", end_dim, ")");
    if (x.dim() == 0) return x.reshape({1});
    Shape shape(x.shape().begin(), x.shape().begin() + s);
    int64_t n = 1;
    for (int64_t d = s; d <= e; ++d) n *= x.size(d);
    shape.push_back(n);
    shape.insert(shape.end(), x.shape().begin() + e + 1, x.shape().end());
    return x.reshape(shape);
}
std::string Flatten::extra_repr() const { return "start_dim=" + std::to_string(start_dim) + ", end_dim=" + std::to_string(end_dim); }

}  // namespace kiln::nn
