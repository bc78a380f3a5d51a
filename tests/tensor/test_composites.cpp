// The composites of tensor/composites.cpp and the nn layers built from them, against values
// computed independently (by hand or with plain loops), by central differences
// (gradcheck), and compiled against eager under every backend.
#include <boost/test/unit_test.hpp>

#include <cmath>

#include "kiln.h"

using namespace kiln;
namespace F = kiln::nn::functional;

namespace {
std::vector<float> values(const Tensor& t) { return t.contiguous().to(DType::float32).to_vector<float>(); }
std::vector<int64_t> ints(const Tensor& t) { return t.contiguous().to_vector<int64_t>(); }
bool close(const std::vector<float>& a, const std::vector<double>& b, double tol = 1e-5) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
        if (std::abs(a[i] - b[i]) > tol * (1 + std::abs(b[i]))) return false;
    return true;
}
const Tensor kX = tensor({{1.0, -2.0, 3.0}, {4.0, 5.0, -6.0}});
}  // namespace

BOOST_AUTO_TEST_SUITE(composites)

BOOST_AUTO_TEST_CASE(shapes_and_views_match_torch) {
    Tensor s = stack({kX, kX * 2.0}, 1);
    BOOST_TEST(s.shape() == (Shape{2, 2, 3}));
    BOOST_TEST(close(values(s.select(1, 1)), {2, -4, 6, 8, 10, -12}));
    BOOST_TEST(stack({kX, kX}, -1).shape() == (Shape{2, 3, 2}));
    BOOST_CHECK_THROW(stack({ones({2}), ones({3})}), Error);
    BOOST_CHECK_THROW(stack({}), Error);
    BOOST_CHECK_THROW(stack({kX}, 4), Error);

    auto c = chunk(arange(7.0), 3);  // torch: sizes 3, 3, 1
    BOOST_TEST(c.size() == 3u);
    BOOST_TEST(c[2].numel() == 1);
    BOOST_TEST(chunk(arange(6.0), 4).size() == 3u);  // ceil(6/4) = 2 per piece: 3 pieces, as torch
    BOOST_TEST(chunk(kX, 2, 1)[1].shape() == (Shape{2, 1}));
    BOOST_TEST(chunk(kX, 2, 1)[0].impl()->storage == kX.impl()->storage);  // views
    BOOST_CHECK_THROW(chunk(kX, 0), Error);
    BOOST_CHECK_THROW(chunk(scalar_tensor(1), 2), Error);
    auto p = split(arange(6.0), std::vector<int64_t>{1, 2, 3});
    BOOST_TEST(close(values(p[2]), {3, 4, 5}));
    BOOST_CHECK_THROW(split(arange(6.0), std::vector<int64_t>{1, 2}), Error);
    BOOST_TEST(split(arange(7.0), 3).back().numel() == 1);

    BOOST_TEST(close(values(eye(3)), {1, 0, 0, 0, 1, 0, 0, 0, 1}));
    BOOST_TEST(eye(2, 3, {.dtype = DType::int64}).dtype() == DType::int64);
    BOOST_TEST(eye(0).numel() == 0);
    BOOST_CHECK_THROW(eye(-1), Error);

    BOOST_TEST(close(values(linspace(0, 1, 5)), {0, 0.25, 0.5, 0.75, 1}));
    BOOST_TEST(close(values(linspace(-1, 1, 4)), {-1, -1.0 / 3, 1.0 / 3, 1}));
    BOOST_TEST(values(linspace(0, 0.3, 7)).back() == 0.3f);  // the end is exact
    BOOST_TEST(linspace(2, 3, 0).numel() == 0);
    BOOST_TEST(close(values(linspace(2, 3, 1)), {2}));
    BOOST_CHECK_THROW(linspace(0, 1, -1), Error);

    BOOST_TEST(bmm(ones({2, 3, 4}), ones({2, 4, 5})).shape() == (Shape{2, 3, 5}));
    BOOST_CHECK_THROW(bmm(ones({3, 4}), ones({4, 5})), Error);
    BOOST_CHECK_THROW(bmm(ones({2, 3, 4}), ones({3, 4, 5})), Error);
    BOOST_CHECK_THROW(bmm(ones({2, 3, 4}), ones({2, 5, 5})), Error);
}

BOOST_AUTO_TEST_CASE(argmax_argmin_take_the_first_index_and_nan_as_torch) {
    BOOST_TEST(ints(argmax(kX)) == std::vector<int64_t>{4});
    BOOST_TEST(ints(argmax(kX, 1)) == (std::vector<int64_t>{2, 1}));
    BOOST_TEST(ints(argmin(kX, 0, true)) == (std::vector<int64_t>{0, 0, 1}));
    BOOST_TEST(argmin(kX, 0, true).shape() == (Shape{1, 3}));
    BOOST_TEST(argmax(kX, std::nullopt, true).shape() == (Shape{1, 1}));
    BOOST_TEST(argmax(kX).dtype() == DType::int64);
    BOOST_TEST(ints(argmax(tensor({2.0, 5.0, 5.0, 1.0}))) == std::vector<int64_t>{1});  // ties: first
    BOOST_TEST(ints(argmin(tensor({2.0, 1.0, 1.0}))) == std::vector<int64_t>{1});
    BOOST_TEST(ints(argmax(tensor({1.0, NAN, 3.0, NAN}))) == std::vector<int64_t>{1});  // NaN is the largest
    BOOST_TEST(ints(argmin(tensor({1.0, NAN, -3.0}))) == std::vector<int64_t>{1});
    BOOST_TEST(ints(argmax(tensor(std::vector<int64_t>{3, 9, 9}))) == std::vector<int64_t>{1});
    BOOST_TEST(ints(argmax(scalar_tensor(4.0), 0)) == std::vector<int64_t>{0});
    BOOST_CHECK_THROW(argmax(zeros({2, 0}), 1), Error);
    BOOST_CHECK_THROW(argmax(kX, 2), Error);
}

// torch.round: half to even, with decimals as torch computes them (x * 10^d rounded, / 10^d;
// d < 0 rounds to tens); values written out as torch 2 prints them. int64 stays int64.
BOOST_AUTO_TEST_CASE(round_is_half_to_even_with_decimals_as_torch) {
    Tensor x = tensor({0.5, 1.5, 2.5, -0.5, -1.5, 1.2345, 12.5, 1250.0}, {.dtype = float64});
    BOOST_TEST(
        round(x).to_vector<double>() == std::vector<double>({0, 2, 2, -0.0, -2, 1, 12, 1250}),
        boost::test_tools::per_element());
    std::vector<double> two = round(x, 2).to_vector<double>();
    BOOST_TEST(two[5] == 1.23);  // 123.45 -> 123 -> 1.23
    BOOST_TEST(two[6] == 12.5);
    BOOST_TEST(
        round(x, -2).to_vector<double>() == std::vector<double>({0, 0, 0, -0.0, -0.0, 0, 0, 1200}),
        boost::test_tools::per_element());  // 12.5 -> 0, 1250 -> 1200 (half to even)
    BOOST_TEST(std::signbit(round(x).to_vector<double>()[3]));  // round(-0.5) is -0
    Tensor i = tensor(std::vector<int64_t>{3, -7}, {2});
    BOOST_TEST(round(i).dtype() == int64);
    BOOST_TEST(round(i, 0).to_vector<int64_t>() == std::vector<int64_t>({3, -7}),
               boost::test_tools::per_element());
    BOOST_CHECK_EXCEPTION(round(i, 1), Error, [](const Error& e) {
        return std::string(e.what()).find("round: decimals=1") != std::string::npos;
    });
    Tensor g = tensor({0.3, 1.7}, {.requires_grad = true});
    round(g, 1).sum().backward();
    BOOST_TEST(g.grad().to_vector<float>() == std::vector<float>({0, 0}),
               boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(var_std_clamp_masked_fill_against_loops) {
    Tensor x = randn({5, 7});
    std::vector<float> v = values(x);
    // Row variances with a plain loop, corrections 1 and 0.
    std::vector<double> var1, var0;
    for (int r = 0; r < 5; ++r) {
        double m = 0, ss = 0;
        for (int c = 0; c < 7; ++c) m += v[r * 7 + c] / 7.0;
        for (int c = 0; c < 7; ++c) ss += (v[r * 7 + c] - m) * (v[r * 7 + c] - m);
        var1.push_back(ss / 6), var0.push_back(ss / 7);
    }
    BOOST_TEST(close(values(var(x, {1})), var1, 1e-4));
    BOOST_TEST(close(values(var(x, {-1}, 0)), var0, 1e-4));
    std::vector<double> std1;
    for (double s : var1) std1.push_back(std::sqrt(s));
    BOOST_TEST(close(values(kiln::std(x, {1})), std1, 1e-4));
    BOOST_TEST(var(x, {1}, 1, true).shape() == (Shape{5, 1}));
    float single = var(ones({1})).item<float>();  // N - 1 = 0: NaN (0/0), as torch
    BOOST_TEST(std::isnan(single));
    BOOST_CHECK_THROW(var(arange(3.0, {.dtype = DType::int64})), Error);

    BOOST_TEST(close(values(clamp(kX, -1.0, 2.0)), {1, -1, 2, 2, 2, -1}));
    BOOST_TEST(close(values(clamp(kX, std::nullopt, 0.0)), {0, -2, 0, 0, 0, -6}));
    BOOST_TEST(close(values(clamp(kX, 3.0, 1.0)), {1, 1, 1, 1, 1, 1}));  // min > max: max everywhere
    BOOST_TEST(std::isnan(clamp(tensor({NAN}), 0.0, 1.0).item<float>()));
    BOOST_TEST(clamp(arange(5.0, {.dtype = DType::int64}), 1.0, 3.0).dtype() == DType::int64);
    BOOST_CHECK_THROW(clamp(kX, std::nullopt, std::nullopt), Error);

    BOOST_TEST(close(values(masked_fill(kX, kX < 0.0, 0.0)), {1, 0, 3, 4, 5, 0}));
    BOOST_TEST(masked_fill(arange(3.0, {.dtype = DType::int64}), arange(3.0) > 0.0, 7).dtype() == DType::int64);
    BOOST_CHECK_THROW(masked_fill(kX, kX, 1.0), Error);              // not a bool mask
    BOOST_CHECK_THROW(masked_fill(ones({2}), ones({3, 2}) > 0.0, 1), Error);  // mask grows the shape
}

BOOST_AUTO_TEST_CASE(nn_composites_match_their_formulas) {
    std::vector<float> x = values(kX);
    std::vector<double> gelu, gelu_tanh, silu, erf;
    for (float v : x) {
        gelu.push_back(0.5 * v * (1 + std::erf(v / std::sqrt(2.0))));
        gelu_tanh.push_back(0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v))));
        silu.push_back(v / (1 + std::exp(-v)));
        erf.push_back(std::erf(v));
    }
    BOOST_TEST(close(values(F::gelu(kX)), gelu));
    BOOST_TEST(close(values(F::gelu(kX, "tanh")), gelu_tanh));
    BOOST_TEST(close(values(F::silu(kX)), silu));
    BOOST_TEST(close(values(kiln::erf(kX)), erf));
    BOOST_CHECK_THROW(F::gelu(kX, "fast"), Error);

    // layer_norm over the last dim, by loops (biased variance).
    std::vector<double> ln;
    for (int r = 0; r < 2; ++r) {
        double m = (x[r * 3] + x[r * 3 + 1] + x[r * 3 + 2]) / 3, ss = 0;
        for (int c = 0; c < 3; ++c) ss += (x[r * 3 + c] - m) * (x[r * 3 + c] - m);
        for (int c = 0; c < 3; ++c) ln.push_back((x[r * 3 + c] - m) / std::sqrt(ss / 3 + 1e-5) * 2 + 1);
    }
    BOOST_TEST(close(values(F::layer_norm(kX, {3}, full({3}, 2.0), ones({3}))), ln, 1e-4));
    BOOST_CHECK_THROW(F::layer_norm(kX, {4}), Error);
    BOOST_CHECK_THROW(F::layer_norm(kX, {3}, ones({4})), Error);
    nn::LayerNorm module({3});
    BOOST_TEST(module.parameters().size() == 2u);
    BOOST_TEST(module.extra_repr() == "(3,), eps=1e-05, elementwise_affine=True");

    // dropout: the identity in eval and at p = 0, zeros at p = 1, else kept values scaled.
    BOOST_TEST(F::dropout(kX, 0.5, false).same(kX));
    BOOST_TEST(F::dropout(kX, 0.0).same(kX));
    BOOST_TEST(values(F::dropout(kX, 1.0).abs().sum())[0] == 0.f);
    Tensor big = ones({20000});
    std::vector<float> d = values(F::dropout(big, 0.25));
    size_t kept = 0;
    for (float v : d) {
        bool dropped_or_scaled = v == 0.f || std::abs(v - 1 / 0.75f) < 1e-6;
        BOOST_TEST(dropped_or_scaled);
        kept += v != 0.f;
    }
    BOOST_TEST(std::abs(double(kept) / 20000 - 0.75) < 0.02);
    BOOST_CHECK_THROW(F::dropout(kX, -0.1), Error);
    nn::Dropout drop(0.5);
    drop.eval();
    BOOST_TEST(drop(kX).same(kX));
}

BOOST_AUTO_TEST_CASE(gradients_match_central_differences) {
    auto x = [] { return randn({3, 4}); };
    using In = const std::vector<Tensor>&;
    BOOST_TEST(gradcheck([](In in) { return stack({in[0], in[0] * in[0]}, 1); }, {x()}));
    BOOST_TEST(gradcheck([](In in) { return clamp(in[0], -0.5, 0.5); }, {x()}));
    BOOST_TEST(gradcheck([](In in) { return var(in[0], {1}); }, {x()}));
    BOOST_TEST(gradcheck([](In in) { return kiln::std(in[0], {0}, 0); }, {x()}));
    BOOST_TEST(gradcheck([](In in) { return masked_fill(in[0], in[0] > 0.0, 2.0); }, {x()}));
    BOOST_TEST(gradcheck([](In in) { return chunk(in[0], 2, 1)[1] * 3.0; }, {x()}));
    BOOST_TEST(gradcheck([](In in) { return bmm(in[0], in[1]); }, {randn({2, 3, 4}), randn({2, 4, 2})}));
    BOOST_TEST(gradcheck([](In in) { return F::gelu(in[0]); }, {x()}));
    BOOST_TEST(gradcheck([](In in) { return F::gelu(in[0], "tanh"); }, {x()}));
    BOOST_TEST(gradcheck([](In in) { return F::silu(in[0]); }, {x()}));
    BOOST_TEST(gradcheck([](In in) { return kiln::erf(in[0]); }, {x()}));
    BOOST_TEST(gradcheck([](In in) { return F::layer_norm(in[0], {4}, in[1], in[2]); }, {x(), randn({4}), randn({4})}));
}

BOOST_AUTO_TEST_CASE(compiled_composites_equal_eager_under_every_backend) {
    auto fn = [](const Tensor& a, const Tensor& w) {
        Tensor h = F::layer_norm(F::gelu(a) + clamp(a, -1.0, 1.0), {6}, w);
        Tensor s = stack(chunk(h, 2, 1), 0).sum({0});
        return masked_fill(s, s > 1.0, 1.0) + F::silu(var(a, {1}, 1, true)) + kiln::erf(s);
    };
    for (const char* backend : {"eager", "aot_eager", "inductor"}) {
        BOOST_TEST_CONTEXT(backend) {
            auto compiled = compile(fn, {.backend = backend});
            Tensor a = randn({4, 6}), w = randn({6});
            Tensor a1 = a.detach().requires_grad_(), w1 = w.detach().requires_grad_();
            Tensor a2 = a.detach().requires_grad_(), w2 = w.detach().requires_grad_();
            Tensor want = fn(a1, w1), got = compiled(a2, w2);
            BOOST_TEST(allclose(got, want, 1e-4, 1e-5));
            want.sum().backward();
            got.sum().backward();
            BOOST_TEST(allclose(a2.grad(), a1.grad(), 1e-3, 1e-4));
            BOOST_TEST(allclose(w2.grad(), w1.grad(), 1e-3, 1e-4));
            Tensor b = randn({4, 6});
            BOOST_TEST(allclose(compiled(b, w), fn(b, w), 1e-4, 1e-5));  // a second call, cached
            BOOST_TEST(ints(compile([](const Tensor& t) { return argmax(t, 1); }, {.backend = backend})(b)) == ints(argmax(b, 1)));
        }
    }
}

BOOST_AUTO_TEST_SUITE_END()
