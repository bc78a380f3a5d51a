// Factories (full, zeros, ones, arange, rand, randn, randint), tensor() from C++ values,
// and the ways values leave: item, to_vector, allclose.
#include <boost/test/unit_test.hpp>

#include <numeric>
#include <set>

#include "reference.h"
#include "tensor/philox.h"

using namespace kiln_test;

BOOST_AUTO_TEST_SUITE(factories)

BOOST_AUTO_TEST_CASE(full_zeros_ones_have_shape_dtype_and_value) {
    for (kiln::DType dt : {kiln::float32, kiln::float64, kiln::int64, kiln::boolean}) {
        Tensor z = kiln::zeros({2, 3}, {.dtype = dt});
        Tensor o = kiln::ones({4}, {.dtype = dt});
        BOOST_TEST((z.dtype() == dt && o.dtype() == dt));
        check_equal(z, Ref{{2, 3}, std::vector<double>(6, 0.0)}, std::string("zeros ") + kiln::dtype_name(dt));
        check_equal(o, Ref{{4}, std::vector<double>(4, 1.0)}, std::string("ones ") + kiln::dtype_name(dt));
    }
    check_equal(kiln::full({3, 1}, 2.5), Ref{{3, 1}, {2.5, 2.5, 2.5}}, "full");
    check_equal(kiln::full({}, -7, {.dtype = kiln::int64}), Ref{{}, {-7}}, "full 0-d int64");
    check_equal(kiln::zeros({0, 3}), Ref{{0, 3}, {}}, "zeros with a 0 dim");
    check_equal(kiln::zeros_like(kiln::ones({2, 2}, {.dtype = kiln::float64})), Ref{{2, 2}, {0, 0, 0, 0}}, "zeros_like");
    BOOST_TEST((kiln::ones_like(kiln::zeros({2}, {.dtype = kiln::int64})).dtype() == kiln::int64));
    Tensor leaf = kiln::ones({2}, {.requires_grad = true});
    BOOST_TEST(leaf.requires_grad());
    BOOST_TEST(leaf.is_leaf());
}

BOOST_AUTO_TEST_CASE(arange_counts_like_python_range) {
    check_equal(kiln::arange(5.), Ref{{5}, {0, 1, 2, 3, 4}}, "arange(5)");
    check_equal(kiln::arange(2., 8., 2.), Ref{{3}, {2, 4, 6}}, "arange(2, 8, 2)");
    check_equal(kiln::arange(3., 0., -1.), Ref{{3}, {3, 2, 1}}, "arange(3, 0, -1)");
    check_close(kiln::arange(0., 1., 0.25), Ref{{4}, {0, 0.25, 0.5, 0.75}}, 0, 1e-7, "arange(0, 1, 0.25)");
    check_close(kiln::arange(0., 0.95, 0.1), Ref{{10}, {0, .1, .2, .3, .4, .5, .6, .7, .8, .9}}, 0, 1e-6, "arange(0, 0.95, 0.1)");
    check_equal(kiln::arange(0.), Ref{{0}, {}}, "empty arange");
    Tensor i = kiln::arange(4., {.dtype = kiln::int64});
    BOOST_TEST((i.dtype() == kiln::int64));
    check_equal(i, Ref{{4}, {0, 1, 2, 3}}, "int64 arange");
}

BOOST_AUTO_TEST_CASE(rand_is_uniform_in_range) {
    Tensor r = kiln::rand({200, 50});
    BOOST_TEST((r.dtype() == kiln::float32));
    BOOST_TEST(r.shape() == (Shape{200, 50}), boost::test_tools::per_element());
    std::vector<float> v = r.to_vector<float>();
    BOOST_TEST(*std::min_element(v.begin(), v.end()) >= 0.0f);
    BOOST_TEST(*std::max_element(v.begin(), v.end()) < 1.0f);
    double mean = std::accumulate(v.begin(), v.end(), 0.0) / double(v.size());
    BOOST_TEST(std::abs(mean - 0.5) < 0.02);
    BOOST_TEST((kiln::rand({3}, {.dtype = kiln::float64}).dtype() == kiln::float64));
}

BOOST_AUTO_TEST_CASE(randn_has_mean_zero_and_std_one) {
    std::vector<double> v = kiln::randn({100000}).to_vector<double>();
    double mean = std::accumulate(v.begin(), v.end(), 0.0) / double(v.size());
    double var = 0;
    for (double x : v) var += (x - mean) * (x - mean);
    double std_dev = std::sqrt(var / double(v.size() - 1));
    BOOST_TEST(std::abs(mean) < 0.02, "mean " << mean);
    BOOST_TEST(std::abs(std_dev - 1) < 0.02, "std " << std_dev);
    Tensor like = kiln::randn_like(kiln::zeros({2, 3}, {.dtype = kiln::float64}));
    BOOST_TEST((like.dtype() == kiln::float64));
    BOOST_TEST(like.shape() == (Shape{2, 3}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(randint_stays_in_low_high_and_hits_every_value) {
    Tensor r = kiln::randint(-2, 3, {1000});
    BOOST_TEST((r.dtype() == kiln::int64));
    std::vector<int64_t> v = r.to_vector<int64_t>();
    std::set<int64_t> seen(v.begin(), v.end());
    BOOST_TEST((seen == std::set<int64_t>{-2, -1, 0, 1, 2}));
    BOOST_TEST((kiln::randint(0, 10, {2, 2}, {.dtype = kiln::float32}).dtype() == kiln::float32));
}

BOOST_AUTO_TEST_CASE(manual_seed_makes_random_factories_repeatable) {
    kiln::manual_seed(42);
    std::vector<float> a = kiln::randn({8}).to_vector<float>();
    std::vector<float> r1 = kiln::rand({8}).to_vector<float>();
    kiln::manual_seed(42);
    std::vector<float> b = kiln::randn({8}).to_vector<float>();
    std::vector<float> r2 = kiln::rand({8}).to_vector<float>();
    BOOST_TEST(a == b, boost::test_tools::per_element());
    BOOST_TEST(r1 == r2, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(tensor_values)

BOOST_AUTO_TEST_CASE(philox_matches_random123_known_answers) {
    using kiln_random::Philox4;
    struct Kat {
        Philox4 counter;
        unsigned k0, k1;
        Philox4 want;
    };
    // Random123's tests/kat_vectors, the three "philox4x32 10" lines.
    const Kat kats[] = {
        {{{0, 0, 0, 0}}, 0, 0, {{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}}},
        {{{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}}, 0xffffffff, 0xffffffff, {{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}}},
        {{{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}}, 0xa4093822, 0x299f31d0, {{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}}},
    };
    for (const Kat& k : kats) {
        Philox4 got = kiln_random::philox_block(k.counter, k.k0, k.k1);
        for (int i = 0; i < 4; ++i) BOOST_TEST(got.v[i] == k.want.v[i]);
    }
}

BOOST_AUTO_TEST_CASE(random_ops_draw_element_i_from_seed_and_offset_plus_i) {
    kiln::manual_seed(7);
    BOOST_TEST(kiln::get_rng_state().offset == 0u);
    std::vector<double> a = kiln::rand({5}, {.dtype = kiln::float64}).to_vector<double>();
    BOOST_TEST(kiln::get_rng_state().offset == 5u);  // one counter per element
    std::vector<double> b = kiln::randn({3}, {.dtype = kiln::float64}).to_vector<double>();
    for (int i = 0; i < 5; ++i) BOOST_TEST(a[size_t(i)] == kiln_random::draw_uniform(7, uint64_t(i), 0.0, 1.0));
    for (int i = 0; i < 3; ++i) BOOST_TEST(b[size_t(i)] == kiln_random::draw_normal(7, uint64_t(5 + i)));
    // A large fill runs on several threads and still draws element i from offset + i.
    kiln::RngState before = kiln::get_rng_state();
    std::vector<float> big = kiln::randn({1 << 18}).to_vector<float>();
    for (size_t i : {size_t(0), size_t(77777), size_t((1 << 18) - 1)})
        BOOST_TEST(big[i] == float(kiln_random::draw_normal(before.seed, before.offset + i)));
    // Saving and restoring the state replays the same draws.
    kiln::set_rng_state(before);
    BOOST_TEST((kiln::randn({1 << 18}).to_vector<float>() == big));
}

BOOST_AUTO_TEST_CASE(rand_stays_below_high_after_rounding_to_float32) {
    // [1, 1 + 2^-30): almost every double draw rounds up to 1 + 2^-30 in float32; none may.
    double lo = 1.0, hi = 1.0 + std::ldexp(1.0, -30);
    kiln::Tensor r = kiln::dispatch(kiln::OpId::rand, {}, {.shape = {4096}, .lo = lo, .hi = hi, .dtype = kiln::float32});
    for (float x : r.to_vector<float>()) BOOST_TEST((double(x) >= lo && double(x) < hi));
}

BOOST_AUTO_TEST_CASE(tensor_from_vectors_and_initializer_lists) {
    Tensor a = kiln::tensor({1.0, 2.0, 3.0});
    BOOST_TEST((a.dtype() == kiln::float32));
    check_equal(a, Ref{{3}, {1, 2, 3}}, "tensor({1, 2, 3})");
    check_equal(kiln::tensor({{1.0, 2.0}, {3.0, 4.0}, {5.0, 6.0}}), Ref{{3, 2}, {1, 2, 3, 4, 5, 6}}, "nested list");
    Tensor i = kiln::tensor(std::vector<int64_t>{4, 5, 6, 7}, {2, 2});
    BOOST_TEST((i.dtype() == kiln::int64));
    check_equal(i, Ref{{2, 2}, {4, 5, 6, 7}}, "vector<int64_t> with shape");
    Tensor b = kiln::tensor(std::vector<bool>{true, false});
    BOOST_TEST((b.dtype() == kiln::boolean));
    Tensor d = kiln::tensor(std::vector<double>{0.1});
    BOOST_TEST((d.dtype() == kiln::float64));
    BOOST_TEST(d.dim() == 0);  // one value, no shape: a scalar
    BOOST_TEST(d.item<double>() == 0.1);
    Tensor f = kiln::tensor(std::vector<float>{1.5f, 2.5f}, {}, {.dtype = kiln::float64});
    BOOST_TEST((f.dtype() == kiln::float64));
    check_equal(f, Ref{{2}, {1.5, 2.5}}, "vector<float> to float64");
    BOOST_TEST(kiln::tensor({1.0}, {.requires_grad = true}).requires_grad());
}

BOOST_AUTO_TEST_CASE(item_and_to_vector_read_any_layout) {
    BOOST_TEST(kiln::scalar_tensor(2.5).item<float>() == 2.5f);
    BOOST_TEST(kiln::tensor({7.0}).item<int64_t>() == 7);  // one element, any shape
    BOOST_TEST(kiln::full({}, 3, {.dtype = kiln::int64}).item<double>() == 3.0);
    BOOST_TEST(bool(kiln::scalar_tensor(1, kiln::boolean)));
    BOOST_TEST(!bool(kiln::scalar_tensor(0)));
    Tensor t = kiln::arange(6.).reshape({2, 3}).t();
    BOOST_TEST(t.to_vector<float>() == (std::vector<float>{0, 3, 1, 4, 2, 5}), boost::test_tools::per_element());
    BOOST_TEST(t.to_vector<int64_t>() == (std::vector<int64_t>{0, 3, 1, 4, 2, 5}), boost::test_tools::per_element());
    BOOST_TEST(t[1].to_vector<double>() == (std::vector<double>{1, 4}), boost::test_tools::per_element());
    BOOST_TEST(t.select(1, 1)[0].item<float>() == 3.0f);
}

BOOST_AUTO_TEST_CASE(allclose_tolerances_and_special_values) {
    Tensor a = kiln::tensor({1.0, 100.0});
    BOOST_TEST(kiln::allclose(a, a));
    BOOST_TEST(kiln::allclose(a, kiln::tensor({1.0 + 1e-6, 100.0 + 1e-4})));
    BOOST_TEST(!kiln::allclose(a, kiln::tensor({1.0 + 1e-3, 100.0})));
    BOOST_TEST(kiln::allclose(a, kiln::tensor({1.1, 110.0}), 0.1));         // rtol
    BOOST_TEST(kiln::allclose(a, kiln::tensor({1.5, 100.5}), 0, 0.5));      // atol
    BOOST_TEST(!kiln::allclose(a, kiln::tensor({1.0, 100.0, 0.0})));        // shapes differ
    BOOST_TEST(kiln::allclose(a, a.to(kiln::float64)));                     // dtypes may differ
    // kiln's allclose treats NaN as equal to NaN (torch.allclose's equal_nan=True), never to a number.
    BOOST_TEST(kiln::allclose(kiln::tensor({NAN, 1.0}), kiln::tensor({NAN, 1.0})));
    BOOST_TEST(!kiln::allclose(kiln::tensor({NAN, 1.0}), kiln::tensor({0.0, 1.0})));
    BOOST_TEST(!kiln::allclose(kiln::tensor({0.0}), kiln::tensor({NAN})));
    BOOST_TEST(kiln::allclose(kiln::tensor({INFINITY}), kiln::tensor({INFINITY})));
    BOOST_TEST(!kiln::allclose(kiln::tensor({INFINITY}), kiln::tensor({-INFINITY})));
    BOOST_TEST(!kiln::allclose(kiln::tensor({INFINITY}), kiln::tensor({1e30})));
}

BOOST_AUTO_TEST_CASE(equal_is_same_sizes_and_same_values) {  // torch.equal (issue 30 item 6)
    Tensor a = kiln::tensor({1.0, 2.0});
    BOOST_TEST(kiln::equal(a, a.clone()));
    BOOST_TEST(!kiln::equal(a, kiln::tensor({1.0, 2.0 + 1e-6})));  // exact, unlike allclose
    BOOST_TEST(!kiln::equal(a, kiln::tensor({1.0, 2.0, 3.0})));
    BOOST_TEST(!kiln::equal(kiln::ones({2, 1}), kiln::ones({1, 2})));  // no broadcasting
    BOOST_TEST(kiln::equal(a, a.to(kiln::int64)));  // values compare across dtypes
    BOOST_TEST(!kiln::equal(kiln::tensor({NAN}), kiln::tensor({NAN})));  // NaN equals nothing
    BOOST_TEST(kiln::equal(kiln::tensor({-0.0}), kiln::tensor({0.0})));
    // Integers compare exactly, past 2^53 where a double would round them together.
    Tensor big = kiln::tensor(std::vector<int64_t>{(int64_t(1) << 53) + 1});
    BOOST_TEST(!kiln::equal(big, kiln::tensor(std::vector<int64_t>{int64_t(1) << 53})));
}

BOOST_AUTO_TEST_SUITE_END()
