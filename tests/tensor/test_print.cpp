// Printing matches PyTorch's default print options character for character, except that
// kiln writes dtype=float64 where PyTorch writes dtype=torch.float64 (kiln has no torch).
#include <boost/test/unit_test.hpp>

#include <cmath>

#include "kiln.h"

using kiln::Tensor;
using kiln::to_string;

BOOST_AUTO_TEST_SUITE(print)

BOOST_AUTO_TEST_CASE(floats_in_integer_and_fixed_modes) {
    BOOST_TEST(to_string(kiln::tensor({1.0, 2.0, 3.0})) == "tensor([1., 2., 3.])");
    BOOST_TEST(to_string(kiln::tensor({0.5, 1.25})) == "tensor([0.5000, 1.2500])");
    BOOST_TEST(to_string(kiln::tensor({-1.0, 10.0, 200.0})) == "tensor([ -1.,  10., 200.])");
    BOOST_TEST(to_string(kiln::tensor({0.0, 0.0})) == "tensor([0., 0.])");
    BOOST_TEST(to_string(kiln::tensor({-0.5, 123.25})) == "tensor([ -0.5000, 123.2500])");
}

BOOST_AUTO_TEST_CASE(two_and_three_dims_align_and_indent) {
    BOOST_TEST(to_string(kiln::tensor({{1.0, 2.5}, {3.0, -4.0}})) ==
               "tensor([[ 1.0000,  2.5000],\n"
               "        [ 3.0000, -4.0000]])");
    BOOST_TEST(to_string(kiln::arange(8.).reshape({2, 2, 2})) ==
               "tensor([[[0., 1.],\n"
               "         [2., 3.]],\n"
               "\n"
               "        [[4., 5.],\n"
               "         [6., 7.]]])");
    // A transposed (strided) tensor prints its logical order.
    BOOST_TEST(to_string(kiln::arange(6., {.dtype = kiln::int64}).reshape({2, 3}).t()) ==
               "tensor([[0, 3],\n"
               "        [1, 4],\n"
               "        [2, 5]])");
}

BOOST_AUTO_TEST_CASE(integers_and_bools) {
    BOOST_TEST(to_string(kiln::tensor(std::vector<int64_t>{1, 2})) == "tensor([1, 2])");
    BOOST_TEST(to_string(kiln::tensor(std::vector<int64_t>{10, -2, 300})) == "tensor([ 10,  -2, 300])");
    BOOST_TEST(to_string(kiln::tensor(std::vector<int64_t>{int64_t(1) << 60, 1})) == "tensor([1152921504606846976,                   1])");
    BOOST_TEST(to_string(kiln::tensor(std::vector<int64_t>{int64_t(1) << 60})) == "tensor(1152921504606846976)");  // one value, no shape: 0-d
    // PyTorch pads True to the width of False.
    BOOST_TEST(to_string(kiln::tensor(std::vector<bool>{true, false})) == "tensor([ True, False])");
    BOOST_TEST(to_string(kiln::tensor(std::vector<bool>{true, true})) == "tensor([True, True])");
    BOOST_TEST(to_string(kiln::tensor({1.0, 2.0}) > 1.5) == "tensor([False,  True])");
}

BOOST_AUTO_TEST_CASE(scalars) {
    BOOST_TEST(to_string(kiln::scalar_tensor(2.5)) == "tensor(2.5000)");
    BOOST_TEST(to_string(kiln::scalar_tensor(2.0)) == "tensor(2.)");
    BOOST_TEST(to_string(kiln::scalar_tensor(3, kiln::int64)) == "tensor(3)");
    BOOST_TEST(to_string(kiln::scalar_tensor(1, kiln::boolean)) == "tensor(True)");
    BOOST_TEST(to_string(kiln::scalar_tensor(1e-6)) == "tensor(1.0000e-06)");
}

BOOST_AUTO_TEST_CASE(float64_shows_its_dtype) {
    // PyTorch: dtype=torch.float64. kiln: dtype=float64 (see tensor/print.cpp).
    BOOST_TEST(to_string(kiln::tensor({1.5, 2.0}, {.dtype = kiln::float64})) == "tensor([1.5000, 2.0000], dtype=float64)");
    BOOST_TEST(to_string(kiln::scalar_tensor(1, kiln::float64)) == "tensor(1., dtype=float64)");
}

BOOST_AUTO_TEST_CASE(autograd_suffixes) {
    Tensor x = kiln::tensor({1.0, -2.0}, {.requires_grad = true});
    BOOST_TEST(to_string(x) == "tensor([ 1., -2.], requires_grad=True)");
    BOOST_TEST(to_string(x * 2) == "tensor([ 2., -4.], grad_fn=<MulBackward0>)");
    BOOST_TEST(to_string(x.relu()) == "tensor([1., 0.], grad_fn=<ReluBackward0>)");
    BOOST_TEST(to_string(x.sum()) == "tensor(-1., grad_fn=<SumBackward0>)");
    BOOST_TEST(to_string(kiln::matmul(x, x)) == "tensor(5., grad_fn=<MatmulBackward0>)");
    Tensor d = kiln::tensor({1.0}, {.dtype = kiln::float64, .requires_grad = true});
    BOOST_TEST(to_string(d) == "tensor([1.], dtype=float64, requires_grad=True)");
    BOOST_TEST(to_string(x.detach()) == "tensor([ 1., -2.])");
}

BOOST_AUTO_TEST_CASE(node_names_are_camel_case_backward0) {
    auto name = [](kiln::OpId op) {
        kiln::autograd::OpNode node;
        node.op = op;
        return node.name();
    };
    BOOST_TEST(name(kiln::OpId::relu) == "ReluBackward0");
    BOOST_TEST(name(kiln::OpId::matmul) == "MatmulBackward0");
    BOOST_TEST(name(kiln::OpId::add) == "AddBackward0");
    BOOST_TEST(name(kiln::OpId::slice_backward) == "SliceBackwardBackward0");
}

BOOST_AUTO_TEST_CASE(scientific_notation_for_wide_ranges) {
    BOOST_TEST(to_string(kiln::tensor({1e-5, 1e5})) == "tensor([1.0000e-05, 1.0000e+05])");
    BOOST_TEST(to_string(kiln::tensor({1.0, 1e9})) == "tensor([1.0000e+00, 1.0000e+09])");
    BOOST_TEST(to_string(kiln::tensor({0.001, 2.0})) == "tensor([1.0000e-03, 2.0000e+00])");
    BOOST_TEST(to_string(kiln::tensor({0.0, -1e-5, 1.0})) == "tensor([ 0.0000e+00, -1.0000e-05,  1.0000e+00])");
    BOOST_TEST(to_string(kiln::tensor({1.0, 1000.0})) == "tensor([   1., 1000.])");  // ratio 1000 is not > 1000
}

BOOST_AUTO_TEST_CASE(nan_and_inf) {
    BOOST_TEST(to_string(kiln::tensor({1.0, NAN, INFINITY, -INFINITY})) == "tensor([1., nan, inf, -inf])");
    BOOST_TEST(to_string(kiln::tensor({1.5, NAN})) == "tensor([1.5000,    nan])");
    BOOST_TEST(to_string(kiln::tensor({NAN, NAN})) == "tensor([nan, nan])");
}

BOOST_AUTO_TEST_CASE(long_rows_wrap_at_80_columns) {
    BOOST_TEST(to_string(kiln::arange(20.) / 3) ==
               "tensor([0.0000, 0.3333, 0.6667, 1.0000, 1.3333, 1.6667, 2.0000, 2.3333, 2.6667,\n"
               "        3.0000, 3.3333, 3.6667, 4.0000, 4.3333, 4.6667, 5.0000, 5.3333, 5.6667,\n"
               "        6.0000, 6.3333])");
    // A suffix that would pass column 80 goes on its own line.
    BOOST_TEST(to_string(kiln::arange(9., {.dtype = kiln::float64}) / 3) ==
               "tensor([0.0000, 0.3333, 0.6667, 1.0000, 1.3333, 1.6667, 2.0000, 2.3333, 2.6667],\n"
               "       dtype=float64)");
}

BOOST_AUTO_TEST_CASE(more_than_1000_elements_are_summarized) {
    BOOST_TEST(to_string(kiln::arange(2000., {.dtype = kiln::int64})) == "tensor([   0,    1,    2,  ..., 1997, 1998, 1999])");
    // The format is chosen from the shown elements only: here their range makes it scientific.
    BOOST_TEST(to_string(kiln::arange(2000.)) ==
               "tensor([0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 1.9970e+03, 1.9980e+03,\n"
               "        1.9990e+03])");
    BOOST_TEST(to_string(kiln::ones({40, 30})) ==
               "tensor([[1., 1., 1.,  ..., 1., 1., 1.],\n"
               "        [1., 1., 1.,  ..., 1., 1., 1.],\n"
               "        [1., 1., 1.,  ..., 1., 1., 1.],\n"
               "        ...,\n"
               "        [1., 1., 1.,  ..., 1., 1., 1.],\n"
               "        [1., 1., 1.,  ..., 1., 1., 1.],\n"
               "        [1., 1., 1.,  ..., 1., 1., 1.]])");
    BOOST_TEST(to_string(kiln::zeros({1000})).find("...") == std::string::npos);  // 1000 is not more than 1000
}

BOOST_AUTO_TEST_CASE(empty_tensors_show_size_and_dtype) {
    BOOST_TEST(to_string(kiln::zeros({0})) == "tensor([])");
    BOOST_TEST(to_string(kiln::zeros({0, 3})) == "tensor([], size=(0, 3))");
    BOOST_TEST(to_string(kiln::zeros({0}, {.dtype = kiln::int64})) == "tensor([], dtype=int64)");
    BOOST_TEST(to_string(Tensor()) == "tensor(undefined)");
}

BOOST_AUTO_TEST_SUITE_END()
