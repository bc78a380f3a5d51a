// Lesson 00: eager kiln. Trains a small MLP on three interleaved spirals with nn:: and
// optim::, then writes a custom autograd Function and asks what backward keeps alive.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <string>

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
        Tensor r = arange(double(per_class)) / double(per_class);           // radius in [0, 1)
        Tensor theta = r * 4.0 + double(4 * k) + randn({per_class}) * 0.2;  // angle, with noise
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
    static void setup_context(autograd::Ctx& ctx, const std::vector<Tensor>& inputs,
                              const Tensor&) {
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
    int failures = 0;
    auto check = [&](bool ok, const std::string& fact) {
        std::cout << "  check: " << fact << ": " << (ok ? "yes" : "NO") << "\n";
        failures += !ok;
    };
    manual_seed(0);
    Dataset train = make_spirals(100), test = make_spirals(100);

    auto model = nn::sequential(nn::Linear(2, 64), nn::ReLU(), nn::Linear(64, 64), nn::ReLU(),
                                nn::Linear(64, 3));
    std::cout << *model << "\n\n";
    optim::Adam opt(model->parameters(), 0.01);

    auto start = std::chrono::steady_clock::now();
    const int epochs = 300;
    double first_loss = 0, last_loss = 0;
    for (int epoch = 1; epoch <= epochs; ++epoch) {
        opt.zero_grad();
        Tensor logits = (*model)(train.x);
        Tensor loss = F::cross_entropy(logits, train.y);
        loss.backward();
        opt.step();
        (epoch == 1 ? first_loss : last_loss) = loss.item<double>();
        if (epoch == 1 || epoch % 50 == 0)
            std::printf("epoch %3d  loss %.4f  train accuracy %5.1f%%\n", epoch,
                        loss.item<double>(), 100 * accuracy(logits, train.y));
    }
    double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    model->eval();
    double train_acc = accuracy((*model)(train.x), train.y),
           test_acc = accuracy((*model)(test.x), test.y);
    std::printf("\nfinal: train accuracy %.1f%%, held-out accuracy %.1f%% (%d epochs in %.0f ms)\n",
                100 * train_acc, 100 * test_acc, epochs, ms);
    check(last_loss < first_loss / 10, "training cut the loss more than tenfold");
    check(test_acc > 0.9, "held-out accuracy above 90% (the spirals are not linearly separable)");
    std::cout << "\n";

    // --- 3. The Function in use: each apply saves its input for backward.
    Tensor x = randn({5, 5, 5}, {.requires_grad = true});
    Tensor y = Cosine::apply(Cosine::apply(x));  // "naive two cosine": two nodes, two saved tensors
    autograd::SavedReport custom = autograd::saved_report(y),
                          builtin = autograd::saved_report(cos(cos(x)));
    std::cout << "\nwhat backward keeps alive for Cosine(Cosine(x)):\n" << custom;
    std::cout << "\nand for the built-in cos(cos(x)):\n" << builtin;
    check(custom.total_tensors == 2 && custom.total_bytes == 2 * 125 * 4,
          "two Cosine nodes save one [5, 5, 5] float32 tensor each");
    check(builtin.total_tensors == custom.total_tensors,
          "the built-in cos saves as much (lesson 06 saves less)");
    y.sum().backward();
    bool ok = allclose(x.grad(), sin(cos(x.detach())) * sin(x.detach()), 1e-4, 1e-6);
    std::cout << "\nx.grad equals d/dx cos(cos(x)) = sin(cos(x)) * sin(x): " << (ok ? "yes" : "NO")
              << "\n";
    check(ok, "the hand-written backward gives the true derivative");
    std::cout << (failures ? "lesson 00: FAILED\n" : "lesson 00: all checks passed\n");
    return failures ? 1 : 0;
}
