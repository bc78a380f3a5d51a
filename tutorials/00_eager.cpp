// Lesson 00: eager kiln. Trains a small MLP on three interleaved spirals with nn:: and
// optim::, then writes a custom autograd Function and asks what backward keeps alive.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>

#include "kiln.h"

using namespace kiln;
namespace F = nn::functional;

// --- 1. Data: three spiral arms in the plane, one class each (not linearly separable).
struct Dataset {
    Tensor x;  // [N, 2] float32 points
    Tensor y;  // [N] int64 class labels
};

Dataset make_spirals(int64_t per_class) {
    std::vector<Tensor> xs, ys;
    for (int64_t k = 0; k < 3; ++k) {
        Tensor r = arange(double(per_class)) / double(per_class);                     // radius in [0, 1)
        Tensor theta = r * 4.0 + double(4 * k) + randn({per_class}) * 0.2;              // angle, with noise
        xs.push_back(cat({(r * sin(theta)).unsqueeze(1), (r * cos(theta)).unsqueeze(1)}, 1));
        ys.push_back(full({per_class}, double(k), {.dtype = int64}));
    }
    return {cat(xs, 0), cat(ys, 0)};
}

// Fraction of rows whose target class has the largest logit (no argmax needed).
double accuracy(const Tensor& logits, const Tensor& y) {
    NoGradGuard no_grad;
    Tensor target_logit = (logits * F::one_hot(y, logits.size(1)).to(float32)).sum({1});
    return (target_logit >= logits.amax({1})).to(float32).mean().item<double>();
}

// --- 2. A custom Function: PyTorch's Cosine example, forward and backward by hand.
struct Cosine : autograd::Function<Cosine> {
    static Tensor forward(const Tensor& x0) { return cos(x0); }
    static void setup_context(autograd::Ctx& ctx, const std::vector<Tensor>& inputs, const Tensor&) {
        const Tensor& x = inputs[0];
        std::cout << "saving tensor of size " << x.shape() << "\n";
        ctx.save_for_backward(x);
    }
    static std::vector<Tensor> backward(autograd::Ctx& ctx, const Tensor& grad_output) {
        const Tensor& x = ctx.saved_tensors()[0];
        return {-sin(x) * grad_output};
    }
};

int main() {
    manual_seed(0);
    Dataset train = make_spirals(100), test = make_spirals(100);

    auto model = nn::sequential(nn::Linear(2, 64), nn::ReLU(), nn::Linear(64, 64), nn::ReLU(), nn::Linear(64, 3));
    std::cout << *model << "\n\n";
    optim::Adam opt(model->parameters(), 0.01);

    auto start = std::chrono::steady_clock::now();
    const int epochs = 300;
    for (int epoch = 1; epoch <= epochs; ++epoch) {
        opt.zero_grad();
        Tensor logits = (*model)(train.x);
        Tensor loss = F::cross_entropy(logits, train.y);
        loss.backward();
        opt.step();
        if (epoch == 1 || epoch % 50 == 0)
            std::printf("epoch %3d  loss %.4f  train accuracy %5.1f%%\n", epoch, loss.item<double>(),
                        100 * accuracy(logits, train.y));
    }
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    model->eval();
    std::printf("\nfinal: train accuracy %.1f%%, held-out accuracy %.1f%% (%d epochs in %.0f ms)\n\n",
                100 * accuracy((*model)(train.x), train.y), 100 * accuracy((*model)(test.x), test.y), epochs, ms);

    // --- 3. The Function in use: each apply saves its input for backward.
    Tensor x = randn({5, 5, 5}, {.requires_grad = true});
    Tensor y = Cosine::apply(Cosine::apply(x));  // "naive two cosine": two nodes, two saved tensors
    std::cout << "\nwhat backward keeps alive for Cosine(Cosine(x)):\n" << autograd::saved_report(y);
    std::cout << "\nand for the built-in cos(cos(x)):\n" << autograd::saved_report(cos(cos(x)));
    y.sum().backward();
    bool ok = allclose(x.grad(), sin(cos(x.detach())) * sin(x.detach()), 1e-4, 1e-6);
    std::cout << "\nx.grad equals d/dx cos(cos(x)) = sin(cos(x)) * sin(x): " << (ok ? "yes" : "NO") << "\n";
    return ok ? 0 : 1;
}
