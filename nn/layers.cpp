// Linear, Sequential, LayerNorm, Dropout, GELU, SiLU.
#include "nn/layers.h"

#include <cmath>
#include <sstream>

#include "nn/functional.h"
#include "nn/linear_cuda.h"

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
    if (Tensor y = detail::linear_cublaslt(x, weight, bias); y.defined())
        return y;  // CUDA: one GEMM
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

LayerNorm::LayerNorm(Shape shape, double eps_, bool affine) : normalized_shape(std::move(shape)), eps(eps_) {
    KILN_CHECK(!normalized_shape.empty(), "LayerNorm: normalized_shape must have at least one dim");
    for (int64_t d : normalized_shape) KILN_CHECK(d > 0, "LayerNorm: normalized_shape ", normalized_shape, " must be positive");
    if (affine) {
        weight = register_parameter("weight", ones(normalized_shape));
        bias = register_parameter("bias", zeros(normalized_shape));
    }
}
Tensor LayerNorm::forward(const Tensor& x) { return functional::layer_norm(x, normalized_shape, weight, bias, eps); }
std::string LayerNorm::extra_repr() const {
    std::ostringstream os;
    os << "(";
    for (size_t i = 0; i < normalized_shape.size(); ++i) os << (i ? ", " : "") << normalized_shape[i];
    os << (normalized_shape.size() == 1 ? ",)" : ")") << ", eps=" << eps << ", elementwise_affine=" << (weight.defined() ? "True" : "False");
    return os.str();
}

Dropout::Dropout(double p_) : p(p_) { KILN_CHECK(p >= 0 && p <= 1, "Dropout: probability has to be between 0 and 1, but got ", p); }
Tensor Dropout::forward(const Tensor& x) { return functional::dropout(x, p, is_training()); }
std::string Dropout::extra_repr() const {
    std::ostringstream os;
    os << "p=" << p << ", inplace=False";
    return os.str();
}

GELU::GELU(std::string a) : approximate(std::move(a)) {
    KILN_CHECK(approximate == "none" || approximate == "tanh", "GELU: approximate must be 'none' or 'tanh', got '", approximate, "'");
}
Tensor GELU::forward(const Tensor& x) { return functional::gelu(x, approximate); }
std::string GELU::extra_repr() const { return approximate == "none" ? "" : "approximate='" + approximate + "'"; }

Tensor SiLU::forward(const Tensor& x) { return functional::silu(x); }

Embedding::Embedding(int64_t n, int64_t d) : num_embeddings(n), embedding_dim(d) {
    KILN_CHECK(n > 0 && d > 0, "Embedding: num_embeddings and embedding_dim must be positive, got ", n, " and ", d);
    weight = register_parameter("weight", randn({n, d}));
}
std::string Embedding::extra_repr() const { return std::to_string(num_embeddings) + ", " + std::to_string(embedding_dim); }

}  // namespace kiln::nn
