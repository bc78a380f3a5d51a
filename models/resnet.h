// ResNet-18 in torchvision's layout and parameter names (conv1, bn1, layer1.0.conv1, ...,
// fc), so a state dict exported from torchvision maps name by name. Any input size of at
// least 32x32: the adaptive average pool makes the head independent of it.
#pragma once
#include <memory>

#include "kiln.h"

namespace kiln::models {

// Two 3x3 convolutions with batch norm and a residual connection; a 1x1 convolution
// (stride 2) on the shortcut when the block changes size.
class BasicBlock : public nn::Module {
   public:
    BasicBlock(int64_t in, int64_t out, int64_t stride) {
        conv1 = add("conv1", nn::Conv2d(in, out, {3, 3}, {stride, stride}, {1, 1}, {1, 1}, 1, false));
        bn1 = add("bn1", nn::BatchNorm2d(out));
        conv2 = add("conv2", nn::Conv2d(out, out, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, false));
        bn2 = add("bn2", nn::BatchNorm2d(out));
        if (stride != 1 || in != out)
            downsample = std::static_pointer_cast<nn::Sequential>(register_module(
                "downsample", nn::sequential(nn::Conv2d(in, out, {1, 1}, {stride, stride}, {0, 0}, {1, 1}, 1, false), nn::BatchNorm2d(out))));
    }
    Tensor forward(const Tensor& x) override {
        Tensor y = relu(bn1->forward(conv1->forward(x)));
        y = bn2->forward(conv2->forward(y));
        return relu(y + (downsample ? downsample->forward(x) : x));
    }

   private:
    template <class M>
    std::shared_ptr<M> add(const std::string& name, M&& m) {
        auto p = std::make_shared<M>(std::move(m));
        register_module(name, p);
        return p;
    }
    std::shared_ptr<nn::Conv2d> conv1, conv2;
    std::shared_ptr<nn::BatchNorm2d> bn1, bn2;
    std::shared_ptr<nn::Sequential> downsample;
};

class ResNet18 : public nn::Module {
   public:
    explicit ResNet18(int64_t num_classes = 1000) {
        conv1 = std::make_shared<nn::Conv2d>(3, 64, nn::Pair{7, 7}, nn::Pair{2, 2}, nn::Pair{3, 3}, nn::Pair{1, 1}, 1, false);
        register_module("conv1", conv1);
        bn1 = std::make_shared<nn::BatchNorm2d>(64);
        register_module("bn1", bn1);
        int64_t in = 64;
        for (int stage = 0; stage < 4; ++stage) {
            int64_t out = 64 << stage;
            auto layer = std::make_shared<nn::Sequential>();
            layer->push_back(std::make_shared<BasicBlock>(in, out, stage == 0 ? 1 : 2));
            layer->push_back(std::make_shared<BasicBlock>(out, out, 1));
            register_module("layer" + std::to_string(stage + 1), layer);
            layers.push_back(layer);
            in = out;
        }
        fc = std::make_shared<nn::Linear>(512, num_classes);
        register_module("fc", fc);
    }
    Tensor forward(const Tensor& x) override {
        Tensor y = max_pool2d(relu(bn1->forward(conv1->forward(x))), {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}});
        for (const auto& layer : layers) y = layer->forward(y);
        y = adaptive_avg_pool2d(y, {1, 1});
        return fc->forward(y.reshape({y.size(0), 512}));
    }

    std::shared_ptr<nn::Conv2d> conv1;
    std::shared_ptr<nn::BatchNorm2d> bn1;
    std::vector<std::shared_ptr<nn::Sequential>> layers;
    std::shared_ptr<nn::Linear> fc;
};

}  // namespace kiln::models
