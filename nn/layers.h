// The basic layers: Linear, ReLU, Sequential to chain them, LayerNorm, Dropout, GELU, SiLU, Embedding.
#pragma once
#include <memory>
#include <type_traits>
#include <vector>

#include "nn/module.h"

namespace kiln::nn {

// y = x W^T + b. W [out, in] and b [out] start uniform in +-1/sqrt(in), as in PyTorch.
class Linear : public Module {
   public:
    Linear(int64_t in_features, int64_t out_features, bool bias = true);
    Tensor forward(const Tensor& x) override;
    std::string extra_repr() const override;

    int64_t in_features, out_features;
    Tensor weight;  // [out_features, in_features]
    Tensor bias;    // [out_features]; undefined when built with bias = false
};

class ReLU : public Module {
   public:
    Tensor forward(const Tensor& x) override { return relu(x); }
};

// Runs its modules in order; they are named "0", "1", ... in named_parameters().
class Sequential : public Module {
   public:
    Sequential() = default;
    template <class... Ms>
    explicit Sequential(std::shared_ptr<Ms>... modules) {
        (push_back(std::move(modules)), ...);
    }
    explicit Sequential(const std::vector<std::shared_ptr<Module>>& modules);

    void push_back(std::shared_ptr<Module> module);
    Tensor forward(const Tensor& x) override;
    size_t size() const { return layers_.size(); }
    const std::shared_ptr<Module>& operator[](size_t i) const;

   private:
    std::vector<std::shared_ptr<Module>> layers_;
};

// Layer normalization over the last dims; weight (ones) and bias (zeros) when affine.
class LayerNorm : public Module {
   public:
    explicit LayerNorm(Shape normalized_shape, double eps = 1e-5, bool elementwise_affine = true);
    Tensor forward(const Tensor& x) override;
    std::string extra_repr() const override;

    Shape normalized_shape;
    double eps;
    Tensor weight, bias;  // undefined without elementwise_affine
};

// Dropout with probability p while training (train()), the identity in eval().
class Dropout : public Module {
   public:
    explicit Dropout(double p = 0.5);
    Tensor forward(const Tensor& x) override;
    std::string extra_repr() const override;
    double p;
};

class GELU : public Module {
   public:
    explicit GELU(std::string approximate = "none");
    Tensor forward(const Tensor& x) override;
    std::string extra_repr() const override;
    std::string approximate;
};

class SiLU : public Module {
   public:
    Tensor forward(const Tensor& x) override;
};

// A table of num_embeddings vectors of embedding_dim, N(0, 1) at the start as in PyTorch;
// forward(index) looks rows up for an int64 index of any shape.
class Embedding : public Module {
   public:
    Embedding(int64_t num_embeddings, int64_t embedding_dim);
    Tensor forward(const Tensor& index) override { return embedding(index, weight); }
    std::string extra_repr() const override;
    int64_t num_embeddings, embedding_dim;
    Tensor weight;  // [num_embeddings, embedding_dim]
};

namespace detail {
template <class M>
std::shared_ptr<Module> as_module_ptr(M&& m) {
    using T = std::decay_t<M>;
    if constexpr (std::is_base_of_v<Module, T>) {
        static_assert(!std::is_lvalue_reference_v<M>, "nn::sequential: pass a module as a temporary or as a shared_ptr");
        return std::make_shared<T>(std::move(m));
    } else {
        return std::shared_ptr<Module>(std::forward<M>(m));  // already a shared_ptr to a module
    }
}
}  // namespace detail

// nn::sequential(nn::Linear(2, 64), nn::ReLU(), nn::Linear(64, 3)): modules by value or shared_ptr.
template <class... Ms>
std::shared_ptr<Sequential> sequential(Ms&&... modules) {
    return std::make_shared<Sequential>(std::vector<std::shared_ptr<Module>>{detail::as_module_ptr(std::forward<Ms>(modules))...});
}

}  // namespace kiln::nn
