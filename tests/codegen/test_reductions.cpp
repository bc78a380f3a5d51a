// Generated reductions over any set of dims (a row kernel whose loop takes the kept dims
// first and the reduced ones last) and of every dtype (sum of int64 or bool: int64; amax and
// amin keep the dtype), checked against eager on contiguous, permuted, sliced and expanded
// inputs, odd and symbolic sizes, with fused producers and consumers.
#include <boost/test/unit_test.hpp>
#include <iostream>
#include <optional>
#include <thread>

#include "codegen/cpu_backend.h"
#include "codegen/inductor.h"
#include "codegen/schedule.h"
#include "kiln.h"
#include "lgraph_builder.h"
#include "random_dtype_programs.h"
#include "reduction_programs.h"
#include "tensor/parallel.h"

using namespace kiln;
using namespace kiln::codegen;
using kiln::codegen::testing::GraphBuilder;
using kiln_test::dtype_error;
using namespace kiln_test;

namespace {

int count_kind(const Schedule& s, KernelKind kind) {
    int n = 0;
    for (const Kernel& k : s.kernels) n += k.kind == kind;
    return n;
}

// Builds each graph with one compiler call (two at once), runs it, compares with eager.
void check_graphs(std::vector<GraphBuilder>& builders, std::vector<std::vector<Tensor>>& inputs,
                  double tol) {
    std::vector<std::optional<CompiledCpuGraph>> compiled(builders.size());
    std::vector<std::thread> threads;
    for (size_t g = 0; g < builders.size(); ++g)
        threads.emplace_back([&, g] { compiled[g].emplace(compile_cpu(builders[g].graph)); });
    for (std::thread& t : threads) t.join();
    int failures = 0, outputs = 0;
    for (size_t g = 0; g < builders.size(); ++g) {
        const Schedule& s = compiled[g]->schedule();
        BOOST_TEST(count_kind(s, KernelKind::fallback) == 0, s.print());
        std::vector<Tensor> got = compiled[g]->run(inputs[g]),
                            want = run_eager(builders[g].graph, inputs[g]);
        BOOST_REQUIRE(got.size() == want.size());
        for (size_t i = 0; i < got.size(); ++i, ++outputs) {
            double error = dtype_error(got[i], want[i]);
            if (error > tol && ++failures <= 5)
                BOOST_ERROR("graph " << g << " output " << i << " (value "
                                     << builders[g].graph.outputs[i] << "): error " << error << "\n"
                                     << got[i] << "\nwant\n"
                                     << want[i]);
        }
    }
    std::cout << outputs << " reduction outputs checked against eager\n";
    BOOST_TEST(failures == 0);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(generated_reductions)

// Every set of dims of 1-D to 4-D values, keepdim both ways, all four dtypes; the op, the
// input's layout and whether a producer and consumer fuse rotate through the cases.
BOOST_AUTO_TEST_CASE(every_set_of_dims_of_every_dtype_matches_eager) {
    manual_seed(11);
    std::vector<GraphBuilder> builders;
    std::vector<std::vector<Tensor>> inputs;
    int n = add_every_reduction(builders, inputs);
    std::cout << n << " reductions ("
              << builders[0].graph.nodes.size() + builders[1].graph.nodes.size() << " nodes)\n";
    check_graphs(builders, inputs, 1e-5);
}

// Each layout with each op, for the reductions batch norm and a bias gradient make.
BOOST_AUTO_TEST_CASE(strided_inputs_of_batch_norm_and_column_reductions_match_eager) {
    manual_seed(12);
    std::vector<GraphBuilder> builders(1);
    std::vector<std::vector<Tensor>> inputs(1);
    for (Layout layout : {Layout::contiguous, Layout::permuted, Layout::sliced, Layout::expanded})
        for (OpId op : reduction_ops()) {
            add_program(builders[0], inputs[0], {4, 3, 5, 17}, {0, 2, 3}, true, DType::float32, op,
                        layout, true);
            add_program(builders[0], inputs[0], {33, 20}, {0}, false, DType::float32, op, layout,
                        true);
            add_program(builders[0], inputs[0], {5, 4, 19}, {0, 2}, false, DType::float64, op,
                        layout, true);
        }
    std::cout << "layouts: " << layout_name(Layout::contiguous) << " ... "
              << layout_name(Layout::expanded) << "\n";
    check_graphs(builders, inputs,
                 1e-4);  // float32 sums of 340 values, in another order than eager's
}

BOOST_AUTO_TEST_CASE(symbolic_sizes_reduce_over_any_dims) {
    using kiln::codegen::testing::s0;
    using kiln::codegen::testing::s1;
    GraphBuilder b;
    int x = b.input({s0, 3, s1}, "x");
    int ints = b.input({s0, s1}, "i", DType::int64);
    int doubled = b.scalar(OpId::mul, x, 2.0);
    int cols = b.reduce(OpId::sum, doubled, {0, 2}, false);  // (x * 2).sum((0, 2)) + 1
    b.output(b.scalar(OpId::add, cols, 1.0));
    int m = b.reduce(OpId::amax, x, {0}, true);
    b.output(b.binary(OpId::sub, x, m));
    b.output(b.reduce(OpId::sum, ints, {0}, false));
    b.output(b.reduce(OpId::amin, ints, {0}, true));
    CompiledCpuGraph f = compile_cpu(b.graph);
    BOOST_TEST(count_kind(f.schedule(), KernelKind::fallback) == 0, f.schedule().print());
    for (int64_t n : {1, 7, 300}) {
        std::vector<Tensor> in = {randn({n, 3, 9}), randint(-1000, 1000, {n, 9})};
        std::vector<Tensor> got = f.run(in), want = run_eager(b.graph, in);
        for (size_t i = 0; i < got.size(); ++i)
            BOOST_TEST(dtype_error(got[i], want[i]) < 1e-5, "s0 = " << n << ", output " << i);
    }
}

// int64 sums wrap on overflow as eager's do; bool amax/amin are any/all.
BOOST_AUTO_TEST_CASE(int64_sums_wrap_and_bool_extremes_are_any_and_all) {
    GraphBuilder b;
    int big = b.input({3, 4}, "big", DType::int64);
    int flags = b.input({3, 4}, "flags", DType::boolean);
    b.output(b.reduce(OpId::sum, big, {0}, false));
    b.output(b.reduce(OpId::sum, flags, {0}, false));
    b.output(b.reduce(OpId::amax, flags, {0}, false));
    b.output(b.reduce(OpId::amin, flags, {0}, true));
    CompiledCpuGraph f = compile_cpu(b.graph);
    Tensor large = full({3, 4}, 4.0e18, {.dtype = DType::int64});
    Tensor bools =
        tensor({1.f, 0.f, 0.f, 1.f, 1.f, 0.f, 0.f, 1.f, 1.f, 0.f, 1.f, 1.f}).reshape({3, 4}) > 0.5;
    std::vector<Tensor> in = {large, bools};
    std::vector<Tensor> got = f.run(in), want = run_eager(b.graph, in);
    BOOST_TEST(got[0].dtype() == DType::int64);
    BOOST_TEST(got[0].to_vector<int64_t>() ==
               want[0].to_vector<int64_t>());  // wrapped, not saturated
    BOOST_TEST(got[1].dtype() == DType::int64);
    for (size_t i = 1; i < got.size(); ++i)
        BOOST_TEST(dtype_error(got[i], want[i]) == 0.0, "output " << i);
    BOOST_TEST(got[2].dtype() == DType::boolean);
}

// Batch norm's training forward (mean and var over (0, 2, 3) of [N, C, H, W], then normalize,
// affine, relu) is one row kernel with rows = C, as layernorm is over its rows: three passes
// along each channel, each walking N runs of H * W contiguous elements in float lanes.
BOOST_AUTO_TEST_CASE(batch_norm_training_forward_is_one_row_kernel_and_vectorized) {
    GraphBuilder b;
    const Shape shape = {8, 16, 9, 9};
    int x = b.input(shape, "x");
    int w = b.input({16, 1, 1}, "w"), bias = b.input({16, 1, 1}, "b");
    int mean = b.mean(x, {0, 2, 3}, true);
    int centered = b.binary(OpId::sub, x, mean);
    int var = b.mean(b.binary(OpId::mul, centered, centered), {0, 2, 3}, true);
    int inv = b.unary(OpId::rsqrt, b.scalar(OpId::add, var, 1e-5));
    int out = b.binary(OpId::add, b.binary(OpId::mul, b.binary(OpId::mul, centered, inv), w), bias);
    b.output(b.unary(OpId::relu, out));
    b.output(mean);
    b.output(var);
    CompiledCpuGraph f = compile_cpu(b.graph);
    const Schedule& s = f.schedule();
    BOOST_TEST(count_kind(s, KernelKind::fallback) == 0, s.print());
    BOOST_TEST(s.kernels.size() == 1u, s.print());
    BOOST_TEST(s.kernels[0].kind == KernelKind::row);
    BOOST_TEST(s.kernels[0].domain == Shape({16, 8, 9, 9}));
    BOOST_TEST(s.print().find("row [16] x [8, 9, 9] (dims 1 0 2 3)") != std::string::npos,
               s.print());
    std::string kernel0 = f.source().substr(f.source().find("// kernel_0:"));
    kernel0 = kernel0.substr(0, kernel0.find("// kernel_1:"));
    BOOST_TEST(kernel0.find("walked as 8 runs of 81") != std::string::npos, kernel0);
    BOOST_TEST(
        kernel0.find("B::load_unaligned(x_0_ptr + i0 * 81 + k1 * 1296 + j)") != std::string::npos,
        kernel0);
    BOOST_TEST(kernel0.find("%") == kernel0.find("rest % "), "no div/mod per element");
    std::vector<Tensor> in = {randn(shape) * 3.0 + 1.0, randn({16, 1, 1}), randn({16, 1, 1})};
    std::vector<Tensor> got = f.run(in), want = run_eager(b.graph, in);
    for (size_t i = 0; i < got.size(); ++i)
        BOOST_TEST(dtype_error(got[i], want[i]) < 1e-4, "output " << i);
}

// A column sum (dim 0 of [B, F]) walks tiles of consecutive columns, lanes across columns, so
// each step down the rows reads consecutive memory (a column at a time strides by F).
BOOST_AUTO_TEST_CASE(column_sums_walk_tiles_of_columns_in_lanes) {
    GraphBuilder b;
    int x = b.input({300, 203}, "x");
    int ints = b.input({300, 7}, "i", DType::int64);  // another loop: its own kernel, scalar tiles
    int cols = b.reduce(OpId::sum, b.unary(OpId::tanh, x), {0}, false);
    b.output(b.scalar(OpId::mul, cols, 0.5));
    b.output(b.reduce(OpId::amax, ints, {0}, true));
    CompiledCpuGraph f = compile_cpu(b.graph);
    BOOST_TEST(f.schedule().kernels.size() == 2u, f.schedule().print());
    BOOST_TEST(
        f.source().find("row over 203 rows of 300 in tiles of 128 rows (lanes across rows)") !=
            std::string::npos,
        f.source());
    BOOST_TEST(f.source().find("B::load_unaligned(x_0_ptr + i0 + k1 * 203)") != std::string::npos,
               f.source());
    std::vector<Tensor> in = {randn({300, 203}), randint(-1000, 1000, {300, 7})};
    std::vector<Tensor> got = f.run(in), want = run_eager(b.graph, in);
    for (size_t i = 0; i < got.size(); ++i)
        BOOST_TEST(dtype_error(got[i], want[i]) < 1e-5, "output " << i);
}

// The bias gradient of a linear layer (a sum over the batch dim) is generated code in the
// compiled backward, and equals eager's.
BOOST_AUTO_TEST_CASE(linear_bias_gradient_is_generated_and_matches_eager) {
    manual_seed(5);
    auto layer = std::make_shared<nn::Linear>(24, 40);
    auto loss_fn = [&](Tensor x) { return (tanh(layer->forward(x)) * 0.5).sum(); };
    auto f = compile(loss_fn, {.choose_faster = false});
    Tensor x = randn({33, 24});
    Tensor loss = f(x);
    loss.backward();
    CompiledGraphInfo backward = last_compiled();
    BOOST_TEST(backward.fallbacks.empty(), backward.schedule);
    BOOST_TEST(backward.schedule.find("(dims 1 0)") != std::string::npos, backward.schedule);
    std::vector<Tensor> compiled_grads;
    for (auto& [name, p] : layer->named_parameters())
        compiled_grads.push_back(p.grad().clone()), p.zero_grad();
    loss_fn(x).backward();
    size_t i = 0;
    for (auto& [name, p] : layer->named_parameters())
        BOOST_TEST(allclose(compiled_grads[i++], p.grad(), 1e-4, 1e-5), name);
}

// argmax/argmin of a row holding NaN give the first NaN's position, as eager and PyTorch do:
// NaN in vector lanes and in the tail, from an input or from math (sqrt of a negative), both
// dims, keepdim, the whole tensor; static and symbolic sizes. The generated kernels returned
// the row length (an index out of range) for NaN in vector lanes: argmax finds NaN with
// x != x, and xsimd's batch != is an ordered compare (false for NaN).
BOOST_AUTO_TEST_CASE(argmax_and_argmin_of_rows_with_nan_give_the_nan_position) {
    auto f = [](Tensor x) {
        Tensor y = sqrt(x);  // NaN where x < 0, computed in the kernels
        return std::vector<Tensor>{argmax(y, 1), argmin(y, 1), argmax(y, 0, true), argmin(y, 0),
                                   argmax(y),    argmin(y),    argmax(x, 1),       argmin(x, 0)};
    };
    for (bool dynamic : {false, true}) {
        jit::reset();
        auto c = compile(f, {.dynamic = dynamic ? jit::Dynamic::always : jit::Dynamic::never,
                             .choose_faster = false});
        for (int64_t cols : {37, 5, 5000}) {
            Tensor x = rand({6, cols}) + 0.5;
            x.narrow(0, 1, 1).narrow(1, 2, 1).fill_(-1.0);          // in the lanes of row 1
            x.narrow(0, 3, 1).narrow(1, cols - 1, 1).fill_(-1.0);   // in the tail of row 3
            x.narrow(0, 4, 1).fill_(-1.0);                          // a row of NaN only
            x.narrow(0, 5, 1).narrow(1, 1, 1).fill_(std::nan(""));  // NaN in the input
            std::vector<Tensor> got = c(x), want = f(x);
            for (size_t k = 0; k < got.size(); ++k) {
                BOOST_TEST_CONTEXT((dynamic ? "dynamic" : "static")
                                   << " cols " << cols << " output " << k) {
                    BOOST_TEST(got[k].shape() == want[k].shape());
                    BOOST_TEST(got[k].to_vector<int64_t>() == want[k].to_vector<int64_t>(),
                               boost::test_tools::per_element());
                }
            }
            BOOST_TEST(want[0].to_vector<int64_t>() ==
                           std::vector<int64_t>({want[0].to_vector<int64_t>()[0], 2,
                                                 want[0].to_vector<int64_t>()[2], cols - 1, 0, 1}),
                       boost::test_tools::per_element());
        }
    }
}

// Few long rows (a full reduction is one row of every element; modified_sigmoid's first
// segment): each pass along a row runs in chunks over the threads, the chunks' partials
// combined in chunk order, the element values stored by the chunk that computes them. The
// result matches eager and repeats bit for bit, at one thread or two.
BOOST_AUTO_TEST_CASE(few_long_rows_split_over_the_threads_and_repeat_at_any_thread_count) {
    std::vector<GraphBuilder> builders(3);
    std::vector<std::vector<Tensor>> inputs;
    {  // x' = 1 / (exp(-x) + 5); mean(x'); mean(x') > 0.5
        GraphBuilder& b = builders[0];
        int x = b.input({1000003}, "x");
        int xs =
            b.scalar(OpId::div, b.scalar(OpId::add, b.unary(OpId::exp, b.unary(OpId::neg, x)), 5.0),
                     1.0, ScalarPos::left);
        int m = b.mean(xs, {0}, false);
        b.output(xs);
        b.output(m);
        b.output(b.node(OpId::gt, {m}, {.scalar = 0.5, .scalar_pos = ScalarPos::right}, {},
                        DType::boolean));
        inputs.push_back({randn({1000003})});
    }
    {  // softmax over 3 rows: three passes, the later ones reading per-row values
        GraphBuilder& b = builders[1];
        int x = b.input({3, 100003}, "x");
        int e = b.unary(OpId::exp, b.binary(OpId::sub, x, b.reduce(OpId::amax, x, {-1}, true)));
        b.output(b.binary(OpId::div, e, b.reduce(OpId::sum, e, {-1}, true)));
        inputs.push_back({randn({3, 100003}) * 3.0});
    }
    {  // layernorm over 2 rows
        GraphBuilder& b = builders[2];
        int x = b.input({2, 70001}, "x");
        int centered = b.binary(OpId::sub, x, b.mean(x, {-1}, true));
        int var = b.mean(b.binary(OpId::mul, centered, centered), {-1}, true);
        b.output(
            b.binary(OpId::mul, centered, b.unary(OpId::rsqrt, b.scalar(OpId::add, var, 1e-5))));
        inputs.push_back({randn({2, 70001}) + 2.0});
    }
    for (size_t g = 0; g < builders.size(); ++g) {
        BOOST_TEST_CONTEXT("graph " << g) {
            CompiledCpuGraph f = compile_cpu(builders[g].graph);
            BOOST_TEST(f.source().find("over few long rows") != std::string::npos, f.source());
            std::vector<Tensor> want = run_eager(builders[g].graph, inputs[g]);
            std::vector<std::vector<float>> first;
            for (int threads : {2, 1, 2}) {
                set_num_threads(threads);
                std::vector<Tensor> got = f.run(inputs[g]);
                BOOST_REQUIRE(got.size() == want.size());
                for (size_t i = 0; i < got.size(); ++i) {
                    BOOST_TEST(dtype_error(got[i], want[i]) < 1e-5, "output " << i);
                    std::vector<float> values =
                        got[i].to(DType::float32).contiguous().to_vector<float>();
                    if (first.size() <= i)
                        first.push_back(values);
                    else
                        BOOST_TEST((values == first[i]),
                                   "output " << i << " at " << threads << " threads repeats");
                }
            }
            set_num_threads(0);
        }
    }
}

// With symbolic sizes the kernel keeps both entries and picks one per call: short rows take
// the loop over rows, few long rows the chunks. One compile serves every size.
BOOST_AUTO_TEST_CASE(symbolic_sizes_pick_the_split_entry_per_call) {
    auto fn = [](const Tensor& x) {
        Tensor e = exp(x - x.amax({1}, true));
        return std::vector<Tensor>{e / e.sum({1}, true),
                                   (x * x).sum()};  // mean: 1/n is not generated
    };
    jit::reset();
    auto f = compile(fn, {.dynamic = jit::Dynamic::always});
    for (Shape shape : {Shape{64, 1000}, Shape{3, 100003}, Shape{2, 70001}, Shape{9, 50}}) {
        Tensor x = randn(shape) * 3.0;
        std::vector<Tensor> got = f(x), want = fn(x);
        for (size_t i = 0; i < want.size(); ++i)
            BOOST_TEST(dtype_error(got[i], want[i]) < 1e-5,
                       "output " << i << " of " << shape[0] << "x" << shape[1]);
    }
    BOOST_TEST(jit::counters().compiles == 1);
    codegen::CompiledGraphInfo info = codegen::last_compiled();
    BOOST_TEST(info.source.find("_split(args, parallel);  // few long rows") != std::string::npos,
               info.why_interpreted << info.schedule << info.source);
}

BOOST_AUTO_TEST_SUITE_END()
