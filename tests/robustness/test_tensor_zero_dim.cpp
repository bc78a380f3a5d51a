// 0-d tensors meet dim arguments. As in PyTorch: reductions, softmax, squeeze, transpose take
// dim 0 / -1 and give a 0-d result; size, narrow, select, slice and cat raise. These once
// read shape()[0] of an empty shape (a segfault).
#include "hostile.h"

using namespace kiln;
using hostile::expect_compiled_error;
using hostile::expect_compiled_matches;
using hostile::expect_error;

BOOST_AUTO_TEST_SUITE(zero_dim)

BOOST_AUTO_TEST_CASE(size_of_a_dim_raises) {
    Tensor x = scalar_tensor(1.5);
    expect_error([&] { x.size(0); }, {"size", "no dimensions"});
    expect_error([&] { x.size(-1); }, {"size", "no dimensions"});
    expect_error([&] { x.size(1); }, {"size", "no dimensions"});
}

BOOST_AUTO_TEST_CASE(narrow_select_slice_index_raise) {
    Tensor x = scalar_tensor(1.5);
    expect_error([&] { x.narrow(0, 0, 1); }, {"narrow", "0-dim"});
    expect_error([&] { x.select(0, 0); }, {"select", "0-dim"});
    expect_error([&] { x.slice(0, 0, 1); }, {"slice", "0-dim"});
    expect_error([&] { x[0]; }, {"select", "0-dim"});
    expect_error([&] { dispatch(OpId::slice, {x}, {.dim = 0, .start = 0, .end = 1}); }, {"slice", "0-dim"});
}

BOOST_AUTO_TEST_CASE(cat_raises) {
    Tensor x = scalar_tensor(1.5);
    expect_error([&] { cat({x, x}, 0); }, {"cat", "zero-dimensional"});
    expect_error([&] { cat({tensor({1.0}), x}, 0); }, {"cat", "same rank"});
}

BOOST_AUTO_TEST_CASE(reductions_over_dim_0_keep_the_value) {
    Tensor x = scalar_tensor(1.5);
    for (Shape dims : {Shape{0}, Shape{-1}, Shape{}}) {
        for (bool keepdim : {false, true}) {
            BOOST_TEST_CONTEXT("dims of size " << dims.size() << (dims.empty() ? "" : dims[0] == 0 ? " (0)" : " (-1)") << ", keepdim " << keepdim) {
                for (Tensor r : {sum(x, dims, keepdim), mean(x, dims, keepdim), amax(x, dims, keepdim), amin(x, dims, keepdim)}) {
                    BOOST_TEST(r.dim() == 0);
                    BOOST_TEST(r.item<double>() == 1.5);
                }
            }
        }
    }
    expect_error([&] { sum(x, {1}); }, {"sum", "out of range", "[-1, 0]", "1"});
    expect_error([&] { amax(x, {-2}); }, {"amax", "out of range", "-2"});
    expect_error([&] { mean(x, {2}); }, {"out of range"});
}

BOOST_AUTO_TEST_CASE(softmax_of_a_scalar_is_one) {
    Tensor x = scalar_tensor(1.5);
    BOOST_TEST(softmax(x, 0).dim() == 0);
    BOOST_TEST(softmax(x, 0).item<double>() == 1.0);
    BOOST_TEST(softmax(x, -1).item<double>() == 1.0);
    BOOST_TEST(log_softmax(x, 0).item<double>() == 0.0);
    expect_error([&] { softmax(x, 1); }, {"out of range"});
}

BOOST_AUTO_TEST_CASE(shape_ops_accept_dim_0) {
    Tensor x = scalar_tensor(1.5);
    BOOST_TEST(x.transpose(0, -1).dim() == 0);
    BOOST_TEST(x.squeeze(0).dim() == 0);
    BOOST_TEST(x.squeeze().dim() == 0);
    BOOST_TEST(x.unsqueeze(0).shape() == Shape{1});
    BOOST_TEST(x.unsqueeze(-1).shape() == Shape{1});
    BOOST_TEST(x.permute({}).dim() == 0);
    BOOST_TEST(x.expand({3}).to_vector<float>() == std::vector<float>({1.5f, 1.5f, 1.5f}));
    BOOST_TEST(x.t().dim() == 0);
    expect_error([&] { x.unsqueeze(2); }, {"unsqueeze", "out of range"});
    expect_error([&] { x.transpose(0, 1); }, {"transpose", "out of range"});
    expect_error([&] { x.permute({0}); }, {"permute", "rank 0"});
}

BOOST_AUTO_TEST_CASE(gradients_through_dim_0) {
    Tensor x = scalar_tensor(1.5).requires_grad_();
    (sum(x, {0}) * 3.0 + mean(x, {-1}) + softmax(x, 0)).backward();
    BOOST_TEST(x.grad().dim() == 0);
    BOOST_TEST(x.grad().item<double>() == 4.0);
}

BOOST_AUTO_TEST_CASE(compiled_reductions_and_softmax) {
    expect_compiled_matches([](Tensor x) { return sum(x, {0}) + mean(x, {-1}) * 2.0 + amax(x, {0}) - amin(x, {-1}, true); },
                            scalar_tensor(1.5));
    expect_compiled_matches([](Tensor x) { return softmax(x, 0) + log_softmax(x, -1); }, scalar_tensor(1.5));
    expect_compiled_matches([](Tensor x) { return (x.unsqueeze(0).expand({4}) * x.transpose(0, -1)).sum({0}); },
                            scalar_tensor(1.5));
    expect_compiled_matches([](Tensor x) { return x.squeeze(0).exp().sum({-1}, true); }, scalar_tensor(0.5));
}

BOOST_AUTO_TEST_CASE(compiled_index_ops_raise) {
    Tensor x = scalar_tensor(1.5);
    expect_compiled_error([](Tensor t) { return t * float(t.size(0)); }, x, {"size", "no dimensions"});
    expect_compiled_error([](Tensor t) { return t.narrow(0, 0, 1) + 1.0; }, x, {"narrow", "0-dim"});
    expect_compiled_error([](Tensor t) { return t.select(0, 0) + 1.0; }, x, {"select", "0-dim"});
    expect_compiled_error([](Tensor t) { return cat({t, t}); }, x, {"cat", "zero-dimensional"});
    expect_compiled_error([](Tensor t) { return sum(t, {3}); }, x, {"sum", "out of range"});
}

BOOST_AUTO_TEST_SUITE_END()
