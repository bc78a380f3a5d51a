// Tests for codegen/schedule: which nodes fuse into which kernel, and what lives in memory.
// No compiler runs here; tests/codegen/test_emit.cpp checks the results against eager.
#include <boost/test/unit_test.hpp>

#include <cmath>

#include "codegen/lower_graph.h"
#include "codegen/schedule.h"
#include "lgraph_builder.h"

using namespace kiln;
using namespace kiln::codegen;
using kiln::codegen::testing::GraphBuilder;

BOOST_AUTO_TEST_CASE(pointwise_chain_fuses_into_one_kernel_storing_only_the_output) {
    GraphBuilder b;
    int x = b.input({10, 10}, "x"), y = b.input({10, 10}, "y");
    int c = b.unary(OpId::cos, x);
    int s = b.unary(OpId::sin, y);
    int out = b.binary(OpId::add, c, s);
    b.output(out);
    Schedule sched = schedule(b.graph);
    BOOST_REQUIRE(sched.kernels.size() == 1u);
    BOOST_TEST(sched.kernels[0].stores == std::vector<int>{out});
    BOOST_TEST(sched.values.at(c).home == Home::inlined);
    BOOST_TEST(sched.print() == "kernel_0  pointwise [10, 10]        cos_2 sin_3 add_4  -> add_4\n");
}

BOOST_AUTO_TEST_CASE(softmax_is_one_row_kernel) {
    GraphBuilder b;
    int x = b.input({64, 1000}, "x");
    int m = b.reduce(OpId::amax, x, {-1}, true);
    int e = b.unary(OpId::exp, b.binary(OpId::sub, x, m));
    b.output(b.binary(OpId::div, e, b.reduce(OpId::sum, e, {-1}, true)));
    Schedule sched = schedule(b.graph);
    BOOST_REQUIRE(sched.kernels.size() == 1u);
    BOOST_TEST(sched.kernels[0].kind == KernelKind::row);
    BOOST_TEST(sched.kernels[0].outer_dims == 1);
    BOOST_TEST(sched.values.at(m).per_row);
    BOOST_TEST(sched.print().find("row [64] x [1000]") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(layernorm_in_primitive_ops_is_one_row_kernel) {
    GraphBuilder b;
    int x = b.input({8, 32}, "x");
    int centered = b.binary(OpId::sub, x, b.mean(x, {-1}, true));
    int var = b.mean(b.binary(OpId::mul, centered, centered), {-1}, true);
    int rstd = b.unary(OpId::rsqrt, b.scalar(OpId::add, var, 1e-5));
    b.output(b.binary(OpId::mul, centered, rstd));
    Schedule sched = schedule(b.graph);
    BOOST_TEST(sched.kernels.size() == 1u);
    BOOST_TEST(sched.kernels[0].nodes.size() == b.graph.nodes.size());
}

BOOST_AUTO_TEST_CASE(a_pointwise_producer_becomes_part_of_the_reduction_kernel) {
    GraphBuilder b;
    int x = b.input({4, 6, 5}, "x");
    int squared = b.binary(OpId::mul, x, x);
    b.output(b.reduce(OpId::sum, squared, {-2, -1}, false));  // reduce the two trailing dims
    Schedule sched = schedule(b.graph);
    BOOST_REQUIRE(sched.kernels.size() == 1u);
    BOOST_TEST(sched.kernels[0].outer_dims == 1);
    BOOST_TEST(sched.values.at(squared).home == Home::inlined);
}

BOOST_AUTO_TEST_CASE(broadcast_inputs_are_loads_not_copies) {
    GraphBuilder b;
    int x = b.input({4, 1, 8}, "x"), y = b.input({5, 8}, "y");
    b.output(b.binary(OpId::add, x, y));
    Schedule sched = schedule(b.graph);
    BOOST_REQUIRE(sched.kernels.size() == 1u);
    BOOST_TEST(sched.kernels[0].domain == Shape({4, 5, 8}));
    BOOST_TEST(sched.kernels[0].loads == std::vector<int>({x, y}));
}

BOOST_AUTO_TEST_CASE(views_are_index_math_over_their_base) {
    GraphBuilder b;
    int x = b.input({6, 10}, "x");
    int t = b.permute(x, {1, 0});
    int sliced = b.slice(t, 0, 2, 10, 2);  // rows 2, 4, 6, 8 of x^T
    b.output(b.unary(OpId::neg, sliced));
    Schedule sched = schedule(b.graph);
    BOOST_REQUIRE(sched.kernels.size() == 1u);
    const ValueInfo& view = sched.values.at(sliced);
    BOOST_TEST(view.home == Home::view);
    BOOST_TEST(view.access.buffer == x);
    BOOST_TEST(to_cpp(view.access.strides[0]) == "2");
    BOOST_TEST(to_cpp(view.access.strides[1]) == "10");
    BOOST_TEST(to_cpp(view.access.offset) == "2");
}

BOOST_AUTO_TEST_CASE(reshape_of_a_strided_view_falls_back_to_eager) {
    GraphBuilder b;
    int x = b.input({6, 10}, "x");
    b.output(b.unary(OpId::neg, b.reshape(b.permute(x, {1, 0}), {60})));
    Schedule sched = schedule(b.graph);
    BOOST_REQUIRE(sched.kernels.size() == 2u);
    BOOST_TEST(sched.kernels[0].kind == KernelKind::fallback);
}

// A reshape that strides can express stays index math (PyTorch's view rule): one head of a
// packed q/k/v projection (a slice, then dropping its size-1 dim), a slice split in two, and
// two dims merged whose strides chain.
BOOST_AUTO_TEST_CASE(reshape_of_a_strided_view_is_index_math_when_strides_express_it) {
    GraphBuilder b;
    int x = b.input({2, 8, 96}, "x");
    int heads = b.reshape(x, {2, 8, 3, 2, 16});
    int k = b.reshape(b.slice(heads, 2, 1, 2), {2, 8, 2, 16});
    int y = b.input({4, 12}, "y");
    int split = b.reshape(b.slice(y, 1, 0, 6), {4, 2, 3});
    int z = b.input({4, 6, 5}, "z");
    int merged = b.reshape(b.slice(z, 2, 0, 4), {24, 4});
    b.output(b.unary(OpId::neg, k));
    b.output(b.unary(OpId::neg, split));
    b.output(b.unary(OpId::neg, merged));
    Schedule sched = schedule(b.graph);
    for (const Kernel& kernel : sched.kernels) BOOST_TEST(kernel.kind != KernelKind::fallback);
    auto strides = [&](int v) {
        std::string out;
        for (const SizeExpr& e : sched.values.at(v).access.strides) out += (out.empty() ? "" : ",") + to_cpp(e);
        return out;
    };
    BOOST_TEST(sched.values.at(k).home == Home::view);
    BOOST_TEST(strides(k) == "768,96,16,1");
    BOOST_TEST(to_cpp(sched.values.at(k).access.offset) == "32");
    BOOST_TEST(strides(split) == "12,3,1");
    BOOST_TEST(strides(merged) == "5,1");
}

// Dims whose strides do not chain cannot merge: the reshape still runs eagerly.
BOOST_AUTO_TEST_CASE(a_reshape_merging_dims_that_do_not_chain_falls_back) {
    GraphBuilder b;
    int x = b.input({2, 8, 2, 16}, "x");
    b.output(b.unary(OpId::neg, b.reshape(b.permute(x, {0, 2, 1, 3}), {2, 2, 128})));
    Schedule sched = schedule(b.graph);
    BOOST_REQUIRE(sched.kernels.size() == 2u);
    BOOST_TEST(sched.kernels[0].kind == KernelKind::fallback);
}

// The gradient of three slices that tile a dim (chunk's, or select's of each index) is one
// cat of their gradients, not three zeros-and-scatter kernels and two adds.
BOOST_AUTO_TEST_CASE(slice_backwards_that_tile_a_dim_become_one_cat) {
    GraphBuilder b;
    int g0 = b.input({4, 2, 5}, "g0"), g1 = b.input({4, 1, 5}, "g1"), g2 = b.input({4, 3, 5}, "g2");
    auto scatter = [&](int g, int64_t start, int64_t end) {
        return b.node(OpId::slice_backward, {g}, {.shape = {4, 6, 5}, .dim = 1, .start = start, .end = end, .step = 1},
                      {4, 6, 5});
    };
    int sum = b.binary(OpId::add, b.binary(OpId::add, scatter(g1, 2, 3), scatter(g2, 3, 6)), scatter(g0, 0, 2));
    b.output(b.unary(OpId::neg, sum));
    LGraph g = b.graph;
    BOOST_TEST(slice_backwards_to_cat(g) == 1);
    BOOST_REQUIRE_EQUAL(g.nodes.size(), 2u);
    BOOST_TEST((g.nodes[0].op == OpId::cat));
    BOOST_TEST(g.nodes[0].attrs.dim == 1);
    BOOST_TEST((g.nodes[0].inputs == std::vector<int>{g0, g1, g2}));  // in the dim's order
    BOOST_TEST(g.nodes[0].out.id == sum);
}

// Slices that leave a gap, overlap, step, or whose pieces are read elsewhere stay as they are.
BOOST_AUTO_TEST_CASE(slice_backwards_that_do_not_tile_a_dim_stay) {
    auto build = [](int64_t second_start, int64_t step, bool read_elsewhere) {
        GraphBuilder b;
        int g0 = b.input({3, 2}, "g0"), g1 = b.input({3, 2}, "g1");
        int a = b.node(OpId::slice_backward, {g0}, {.shape = {3, 4}, .dim = 1, .start = 0, .end = 2, .step = 1}, {3, 4});
        int c = b.node(OpId::slice_backward, {g1},
                       {.shape = {3, 4}, .dim = 1, .start = second_start, .end = second_start + 2 * step, .step = step}, {3, 4});
        b.output(b.binary(OpId::add, a, c));
        if (read_elsewhere) b.output(a);
        return b.graph;
    };
    LGraph tiles = build(2, 1, false), overlap = build(1, 1, false), stepped = build(1, 2, false),
           shared = build(2, 1, true);
    BOOST_TEST(slice_backwards_to_cat(tiles) == 1);
    BOOST_TEST(slice_backwards_to_cat(overlap) == 0);
    BOOST_TEST(slice_backwards_to_cat(stepped) == 0);
    BOOST_TEST(slice_backwards_to_cat(shared) == 0);
}

// attention's heads go back to [B, L, H, d] by a transpose that the kernel's store takes over:
// the permute is gone, the attention writes heads-last, and the reshape after it reads it.
BOOST_AUTO_TEST_CASE(attention_read_only_by_the_heads_permute_writes_heads_last) {
    auto build = [](bool read_elsewhere, Shape dims) {
        GraphBuilder b;
        int q = b.input({2, 4, 6, 8}, "q"), k = b.input({2, 4, 5, 8}, "k"), v = b.input({2, 4, 5, 3}, "v");
        int a = b.node(OpId::attention, {q, k, v}, {.dim = 1, .scalar = 0.25}, {2, 4, 6, 3});
        int t = b.permute(a, dims);
        b.output(b.unary(OpId::neg, b.reshape(t, {2, 6, 12})));
        if (read_elsewhere) b.output(a);
        return std::pair{b.graph, t};
    };
    auto [g, t] = build(false, {0, 2, 1, 3});
    BOOST_TEST(attention_heads_last(g) == 1);
    BOOST_REQUIRE_EQUAL(g.nodes.size(), 3u);  // attention, reshape, neg
    BOOST_TEST((g.nodes[0].op == OpId::attention));
    BOOST_TEST(g.nodes[0].attrs.keepdim);
    BOOST_TEST(g.nodes[0].attrs.dim == 1);
    BOOST_TEST(g.nodes[0].out.id == t);
    BOOST_TEST((g.nodes[0].out.shape == Shape{2, 6, 4, 3}));
    BOOST_TEST((g.nodes[1].op == OpId::reshape && g.nodes[1].inputs[0] == t));
    auto shared = build(true, {0, 2, 1, 3}).first, other = build(false, {1, 0, 2, 3}).first;
    BOOST_TEST(attention_heads_last(shared) == 0);  // the attention is also returned as it is
    BOOST_TEST(attention_heads_last(other) == 0);   // not the heads' permute
}

BOOST_AUTO_TEST_CASE(matmul_is_blas_then_its_epilogue_kernel) {
    GraphBuilder b;
    int x = b.input({16, 8}, "x"), w = b.input({8, 4}, "w"), bias = b.input({4}, "bias");
    int mm = b.matmul(x, w);
    b.output(b.unary(OpId::relu, b.binary(OpId::add, mm, bias)));
    Schedule sched = schedule(b.graph);
    BOOST_REQUIRE(sched.kernels.size() == 2u);
    BOOST_TEST(sched.kernels[0].kind == KernelKind::blas);
    BOOST_TEST(sched.kernels[1].kind == KernelKind::pointwise);
    BOOST_TEST(sched.kernels[1].loads == std::vector<int>({mm, bias}));
}

BOOST_AUTO_TEST_CASE(a_value_used_by_two_kernels_is_stored_once) {
    GraphBuilder b;
    int x = b.input({16}, "x"), y = b.input({4, 16}, "y");
    int e = b.unary(OpId::exp, x);        // kernel over [16]
    int z = b.binary(OpId::mul, y, e);    // kernel over [4, 16] reads e from memory
    b.output(z);
    b.output(b.unary(OpId::neg, e));
    Schedule sched = schedule(b.graph);
    BOOST_TEST(sched.kernels.size() == 2u);
    BOOST_TEST(sched.values.at(e).home == Home::stored);
}

BOOST_AUTO_TEST_CASE(comparisons_and_where_fuse_into_one_kernel) {
    GraphBuilder b;
    int x = b.input({4}, "x"), y = b.input({4}, "y");
    int less = b.node(OpId::lt, {x, y}, {}, {4}, DType::boolean);
    b.output(b.node(OpId::where, {less, x, y}, {}, {4}));
    Schedule sched = schedule(b.graph);
    BOOST_REQUIRE(sched.kernels.size() == 1u);
    BOOST_TEST(sched.kernels[0].kind == KernelKind::pointwise);
    BOOST_TEST(sched.values.at(less).home == Home::inlined);
}

BOOST_AUTO_TEST_CASE(a_small_kernel_read_by_one_pointwise_kernel_is_folded_into_it) {
    // Batch norm's per-channel scale: rsqrt(var + eps) over [C, 1, 1] is recomputed inside
    // the pass over x, unless something else needs it in memory (here: it is returned).
    for (bool returned : {false, true}) {
        GraphBuilder b;
        int x = b.input({2, 4, 5, 5}, "x"), var = b.input({4, 1, 1}, "var");
        int scale = b.unary(OpId::rsqrt, b.node(OpId::add, {var}, {.scalar = 1e-5, .scalar_pos = ScalarPos::right}, {4, 1, 1}));
        b.output(b.unary(OpId::relu, b.binary(OpId::mul, x, scale)));
        if (returned) b.output(scale);
        Schedule sched = schedule(b.graph);
        BOOST_TEST(sched.kernels.size() == (returned ? 2u : 1u));
        BOOST_TEST(sched.values.at(scale).home == (returned ? Home::stored : Home::inlined));
        BOOST_TEST(sched.values.at(scale).kernel == 0);
    }
}

BOOST_AUTO_TEST_CASE(a_full_read_only_by_generated_kernels_is_a_constant) {
    GraphBuilder b;
    int x = b.input({4}, "x");
    int zero = b.node(OpId::full, {}, {.shape = {4}, .scalar = 0.0}, {4});
    int inf = b.node(OpId::full, {}, {.shape = {}, .scalar = -INFINITY}, {});
    int pos = b.node(OpId::gt, {x, zero}, {}, {4}, DType::boolean);
    b.output(b.node(OpId::where, {pos, x, inf}, {}, {4}));
    b.output(inf);  // also returned: this one must be in memory after all
    Schedule sched = schedule(b.graph);
    BOOST_TEST(sched.values.at(zero).home == Home::constant);
    BOOST_TEST(sched.values.at(inf).home == Home::stored);
    BOOST_REQUIRE(sched.kernels.size() == 2u);  // the returned full (fallback), the where
    BOOST_TEST(sched.kernels[0].kind == KernelKind::fallback);
    BOOST_TEST(sched.kernels[1].loads == std::vector<int>({x, inf}));
}

BOOST_AUTO_TEST_CASE(unsupported_ops_and_dtypes_are_fallback_kernels) {
    GraphBuilder b;
    int x = b.input({4, 4}, "x", DType::float64);
    int ints = b.node(OpId::cast, {x}, {.dtype = DType::int64}, {4, 4}, DType::int64);
    b.output(b.node(OpId::sum, {ints}, {}, {}, DType::int64));  // an int64 sum is generated
    b.output(b.node(OpId::matmul, {x, x}, {}, {4, 4}, DType::float64));
    Schedule sched = schedule(b.graph);
    BOOST_REQUIRE(sched.kernels.size() == 2u);
    BOOST_TEST(sched.kernels[0].kind == KernelKind::row);
    BOOST_TEST(sched.kernels[1].kind == KernelKind::fallback);
    BOOST_TEST(sched.kernels[1].why ==
               "a matmul of a float64 value; the blas kernel is float32 only");
}

BOOST_AUTO_TEST_CASE(symbols_are_bound_from_input_dims) {
    using kiln::codegen::testing::s0;
    GraphBuilder b;
    int x = b.input({3, s0}, "x");
    b.output(b.unary(OpId::exp, x));
    Schedule sched = schedule(b.graph);
    BOOST_TEST(sched.num_symbols == 1);
    BOOST_TEST((sched.symbol_binding.at(0) == std::pair<int, int>{0, 1}));
    BOOST_TEST(to_cpp(contiguous_stride_exprs({s0, 4, s0})[0]) == "s0 * 4");

    GraphBuilder unbound;
    int y = unbound.input({4}, "y");
    unbound.output(unbound.expand(y, {s0, 4}));
    unbound.output(unbound.unary(OpId::exp, unbound.graph.outputs[0]));
    BOOST_CHECK_THROW(schedule(unbound.graph), kiln::Error);
}

// Cross-entropy's backward: a row sum seen through a reshape, then broadcast back over its
// row. The view reads the sum from memory, so its consumers must run in a later kernel,
// not in the pass that is still computing the sum.
BOOST_AUTO_TEST_CASE(a_view_of_a_kernels_result_is_read_in_a_later_kernel) {
    GraphBuilder b;
    int x = b.input({16, 10}, "x");
    int s = b.reduce(OpId::sum, b.unary(OpId::neg, x), {-1}, true);
    int v = b.expand(b.reshape(s, {16, 1}), {16, 10});
    b.output(b.binary(OpId::add, x, v));
    Schedule sched = schedule(b.graph);
    BOOST_REQUIRE(sched.kernels.size() == 2u);
    BOOST_TEST(sched.values.at(s).kernel == 0);
    BOOST_TEST(sched.kernels[1].loads == (std::vector<int>{x, s}));
}
