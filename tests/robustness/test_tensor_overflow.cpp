// Shapes whose element or byte count overflows, negative sizes, and index arithmetic near
// INT64_MAX. zeros({2^32, 2^32}) once gave numel 0 over a tiny buffer, and indexing it
// segfaulted; every shape that is made now passes checked_numel (tensor/tensor.h).
#include <limits>

#include "hostile.h"

using namespace kiln;
using hostile::expect_compiled_error;
using hostile::expect_error;

namespace {
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
}  // namespace

BOOST_AUTO_TEST_SUITE(overflow)

BOOST_AUTO_TEST_CASE(factories_refuse_counts_past_int64) {
    expect_error([] { zeros({1LL << 32, 1LL << 32}); }, {"[4294967296, 4294967296]", "more elements than int64"});
    expect_error([] { ones({1LL << 62, 4}); }, {"more elements than int64"});
    expect_error([] { full({3, kMax, 2}, 1.0); }, {"more elements than int64"});
    expect_error([] { randn({1LL << 40, 1LL << 40}); }, {"randn", "more elements than int64"});
    expect_error([] { rand({1LL << 40, 1LL << 40}); }, {"rand", "more elements than int64"});
    expect_error([] { randint(0, 5, {1LL << 40, 1LL << 40}); }, {"randint", "more elements than int64"});
    expect_error([] { empty({1LL << 32, 1LL << 32}); }, {"empty", "more elements than int64"});
}

BOOST_AUTO_TEST_CASE(factories_refuse_byte_counts_past_int64) {
    expect_error([] { zeros({1LL << 61}); }, {"2305843009213693952", "too many to address in bytes"});
}

BOOST_AUTO_TEST_CASE(factories_refuse_more_than_the_machine_has) {
    expect_error([] { zeros({1LL << 50}); }, {"storage_allocate", "bytes of memory"});
}

BOOST_AUTO_TEST_CASE(negative_sizes_raise) {
    expect_error([] { zeros({2, -3}); }, {"negative size -3", "[2, -3]"});
    expect_error([] { randn({-1}); }, {"randn", "negative size -1"});
    expect_error([] { zeros({4}).reshape({-2, -2}); }, {"reshape", "-2"});
    expect_error([] { scalar_tensor(1.0).expand({-5}); }, {"expand", "-5"});
}

BOOST_AUTO_TEST_CASE(reshape_and_expand_targets_are_checked) {
    Tensor empty0 = zeros({0});
    expect_error([&] { empty0.reshape({1LL << 32, 1LL << 32, 0}); }, {"reshape", "more elements than int64"});
    expect_error([&] { empty0.reshape({1LL << 32, 1LL << 32}); }, {"reshape"});
    expect_error([&] { zeros({6}).reshape({-1, 1LL << 62, 8}); }, {"reshape"});
    expect_error([&] { zeros({6}).view({kMax, 2, 0}); }, {"reshape", "more elements than int64"});
    expect_error([] { scalar_tensor(1.0).expand({1LL << 32, 1LL << 32}); }, {"expand", "more elements than int64"});
    expect_error([] { zeros({1, 1}).expand({1LL << 40, 1LL << 40}); }, {"expand", "more elements than int64"});
}

BOOST_AUTO_TEST_CASE(cat_of_huge_views_raises) {
    Tensor big = scalar_tensor(1.0).expand({1LL << 59});  // a view: no memory behind it
    std::vector<Tensor> many(17, big);
    expect_error([&] { cat(many); }, {"cat", "more than int64"});
    expect_error([&] { cat({big, big}); }, {"too many to address in bytes"});
}

BOOST_AUTO_TEST_CASE(narrow_and_slice_near_int64_limits) {
    Tensor x = arange(10);
    expect_error([&] { x.narrow(0, 1, kMax); }, {"narrow", "9223372036854775807"});
    expect_error([&] { x.narrow(0, kMax, 1); }, {"narrow"});
    expect_error([&] { x.narrow(0, -1, 2); }, {"narrow"});
    BOOST_TEST(x.slice(0, kMin, kMax).numel() == 10);
    BOOST_TEST(x.slice(0, kMin, kMax, kMax).to_vector<int64_t>() == std::vector<int64_t>({0}));
    BOOST_TEST(x.slice(0, 3, kMax, 4).to_vector<int64_t>() == std::vector<int64_t>({3, 7}));
    BOOST_TEST(x.slice(0, kMax, kMin).numel() == 0);
    expect_error([&] { x.slice(0, 0, 5, 0); }, {"slice", "step must be positive"});
    expect_error([&] { x.select(0, kMin); }, {"select", "out of bounds"});
}

BOOST_AUTO_TEST_CASE(arange_refuses_unbounded_ranges) {
    expect_error([] { arange(0, 1e300); }, {"arange", "too many elements"});
    expect_error([] { arange(0, std::numeric_limits<double>::infinity()); }, {"arange", "finite"});
    expect_error([] { arange(std::nan(""), 5); }, {"arange", "finite"});
    expect_error([] { arange(0, 10, std::nan("")); }, {"arange", "finite"});
    expect_error([] { arange(5, 0, 1); }, {"arange", "empty the wrong way"});
}

BOOST_AUTO_TEST_CASE(randint_takes_the_whole_int64_range) {
    Tensor r = randint(kMin, kMax, {64});
    BOOST_TEST(r.numel() == 64);
    expect_error([] { randint(5, 5, {2}); }, {"randint", "less than high"});
}

BOOST_AUTO_TEST_CASE(make_tensor_checks_the_storage_size) {
    expect_error([] { make_tensor(storage_allocate(8), {4}, float32); }, {"make_tensor", "16 bytes", "holds 8"});
    expect_error([] { make_tensor(storage_allocate(8), {1LL << 32, 1LL << 32}, float32); }, {"make_tensor", "more elements"});
}

BOOST_AUTO_TEST_CASE(compiled_shape_overflow_raises) {
    Tensor x = scalar_tensor(2.0);
    expect_compiled_error([](Tensor t) { return t.expand({1LL << 32, 1LL << 32}) + 1.0; }, x, {"expand", "more elements than int64"});
    expect_compiled_error([](Tensor t) { return t + zeros({1LL << 32, 1LL << 32}); }, x, {"more elements than int64"});
    expect_compiled_error([](Tensor t) { return t.reshape({-1, 1LL << 62, 8}); }, x, {"reshape"});
}

BOOST_AUTO_TEST_SUITE_END()
