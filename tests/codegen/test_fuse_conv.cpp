// codegen/fuse_conv.cpp: a conv2d's epilogue (eval batch norm, residual add, relu) folded
// into one conv2d_fused node that runs as oneDNN post-ops, compiled equal to eager; the
// patterns that must not fold stay correct and say why; KILN_CONV=im2col and
// KILN_CONV_FUSE=0 run the same graphs without it.
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cstdlib>
#include <string>

#include "kiln.h"
#include "tests/scoped_env.h"

using namespace kiln;

namespace {

using Env = kiln_test::ScopedEnv;  // sets one variable for a scope

double max_diff(const Tensor& a, const Tensor& b) {
    BOOST_REQUIRE(a.shape() == b.shape());
    return (a.to(float64) - b.to(float64)).abs().amax().item<double>();
}

struct Bn {  // eval-mode batch norm's four per-channel tensors, away from 0 and 1
    Tensor mean, var, gamma, beta;
    explicit Bn(int64_t c)
        : mean(randn({c}) * 0.3),
          var(rand({c}) + 0.5),
          gamma(randn({c}) * 0.5 + 1),
          beta(randn({c}) * 0.2) {}
    Tensor operator()(const Tensor& y) const {
        return nn::functional::batch_norm(y, mean, var, gamma, beta, false, 0.1, 1e-5);
    }
};

// The conv_fusions lines of the graphs compiled since `first_id`.
std::vector<std::string> fusion_notes(int first_id) {
    codegen::CompiledGraphInfo info = codegen::last_compiled();
    BOOST_REQUIRE(info.id > first_id);
    return info.conv_fusions;
}

int count_fused(const std::vector<std::string>& notes) {
    return int(std::count_if(notes.begin(), notes.end(), [](const std::string& n) {
        return n.find(": fused") != std::string::npos;
    }));
}

std::string joined(const std::vector<std::string>& notes) {
    std::string s;
    for (const std::string& n : notes) s += n + "\n";
    return s;
}

const CompileOptions kernels_only{.choose_faster = false};

struct ConvCase {
    int64_t n, c, o, h, w, k, stride, pad, groups;
    bool bias;
};

}  // namespace

BOOST_AUTO_TEST_SUITE(fuse_conv)

// Strides, padding, groups (depthwise too), batch 1, odd channel counts, with and without
// bias: conv + batch norm + relu, and conv + batch norm + residual + relu, compiled as one
// conv2d_fused each, equal to eager.
BOOST_AUTO_TEST_CASE(conv_batch_norm_relu_and_residual_fuse_and_equal_eager) {
#ifndef KILN_HAVE_DNNL
    BOOST_TEST_MESSAGE("built without oneDNN: no conv2d node to fuse, this test is skipped");
    return;
#endif
    manual_seed(21);
    const ConvCase cases[] = {
        {1, 3, 5, 9, 7, 3, 1, 1, 1, false},   {2, 4, 6, 8, 8, 3, 2, 1, 2, true},
        {3, 5, 7, 11, 6, 1, 1, 0, 1, true},   {2, 6, 6, 7, 7, 3, 1, 1, 6, false},
        {2, 3, 8, 10, 10, 5, 2, 2, 1, false}, {1, 16, 32, 12, 12, 3, 1, 1, 1, true},
    };
    for (size_t i = 0; i < std::size(cases); ++i) {
        const ConvCase& c = cases[i];
        Tensor w = randn({c.o, c.c / c.groups, c.k, c.k}) * 0.3,
               b = c.bias ? randn({c.o}) : Tensor();
        Bn bn(c.o);
        auto conv = [&](const Tensor& x) {
            return conv2d(x, w, b, {c.stride, c.stride}, {c.pad, c.pad}, {1, 1}, c.groups);
        };
        auto block = [&](const Tensor& x) { return relu(bn(conv(x))); };
        auto residual = [&](const Tensor& x, const Tensor& r) { return relu(bn(conv(x)) + r); };
        Tensor x = randn({c.n, c.c, c.h, c.w});
        Tensor r = randn(conv(x).shape());
        int before = codegen::last_compiled().id;
        auto f = compile(block, kernels_only);
        int64_t calls = detail::onednn_conv_calls();
        Tensor got = f(x);
        BOOST_TEST(detail::onednn_conv_calls() > calls, "case " << i);
        BOOST_TEST(max_diff(got, block(x)) < 1e-4, "case " << i);
        std::vector<std::string> notes = fusion_notes(before);
        BOOST_TEST(count_fused(notes) == 1, "case " << i << ":\n" << joined(notes));
        BOOST_TEST(notes.at(0).find("fused sub, mul, mul, add, relu") != std::string::npos,
                   joined(notes));

        before = codegen::last_compiled().id;
        auto g = compile(residual, kernels_only);
        BOOST_TEST(max_diff(g(x, r), residual(x, r)) < 1e-4, "case " << i);
        notes = fusion_notes(before);
        BOOST_TEST(notes.at(0).find("fused sub, mul, mul, add, add, relu") != std::string::npos,
                   joined(notes));
    }
}

// A conv value the rest of the graph needs is never folded away: returned, read twice,
// multiplied by a value that is not per-channel, on the right of a sub, normalized by batch
// statistics (training-mode batch norm), in float64. Each equals eager and says why.
BOOST_AUTO_TEST_CASE(epilogues_that_must_not_fuse_stay_equal_to_eager) {
#ifndef KILN_HAVE_DNNL
    BOOST_TEST_MESSAGE("built without oneDNN: no conv2d node to fuse, this test is skipped");
    return;
#endif
    manual_seed(22);
    Tensor w = randn({6, 4, 3, 3}) * 0.3, x = randn({2, 4, 8, 8});
    Bn bn(6);
    auto conv = [&](const Tensor& a) { return conv2d(a, w, {}, {1, 1}, {1, 1}); };
    auto check = [&](auto fn, const std::string& expect, const char* label) {
        int before = codegen::last_compiled().id;
        auto f = compile(fn, kernels_only);
        auto got = f(x);
        auto want = fn(x);
        if constexpr (std::is_same_v<decltype(got), Tensor>) {
            BOOST_TEST(max_diff(got, want) < 1e-4, label);
        } else {
            BOOST_TEST(max_diff(std::get<0>(got), std::get<0>(want)) < 1e-4, label);
            BOOST_TEST(max_diff(std::get<1>(got), std::get<1>(want)) < 1e-4, label);
        }
        std::string notes = joined(fusion_notes(before));
        BOOST_TEST(notes.find(expect) != std::string::npos, label << ": expected '" << expect
                                                                  << "' in\n"
                                                                  << notes);
    };
    // the conv's value is also returned: nothing fuses
    check(
        [&](const Tensor& a) {
            Tensor y = conv(a);
            return std::make_tuple(relu(bn(y)), y);
        },
        "not fused (conv2d", "returned");
    // read by a reduction as well
    check(
        [&](const Tensor& a) {
            Tensor y = conv(a);
            return relu(bn(y)) + y.mean();
        },
        "is read 2 times", "read twice");
    // an intermediate (the batch norm's output) read twice: the chain stops before it
    check(
        [&](const Tensor& a) {
            Tensor t = bn(conv(a));
            return relu(t) * t;
        },
        "fused sub, mul, mul, add (stopped", "intermediate read twice");
    // a per-position, not per-channel, factor
    Tensor m = rand({1, 1, 8, 8}) + 0.5;
    check([&](const Tensor& a) { return relu(bn(conv(a)) * m); }, "neither per-channel",
          "per-position factor");
    // the conv's value on the right of a sub
    Tensor mean = randn({6, 1, 1});
    check([&](const Tensor& a) { return relu(mean - conv(a)); }, "as its right operand",
          "right operand of sub");
    // a float64 per-channel operand promotes the result
    Tensor s64 = randn({6, 1, 1}, {.dtype = float64});
    check([&](const Tensor& a) { return relu(conv(a) * s64 + 1.0); }, "changes the dtype",
          "float64 operand");
    // training-mode batch norm reads the conv's value for its statistics
    Tensor rm = zeros({6}), rv = ones({6}), rm2 = zeros({6}), rv2 = ones({6});
    auto train_bn = [&](const Tensor& a, Tensor& run_m, Tensor& run_v) {
        return relu(
            nn::functional::batch_norm(conv(a), run_m, run_v, bn.gamma, bn.beta, true, 0.1, 1e-5));
    };
    int before = codegen::last_compiled().id;
    auto f = compile([&](const Tensor& a) { return train_bn(a, rm, rv); }, kernels_only);
    Tensor got = f(x), want = train_bn(x, rm2, rv2);
    BOOST_TEST(max_diff(got, want) < 1e-4);
    BOOST_TEST(max_diff(rm, rm2) < 1e-5);
    BOOST_TEST(count_fused(fusion_notes(before)) == 0, joined(fusion_notes(before)));
    // float64: conv2d is the im2col composite, there is no conv2d node
    Tensor x64 = x.to(float64), w64 = w.to(float64);
    auto f64 = [&](const Tensor& a) { return relu(bn(conv2d(a, w64, {}, {1, 1}, {1, 1}))); };
    auto c64 = compile(f64, kernels_only);
    BOOST_TEST(max_diff(c64(x64), f64(x64)) < 1e-10);
}

// Without oneDNN's path (KILN_CONV=im2col at trace time: no conv2d node; at run time after
// a oneDNN trace: conv2d_fused runs conv2d then its ops one by one) and with the pass off
// (KILN_CONV_FUSE=0), the same graph equals eager.
BOOST_AUTO_TEST_CASE(im2col_and_fusion_off_run_the_same_graphs_equal_to_eager) {
    manual_seed(23);
    Tensor w = randn({5, 3, 3, 3}) * 0.3, x = randn({2, 3, 9, 9}), r = randn({2, 5, 9, 9});
    Bn bn(5);
    auto fn = [&](const Tensor& a, const Tensor& res) {
        return relu(bn(conv2d(a, w, {}, {1, 1}, {1, 1})) + res);
    };
    Tensor want = fn(x, r);
    {
        Env im2col("KILN_CONV", "im2col");
        auto f = compile(fn, kernels_only);
        int64_t calls = detail::onednn_conv_calls();
        BOOST_TEST(max_diff(f(x, r), want) < 1e-4);
        BOOST_TEST(detail::onednn_conv_calls() == calls);
        BOOST_TEST(codegen::last_compiled().conv_fusions.empty());
    }
    {
        Env off("KILN_CONV_FUSE", "0");
        auto f = compile(fn, kernels_only);
        BOOST_TEST(max_diff(f(x, r), want) < 1e-4);
        BOOST_TEST(codegen::last_compiled().schedule.find("conv2d_fused") == std::string::npos);
    }
#ifdef KILN_HAVE_DNNL
    auto f = compile(fn, kernels_only);
    BOOST_TEST(max_diff(f(x, r), want) < 1e-4);
    BOOST_TEST(codegen::last_compiled().schedule.find("conv2d_fused") != std::string::npos);
    Env im2col("KILN_CONV", "im2col");  // the same compiled graph, its fused node by the reference
    int64_t calls = detail::onednn_conv_calls();
    BOOST_TEST(max_diff(f(x, r), want) < 1e-4);
    BOOST_TEST(detail::onednn_conv_calls() == calls);
#else
    BOOST_TEST_MESSAGE("built without oneDNN: the fused half of this test is skipped");
#endif
}

BOOST_AUTO_TEST_CASE(conv2d_fused_op_equals_its_ops_and_has_no_derivative) {
    manual_seed(24);
    Tensor x = randn({2, 3, 6, 6}), w = randn({4, 3, 3, 3}), b = randn({4}),
           s = randn({1, 4, 1, 1}), t = randn({4, 1, 1}), r = randn({2, 4, 6, 6});
    using P = detail::ConvPostOp;
    Attrs a{.shape = {3, 3, 1, 1, 1, 1, 1, 1}, .dim = 1};
    a.dims = {int64_t(P::mul_channel), int64_t(P::sub_channel), int64_t(P::add_tensor),
              int64_t(P::relu), int64_t(P::div_channel)};
    Tensor got = dispatch(OpId::conv2d_fused, {x, w, b, s, t, r, s}, a);
    Tensor want = relu(conv2d(x, w, b, {1, 1}, {1, 1}) * s - t + r) / s;
    BOOST_TEST(max_diff(got, want) < 1e-4);
    Tensor wg = w.detach().requires_grad_();
    Tensor out = dispatch(OpId::conv2d_fused, {x, wg, b, s, t, r, s}, a);
    BOOST_CHECK_THROW(out.sum().backward(), Error);
    a.dims = {99};
    BOOST_CHECK_THROW(dispatch(OpId::conv2d_fused, {x, w}, a), Error);
}

// conv2d_fused with attrs.keepdim writes its output channels-last (NHWC memory seen as
// [N, C, H, W]), the layout oneDNN's convolutions want here; conv2d and conv2d_fused read a
// channels-last input or residual as it is. Every mix of layouts equals the NCHW result, and a
// reader that is not a conv sees the same values.
BOOST_AUTO_TEST_CASE(conv2d_fused_writes_and_reads_channels_last_with_the_same_values) {
#ifndef KILN_HAVE_DNNL
    BOOST_TEST_MESSAGE("built without oneDNN: conv2d_fused runs its ops one by one, NCHW");
    return;
#endif
    manual_seed(25);
    Tensor x = randn({2, 8, 7, 6}), w = randn({16, 8, 3, 3}) * 0.3, s = randn({1, 16, 1, 1}),
           r = randn({2, 16, 4, 3});
    auto nhwc = [](const Tensor& t) {
        return t.permute({0, 2, 3, 1}).contiguous().permute({0, 3, 1, 2});
    };
    auto is_nhwc = [](const Tensor& t) {
        const Shape& z = t.shape();
        return t.strides() == Shape{z[1] * z[2] * z[3], 1, z[3] * z[1], z[1]};
    };
    using P = detail::ConvPostOp;
    Attrs a{.shape = {3, 3, 2, 2, 1, 1, 1, 1}, .dim = 1};
    a.dims = {int64_t(P::mul_channel), int64_t(P::add_tensor), int64_t(P::relu)};
    Tensor want = relu(conv2d(x, w, Tensor(), {2, 2}, {1, 1}) * s + r);
    BOOST_REQUIRE(want.is_contiguous());
    for (bool out_nhwc : {false, true})
        for (bool x_nhwc : {false, true})
            for (bool r_nhwc : {false, true}) {
                Attrs b = a;
                b.keepdim = out_nhwc;
                Tensor xi = x_nhwc ? nhwc(x) : x, ri = r_nhwc ? nhwc(r) : r;
                BOOST_REQUIRE(is_nhwc(xi) == x_nhwc);
                Tensor got = dispatch(OpId::conv2d_fused, {xi, w, s, ri}, b);
                BOOST_TEST_CONTEXT("out " << out_nhwc << " x " << x_nhwc << " residual "
                                          << r_nhwc) {
                    BOOST_TEST(is_nhwc(got) == out_nhwc);
                    BOOST_TEST(max_diff(got, want) < 1e-4);
                    BOOST_TEST(max_diff(got.contiguous(), want) < 1e-4);  // a non-conv reader
                    // conv2d reads it as it is
                    Tensor w2 = randn({4, 16, 1, 1});
                    BOOST_TEST(max_diff(conv2d(got, w2), conv2d(want, w2)) < 1e-4);
                }
            }
    Tensor plain = dispatch(OpId::conv2d, {nhwc(x), w}, {.shape = a.shape, .dim = 1});
    BOOST_TEST(max_diff(plain, conv2d(x, w, Tensor(), {2, 2}, {1, 1})) < 1e-4);
}

// The inductor lets a conv2d_fused write channels-last only when every reader is another
// conv2d_fused reading it as its input or residual (ResNet's basic block: the block's input
// feeds both); an output that is returned, or that a pointwise op or a pooling also reads,
// stays NCHW. Compiled equals eager either way.
BOOST_AUTO_TEST_CASE(only_outputs_read_by_convs_alone_are_written_channels_last) {
#ifndef KILN_HAVE_DNNL
    BOOST_TEST_MESSAGE("built without oneDNN: no conv2d node to fuse, this test is skipped");
    return;
#endif
    manual_seed(26);
    Tensor w1 = randn({8, 3, 3, 3}) * 0.3, w2 = randn({8, 8, 3, 3}) * 0.2,
           w3 = randn({8, 8, 3, 3}) * 0.2;
    Bn bn1(8), bn2(8), bn3(8);
    auto conv = [](const Tensor& x, const Tensor& w) {
        return conv2d(x, w, Tensor(), {1, 1}, {1, 1});
    };
    // y1 feeds conv2 and conv2's residual; y2 feeds conv3 and a max pool; y3 is returned
    auto block = [&](const Tensor& x) {
        Tensor y1 = relu(bn1(conv(x, w1)));
        Tensor y2 = relu(bn2(conv(y1, w2)) + y1);
        Tensor y3 = relu(bn3(conv(y2, w3)));
        return std::make_pair(y3, max_pool2d(y2, {.kernel = {2, 2}, .stride = {2, 2}}));
    };
    Tensor x = randn({2, 3, 8, 8});
    NoGradGuard no_grad;
    int before = codegen::last_compiled().id;
    auto f = compile(
        [&](const Tensor& t) {
            auto [a, b] = block(t);
            return std::vector<Tensor>{a, b};
        },
        kernels_only);
    std::vector<Tensor> got = f(x);
    auto [want3, want_pool] = block(x);
    BOOST_TEST(max_diff(got.at(0), want3) < 1e-4);
    BOOST_TEST(max_diff(got.at(1), want_pool) < 1e-4);
    std::vector<std::string> notes = fusion_notes(before);
    BOOST_REQUIRE(notes.size() == 3u);
    auto channels_last = [](const std::string& n) {
        return n.find("channels-last out") != std::string::npos;
    };
    BOOST_TEST(channels_last(notes[0]), joined(notes));   // y1: conv2's input and residual
    BOOST_TEST(!channels_last(notes[1]), joined(notes));  // y2: the max pool reads it too
    BOOST_TEST(!channels_last(notes[2]), joined(notes));  // y3: returned
    BOOST_TEST(got.at(0).is_contiguous());
}

BOOST_AUTO_TEST_SUITE_END()
