// codegen/channels_last.cpp: CPU training graphs run their convolutions, both gradients and
// the batch-norm / ReLU / residual kernels between them on NHWC values. Compiled equals eager
// (values, gradients, running statistics), with the pass on and off; returned values keep
// their NCHW shape and read right whatever their strides; the conv ops' NHWC form equals the
// NCHW one; multi-pass column reductions run in tiles; transposing copies equal plain ones.
#include <boost/test/unit_test.hpp>
#include <string>
#include <type_traits>
#include <vector>

#include "kiln.h"
#include "tests/scoped_env.h"

using namespace kiln;

namespace {

using Env = kiln_test::ScopedEnv;

double max_diff(const Tensor& a, const Tensor& b) {
    BOOST_REQUIRE(a.shape() == b.shape());
    return (a.to(float64) - b.to(float64)).abs().amax().item<double>();
}

Tensor eager(OpId op, const std::vector<Tensor>& in, const Attrs& a) {
    return dispatch_eager(op, in, a);
}

std::string joined(const std::vector<std::string>& notes) {
    std::string s;
    for (const std::string& n : notes) s += n + "\n";
    return s;
}

bool has_channels_last_note(const codegen::CompiledGraphInfo& info) {
    return joined(info.conv_fusions).find("channels-last: ") != std::string::npos;
}

// A small ResNet: a strided stem with odd sizes, batch norm in training mode, max pooling,
// a basic block, a downsampling block with a 1x1 strided shortcut, average pooling, a linear
// head. Returns the loss and the stem conv's output (a returned conv value).
struct Net {
    std::vector<Tensor> params;  // conv weights, batch-norm weights and biases, head
    std::vector<Tensor> stats;   // running means and variances
    Net() {
        auto w = [&](Shape s) { params.push_back((randn(s) * 0.3).requires_grad_()); };
        w({8, 3, 3, 3}), w({8, 8, 3, 3}), w({8, 8, 3, 3}), w({16, 8, 3, 3}), w({16, 16, 3, 3}),
            w({16, 8, 1, 1});
        for (int64_t c : {8, 8, 8, 16, 16, 16}) {
            params.push_back((rand({c}) + 0.5).requires_grad_());
            params.push_back((randn({c}) * 0.1).requires_grad_());
            stats.push_back(zeros({c}));
            stats.push_back(ones({c}));
        }
        params.push_back((randn({16, 5}) * 0.2).requires_grad_());
    }
    std::tuple<Tensor, Tensor> operator()(const Tensor& x, std::vector<Tensor>& st) const {
        const std::vector<Tensor>& p = params;
        auto bn = [&](const Tensor& y, int i) {
            return nn::functional::batch_norm(y, st[2 * i], st[2 * i + 1], p[6 + 2 * i],
                                              p[7 + 2 * i], true, 0.1, 1e-5);
        };
        auto conv = [&](const Tensor& a, int i, int64_t stride, int64_t pad) {
            return conv2d(a, p[i], {}, {stride, stride}, {pad, pad});
        };
        Tensor stem = conv(x, 0, 2, 1);
        Tensor h =
            max_pool2d(relu(bn(stem, 0)), {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}});
        Tensor b = relu(bn(conv(relu(bn(conv(h, 1, 1, 1), 1)), 2, 1, 1), 2) + h);
        Tensor d =
            relu(bn(conv(relu(bn(conv(b, 3, 2, 1), 3)), 4, 1, 1), 4) + bn(conv(b, 5, 2, 0), 5));
        Tensor pooled = avg_pool2d(d, {.kernel = {2, 2}, .stride = {2, 2}});
        Tensor logits = matmul(pooled.reshape({pooled.size(0), -1}), p[18]);
        return {(logits * logits).mean() + (stem * stem).mean() * 0.01, stem};
    }
};

// Compiles fn (generated kernels always: no per-graph choice), calls it and fn itself on x,
// and returns both results with the graph that call compiled.
template <class Fn>
auto compiled_and_eager(Fn fn, const Tensor& x) {
    int before = codegen::last_compiled().id;
    auto f = compile(fn, {.choose_faster = false});
    auto got = f(x);
    auto want = fn(x);
    codegen::CompiledGraphInfo info = codegen::last_compiled();
    BOOST_REQUIRE(info.id > before);
    return std::make_tuple(got, want, info);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(channels_last)

// One training step compiled (the backward half with the channels-last note)
// equals eager: the loss, the returned conv value, every parameter's and the input's
// gradient, the running statistics; KILN_CONV_NHWC=0 compiles without the pass, equal too.
BOOST_AUTO_TEST_CASE(conv_net_training_step_compiled_equals_eager) {
#ifndef KILN_HAVE_DNNL
    BOOST_TEST_MESSAGE("built without oneDNN: conv2d is im2col + GEMM, no conv node to rewrite");
    return;
#endif
    manual_seed(61);
    Net net;
    Tensor x0 = randn({2, 3, 13, 11});
    auto grads = [&](const Tensor& x) {
        std::vector<Tensor> g{x.grad().defined() ? x.grad().clone() : Tensor()};
        for (const Tensor& p : net.params) g.push_back(p.grad().clone());
        return g;
    };
    auto zero = [&] {
        for (Tensor& p : net.params) p.set_grad(Tensor());
    };
    // eager
    Tensor xe = x0.clone().requires_grad_();
    std::vector<Tensor> st_e = {};
    for (const Tensor& s : net.stats) st_e.push_back(s.clone());
    auto [loss_e, stem_e] = net(xe, st_e);
    loss_e.backward();
    std::vector<Tensor> want = grads(xe);
    zero();
    for (const char* nhwc : {"always", "0"}) {
        Env env("KILN_CONV_NHWC", nhwc);
        Tensor xc = x0.clone().requires_grad_();
        std::vector<Tensor> st_c;
        for (const Tensor& s : net.stats) st_c.push_back(s.clone());
        int before = codegen::last_compiled().id;
        auto f = compile([&](const Tensor& x) { return net(x, st_c); }, {.choose_faster = false});
        auto [loss_c, stem_c] = f(xc);
        loss_c.backward();
        // both halves are compiled by now: the last one handed over is the backward
        codegen::CompiledGraphInfo bwd = codegen::last_compiled();
        BOOST_REQUIRE(bwd.id > before + 1);
        BOOST_TEST(bwd.graph.find("conv2d_weight_grad") != std::string::npos);
        bool on = std::string(nhwc) == "always";
        BOOST_TEST(has_channels_last_note(bwd) == on, joined(bwd.conv_fusions));
        BOOST_TEST(max_diff(loss_c, loss_e) < 1e-4 * (1 + loss_e.abs().item<double>()));
        BOOST_TEST(stem_c.shape() == (Shape{2, 8, 7, 6}));
        BOOST_TEST(max_diff(stem_c, stem_e) < 1e-4);
        BOOST_TEST(max_diff(stem_c.contiguous(), stem_e) < 1e-4);
        BOOST_TEST(max_diff(stem_c.sum({1}), stem_e.sum({1})) <
                   1e-3);  // eager ops read its strides
        std::vector<Tensor> got = grads(xc);
        for (size_t i = 0; i < want.size(); ++i) {
            double scale = 1 + want[i].abs().amax().item<double>();
            BOOST_TEST(max_diff(got[i], want[i]) < 2e-4 * scale,
                       "gradient " << i << ", NHWC " << nhwc);
        }
        for (size_t i = 0; i < st_e.size(); ++i)
            BOOST_TEST(max_diff(st_c[i], st_e[i]) < 1e-5, "running statistic " << i);
        zero();
    }
}

// Inference graphs too: a conv whose value is returned (not fused) is rewritten; the returned
// value, a transposed view of it and a slice read right; a value read by both an NHWC
// reader and an NCHW one (a max pool) is copied back once.
BOOST_AUTO_TEST_CASE(returned_conv_values_and_views_read_as_eager) {
#ifndef KILN_HAVE_DNNL
    BOOST_TEST_MESSAGE("built without oneDNN: no conv node to rewrite");
    return;
#endif
    manual_seed(62);
    Tensor w = randn({6, 4, 3, 3}) * 0.3, w2 = randn({5, 6, 1, 1}) * 0.3, x = randn({3, 4, 9, 17});
    auto fn = [&](const Tensor& a) {
        Tensor y = conv2d(a, w, {}, {1, 2}, {1, 1});
        Tensor r = relu(y);
        Tensor pooled = max_pool2d(r, {.kernel = {2, 2}, .stride = {2, 2}});
        Tensor z = conv2d(r, w2);
        return std::make_tuple(y, y.transpose(1, 3), z.slice(1, 1, 4), pooled, r * 2.0);
    };
    NoGradGuard no_grad;
    {  // by default a graph this small keeps NCHW (its largest activation is under 2^20)
        // (a weight gradient's size, 2^20 elements here, is no activation's)
        Tensor big_w = randn({1024, 1024, 1, 1});
        Tensor small_x = randn({1, 1024, 2, 2}), small_g = randn({1, 1024, 2, 2});
        Attrs a{.shape = {1, 1, 1, 1, 0, 0, 1, 1}, .dim = 1};
        auto wg = [&](const Tensor& xx, const Tensor& gg) {
            return dispatch(OpId::conv2d_weight_grad, {xx, gg}, a) * 2.0;
        };
        int before = codegen::last_compiled().id;
        auto f = compile(wg, {.choose_faster = false});
        Tensor got = f(small_x, small_g);
        BOOST_TEST(got.shape() == big_w.shape());
        codegen::CompiledGraphInfo info = codegen::last_compiled();
        BOOST_REQUIRE(info.id > before);
        BOOST_TEST(!has_channels_last_note(info), joined(info.conv_fusions));
        BOOST_TEST(max_diff(got, wg(small_x, small_g)) < 1e-3);
    }
    {
        int before = codegen::last_compiled().id;
        auto f = compile(fn, {.choose_faster = false});
        Tensor y = std::get<0>(f(x));
        codegen::CompiledGraphInfo info = codegen::last_compiled();
        BOOST_REQUIRE(info.id > before);
        BOOST_TEST(!has_channels_last_note(info), joined(info.conv_fusions));
        BOOST_TEST(max_diff(y, std::get<0>(fn(x))) < 1e-4);
    }
    Env always("KILN_CONV_NHWC", "always");
    auto [got, want, info] = compiled_and_eager(fn, x);
    BOOST_TEST(has_channels_last_note(info), joined(info.conv_fusions));
    BOOST_TEST(max_diff(std::get<0>(got), std::get<0>(want)) < 1e-4);
    BOOST_TEST(max_diff(std::get<1>(got), std::get<1>(want)) < 1e-4);
    BOOST_TEST(max_diff(std::get<2>(got), std::get<2>(want)) < 1e-4);
    BOOST_TEST(max_diff(std::get<3>(got), std::get<3>(want)) < 1e-4);
    BOOST_TEST(max_diff(std::get<4>(got), std::get<4>(want)) < 1e-4);
    BOOST_TEST(std::get<0>(got).shape() == (Shape{3, 6, 9, 9}));
    // the caller's in-place write to a returned value lands where it reads
    Tensor y = std::get<0>(got);
    y.add_(ones(y.shape()));
    BOOST_TEST(max_diff(y, std::get<0>(want) + 1.0) < 1e-4);
}

// conv2d, conv2d_input_grad and conv2d_weight_grad with attrs.keepdim take and give NHWC
// activations [N, H, W, C] and equal the NCHW ops, on oneDNN and on im2col; the NHWC form has
// no derivative.
BOOST_AUTO_TEST_CASE(conv_ops_on_nhwc_activations_equal_the_nchw_ops) {
    manual_seed(63);
    Tensor x = randn({2, 6, 7, 10}), w = randn({4, 3, 3, 3}) * 0.3, b = randn({4});
    Attrs a{.shape = {3, 3, 2, 1, 1, 1, 1, 1}, .dim = 2};  // stride (2, 1), padding 1, 2 groups
    Tensor y = dispatch(OpId::conv2d, {x, w, b}, a);
    Tensor g = randn(y.shape());
    Attrs ig = a;
    ig.dims = {7, 10};
    Tensor gx = dispatch(OpId::conv2d_input_grad, {g, w}, ig);
    Tensor gw = dispatch(OpId::conv2d_weight_grad, {x, g}, a);
    auto nhwc = [](const Tensor& t) { return t.permute({0, 2, 3, 1}).contiguous(); };
    for (const char* backend : {"onednn", "im2col"}) {
        Env env("KILN_CONV", backend);
        Attrs an = a, ign = ig;
        an.keepdim = ign.keepdim = true;
        Tensor yn = eager(OpId::conv2d, {nhwc(x), w, b}, an);
        BOOST_TEST(yn.shape() == (Shape{2, 4, 10, 4}), backend);
        BOOST_TEST(max_diff(yn, nhwc(y)) < 1e-4, backend);
        // a non-contiguous NHWC input reads the same
        Tensor xs = nhwc(x).transpose(1, 2).contiguous().transpose(1, 2);
        BOOST_TEST(max_diff(eager(OpId::conv2d, {xs, w, b}, an), nhwc(y)) < 1e-4, backend);
        Tensor gxn = eager(OpId::conv2d_input_grad, {nhwc(g), w}, ign);
        BOOST_TEST(max_diff(gxn, nhwc(gx)) < 1e-4, backend);
        Tensor gwn = eager(OpId::conv2d_weight_grad, {nhwc(x), nhwc(g)}, an);
        BOOST_TEST(max_diff(gwn, gw) < 1e-3, backend);
    }
    Tensor xr = nhwc(x).requires_grad_();
    Attrs an = a;
    an.keepdim = true;
    Tensor yn = dispatch(OpId::conv2d, {xr, w, b}, an);
    BOOST_CHECK_EXCEPTION(yn.sum().backward(), Error, [](const Error& e) {
        return std::string(e.what()).find("no derivative") != std::string::npos;
    });
    BOOST_CHECK_EXCEPTION(
        eager(OpId::conv2d, {randn({2, 6, 7}), w, b}, an), Error, [](const Error& e) {
            return std::string(e.what()).find("4-D NHWC activation") != std::string::npos;
        });
}

// Batch norm's statistics over NHWC values: a column sum, a column sum of squares around the
// mean and an element pass reading both, one row kernel in tiles of rows (lanes across the
// channels); equal to eager, with channel counts below, at and above a tile and odd ones.
BOOST_AUTO_TEST_CASE(multi_pass_column_reductions_run_in_tiles_equal_to_eager) {
    manual_seed(64);
    for (int64_t c : {5, 16, 37, 130}) {
        Tensor x = randn({3, 5, 7, c}) * 2 + 1, g = rand({c}) + 0.5, beta = randn({c});
        auto fn = [&](const Tensor& a) {
            Tensor mean = a.mean({0, 1, 2}, true);
            Tensor centered = a - mean;
            Tensor var = (centered * centered).mean({0, 1, 2}, true);
            return std::make_tuple(relu(centered * rsqrt(var + 1e-5) * g + beta), mean);
        };
        auto [got, want, info] = compiled_and_eager(fn, x);
        BOOST_TEST(info.source.find("in tiles of") != std::string::npos, "C = " << c);
        BOOST_TEST(max_diff(std::get<0>(got), std::get<0>(want)) < 1e-4, "C = " << c);
        BOOST_TEST(max_diff(std::get<1>(got), std::get<1>(want)) < 1e-5, "C = " << c);
    }
}

// contiguous() of a permuted view (NHWC <-> NCHW and others, sizes around the 16 x 16 tiles,
// an offset source, float32 and int64) equals the copy index by index.
BOOST_AUTO_TEST_CASE(transposing_copies_equal_element_copies) {
    manual_seed(65);
    // The permuted copy of a contiguous 4-D tensor's data `d` of shape `s`, by hand.
    auto by_hand = [](const auto& d, const Shape& s, const Shape& perm) {
        std::remove_cvref_t<decltype(d)> out;
        Shape o{s[perm[0]], s[perm[1]], s[perm[2]], s[perm[3]]},
            st{s[1] * s[2] * s[3], s[2] * s[3], s[3], 1};
        for (int64_t i0 = 0; i0 < o[0]; ++i0)
            for (int64_t i1 = 0; i1 < o[1]; ++i1)
                for (int64_t i2 = 0; i2 < o[2]; ++i2)
                    for (int64_t i3 = 0; i3 < o[3]; ++i3)
                        out.push_back(d[size_t(i0 * st[perm[0]] + i1 * st[perm[1]] +
                                               i2 * st[perm[2]] + i3 * st[perm[3]])]);
        return out;
    };
    const Shape shapes[] = {
        {2, 17, 5, 33}, {1, 16, 1, 16}, {3, 40, 2, 19}, {2, 3, 31, 64}, {2, 7, 5, 6}};
    for (const Shape& s : shapes)
        for (const Shape& perm : {Shape{0, 2, 3, 1}, Shape{0, 3, 1, 2}, Shape{3, 1, 2, 0}}) {
            Tensor base = randn({s[0] + 1, s[1], s[2], s[3]}).slice(0, 1, s[0] + 1);  // an offset
            Tensor c = base.permute(perm).contiguous();
            BOOST_TEST(c.is_contiguous());
            BOOST_TEST(c.to_vector<float>() == by_hand(base.to_vector<float>(), s, perm),
                       "shape " << s[0] << "x" << s[1] << "x" << s[2] << "x" << s[3] << ", perm "
                                << perm[0] << perm[1] << perm[2] << perm[3]);
            Tensor ints = (base * 100).to(int64);
            BOOST_TEST(ints.permute(perm).contiguous().to_vector<int64_t>() ==
                       by_hand(ints.to_vector<int64_t>(), s, perm));
        }
}

BOOST_AUTO_TEST_SUITE_END()
