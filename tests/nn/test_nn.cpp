// nn:: modules and losses, and optim:: optimizers against PyTorch's update formulas.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <sstream>

#include "kiln.h"

using namespace kiln;
namespace F = kiln::nn::functional;

namespace {
std::vector<std::string> names(const nn::Module& m) {
    std::vector<std::string> out;
    for (const auto& [name, p] : m.named_parameters()) out.push_back(name);
    return out;
}
}  // namespace

BOOST_AUTO_TEST_SUITE(modules)

BOOST_AUTO_TEST_CASE(linear_shapes_names_and_init_range) {
    manual_seed(0);
    nn::Linear fc(4, 3);
    BOOST_TEST(fc.weight.shape() == Shape({3, 4}));
    BOOST_TEST(fc.bias.shape() == Shape({3}));
    BOOST_TEST(fc.weight.requires_grad());
    BOOST_TEST(fc.weight.is_leaf());
    BOOST_TEST((names(fc) == std::vector<std::string>{"weight", "bias"}));
    BOOST_TEST(fc.weight.abs().amax().item<float>() <= 0.5f);  // U(-1/sqrt(4), 1/sqrt(4))
    BOOST_TEST(fc(randn({5, 4})).shape() == Shape({5, 3}));
    BOOST_TEST(fc(randn({4})).shape() == Shape({3}));
    Tensor x = randn({2, 4});
    BOOST_TEST(allclose(fc(x), matmul(x, fc.weight.t()) + fc.bias));
    BOOST_CHECK_EXCEPTION(fc(randn({2, 5})), Error, [](const Error& e) {
        return std::string(e.what()).find("expected input with last dim 4") != std::string::npos;
    });
    nn::Linear no_bias(4, 3, false);
    BOOST_TEST((names(no_bias) == std::vector<std::string>{"weight"}));
}

BOOST_AUTO_TEST_CASE(sequential_names_printing_and_train_mode) {
    auto model = nn::sequential(nn::Linear(2, 8), nn::ReLU(), nn::Linear(8, 3));
    BOOST_TEST((names(*model) == std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"}));
    BOOST_TEST(model->parameters().size() == 4u);
    BOOST_TEST(model->size() == 3u);
    BOOST_TEST((*model)(randn({5, 2})).shape() == Shape({5, 3}));
    std::ostringstream os;
    os << *model;
    BOOST_TEST(os.str() ==
               "Sequential(\n"
               "  (0): Linear(in_features=2, out_features=8, bias=True)\n"
               "  (1): ReLU()\n"
               "  (2): Linear(in_features=8, out_features=3, bias=True)\n"
               ")");
    BOOST_TEST(model->is_training());
    model->eval();
    BOOST_TEST(!(*model)[0]->is_training());
    model->train();
    BOOST_TEST((*model)[2]->is_training());
}

BOOST_AUTO_TEST_CASE(sequential_from_shared_ptrs_keeps_identity_and_nests) {
    auto fc = std::make_shared<nn::Linear>(3, 3);
    nn::Sequential inner(fc, std::make_shared<nn::ReLU>());
    BOOST_TEST(inner[0].get() == fc.get());
    auto outer = nn::sequential(std::make_shared<nn::Sequential>(fc, std::make_shared<nn::ReLU>()), fc);
    // fc appears twice: its parameters are listed once, under the first name.
    BOOST_TEST((names(*outer) == std::vector<std::string>{"0.0.weight", "0.0.bias"}));
}

BOOST_AUTO_TEST_CASE(zero_grad_drops_parameter_grads) {
    auto model = nn::sequential(nn::Linear(2, 2), nn::ReLU(), nn::Linear(2, 1));
    (*model)(randn({4, 2})).sum().backward();
    BOOST_TEST(model->parameters()[0].grad().defined());
    model->zero_grad();
    for (const Tensor& p : model->parameters()) BOOST_TEST(!p.grad().defined());
}

BOOST_AUTO_TEST_CASE(unregister_drops_a_name_so_it_can_be_registered_again) {
    struct Holder : nn::Module {
        Tensor forward(const Tensor& x) override { return x; }
    } m;
    m.register_parameter("w", ones({2}));
    m.register_module("fc", std::make_shared<nn::Linear>(2, 2));
    BOOST_CHECK_THROW(m.register_parameter("w", ones({3})), Error);  // twice is still an error
    BOOST_TEST(m.has_parameter("w"));
    BOOST_TEST(m.has_child("fc"));
    BOOST_TEST(m.unregister("fc"));
    BOOST_TEST(!m.has_child("fc"));
    BOOST_TEST(!m.unregister("fc"));  // nothing left under that name
    m.register_module("fc", std::make_shared<nn::Linear>(2, 3));
    BOOST_TEST(m.unregister("w"));
    m.register_parameter("w", zeros({3}));
    BOOST_TEST((names(m) == std::vector<std::string>{"w", "fc.weight", "fc.bias"}));
    BOOST_TEST(m.named_parameters()[1].second.size(0) == 3);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(losses)

BOOST_AUTO_TEST_CASE(cross_entropy_matches_hand_computation) {
    Tensor logits = tensor({{1.0, 2.0, 3.0}, {1.0, 0.0, -1.0}});
    Tensor targets = tensor(std::vector<int64_t>{2, 0});
    auto nll = [](std::vector<double> z, int t) {
        double lse = std::log(std::exp(z[0]) + std::exp(z[1]) + std::exp(z[2]));
        return lse - z[size_t(t)];
    };
    double l0 = nll({1, 2, 3}, 2), l1 = nll({1, 0, -1}, 0);
    BOOST_TEST(F::cross_entropy(logits, targets).item<double>() == (l0 + l1) / 2, boost::test_tools::tolerance(1e-6));
    BOOST_TEST(F::cross_entropy(logits, targets, F::Reduction::sum).item<double>() == l0 + l1,
               boost::test_tools::tolerance(1e-6));
    BOOST_TEST(allclose(F::cross_entropy(logits, targets, F::Reduction::none), tensor({l0, l1})));
    // Probability targets equal to the one-hot give the same loss.
    Tensor probs = F::one_hot(targets, 3).to(float32);
    BOOST_TEST(allclose(F::cross_entropy(logits, probs), F::cross_entropy(logits, targets)));
}

BOOST_AUTO_TEST_CASE(cross_entropy_gradient_is_softmax_minus_one_hot) {
    Tensor logits = randn({4, 5}, {.requires_grad = true});
    Tensor targets = tensor(std::vector<int64_t>{0, 4, 2, 2});
    F::cross_entropy(logits, targets).backward();
    Tensor expected = (logits.detach().softmax(1) - F::one_hot(targets, 5).to(float32)) / 4.0;
    BOOST_TEST(allclose(logits.grad(), expected, 1e-5, 1e-6));
    auto ce = [](const std::vector<Tensor>& in) { return F::cross_entropy(in[0], in[1]); };
    BOOST_TEST(gradcheck(ce, {randn({4, 5}), targets}));
    auto ce_probs = [](const std::vector<Tensor>& in) { return F::cross_entropy(in[0], in[1].softmax(1)); };
    BOOST_TEST(gradcheck(ce_probs, {randn({3, 4}), randn({3, 4})}));
}

BOOST_AUTO_TEST_CASE(cross_entropy_explains_bad_targets) {
    Tensor logits = randn({2, 3});
    BOOST_CHECK_EXCEPTION(F::cross_entropy(logits, tensor(std::vector<int64_t>{0, 3})), Error, [](const Error& e) {
        return std::string(e.what()).find("target 3 is out of bounds for 3 classes") != std::string::npos;
    });
    BOOST_CHECK_EXCEPTION(F::cross_entropy(logits, tensor({0.0, 1.0})), Error, [](const Error& e) {
        return std::string(e.what()).find("probability targets must have the logits' shape") != std::string::npos;
    });
    BOOST_CHECK_THROW(F::cross_entropy(logits, tensor(std::vector<int64_t>{0, 1, 2})), Error);
}

// Issue 30 item 9: a compiled cross_entropy whose target is out of range returned a loss
// (the row matched no class and added 0) where eager raises. The range check is gather's,
// in the graph, so every backend raises on a hit too.
BOOST_AUTO_TEST_CASE(a_compiled_cross_entropy_raises_on_a_target_out_of_range_as_eager_does) {
    Tensor logits = randn({3, 4});
    auto loss = [](const Tensor& z, const Tensor& t) { return F::cross_entropy(z, t); };
    for (int64_t bad : {4, -1, -100 + 1}) {
        Tensor t = tensor(std::vector<int64_t>{1, bad, 0});
        BOOST_TEST_CONTEXT("target " << bad) {
            BOOST_CHECK_EXCEPTION(loss(logits, t), IndexError, [&](const IndexError& e) {
                return std::string(e.what()).find("cross_entropy: target " + std::to_string(bad) +
                                                  " is out of bounds for 4 classes") !=
                       std::string::npos;
            });
            for (const char* backend : {"eager", "aot_eager", "inductor"}) {
                jit::reset();
                auto compiled = compile(loss, {.backend = backend});
                Tensor good = tensor(std::vector<int64_t>{1, 3, 0});
                BOOST_TEST(std::abs(compiled(logits, good).item<double>() -
                                    loss(logits, good).item<double>()) < 1e-6);
                BOOST_CHECK_EXCEPTION(compiled(logits, t), Error, [&](const Error& e) {
                    BOOST_TEST_MESSAGE(backend << ": " << e.what());
                    return std::string(e.what()).find("index " + std::to_string(bad) +
                                                      " is out of bounds") != std::string::npos;
                });
            }
        }
    }
}

// The range check above goes through gather; gather has a shape rule (jit/sym_shapes.cpp),
// so the batch size stays a symbol: after the first size change the loss compiles once for
// every later batch size, equal to eager (without the rule, gather pinned it: 6 compiles).
BOOST_AUTO_TEST_CASE(a_compiled_cross_entropy_stays_dynamic_in_the_batch) {
    manual_seed(38);
    Tensor w = randn({6, 5});
    auto loss = [&](const Tensor& x, const Tensor& t) {
        return F::cross_entropy(matmul(x, w), t, F::Reduction::mean, {}, 3);
    };
    for (const char* backend : {"eager", "aot_eager", "inductor"}) {
        jit::reset();
        auto compiled = compile(loss, {.backend = backend});
        for (int64_t n : {4, 5, 6, 7, 9, 11}) {
            Tensor x = randn({n, 6}), t = randint(0, 5, {n});
            BOOST_TEST(std::abs(compiled(x, t).item<double>() - loss(x, t).item<double>()) < 1e-5,
                       backend << " n " << n);
        }
        BOOST_TEST(jit::counters().compiles == 2,
                   backend << ": " << jit::counters().compiles << " compiles");
    }
}

// Issue 30 item 11: cross_entropy's weight, ignore_index and label_smoothing, and [N, C, d...]
// logits, against PyTorch's formulas as float64 loops; values and gradients, eager and
// compiled.
BOOST_AUTO_TEST_CASE(cross_entropy_options_match_float64_loops) {
    manual_seed(35);
    const int64_t N = 3, C = 4, D = 5;  // logits [N, C, D], targets [N, D]
    Tensor logits = randn({N, C, D}), weight = rand({C}) + 0.5;
    std::vector<int64_t> tv;
    for (int64_t i = 0; i < N * D; ++i) tv.push_back(i % 4 == 1 ? -100 : (i * 7) % C);
    Tensor targets = tensor(tv, {N, D});
    std::vector<double> z = logits.to(float64).to_vector<double>(),
                        wv = weight.to(float64).to_vector<double>();
    // loss per (n, d), and the denominator of the mean
    auto loops = [&](bool weighted, double eps, F::Reduction r) {
        std::vector<double> per;
        double total = 0, denom = 0;
        for (int64_t n = 0; n < N; ++n)
            for (int64_t d = 0; d < D; ++d) {
                int64_t t = tv[size_t(n * D + d)];
                double mx = -INFINITY, se = 0;
                for (int64_t c = 0; c < C; ++c) mx = std::max(mx, z[size_t((n * C + c) * D + d)]);
                for (int64_t c = 0; c < C; ++c) se += std::exp(z[size_t((n * C + c) * D + d)] - mx);
                auto logp = [&](int64_t c) {
                    return z[size_t((n * C + c) * D + d)] - mx - std::log(se);
                };
                if (t == -100) {
                    per.push_back(0);
                    continue;
                }
                double wt = weighted ? wv[size_t(t)] : 1.0, smooth = 0;
                for (int64_t c = 0; c < C; ++c)
                    smooth -= (weighted ? wv[size_t(c)] : 1.0) * logp(c);
                double l = (1 - eps) * -wt * logp(t) + eps / double(C) * smooth;
                per.push_back(l);
                total += l;
                denom += wt;
            }
        if (r == F::Reduction::none) return tensor(per, {N, D});
        return tensor(std::vector<double>{r == F::Reduction::sum ? total : total / denom}, {});
    };
    for (bool weighted : {false, true})
        for (double eps : {0.0, 0.2})
            for (F::Reduction r : {F::Reduction::mean, F::Reduction::sum, F::Reduction::none}) {
                BOOST_TEST_CONTEXT("weighted " << weighted << " label_smoothing " << eps
                                               << " reduction " << int(r)) {
                    auto fn = [&](const Tensor& x) {
                        return F::cross_entropy(x, targets, r, weighted ? weight : Tensor(), -100,
                                                eps);
                    };
                    Tensor want = loops(weighted, eps, r)
                                      .reshape(r == F::Reduction::none ? Shape{N, D} : Shape{});
                    Tensor x0 = logits.detach().requires_grad_();
                    Tensor got = fn(x0);
                    BOOST_TEST(allclose(got.to(float64), want, 1e-5, 1e-6));
                    got.sum().backward();
                    // the gradient: float64 autograd of the same call, checked by finite
                    // differences
                    BOOST_TEST(gradcheck([&](const std::vector<Tensor>& in) { return fn(in[0]); },
                                         {logits.to(float64)}));
                    for (const char* backend : {"eager", "aot_eager", "inductor"}) {
                        jit::reset();
                        auto compiled = compile(fn, {.backend = backend});
                        for (int call = 0; call < 2; ++call) {
                            Tensor xc = logits.detach().requires_grad_();
                            Tensor gc = compiled(xc);
                            BOOST_TEST(allclose(gc.to(float64), want, 1e-5, 1e-6), backend);
                            gc.sum().backward();
                            BOOST_TEST(allclose(xc.grad(), x0.grad(), 1e-5, 1e-6), backend);
                        }
                    }
                }
            }
    // [N, C] rows equal the [N, C, d] loss of each position; nll_loss with the same options.
    Tensor rows = logits.permute({0, 2, 1}).reshape({N * D, C});
    BOOST_TEST(
        allclose(F::cross_entropy(rows, targets.reshape({N * D}), F::Reduction::mean, weight),
                 F::cross_entropy(logits, targets, F::Reduction::mean, weight), 1e-5, 1e-6));
    BOOST_TEST(allclose(
        F::nll_loss(rows.log_softmax(1), targets.reshape({N * D}), F::Reduction::none, weight),
        F::cross_entropy(logits, targets, F::Reduction::none, weight).reshape({N * D}), 1e-5,
        1e-6));
    // Probability targets with label smoothing: -(p (1 - eps) + eps / C) . log_softmax.
    Tensor p = randn({N, C}).softmax(1), z2 = randn({N, C});
    Tensor smoothed = p * 0.9 + 0.1 / double(C);
    BOOST_TEST(allclose(F::cross_entropy(z2, p, F::Reduction::mean, {}, -100, 0.1),
                        (-(smoothed * z2.log_softmax(1)).sum({1})).mean(), 1e-5, 1e-6));
    // Unbatched [C] logits with a 0-d target.
    Tensor one = randn({C});
    Tensor t0 = tensor(std::vector<int64_t>{2}).reshape({});
    BOOST_TEST(allclose(F::cross_entropy(one, t0),
                        F::cross_entropy(one.unsqueeze(0), t0.reshape({1})), 1e-6, 1e-7));
    BOOST_CHECK_THROW(F::cross_entropy(logits, targets, F::Reduction::mean, ones({3})),
                      Error);  // weight of the wrong size
}

BOOST_AUTO_TEST_CASE(mse_loss_matches_hand_computation) {
    Tensor a = tensor({1.0, 2.0, 4.0}), b = tensor({0.0, 2.0, 1.0});
    BOOST_TEST(F::mse_loss(a, b).item<double>() == 10.0 / 3, boost::test_tools::tolerance(1e-6));
    BOOST_TEST(F::mse_loss(a, b, F::Reduction::sum).item<double>() == 10.0, boost::test_tools::tolerance(1e-6));
    BOOST_TEST(gradcheck([](const std::vector<Tensor>& in) { return F::mse_loss(in[0], in[1]); },
                         {randn({3, 2}), randn({3, 2})}));
    BOOST_CHECK_THROW(F::mse_loss(a, tensor({1.0})), Error);
}

BOOST_AUTO_TEST_CASE(softmax_rows_sum_to_one) {
    Tensor p = F::softmax(randn({3, 4}) * 10.0);
    BOOST_TEST(allclose(p.sum({-1}), ones({3}), 1e-5, 1e-6));
    BOOST_TEST(allclose(exp(F::log_softmax(randn({3, 4}))).sum({1}), ones({3}), 1e-5, 1e-6));
}

BOOST_AUTO_TEST_SUITE_END()
