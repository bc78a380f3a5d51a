// Numbers at the edges, as PyTorch gives them: means and softmaxes over nothing, fill values
// a dtype cannot hold, int64 overflow (wraps; C++'s signed overflow would be UB), casts of
// NaN/inf to int64 (UB as a static_cast), and the scalar promotion rule of docs/robustness.md.
#include <limits>

#include "hostile.h"

using namespace kiln;
using hostile::expect_compiled_matches;
using hostile::expect_error;

namespace {
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

Tensor ints(std::vector<int64_t> v) { return tensor(v); }
Tensor iota(double n) { return arange(n, {.dtype = int64}); }  // torch.arange(n): int64
}  // namespace

BOOST_AUTO_TEST_SUITE(numbers)

BOOST_AUTO_TEST_CASE(mean_over_nothing_is_nan) {
    Tensor m = zeros({0, 3}).mean({0});
    BOOST_TEST(m.shape() == Shape{3});
    for (float v : m.to_vector<float>()) BOOST_TEST(std::isnan(v));
    BOOST_TEST(std::isnan(zeros({0}).mean().item<float>()));
    BOOST_TEST(zeros({3, 0}).mean({0}).shape() == Shape{0});
    expect_compiled_matches([](Tensor x) { return x.mean({0}) + 1.0; }, zeros({0, 3}));
}

BOOST_AUTO_TEST_CASE(softmax_over_nothing_is_empty) {
    for (int64_t dim : {0, 1, -1}) {
        Tensor x = zeros({0, 4});
        if (dim != 0) x = zeros({4, 0});
        BOOST_TEST(softmax(x, dim).shape() == x.shape());
        BOOST_TEST(log_softmax(x, dim).shape() == x.shape());
    }
    BOOST_TEST(softmax(zeros({0, 4}), 1).shape() == Shape({0, 4}));
    expect_compiled_matches([](Tensor x) { return softmax(x, 1) + log_softmax(x, 1); }, zeros({3, 0}));
    expect_error([] { amax(zeros({3, 0}), {1}); }, {"amax", "empty", "[3, 0]"});  // as torch
}

BOOST_AUTO_TEST_CASE(full_refuses_values_the_dtype_cannot_hold) {
    expect_error([] { full({2}, kNaN, {.dtype = int64}); }, {"full", "nan", "int64"});
    expect_error([] { full({2}, kInf, {.dtype = int64}); }, {"full", "inf", "int64"});
    expect_error([] { full({2}, -kInf, {.dtype = int64}); }, {"full", "int64"});
    expect_error([] { full({2}, 1e19, {.dtype = int64}); }, {"full", "1e+19", "int64"});
    expect_error([] { full({2}, 9223372036854775808.0, {.dtype = int64}); }, {"full", "int64"});
    expect_error([] { full({2}, 1e300); }, {"full", "float32"});
    expect_error([] { scalar_tensor(kNaN, int64); }, {"full", "int64"});
    BOOST_TEST(full({1}, -9223372036854775808.0, {.dtype = int64}).item<int64_t>() == kMin);
    BOOST_TEST(full({1}, 2.7, {.dtype = int64}).item<int64_t>() == 2);  // truncates, as torch
    BOOST_TEST(std::isinf(full({1}, kInf).item<float>()));
    BOOST_TEST(std::isnan(full({1}, kNaN).item<float>()));
    BOOST_TEST(full({1}, kNaN, {.dtype = boolean}).item<bool>() == true);
}

BOOST_AUTO_TEST_CASE(int64_arithmetic_wraps) {
    Tensor big = ints({kMax, kMin, kMax});
    BOOST_TEST((big + ints({1, -1, kMax})).to_vector<int64_t>() == std::vector<int64_t>({kMin, kMax, -2}));
    BOOST_TEST((big - ints({-1, 1, kMin})).to_vector<int64_t>() == std::vector<int64_t>({kMin, kMax, -1}));
    BOOST_TEST((big * ints({2, -1, kMax})).to_vector<int64_t>() == std::vector<int64_t>({-2, kMin, 1}));
    BOOST_TEST((big + 1.0).to_vector<int64_t>() == std::vector<int64_t>({kMin, kMin + 1, kMin}));
    BOOST_TEST((2.0 * big).dtype() == int64);
    BOOST_TEST((-ints({kMin, 5})).to_vector<int64_t>() == std::vector<int64_t>({kMin, -5}));
    BOOST_TEST(abs(ints({kMin, -5})).to_vector<int64_t>() == std::vector<int64_t>({kMin, 5}));
    BOOST_TEST(sign(ints({kMin, 0, kMax})).to_vector<int64_t>() == std::vector<int64_t>({-1, 0, 1}));
    BOOST_TEST(relu(ints({kMin, kMax})).to_vector<int64_t>() == std::vector<int64_t>({0, kMax}));
    BOOST_TEST(ints({kMax, 1}).sum().item<int64_t>() == kMin);
    BOOST_TEST(ints({kMax, kMax, 2}).sum().item<int64_t>() == 0);
    BOOST_TEST(maximum(ints({kMin}), ints({kMax})).item<int64_t>() == kMax);
}

BOOST_AUTO_TEST_CASE(compiled_int64_arithmetic_wraps) {
    expect_compiled_matches([](Tensor x) { return (x + x) * x - (-x) + abs(x); }, ints({kMax, kMin, 7}));
    expect_compiled_matches([](Tensor x) { return x.sum() + x * 3.0; }, ints({kMax, 2}));
}

BOOST_AUTO_TEST_CASE(scalar_promotion_rule) {
    Tensor x = iota(5);
    BOOST_TEST(x.dtype() == int64);
    BOOST_TEST((x * 2.0).dtype() == int64);  // an int-valued scalar keeps int64 (the API cannot tell 2 from 2.0)
    BOOST_TEST((x * 2.5).dtype() == float32);
    BOOST_TEST((x * 2.5).to_vector<float>() == std::vector<float>({0, 2.5, 5, 7.5, 10}));
    BOOST_TEST((x + 1e30).dtype() == float32);  // past int64: float
    BOOST_TEST((x + kInf).dtype() == float32);
    BOOST_TEST(std::isnan((x + kNaN).to_vector<float>()[0]));
    BOOST_TEST((x / 2.0).dtype() == float32);  // float-only ops always promote
    BOOST_TEST((x < 2.5).to_vector<bool>() == std::vector<bool>({true, true, true, false, false}));
    BOOST_TEST((x == 1e30).to_vector<bool>() == std::vector<bool>(5, false));
    BOOST_TEST((x < kNaN).to_vector<bool>() == std::vector<bool>(5, false));
}

BOOST_AUTO_TEST_CASE(integer_division_and_pow) {
    Tensor x = iota(3);
    std::vector<float> q = (x / 0.0).to_vector<float>();
    BOOST_TEST(std::isnan(q[0]));
    BOOST_TEST(q[1] == std::numeric_limits<float>::infinity());
    std::vector<float> r = (x / zeros({3}, {.dtype = int64})).to_vector<float>();
    BOOST_TEST(std::isnan(r[0]));
    BOOST_TEST(std::isinf(r[2]));
    Tensor p = pow(arange(1, 4, 1, {.dtype = int64}), -1.0);
    BOOST_TEST(p.dtype() == float32);
    BOOST_TEST(p.to_vector<float>() == std::vector<float>({1.f, 0.5f, 1.f / 3.f}), boost::test_tools::per_element());
    BOOST_TEST(std::isinf(pow(iota(3), -1.0).to_vector<float>()[0]));
    BOOST_TEST(reciprocal(iota(2)).to_vector<float>()[0] == std::numeric_limits<float>::infinity());
}

BOOST_AUTO_TEST_CASE(casts_of_nan_and_inf_to_int64) {
    Tensor f = tensor({kNaN, kInf, -kInf, 1e30, -1e30, 2.7, -2.7}, {.dtype = float64});
    std::vector<int64_t> want = {kMin, kMin, kMin, kMin, kMin, 2, -2};  // x86's (and torch's CPU) answer
    BOOST_TEST(f.to(int64).to_vector<int64_t>() == want);
    BOOST_TEST(f.to(float32).to(int64).to_vector<int64_t>() == want);
    BOOST_TEST(f.to_vector<int64_t>() == want);
    BOOST_TEST(scalar_tensor(kNaN).item<int64_t>() == kMin);
    BOOST_TEST(f.to(boolean).to_vector<bool>() == std::vector<bool>({true, true, true, true, true, true, true}));
    expect_compiled_matches([](Tensor t) { return t.to(int64) + 1.0; }, tensor({kNaN, kInf, 3.5}));
}

BOOST_AUTO_TEST_CASE(arange_and_random_factories_check_their_dtype) {
    expect_error([] { arange(9e18, 1e19, 1e17, {.dtype = int64}); }, {"arange", "int64"});
    BOOST_TEST(arange(-3, 3, 2.0, {.dtype = int64}).to_vector<int64_t>() == std::vector<int64_t>({-3, -1, 1}));
    expect_error([] { rand({2}, {.dtype = int64}); }, {"rand", "int64"});
    expect_error([] { randn({2}, {.dtype = boolean}); }, {"randn", "bool"});
    BOOST_TEST(randint(0, 2, {8}, {.dtype = float32}).dtype() == float32);
}

BOOST_AUTO_TEST_SUITE_END()
