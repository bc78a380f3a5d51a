// optim::SGD and optim::Adam: one step against PyTorch's formulas, and convergence.
#include <boost/test/unit_test.hpp>
#include <cmath>

#include "kiln.h"
#include "tensor/parallel.h"
#include "tensor/storage.h"
#include "tests/scoped_env.h"

using namespace kiln;
namespace F = kiln::nn::functional;

namespace {

// A least-squares problem y = X w + b with a known answer.
struct Problem {
    Tensor x, y;
};
Problem make_problem() {
    manual_seed(7);
    Tensor x = randn({64, 3});
    Tensor w = tensor({1.5, -2.0, 0.5}).reshape({3, 1});
    return {x, matmul(x, w) + 0.3};
}

double train(optim::Optimizer& opt, nn::Module& model, const Problem& p, int steps, double* first_loss) {
    double loss_value = 0;
    for (int i = 0; i < steps; ++i) {
        opt.zero_grad();
        Tensor loss = F::mse_loss(model(p.x), p.y);
        loss.backward();
        opt.step();
        loss_value = loss.item<double>();
        if (i == 0) *first_loss = loss_value;
    }
    return loss_value;
}

}  // namespace

BOOST_AUTO_TEST_CASE(sgd_step_matches_pytorch_formula) {
    std::vector<double> p0 = {1.0, -2.0, 3.0}, g1 = {0.5, 0.1, -0.3}, g2 = {-0.2, 0.4, 0.6};
    double lr = 0.1, momentum = 0.9, wd = 0.01;
    Tensor p = tensor({1.0, -2.0, 3.0}, {.dtype = float64, .requires_grad = true});
    optim::SGD opt({p}, lr, momentum, wd);
    // By hand: d = g + wd p; buf = d (first step) or momentum buf + d; p -= lr buf.
    std::vector<double> expect = p0, buf(3);
    for (int step = 0; step < 2; ++step) {
        const std::vector<double>& g = step == 0 ? g1 : g2;
        p.set_grad(tensor(g, {3}, {.dtype = float64}));
        opt.step();
        for (size_t i = 0; i < 3; ++i) {
            double d = g[i] + wd * expect[i];
            buf[i] = step == 0 ? d : momentum * buf[i] + d;
            expect[i] -= lr * buf[i];
        }
        BOOST_TEST(allclose(p, tensor(expect, {3}, {.dtype = float64}), 1e-12, 1e-12));
    }
    BOOST_TEST(p.is_leaf());
}

// SGD's one-pass CPU update (optim/optimizer.cpp, cpu_sgd_step) gives the per-tensor path's
// bits (KILN_FUSED_OPTIM=0) over steps with momentum and weight decay, at 1 and 2 threads, for
// a size that is no whole number of its blocks; and after the first step (which clones the
// gradient into the momentum buffer) a step allocates nothing: the per-tensor path allocated
// a fresh tensor per op.
BOOST_AUTO_TEST_CASE(sgd_cpu_one_pass_step_equals_the_per_tensor_path_and_allocates_nothing) {
    const int threads_before = num_threads();
    for (int threads : {1, 2})
        for (double wd : {0.0, 0.01})
            for (double momentum : {0.0, 0.9}) {
                set_num_threads(threads);
                manual_seed(3);
                const int64_t n = 70001;
                Tensor start = randn({n});
                Tensor fused = start.clone().requires_grad_(),
                       reference = start.clone().requires_grad_();
                optim::SGD fused_opt({fused}, 0.05, momentum, wd),
                    reference_opt({reference}, 0.05, momentum, wd);
                for (int step = 0; step < 3; ++step) {
                    Tensor g = randn({n});
                    fused.set_grad(g.clone()), reference.set_grad(g.clone());
                    PoolStats before = pool_stats();
                    fused_opt.step();
                    PoolStats after = pool_stats();
                    if (step > 0 || momentum == 0)
                        BOOST_TEST(
                            after.hits + after.misses == before.hits + before.misses,
                            "step " << step << " allocated "
                                    << (after.hits + after.misses) - (before.hits + before.misses));
                    {
                        kiln_test::ScopedEnv per_tensor("KILN_FUSED_OPTIM", "0");
                        reference_opt.step();
                    }
                    BOOST_TEST(equal(fused, reference), "threads " << threads << " wd " << wd
                                                                   << " momentum " << momentum
                                                                   << " step " << step);
                }
            }
    set_num_threads(threads_before);
}

BOOST_AUTO_TEST_CASE(adam_step_matches_pytorch_formula) {
    std::vector<double> p0 = {0.5, -1.0}, g1 = {0.3, -0.7}, g2 = {-0.1, 0.2}, g3 = {0.05, 0.05};
    double lr = 0.01, b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 0.1;
    Tensor p = tensor(p0, {2}, {.dtype = float64, .requires_grad = true});
    optim::Adam opt({p}, lr, {b1, b2}, eps, wd);
    std::vector<double> expect = p0, m(2, 0.0), v(2, 0.0);
    const std::vector<double>* grads[] = {&g1, &g2, &g3};
    for (int t = 1; t <= 3; ++t) {
        const std::vector<double>& g = *grads[t - 1];
        p.set_grad(tensor(g, {2}, {.dtype = float64}));
        opt.step();
        for (size_t i = 0; i < 2; ++i) {
            double gi = g[i] + wd * expect[i];
            m[i] = b1 * m[i] + (1 - b1) * gi;
            v[i] = b2 * v[i] + (1 - b2) * gi * gi;
            double m_hat = m[i] / (1 - std::pow(b1, t));
            double denom = std::sqrt(v[i]) / std::sqrt(1 - std::pow(b2, t)) + eps;
            expect[i] -= lr * m_hat / denom;
        }
        BOOST_TEST(allclose(p, tensor(expect, {2}, {.dtype = float64}), 1e-10, 1e-12));
    }
}

BOOST_AUTO_TEST_CASE(optimizers_skip_params_without_grad_and_reject_non_leaves) {
    Tensor p = tensor({1.0}, {.requires_grad = true});
    optim::Adam adam({p});
    adam.step();
    BOOST_TEST(p.item<float>() == 1.0f);
    BOOST_CHECK_THROW(optim::SGD({p * 2.0}, 0.1), Error);
    BOOST_CHECK_THROW(optim::SGD({tensor({1.0})}, 0.1), Error);
}

BOOST_AUTO_TEST_CASE(sgd_with_momentum_converges_on_least_squares) {
    Problem p = make_problem();
    manual_seed(1);
    nn::Linear model(3, 1);
    optim::SGD opt(model.parameters(), 0.05, 0.9);
    double first = 0, last = train(opt, model, p, 200, &first);
    BOOST_TEST(last < first / 100, "loss " << first << " -> " << last);
}

BOOST_AUTO_TEST_CASE(adam_converges_on_least_squares) {
    Problem p = make_problem();
    manual_seed(1);
    nn::Linear model(3, 1);
    optim::Adam opt(model.parameters(), 0.05);
    double first = 0, last = train(opt, model, p, 300, &first);
    BOOST_TEST(last < first / 100, "loss " << first << " -> " << last);
}
