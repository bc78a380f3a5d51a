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

MaxPool2d::MaxPool2d(Pair k, Pair s, Pair p, Pair d) : window{k, or_kernel(s, k), p, d} {}
Tensor MaxPool2d::forward(const Tensor& x) { return max_pool2d(x, window); }
std::string MaxPool2d::extra_repr() const {
    return "kernel_size=" + pair_text(window.kernel) + ", stride=" + pair_text(window.stride) + ", padding=" + pair_text(window.padding) +
           ", dilation=" + pair_text(window.dilation);
}

AvgPool2d::AvgPool2d(Pair k, Pair s, Pair p) : window{k, or_kernel(s, k), p, {1, 1}} {}
Tensor AvgPool2d::forward(const Tensor& x) { return avg_pool2d(x, window); }
std::string AvgPool2d::extra_repr() const {
    return "kernel_size=" + pair_text(window.kernel) + ", stride=" + pair_text(window.stride) + ", padding=" + pair_text(window.padding);
}

AdaptiveAvgPool2d::AdaptiveAvgPool2d(Pair size) : output_size(size) {}
std::string AdaptiveAvgPool2d::extra_repr() const { return "output_size=" + pair_text(output_size); }

BatchNorm2d::BatchNorm2d(int64_t c, double eps_, double momentum_, bool affine) : num_features(c), eps(eps_), momentum(momentum_) {
    KILN_CHECK(c > 0, "BatchNorm2d: num_features must be positive, got ", c);
    if (affine) {
        weight = register_parameter("weight", ones({c}));
        bias = register_parameter("bias", zeros({c}));
    }
    running_mean = register_buffer("running_mean", zeros({c}));
    running_var = register_buffer("running_var", ones({c}));
    num_batches_tracked = register_buffer("num_batches_tracked", zeros({}, {.dtype = DType::int64}));
}

Tensor BatchNorm2d::forward(const Tensor& x) {
    KILN_CHECK(x.dim() == 4, "BatchNorm2d: expected a 4-D input [N, C, H, W], got shape ", x.shape());
    KILN_CHECK(x.size(1) == num_features, "BatchNorm2d: expected ", num_features, " channels, got input of shape ", x.shape());
    bool training = is_training();
    if (training) {
        autograd::NoGradGuard no_grad;  // counted as PyTorch does; only momentum=None would read it
        num_batches_tracked.assign_(num_batches_tracked + 1.0);
    }
    return functional::batch_norm(x, running_mean, running_var, weight, bias, training, momentum, eps);
}

std::string BatchNorm2d::extra_repr() const {
    std::ostringstream os;
    os << num_features << ", eps=" << eps << ", momentum=" << momentum << ", affine=" << (weight.defined() ? "True" : "False")
       << ", track_running_stats=True";
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
