// A second sweep over issue 10's tensor classes with variants the first tests did not try:
// duplicate and out-of-range dims, 0-d operands of matmul, shapes that only overflow once
// broadcast, degenerate reshape/slice/arange/randint arguments, NaN and infinities through
// max/min/softmax, eager and compiled.
#include <cmath>
#include <limits>

#include "hostile.h"

using namespace kiln;
using hostile::expect_compiled_error;
using hostile::expect_compiled_matches;
using hostile::expect_error;
using hostile::expect_same;

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr int64_t kBig = int64_t(1) << 32;
}  // namespace

BOOST_AUTO_TEST_SUITE(sweep)

// torch: "dim 0 appears multiple times in the list of dims" (0 and -1 are the same dim),
// on a 0-d tensor too.
BOOST_AUTO_TEST_CASE(duplicate_dims_raise) {
    Tensor v = tensor({1.0, 2.0, 3.0}), m = ones({2, 3});
    expect_error([&] { sum(v, {0, -1}); }, {"sum", "dim 0 appears twice", "[0, -1]"});
    expect_error([&] { mean(m, {1, 1}); }, {"mean", "dim 1 appears twice"});
    expect_error([&] { sum(scalar_tensor(1.5), {0, -1}); }, {"sum", "dim 0 appears twice"});  // 0-d: as torch
    expect_error([&] { mean(scalar_tensor(1.5), {0, 0}); }, {"sum", "dim 0 appears twice"});
    expect_error([&] { amax(m, {0, -2}); }, {"amax", "appears twice"});
    expect_compiled_error([](Tensor t) { return sum(t, {1, -1}) * 2.0; }, m, {"sum", "appears twice"});
}

// torch: "both arguments to matmul need to be at least 1D".
BOOST_AUTO_TEST_CASE(matmul_of_a_0_dim_tensor_raises) {
    Tensor s = scalar_tensor(2.0), v = tensor({1.0, 2.0});
    expect_error([&] { matmul(s, v); }, {"matmul", "at least 1 dim", "[] and [2]"});
    expect_error([&] { matmul(v, s); }, {"matmul", "at least 1 dim", "[2] and []"});
    expect_error([&] { matmul(s, s); }, {"matmul", "at least 1 dim"});
    expect_compiled_error([](Tensor t) { return matmul(t, t) + 1.0; }, s, {"matmul", "at least 1 dim"});
}

// Each operand is a view of one element; only the broadcast result is too big to count.
// (Nothing here may allocate: a broadcast that fits in int64 but not in memory would.)
BOOST_AUTO_TEST_CASE(broadcast_results_are_checked) {
    Tensor tall = zeros({1, 1}).expand({kBig, 1}), wide = zeros({1, 1}).expand({1, kBig});
    expect_error([&] { tall + wide; }, {"[4294967296, 4294967296]", "int64"});
    expect_error([&] { tall < wide; }, {"[4294967296, 4294967296]", "int64"});
    expect_error([&] { maximum(wide, tall); }, {"[4294967296, 4294967296]", "int64"});
    expect_error([&] { zeros({1}).expand({int64_t(1) << 62}); }, {"expand", "too many to address in bytes"});
    expect_compiled_error([](Tensor t) { return t.expand({kBig, 1}) * t.expand({1, kBig}); }, zeros({1, 1}), {"int64"});
}

BOOST_AUTO_TEST_CASE(degenerate_reshape_slice_and_factories) {
    Tensor empty0 = zeros({0}), v = arange(6.0);
    // -1 next to a 0 could be any size (torch raises too); the division must not trap.
    expect_error([&] { empty0.reshape({-1, 0}); }, {"reshape"});
    expect_error([&] { v.reshape({-1, -1}); }, {"reshape", "-1"});
    expect_error([&] { v.reshape({-2, 3}); }, {"reshape"});
    expect_error([&] { empty0.reshape({0, -1, 3}); }, {"reshape"});
    expect_error([&] { v.slice(0, 0, 6, 0); }, {"slice", "step"});
    expect_error([&] { v.slice(0, 0, 6, -1); }, {"slice", "step"});
    expect_error([&] { v.narrow(0, 2, -1); }, {"narrow"});
    expect_error([&] { arange(0.0, 10.0, 0.0); }, {"arange", "step"});
    expect_error([&] { arange(0.0, kNaN); }, {"arange"});
    expect_error([&] { arange(kNaN); }, {"arange"});
    expect_error([&] { arange(0.0, 10.0, -1.0); }, {"arange", "the wrong way"});  // torch raises too
    BOOST_TEST(arange(0.0, 0.0, -1.0).numel() == 0);
    expect_error([&] { randint(5, 5, {3}); }, {"randint"});
    expect_error([&] { randint(6, 5, {3}); }, {"randint"});
    expect_compiled_error([](Tensor t) { return t.reshape({-1, 0}) + 1.0; }, empty0, {"reshape"});
}

// torch.maximum/amax propagate NaN; softmax of a row of -inf is NaN, of a row with +inf NaN
// where it is inf ... every backend must agree with eager, element by element.
BOOST_AUTO_TEST_CASE(nan_and_infinities_through_max_min_and_softmax) {
    Tensor x = tensor({1.0, kNaN, 2.0, -kInf, kInf, 0.0, -0.0, 3.0});
    BOOST_TEST(std::isnan(amax(x).item<double>()));
    BOOST_TEST(std::isnan(amin(x).item<double>()));
    BOOST_TEST(std::isnan(maximum(x, zeros({8})).to_vector<double>()[1]));
    BOOST_TEST(std::isnan(relu(x).to_vector<double>()[1]));
    expect_compiled_matches([](Tensor t) { return amax(t, {0}, true) + amin(t, {0}, true); }, x);
    expect_compiled_matches([](Tensor t) { return maximum(t, t * -1.0) - minimum(t, zeros({8})) + relu(t); }, x);
    Tensor rows = tensor({-kInf, -kInf, 1.0, kInf, 1.0, 2.0}).reshape({3, 2});
    std::vector<double> sm = softmax(rows, 1).to_vector<double>();
    BOOST_TEST(std::isnan(sm[0]));  // all -inf: NaN, as torch
    BOOST_TEST(std::isnan(sm[2]));  // +inf: NaN where it is (inf - inf), as torch
    expect_compiled_matches([](Tensor t) { return softmax(t, 1) + log_softmax(t, -1); }, rows);
    expect_compiled_matches([](Tensor t) { return sum(t, {1}) / mean(t, {1}); }, rows);
}

BOOST_AUTO_TEST_SUITE_END()
