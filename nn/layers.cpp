// Linear and Sequential.
#include "nn/layers.h"

#include <cmath>

namespace kiln::nn {

Linear::Linear(int64_t in, int64_t out, bool with_bias) : in_features(in), out_features(out) {
    KILN_CHECK(in > 0 && out > 0, "Linear: in_features and out_features must be positive, got ", in, " and ", out);
    double bound = 1.0 / std::sqrt(double(in));
    weight = register_parameter("weight", rand({out, in}) * (2 * bound) - bound);
    if (with_bias) bias = register_parameter("bias", rand({out}) * (2 * bound) - bound);
}

Tensor Linear::forward(const Tensor& x) {
    KILN_CHECK(x.dim() >= 1 && x.size(-1) == in_features, "Linear: expected input with last dim ", in_features,
               " (in_features), got shape ", x.shape());
    Tensor y = matmul(x, weight.t());
    return bias.defined() ? y + bias : y;
}

std::string Linear::extra_repr() const {
    return "in_features=" + std::to_string(in_features) + ", out_features=" + std::to_string(out_features) +
           ", bias=" + (bias.defined() ? "True" : "False");
}

Sequential::Sequential(const std::vector<std::shared_ptr<Module>>& modules) {
    for (const auto& m : modules) push_back(m);
}

void Sequential::push_back(std::shared_ptr<Module> module) {
    register_module(std::to_string(layers_.size()), module);
    layers_.push_back(std::move(module));
}

Tensor Sequential::forward(const Tensor& x) {
    Tensor y = x;
    for (const auto& layer : layers_) y = layer->forward(y);
    return y;
}

const std::shared_ptr<Module>& Sequential::operator[](size_t i) const {
    KILN_CHECK(i < layers_.size(), "Sequential: index ", i, " out of range for ", layers_.size(), " modules");
    return layers_[i];
}

}  // namespace kiln::nn
