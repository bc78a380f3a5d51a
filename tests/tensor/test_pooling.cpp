// max_pool2d, avg_pool2d and the adaptive poolings (tensor/composites_conv.cpp) against
// PyTorch's loops in float64: values, gradients (a tied or NaN maximum's to the first),
// ceil_mode, count_include_pad, divisor_override, return_indices, unbatched inputs, eager
// and compiled. (test_pool.cpp is the caching memory allocator's.)
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "kiln.h"
#include "tests/tensor/window_loops.h"

using namespace kiln;
using namespace kiln_test;

namespace {

Tensor pool_reference(const Tensor& x, const Window2d& win, bool max) {
    std::vector<double> xv = x.to(float64).contiguous().to_vector<double>();
    int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
    auto [kh, kw] = win.kernel;
    auto [sh, sw] = win.stride;
    auto [ph, pw] = win.padding;
    int64_t OH = (H + 2 * ph - (kh - 1) - 1) / sh + 1, OW = (W + 2 * pw - (kw - 1) - 1) / sw + 1;
    std::vector<double> out;
    for (int64_t nc = 0; nc < N * C; ++nc)
        for (int64_t i = 0; i < OH; ++i)
            for (int64_t j = 0; j < OW; ++j) {
                double acc = max ? -INFINITY : 0.0;
                for (int64_t ki = 0; ki < kh; ++ki)
                    for (int64_t kj = 0; kj < kw; ++kj) {
                        int64_t h = i * sh + ki - ph, w = j * sw + kj - pw;
                        double v = (h < 0 || h >= H || w < 0 || w >= W) ? (max ? -INFINITY : 0.0) : xv[size_t((nc * H + h) * W + w)];
                        acc = max ? std::max(acc, v) : acc + v;
                    }
                out.push_back(max ? acc : acc / double(kh * kw));
            }
    return tensor(out, {N, C, OH, OW});
}

// The gradient of sum(max_pool2d(x) * r) by the loops: each window's r to its first maximum.
Tensor max_pool_grad_loops(const Tensor& x, const Window2d& w, const Tensor& r) {
    PoolLoops p = pool_loops(x, w, true);
    std::vector<double> g(size_t(x.numel())), rv = r.to(float64).contiguous().to_vector<double>();
    std::vector<double> at = p.index.to_vector<double>();
    int64_t plane = x.size(2) * x.size(3), cells = p.out.size(2) * p.out.size(3);
    for (size_t e = 0; e < at.size(); ++e)
        g[size_t(int64_t(e) / cells * plane + int64_t(at[e]))] += rv[e];
    return tensor(g, x.shape());
}

// fn(x) and the gradient of sum(fn(x) * r) (r: want's shape): eager, then compiled under each
// backend (two calls each: the recording and a hit), against want and want_grad.
void check_eager_and_compiled(const std::function<Tensor(const Tensor&)>& fn, const Tensor& x,
                              const Tensor& r, const Tensor& want, const Tensor& want_grad,
                              double tol) {
    auto run = [&](const std::function<Tensor(const Tensor&)>& f, const std::string& how) {
        Tensor xi = x.detach().clone().requires_grad_();
        Tensor out = f(xi);
        BOOST_TEST_CONTEXT(how) {
            BOOST_REQUIRE(out.shape() == want.shape());
            BOOST_TEST(max_diff(out, want) < tol);
            if (want_grad.defined()) {
                (out * r).sum().backward();
                BOOST_TEST(max_diff(xi.grad(), want_grad) < tol);
            }
        }
    };
    run(fn, "eager");
    for (const char* backend : kBackends) {
        jit::reset();
        auto compiled = compile(fn, {.backend = backend});
        run([&](const Tensor& t) { return compiled(t); }, std::string(backend) + " recording");
        run([&](const Tensor& t) { return compiled(t); }, std::string(backend) + " hit");
    }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(pooling)

BOOST_AUTO_TEST_CASE(pooling_matches_direct_loops) {
    manual_seed(12);
    Tensor x = randn({2, 3, 7, 6});
    for (Window2d w : {Window2d{.kernel = {2, 2}, .stride = {2, 2}}, Window2d{.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}},
                       Window2d{.kernel = {3, 2}, .stride = {1, 2}, .padding = {1, 0}}}) {
        BOOST_TEST(max_diff(max_pool2d(x, w), pool_reference(x, w, true)) < 1e-6);
        BOOST_TEST(max_diff(avg_pool2d(x, w), pool_reference(x, w, false)) < 1e-6);
    }
    // adaptive: divisible sizes are one avg_pool2d; others take PyTorch's overlapping bins
    BOOST_TEST(max_diff(adaptive_avg_pool2d(x, {1, 1}), x.mean({2, 3}, true)) < 1e-6);
    Tensor a = adaptive_avg_pool2d(x, {3, 4});
    BOOST_TEST(a.shape() == (Shape{2, 3, 3, 4}));
    // cell (1, 2): rows [floor(7/3), ceil(14/3)) = [2, 5), cols [floor(12/4), ceil(18/4)) = [3, 5)
    BOOST_TEST(max_diff(a.slice(2, 1, 2).slice(3, 2, 3), x.slice(2, 2, 5).slice(3, 3, 5).mean({2, 3}, true)) < 1e-6);
    // a NaN in a window is the window's max (as torch)
    Tensor n = zeros({1, 1, 2, 2});
    n = where(arange(4).reshape({1, 1, 2, 2}) == 1.0, full({1, 1, 2, 2}, NAN), n);
    BOOST_TEST(std::isnan(max_pool2d(n, {.kernel = {2, 2}, .stride = {2, 2}}).item<float>()));
}

// Issue 30 item 8: tied maxima in a window. PyTorch sends the window's whole gradient to the
// first maximum (row-major in the window); kiln's amax split it evenly. Windows that overlap,
// padding, and a plane of equal values, eager and compiled.
BOOST_AUTO_TEST_CASE(max_pool2d_sends_a_tied_maximum_s_whole_gradient_to_the_first) {
    manual_seed(31);
    Tensor ties = randint(0, 3, {2, 3, 6, 7}).to(float32);  // values 0, 1, 2: most windows tie
    for (Window2d w : {Window2d{.kernel = {2, 2}, .stride = {2, 2}},
                       Window2d{.kernel = {3, 3}, .stride = {1, 1}, .padding = {1, 1}},
                       Window2d{.kernel = {3, 2}, .stride = {2, 1}, .dilation = {2, 1}}}) {
        for (const Tensor& x : {ties, zeros({2, 3, 6, 7})}) {
            PoolLoops want = pool_loops(x, w, true);
            Tensor r = randn(want.out.shape());
            BOOST_TEST_CONTEXT("kernel " << w.kernel.first << "x" << w.kernel.second << " stride "
                                         << w.stride.first) {
                check_eager_and_compiled([w](const Tensor& t) { return max_pool2d(t, w); }, x, r,
                                         want.out, max_pool_grad_loops(x, w, r), 1e-5);
            }
        }
    }
}

// With a gradient, max_pool2d is one table op, max_pool2d_index (each window's first maximum,
// found in one pass over the input), and a gather whose gradient is scatter_add: no unfold2d and
// argmax mask over the windows, which made training 2-3x slower. Without a gradient on the CPU,
// small inputs keep unfold2d + amax (fused when compiled, faster there) and large ones (over 4M
// column entries: ResNet-18 224's stem pool has 14.5M) take the index op too: their columns
// were 9x the input. A window holding NaNs gives NaN and sends its gradient to its first NaN;
// ceil_mode and the index (return_indices) ride on the same op.
BOOST_AUTO_TEST_CASE(max_pool2d_is_one_index_op_and_a_gather) {
    manual_seed(34);
    Window2d w{.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}};
    auto fn = [w](const Tensor& t) { return max_pool2d(t, w); };
    Tensor x = randn({2, 3, 9, 8});
    Tensor large = randn({1, 4, 1200, 1000});  // 4 x 600 x 500 windows of 9: 10.8M columns
    for (int c = 0; c < 3; ++c) {
        bool grad = c == 1, big = c == 2;
        Tensor in = big ? large : grad ? x.detach().requires_grad_() : x;
        jit::ExplainOutput ex = jit::explain(fn, in);
        BOOST_REQUIRE(ex.ops_per_graph.size() == 1);
        const std::vector<std::string>& ops = ex.ops_per_graph[0];
        bool index = grad || big;
        BOOST_TEST_CONTEXT("gradient " << grad << ", large " << big) {
            BOOST_TEST(std::count(ops.begin(), ops.end(), "max_pool2d_index") == (index ? 1 : 0));
            BOOST_TEST(std::count(ops.begin(), ops.end(), "gather") == (index ? 1 : 0));
            BOOST_TEST(std::count(ops.begin(), ops.end(), "unfold2d") == (index ? 0 : 1));
        }
    }
    BOOST_TEST(max_diff(max_pool2d(large, w), pool_loops(large, w, true).out) == 0.0);
    // NaNs at plane positions 1 and 8 (rows 0-1, cols 0-1): the windows holding them are NaN
    // and their gradient goes to position 1, the first in window order
    Tensor place = arange(72).reshape({1, 1, 9, 8});
    Tensor nan_x = where((place - 1.0) * (place - 8.0) == 0.0, full({2, 3, 9, 8}, NAN), x);
    std::vector<double> xv = nan_x.to(float64).contiguous().to_vector<double>();
    int64_t OH = 5, OW = 4;
    Tensor r = randn({2, 3, OH, OW});
    std::vector<double> rv = r.to(float64).contiguous().to_vector<double>(), want,
                        grad(xv.size(), 0.0);
    for (int64_t nc = 0; nc < 6; ++nc)
        for (int64_t i = 0; i < OH; ++i)
            for (int64_t j = 0; j < OW; ++j) {
                int64_t at = -1;
                for (int64_t ki = 0; ki < 3; ++ki)
                    for (int64_t kj = 0; kj < 3; ++kj) {
                        int64_t h = i * 2 - 1 + ki, c = j * 2 - 1 + kj;
                        if (h < 0 || h >= 9 || c < 0 || c >= 8) continue;
                        double v = xv[size_t(nc * 72 + h * 8 + c)];
                        double best = at < 0 ? 0.0 : xv[size_t(nc * 72 + at)];
                        if (at < 0 || (!std::isnan(best) && (std::isnan(v) || v > best)))
                            at = h * 8 + c;
                    }
                want.push_back(xv[size_t(nc * 72 + at)]);
                grad[size_t(nc * 72 + at)] += rv[size_t((nc * OH + i) * OW + j)];
            }
    Tensor want_t = tensor(want, {2, 3, OH, OW});
    BOOST_TEST(std::isnan(want[0]));                         // the first window holds both NaNs
    auto nan_equal = [](const Tensor& a, const Tensor& b) {  // NaN where b is NaN, else within 1e-5
        Tensor both = ne(a, a) == ne(b, b);
        Tensor diff = where(ne(b, b), 0.0, (a.to(float64) - b.to(float64)).abs());
        return both.to(float32).amin().item<float>() == 1.0f && diff.amax().item<double>() < 1e-5;
    };
    auto run = [&](const std::function<Tensor(const Tensor&)>& f, const std::string& how) {
        Tensor xi = nan_x.detach().clone().requires_grad_();
        Tensor out = f(xi);
        (out * r).sum().backward();
        BOOST_TEST(nan_equal(out, want_t), how);
        BOOST_TEST(max_diff(xi.grad(), tensor(grad, {2, 3, 9, 8})) < 1e-5, how);
    };
    run(fn, "eager");
    for (const char* backend : kBackends) {
        jit::reset();
        auto compiled = compile(fn, {.backend = backend});
        run([&](const Tensor& t) { return compiled(t); }, backend);
        run([&](const Tensor& t) { return compiled(t); }, backend);
    }
}

// max_pool2d_index's CPU kernel runs one window entry over a row of outputs at a time, each
// over the outputs whose window holds that entry's column: the row's ends come from the
// stride, padding and dilation. Every combination below, on widths that leave windows hanging
// over either end, with ties (values 0-2) so that a wrong order of entries picks a later
// maximum: the values and the index (return_indices) equal the loops', with and without a
// gradient wanted.
BOOST_AUTO_TEST_CASE(max_pool2d_index_matches_the_loops_over_strides_paddings_dilations) {
    manual_seed(35);
    for (int64_t width : {1, 5, 8, 13})
        for (int64_t k : {1, 2, 3})
            for (int64_t s : {1, 2, 3})
                for (int64_t pad = 0; pad <= k / 2; ++pad)
                    for (int64_t d : {1, 2})
                        for (bool ceil : {false, true}) {
                            Window2d w{.kernel = {k, k},
                                       .stride = {s, s},
                                       .padding = {pad, pad},
                                       .dilation = {d, d},
                                       .ceil_mode = ceil};
                            if (width + 2 * pad < d * (k - 1) + 1) continue;  // no window fits
                            Tensor x = randint(0, 3, {1, 2, width + 1, width}).to(float32);
                            PoolLoops want = pool_loops(x, w, true);
                            BOOST_TEST_CONTEXT("width " << width << " kernel " << k << " stride "
                                                        << s << " pad " << pad << " dilation " << d
                                                        << " ceil " << ceil) {
                                // a window wholly in the padding: PyTorch's error
                                if (want.index.amin().item<double>() < 0) {
                                    BOOST_CHECK_THROW(max_pool2d_with_indices(x, w), Error);
                                    continue;
                                }
                                auto [out, index] = max_pool2d_with_indices(x, w);
                                BOOST_REQUIRE(out.shape() == want.out.shape());
                                BOOST_TEST(max_diff(out, want.out) == 0.0);
                                BOOST_TEST(max_diff(index.to(float64), want.index) == 0.0);
                                BOOST_TEST(max_diff(max_pool2d(x, w), want.out) == 0.0);
                            }
                        }
}

// Issue 30 item 11, pooling: ceil_mode, count_include_pad=False, divisor_override,
// return_indices (max_pool2d_with_indices), adaptive_max_pool2d and unbatched [C, H, W]
// inputs, against PyTorch's loops in float64 (values and gradients), eager and compiled.
BOOST_AUTO_TEST_CASE(pooling_options_match_pytorch_s_loops) {
    manual_seed(32);
    Tensor x = randn({2, 3, 7, 6});
    std::vector<Window2d> windows = {
        {.kernel = {3, 3}, .stride = {2, 2}, .ceil_mode = true},
        {.kernel = {2, 3}, .stride = {2, 2}, .padding = {1, 1}, .ceil_mode = true},
        {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}, .count_include_pad = false},
        {.kernel = {3, 2},
         .stride = {3, 2},
         .padding = {1, 1},
         .ceil_mode = true,
         .count_include_pad = false},
        {.kernel = {3, 3},
         .stride = {2, 2},
         .padding = {1, 0},
         .ceil_mode = true,
         .divisor_override = 4},
        {.kernel = {2, 2}, .stride = {2, 2}},
    };
    for (const Window2d& w : windows) {
        BOOST_TEST_CONTEXT("kernel " << w.kernel.first << "x" << w.kernel.second << " stride "
                                     << w.stride.first << "x" << w.stride.second << " padding "
                                     << w.padding.first << "x" << w.padding.second << " ceil "
                                     << w.ceil_mode << " include_pad " << w.count_include_pad
                                     << " divisor " << w.divisor_override) {
            PoolLoops avg = pool_loops(x, w, false);
            // The gradient of a mean: each window's r / divisor to each of its input elements,
            // which is the loops' adjoint; checked through gradcheck-free float64 autograd below.
            Tensor r = randn(avg.out.shape());
            Tensor x64 = x.to(float64).requires_grad_();
            (avg_pool2d(x64, w) * r.to(float64)).sum().backward();
            check_eager_and_compiled([w](const Tensor& t) { return avg_pool2d(t, w); }, x, r,
                                     avg.out, x64.grad(), 1e-5);
            if (w.divisor_override || !w.count_include_pad) continue;
            PoolLoops mx = pool_loops(x, w, true);
            check_eager_and_compiled([w](const Tensor& t) { return max_pool2d(t, w); }, x, r,
                                     mx.out, max_pool_grad_loops(x, w, r), 1e-5);
            auto [values, index] = max_pool2d_with_indices(x, w);
            BOOST_TEST(index.dtype() == DType::int64);
            BOOST_TEST(max_diff(values, mx.out) < 1e-6);
            BOOST_TEST(max_diff(index, mx.index) == 0.0);
        }
    }
    // avg_pool2d's gradient in float64 against finite differences (the loops' own adjoint).
    Window2d odd{.kernel = {3, 2},
                 .stride = {3, 2},
                 .padding = {1, 1},
                 .ceil_mode = true,
                 .count_include_pad = false};
    BOOST_TEST(gradcheck([odd](const std::vector<Tensor>& in) { return avg_pool2d(in[0], odd); },
                         {randn({1, 2, 5, 5})}));

    // adaptive_max_pool2d: PyTorch's bins, the first maximum of each (ties included).
    Tensor ties = randint(0, 3, {2, 3, 7, 6}).to(float32);
    Tensor r = randn({2, 3, 3, 4});
    std::vector<double> tv = ties.to(float64).to_vector<double>(),
                        rv = r.to(float64).to_vector<double>();
    std::vector<double> out, grad(tv.size());
    for (int64_t nc = 0; nc < 6; ++nc)
        for (int64_t i = 0; i < 3; ++i)
            for (int64_t j = 0; j < 4; ++j) {
                int64_t h0 = i * 7 / 3, h1 = ((i + 1) * 7 + 2) / 3, w0 = j * 6 / 4,
                        w1 = ((j + 1) * 6 + 3) / 4;
                size_t at = 0;
                double best = -INFINITY;
                for (int64_t h = h0; h < h1; ++h)
                    for (int64_t ww = w0; ww < w1; ++ww)
                        if (tv[size_t((nc * 7 + h) * 6 + ww)] > best)
                            best = tv[size_t((nc * 7 + h) * 6 + ww)],
                            at = size_t((nc * 7 + h) * 6 + ww);
                out.push_back(best);
                grad[at] += rv[size_t((nc * 3 + i) * 4 + j)];
            }
    check_eager_and_compiled(
        [](const Tensor& t) {
            return adaptive_max_pool2d(t, {3, 4});
        },
        ties, r, tensor(out, {2, 3, 3, 4}), tensor(grad, ties.shape()), 1e-5);
    BOOST_TEST(max_diff(adaptive_max_pool2d(x, {7, 3}),
                        max_pool2d(x, {.kernel = {1, 2}, .stride = {1, 2}})) == 0.0);

    // Unbatched [C, H, W]: the batched result's one sample.
    Tensor one = x.slice(0, 0, 1), w = randn({4, 3, 3, 3});
    Window2d pw{.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}, .ceil_mode = true};
    BOOST_TEST(max_diff(conv2d(one.squeeze(0), w, {}, {2, 1}, {1, 1}),
                        conv2d(one, w, {}, {2, 1}, {1, 1}).squeeze(0)) < 1e-5);
    BOOST_TEST(max_diff(max_pool2d(one.squeeze(0), pw), max_pool2d(one, pw).squeeze(0)) == 0.0);
    BOOST_TEST(max_diff(avg_pool2d(one.squeeze(0), pw), avg_pool2d(one, pw).squeeze(0)) == 0.0);
    BOOST_TEST(max_diff(adaptive_avg_pool2d(one.squeeze(0), {3, 4}),
                        adaptive_avg_pool2d(one, {3, 4}).squeeze(0)) == 0.0);
    BOOST_TEST(max_diff(adaptive_max_pool2d(one.squeeze(0), {3, 4}),
                        adaptive_max_pool2d(one, {3, 4}).squeeze(0)) == 0.0);
    BOOST_TEST(max_pool2d_with_indices(one.squeeze(0), pw).second.shape() == (Shape{3, 4, 4}));
    auto unbatched_conv = [&](const Tensor& t) { return conv2d(t, w, {}, {1, 1}, {1, 1}); };
    Tensor xc = one.squeeze(0);
    Tensor rc = randn({4, 7, 6});
    Tensor x64 = xc.to(float64).requires_grad_();
    (conv2d(x64, w.to(float64), {}, {1, 1}, {1, 1}) * rc.to(float64)).sum().backward();
    check_eager_and_compiled(unbatched_conv, xc, rc,
                             conv_reference(one, w, {}, {1, 1}, {1, 1}, {1, 1}, 1).squeeze(0),
                             x64.grad(), 1e-4);
}

BOOST_AUTO_TEST_SUITE_END()
