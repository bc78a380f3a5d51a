// conv2d and pooling (tensor/composites_conv.cpp over unfold2d/fold2d) against direct
// float64 loops, the errors PyTorch gives, and compiled equal to eager forward and backward.
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <limits>
#include <string>
#include <thread>
#include <tuple>

#include "kiln.h"

using namespace kiln;

namespace {

// out[n, o, i, j] = b[o] + sum over c in o's group, ki, kj of x[n, c, i*s + ki*d - p, ...] * w[o, c', ki, kj]
Tensor conv_reference(const Tensor& x, const Tensor& w, const Tensor& b, std::pair<int64_t, int64_t> s, std::pair<int64_t, int64_t> p,
                      std::pair<int64_t, int64_t> d, int64_t groups) {
    std::vector<double> xv = x.to(float64).contiguous().to_vector<double>(), wv = w.to(float64).contiguous().to_vector<double>();
    int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3), O = w.size(0), kh = w.size(2), kw = w.size(3);
    int64_t OH = (H + 2 * p.first - d.first * (kh - 1) - 1) / s.first + 1, OW = (W + 2 * p.second - d.second * (kw - 1) - 1) / s.second + 1;
    int64_t Cg = C / groups, Og = O / groups;
    std::vector<double> out(size_t(N * O * OH * OW));
    for (int64_t n = 0; n < N; ++n)
        for (int64_t o = 0; o < O; ++o)
            for (int64_t i = 0; i < OH; ++i)
                for (int64_t j = 0; j < OW; ++j) {
                    double acc = b.defined() ? b.to(float64).to_vector<double>()[size_t(o)] : 0.0;
                    for (int64_t c = 0; c < Cg; ++c)
                        for (int64_t ki = 0; ki < kh; ++ki)
                            for (int64_t kj = 0; kj < kw; ++kj) {
                                int64_t h = i * s.first + ki * d.first - p.first, ww = j * s.second + kj * d.second - p.second;
                                if (h < 0 || h >= H || ww < 0 || ww >= W) continue;
                                int64_t cin = o / Og * Cg + c;
                                acc += xv[size_t(((n * C + cin) * H + h) * W + ww)] * wv[size_t(((o * Cg + c) * kh + ki) * kw + kj)];
                            }
                    out[size_t(((n * O + o) * OH + i) * OW + j)] = acc;
                }
    return tensor(out, {N, O, OH, OW});
}

// The float64 loops of conv_reference run backwards: for a loss sum(out * r), the gradients
// of x, w and b. {out, gx, gw, gb}.
std::vector<Tensor> conv_reference_grads(const Tensor& x, const Tensor& w, const Tensor& r,
                                         std::pair<int64_t, int64_t> s,
                                         std::pair<int64_t, int64_t> p,
                                         std::pair<int64_t, int64_t> d, int64_t groups) {
    std::vector<double> xv = x.to(float64).contiguous().to_vector<double>(),
                        wv = w.to(float64).contiguous().to_vector<double>();
    std::vector<double> rv = r.to(float64).contiguous().to_vector<double>();
    int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3), O = w.size(0),
            kh = w.size(2), kw = w.size(3);
    int64_t OH = r.size(2), OW = r.size(3), Cg = C / groups, Og = O / groups;
    std::vector<double> gx(xv.size()), gw(wv.size()), gb(static_cast<size_t>(O));
    for (int64_t n = 0; n < N; ++n)
        for (int64_t o = 0; o < O; ++o)
            for (int64_t i = 0; i < OH; ++i)
                for (int64_t j = 0; j < OW; ++j) {
                    double g = rv[size_t(((n * O + o) * OH + i) * OW + j)];
                    gb[size_t(o)] += g;
                    for (int64_t c = 0; c < Cg; ++c)
                        for (int64_t ki = 0; ki < kh; ++ki)
                            for (int64_t kj = 0; kj < kw; ++kj) {
                                int64_t h = i * s.first + ki * d.first - p.first,
                                        ww = j * s.second + kj * d.second - p.second;
                                if (h < 0 || h >= H || ww < 0 || ww >= W) continue;
                                size_t xi = size_t(((n * C + o / Og * Cg + c) * H + h) * W + ww),
                                       wi = size_t(((o * Cg + c) * kh + ki) * kw + kj);
                                gx[xi] += g * wv[wi];
                                gw[wi] += g * xv[xi];
                            }
                }
    return {tensor(gx, x.shape()), tensor(gw, w.shape()), tensor(gb, {O})};
}

// Sets KILN_CONV for one scope (the conv2d entry reads it on every call).
struct ConvBackend {
    explicit ConvBackend(const char* name) { setenv("KILN_CONV", name, 1); }
    ~ConvBackend() { unsetenv("KILN_CONV"); }
};

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

double max_diff(const Tensor& a, const Tensor& b) {
    BOOST_REQUIRE(a.shape() == b.shape());
    return (a.to(float64) - b.to(float64)).abs().amax().item<double>();
}

const char* const kBackends[] = {"eager", "aot_eager", "inductor"};

// PyTorch's pooling loops in float64, written out again (aten's max_pool2d and avg_pool2d CPU
// kernels): the output size with ceil_mode, each window clipped to the padded input for
// count_include_pad, the first maximum (strict >) and its index into the H*W plane.
struct PoolLoops {
    Tensor out, index;
};
PoolLoops pool_loops(const Tensor& x, const Window2d& w, bool max) {
    std::vector<double> xv = x.to(float64).contiguous().to_vector<double>();
    int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
    auto [kh, kw] = w.kernel;
    auto [sh, sw] = w.stride;
    auto [ph, pw] = w.padding;
    auto [dh, dw] = w.dilation;
    auto size = [&](int64_t in, int64_t k, int64_t s, int64_t p, int64_t d) {
        int64_t num = in + 2 * p - d * (k - 1) - 1 + (w.ceil_mode ? s - 1 : 0);
        int64_t out = int64_t(std::floor(double(num) / double(s))) + 1;
        if (w.ceil_mode && (out - 1) * s >= in + p) --out;
        return out;
    };
    int64_t OH = size(H, kh, sh, ph, dh), OW = size(W, kw, sw, pw, dw);
    std::vector<double> out, index;
    for (int64_t nc = 0; nc < N * C; ++nc)
        for (int64_t i = 0; i < OH; ++i)
            for (int64_t j = 0; j < OW; ++j) {
                int64_t h0 = i * sh - ph, w0 = j * sw - pw;
                if (max) {
                    double best = -INFINITY;
                    int64_t at = -1;
                    for (int64_t ki = 0; ki < kh; ++ki)
                        for (int64_t kj = 0; kj < kw; ++kj) {
                            int64_t h = h0 + ki * dh, ww = w0 + kj * dw;
                            if (h < 0 || h >= H || ww < 0 || ww >= W) continue;
                            double v = xv[size_t((nc * H + h) * W + ww)];
                            if (at < 0 || v > best) best = v, at = h * W + ww;
                        }
                    out.push_back(best);
                    index.push_back(double(at));
                } else {
                    int64_t h1 = std::min(h0 + kh, H + ph), w1 = std::min(w0 + kw, W + pw);
                    int64_t pool_size = (h1 - h0) * (w1 - w0);
                    h0 = std::max<int64_t>(h0, 0), w0 = std::max<int64_t>(w0, 0),
                    h1 = std::min(h1, H), w1 = std::min(w1, W);
                    double sum = 0;
                    for (int64_t h = h0; h < h1; ++h)
                        for (int64_t ww = w0; ww < w1; ++ww)
                            sum += xv[size_t((nc * H + h) * W + ww)];
                    int64_t divisor = w.divisor_override    ? w.divisor_override
                                      : w.count_include_pad ? pool_size
                                                            : (h1 - h0) * (w1 - w0);
                    out.push_back(sum / double(divisor));
                }
            }
    return {tensor(out, {N, C, OH, OW}), max ? tensor(index, {N, C, OH, OW}) : Tensor()};
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

void raises_containing(const std::function<void()>& f, const std::string& want,
                       const std::string& how) {
    try {
        f();
        BOOST_ERROR(how << ": no error, expected one saying: " << want);
    } catch (const Error& e) {
        BOOST_TEST(std::string(e.what()).find(want) != std::string::npos, how << ": " << e.what());
    }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(conv)

BOOST_AUTO_TEST_CASE(conv2d_matches_direct_loops_over_strides_padding_dilation_and_groups) {
    manual_seed(11);
    struct Config {
        Shape x, w;
        std::pair<int64_t, int64_t> s, p, d;
        int64_t groups;
        bool bias;
    };
    const Config configs[] = {
        {{2, 3, 7, 6}, {5, 3, 3, 3}, {1, 1}, {0, 0}, {1, 1}, 1, true},  {{2, 3, 7, 6}, {5, 3, 3, 3}, {2, 1}, {1, 2}, {1, 1}, 1, false},
        {{1, 4, 8, 8}, {6, 2, 3, 2}, {1, 2}, {1, 0}, {2, 1}, 2, true},  {{3, 2, 5, 5}, {4, 2, 1, 1}, {1, 1}, {0, 0}, {1, 1}, 1, true},
        {{1, 6, 6, 7}, {6, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 6, false},  // depthwise
    };
    int index = 0;
    for (const Config& c : configs) {
        ++index;
        Tensor x = randn(c.x, {.dtype = float64}), w = randn(c.w, {.dtype = float64}), b = c.bias ? randn({c.w[0]}, {.dtype = float64}) : Tensor();
        Tensor got = conv2d(x, w, b, c.s, c.p, c.d, c.groups);
        BOOST_TEST(max_diff(got, conv_reference(x, w, b, c.s, c.p, c.d, c.groups)) < 1e-10, "config " << index);
        Tensor got32 = conv2d(x.to(float32), w.to(float32), c.bias ? b.to(float32) : Tensor(), c.s, c.p, c.d, c.groups);
        BOOST_TEST(got32.dtype() == float32);
        BOOST_TEST(max_diff(got32, got) < 1e-4);
    }
}

// Both CPU paths (oneDNN where built with it, on its own layouts and on NCHW, and the im2col
// composite) in float32 against the float64 loops: the output and the gradients of input,
// weight and bias.
BOOST_AUTO_TEST_CASE(conv2d_and_both_gradients_match_float64_loops_on_onednn_and_im2col) {
    struct Config {
        Shape x, w;
        std::pair<int64_t, int64_t> s, p, d;
        int64_t groups;
        bool bias;
    };
    const Config configs[] = {
        {{2, 3, 7, 6}, {5, 3, 3, 3}, {1, 1}, {0, 0}, {1, 1}, 1, true},
        {{2, 3, 7, 6}, {5, 3, 3, 3}, {2, 1}, {1, 2}, {1, 1}, 1, false},
        {{1, 4, 8, 8}, {6, 2, 3, 2}, {1, 2}, {1, 0}, {2, 1}, 2, true},
        {{3, 2, 5, 5}, {4, 2, 1, 1}, {1, 1}, {0, 0}, {1, 1}, 1, true},
        {{1, 6, 6, 7}, {6, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 6, false},   // depthwise
        {{2, 8, 9, 9}, {16, 8, 3, 3}, {2, 2}, {1, 1}, {1, 1}, 1, false},  // downsampling
        {{1, 3, 11, 10}, {4, 3, 5, 5}, {3, 2}, {2, 2}, {1, 2}, 1, true},
        {{2, 4, 10, 10}, {8, 2, 3, 3}, {1, 1}, {2, 2}, {2, 2}, 2, true},  // dilation with groups
    };
    for (const char* backend : {"onednn", "onednn-plain", "im2col"}) {
#ifndef KILN_HAVE_DNNL
        if (std::string(backend) != "im2col") {
            BOOST_TEST_MESSAGE("built without oneDNN: KILN_CONV=" << backend << " is skipped");
            continue;
        }
#endif
        ConvBackend use(backend);
        BOOST_TEST(detail::conv_backend_name() == std::string(backend).substr(0, 6));
        manual_seed(15);
        int index = 0;
        for (const Config& c : configs) {
            ++index;
            Tensor x = randn(c.x, {.requires_grad = true}), w = randn(c.w, {.requires_grad = true});
            Tensor b = c.bias ? randn({c.w[0]}, {.requires_grad = true}) : Tensor();
            int64_t calls = detail::onednn_conv_calls();
            Tensor out = conv2d(x, w, b, c.s, c.p, c.d, c.groups);
            Tensor r = randn(out.shape());
            (out * r).sum().backward();
            // oneDNN: one forward, one input-gradient and one weight-gradient primitive.
            BOOST_TEST(
                detail::onednn_conv_calls() - calls == (std::string(backend) != "im2col" ? 3 : 0),
                backend << " config " << index);
            std::vector<Tensor> want = conv_reference_grads(x, w, r, c.s, c.p, c.d, c.groups);
            double tol = 1e-4 * double(c.w[1] * c.w[2] * c.w[3]);
            BOOST_TEST(max_diff(out, conv_reference(x, w, b, c.s, c.p, c.d, c.groups)) < tol,
                       backend << " config " << index);
            BOOST_TEST(max_diff(x.grad(), want[0]) < tol, backend << " config " << index);
            BOOST_TEST(max_diff(w.grad(), want[1]) < tol * double(out.size(2) * out.size(3)),
                       backend << " config " << index);
            if (c.bias)
                BOOST_TEST(max_diff(b.grad(), want[2]) < tol * double(out.size(2) * out.size(3)),
                           backend << " config " << index);
        }
    }
}

// Built with oneDNN, a CPU float32 conv2d runs through it, eager and compiled (one conv2d node
// in the graph, run by the same op); float64 and KILN_CONV=im2col take the composite.
BOOST_AUTO_TEST_CASE(cpu_float32_conv2d_runs_through_onednn_when_built_with_it) {
#ifndef KILN_HAVE_DNNL
    BOOST_TEST_MESSAGE(
        "built without oneDNN (KILN_HAVE_DNNL unset): nothing to check but the name");
    BOOST_TEST(detail::conv_backend_name() == std::string("im2col"));
#else
    BOOST_TEST(detail::conv_backend_name() == std::string("onednn"));
    Tensor x = randn({2, 3, 8, 8}), w = randn({4, 3, 3, 3});
    int64_t calls = detail::onednn_conv_calls();
    conv2d(x, w);
    BOOST_TEST(detail::onednn_conv_calls() == calls + 1);
    conv2d(x.to(float64), w.to(float64));
    BOOST_TEST(detail::onednn_conv_calls() == calls + 1);
    auto fn = [&](const Tensor& a) { return relu(conv2d(a, w, {}, {1, 1}, {1, 1})); };
    auto compiled = compile(fn);
    Tensor eager = fn(x);
    calls = detail::onednn_conv_calls();
    Tensor got = compiled(x);
    BOOST_TEST(detail::onednn_conv_calls() > calls);
    BOOST_TEST(max_diff(got, eager) < 1e-5);
    jit::ExplainOutput ex = jit::explain(fn, x);
    BOOST_REQUIRE(ex.ops_per_graph.size() == 1);
    BOOST_TEST(std::count(ex.ops_per_graph[0].begin(), ex.ops_per_graph[0].end(), "conv2d") == 1);
    Tensor by_onednn = conv2d(x, w);
    {
        ConvBackend use("im2col");
        BOOST_TEST(detail::conv_backend_name() == std::string("im2col"));
        calls = detail::onednn_conv_calls();
        BOOST_TEST(max_diff(conv2d(x, w), by_onednn) < 1e-4);
        BOOST_TEST(detail::onednn_conv_calls() == calls);
    }
#endif
}

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

BOOST_AUTO_TEST_CASE(fold2d_adds_overlapping_windows_back) {
    // fold2d is unfold2d's adjoint: <unfold(x), y> == <x, fold(y)>
    Tensor x = randn({2, 3, 5, 4}, {.dtype = float64});
    Attrs w{.shape = {3, 2, 1, 1, 1, 0, 1, 1}};
    Tensor cols = dispatch(OpId::unfold2d, {x}, w);
    Tensor y = randn(cols.shape(), {.dtype = float64});
    Attrs f = w;
    f.dims = {5, 4};
    Tensor back = dispatch(OpId::fold2d, {y}, f);
    BOOST_TEST(back.shape() == x.shape());
    BOOST_TEST(std::abs((cols * y).sum().item<double>() - (x * back).sum().item<double>()) < 1e-9);
}

BOOST_AUTO_TEST_CASE(bad_shapes_raise_naming_the_op_and_the_values) {
    Tensor x = randn({1, 3, 5, 5});
    auto raises = [](auto&& f, const std::string& want) {
        try {
            f();
            BOOST_ERROR("no error, expected one saying: " << want);
        } catch (const Error& e) {
            BOOST_TEST(std::string(e.what()).find(want) != std::string::npos, e.what());
        }
    };
    raises([&] { conv2d(x, randn({4, 2, 3, 3})); }, "conv2d: expected input with 2 channels");
    raises(
        [&] {
            conv2d(x.reshape({15, 5}), randn({4, 3, 3, 3}));
        },
        "conv2d: expected a 3-D [C, H, W] or 4-D [N, C, H, W] input");
    raises(
        [&] {
            conv2d(x, randn({4, 3, 7, 7}));
        },
        "Kernel size can't be greater than actual input size");
    raises([&] { conv2d(x, randn({4, 3, 3, 3}), randn({3})); }, "expected a bias of shape [4]");
    raises([&] { conv2d(x, randn({4, 1, 3, 3}), {}, {1, 1}, {0, 0}, {1, 1}, 2); }, "divisible by groups");
    raises([&] { conv2d(x, randn({4, 3, 3, 3}), {}, {0, 1}); }, "stride must be positive");
    raises([&] { max_pool2d(x, {.kernel = {2, 2}, .padding = {2, 2}}); }, "padding should be at most half of the kernel size");
    raises([&] { adaptive_avg_pool2d(x, {0, 1}); }, "output size must be positive");
    raises([&] { max_pool2d(x.to(int64), {.kernel = {2, 2}}); }, "expected a float32 or float64 tensor");
}

BOOST_AUTO_TEST_CASE(a_compiled_conv_block_equals_eager_forward_and_backward) {
    for (const char* backend : {"onednn", "im2col"}) {
#ifndef KILN_HAVE_DNNL
        if (std::string(backend) == "onednn") {
            BOOST_TEST_MESSAGE("built without oneDNN: its half of this test is skipped");
            continue;
        }
#endif
        ConvBackend use(backend);
        manual_seed(13);
        Tensor w = (randn({8, 3, 3, 3}) * 0.2).requires_grad_(),
               b = zeros({8}, {.requires_grad = true});
        auto block = [&](const Tensor& x) {
            Tensor h = relu(conv2d(x, w, b, {1, 1}, {1, 1}));
            h = max_pool2d(h, {.kernel = {2, 2}, .stride = {2, 2}});
            return adaptive_avg_pool2d(h, {1, 1}).reshape({x.size(0), 8}).sum();
        };
        auto compiled = compile(block);
        for (int i = 0; i < 2; ++i) {
            Tensor x = randn({2, 3, 8, 8});
            w.zero_grad(), b.zero_grad();
            Tensor l = block(x);
            l.backward();
            Tensor gw = w.grad().clone(), gb = b.grad().clone();
            w.zero_grad(), b.zero_grad();
            Tensor lc = compiled(x);
            lc.backward();
            BOOST_TEST(std::abs(l.item<float>() - lc.item<float>()) < 1e-4);
            BOOST_TEST(max_diff(w.grad(), gw) < 1e-4);
            BOOST_TEST(max_diff(b.grad(), gb) < 1e-4);
        }
    }
}

// Sizes that change from call to call (the JIT's dynamic shapes), a strided view as the
// input, an in-place write inside the function, and backward, all at once: every call
// equals eager, values and gradients.
BOOST_AUTO_TEST_CASE(compiled_conv_pool_gather_over_changing_sizes_views_and_in_place_writes) {
    manual_seed(14);
    Tensor w = (randn({4, 3, 3, 3}) * 0.3).requires_grad_();
    auto fn = [&](const Tensor& x, const Tensor& idx) {
        Tensor y = conv2d(x, w, {}, {2, 1}, {1, 1});
        y.mul_(0.5);                                              // in place on an intermediate
        Tensor p = max_pool2d(relu(y), {.kernel = {2, 2}, .stride = {1, 2}, .padding = {1, 1}});
        Tensor flat = p.reshape({p.size(0), p.size(1), p.size(2) * p.size(3)});
        return gather(flat, 2, idx).sum() + avg_pool2d(x, {.kernel = {2, 2}, .stride = {2, 2}}).sum();
    };
    auto compiled = compile(fn);
    for (auto [n, h, wd] : {std::tuple{2, 8, 9}, {3, 10, 7}, {2, 8, 9}, {1, 12, 12}, {4, 9, 10}}) {
        Tensor base = randn({n, 3, wd, h});
        Tensor x = base.transpose(2, 3);                          // a strided view [n, 3, h, wd]
        Tensor probe = conv2d(x, w.detach(), {}, {2, 1}, {1, 1});
        int64_t cells = ((probe.size(2) + 2 - 2) / 1 + 1) * ((probe.size(3) + 2 - 2) / 2 + 1);
        Tensor idx = randint(0, cells, {n, 4, 5});
        w.zero_grad();
        Tensor want = fn(x, idx);
        want.backward();
        Tensor gw = w.grad().clone();
        w.zero_grad();
        Tensor got = compiled(x, idx);
        got.backward();
        BOOST_TEST(std::abs(got.item<float>() - want.item<float>()) < 1e-3 * (1 + std::abs(want.item<float>())), "n " << n << " h " << h);
        BOOST_TEST(max_diff(w.grad(), gw) < 1e-3, "n " << n << " h " << h);
    }
}

// The weights reordered into oneDNN's layout are kept (tensor/conv_weight_cache.h) and found
// again only while they are the same values: an in-place write, a freed tensor whose buffer
// a new one reuses, and other views of one storage each get their own, correct, weights.
BOOST_AUTO_TEST_CASE(reordered_weights_are_cached_and_never_served_stale) {
#ifndef KILN_HAVE_DNNL
    BOOST_TEST_MESSAGE("built without oneDNN: no weight cache, this test is skipped");
    BOOST_TEST(detail::conv_weight_cache_stats().entries == 0);
#else
    manual_seed(31);
    detail::conv_weight_cache_clear();
    Tensor x = randn({2, 16, 10, 10});
    auto conv = [&](const Tensor& w) { return conv2d(x, w, {}, {1, 1}, {1, 1}); };
    auto reference = [&](const Tensor& w) {
        ConvBackend use("im2col");
        return conv(w);
    };
    Tensor w = randn({32, 16, 3, 3}) * 0.2;
    auto stats = detail::conv_weight_cache_stats;
    int64_t misses = stats().misses, hits = stats().hits;
    Tensor first = conv(w);
    // oneDNN wants blocked weights for this shape (checked: else nothing below is tested)
    BOOST_REQUIRE_MESSAGE(stats().misses == misses + 1,
                          "the weights were not reordered: plain layout chosen?");
    BOOST_TEST(max_diff(conv(w), first) == 0.0);
    BOOST_TEST(stats().hits == hits + 1);
    BOOST_TEST(stats().misses == misses + 1);
    // an in-place update (as SGD's p.add_) reorders again
    w.add_(ones_like(w));
    BOOST_TEST(max_diff(conv(w), reference(w)) < 1e-4);
    BOOST_TEST(stats().misses == misses + 2);
    optim::SGD sgd({w.requires_grad_()}, 0.5);
    conv(w).sum().backward();
    sgd.step();
    {
        NoGradGuard no_grad;
        Tensor want = reference(w.detach());  // SGD made the weights large: a relative bound
        BOOST_TEST(max_diff(conv(w), want) < 1e-5 * want.abs().amax().item<double>());
    }
    // freed weights whose buffer the pool hands to the next tensor of the same size
    for (int i = 0; i < 4; ++i) {
        const void* old_address;
        {
            Tensor a = randn({32, 16, 3, 3});
            old_address = a.raw_data();
            conv(a);
        }
        Tensor b = randn({32, 16, 3, 3});
        if (i == 0)
            BOOST_TEST_MESSAGE(
                "buffer reused by the next tensor: " << (b.raw_data() == old_address));
        BOOST_TEST(max_diff(conv(b), reference(b)) < 1e-4, "round " << i);
    }
    // one storage, three weights: two shapes at offset 0, and the same shape further on
    Tensor base = randn({2 * 32 * 16 * 9}) * 0.2;
    Tensor w_half = base.slice(0, 0, 32 * 16 * 9).reshape({32, 16, 3, 3});
    Tensor w_all = base.reshape({64, 16, 3, 3});
    Tensor w_second = base.slice(0, 32 * 16 * 9, 2 * 32 * 16 * 9).reshape({32, 16, 3, 3});
    for (int round = 0; round < 2; ++round)
        for (const Tensor* v : {&w_half, &w_all, &w_second})
            BOOST_TEST(max_diff(conv(*v), reference(*v)) < 1e-4, "round " << round);
    // a write through another view of the storage bumps the shared version
    base.slice(0, 32 * 16 * 9, 32 * 16 * 9 + 5).mul_(-3.0);
    BOOST_TEST(max_diff(conv(w_second), reference(w_second)) < 1e-4);
    BOOST_TEST(stats().bytes <= int64_t(512) << 20);
    // KILN_CONV_CACHE=0: reorders every call
    setenv("KILN_CONV_CACHE", "0", 1);
    misses = stats().misses;
    conv(w_half), conv(w_half);
    BOOST_TEST(stats().misses == misses + 2);
    unsetenv("KILN_CONV_CACHE");
#endif
}

// Several threads convolving with the same weights, which one of them updates in between.
BOOST_AUTO_TEST_CASE(the_weight_cache_serves_several_threads) {
    manual_seed(32);
    Tensor x = randn({1, 16, 8, 8}), w = randn({32, 16, 3, 3}) * 0.2;
    Tensor want;
    {
        ConvBackend use("im2col");
        want = conv2d(x, w, {}, {1, 1}, {1, 1});
    }
    std::vector<double> diffs(4, -1);
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
        threads.emplace_back([&, t] {
            double worst = 0;
            for (int i = 0; i < 10; ++i)
                worst = std::max(worst, max_diff(conv2d(x, w, {}, {1, 1}, {1, 1}), want));
            diffs[size_t(t)] = worst;
        });
    for (auto& th : threads) th.join();
    for (double d : diffs) BOOST_TEST(d < 1e-4);
}

// Issue 30 item 7: a (dilated) kernel wider than the padded input with stride > 1 made the
// size's numerator negative, and C++'s truncating `/` gave (-1) / 2 + 1 = 1: a [.., 1, 1]
// result read from outside the input. The division floors now, and each op raises as
// PyTorch, eagerly and compiled (after a valid call, so the compiled function re-records).
BOOST_AUTO_TEST_CASE(a_window_wider_than_the_padded_input_raises_eager_and_compiled) {
    manual_seed(30);
    Tensor wide = randn({4, 2, 4, 4}), dilated = randn({4, 2, 2, 2});
    nn::MaxPool2d max_module({4, 4}, {2, 2});
    nn::AvgPool2d avg_module({6, 6}, {3, 3}, {1, 1});
    std::vector<std::tuple<std::string, std::function<Tensor(const Tensor&)>, std::string>> cases =
        {
            {"conv2d 4x4 kernel, stride 2",
             [&](const Tensor& x) {
                 return conv2d(x, wide, {}, {2, 2});
             },
             "Kernel size can't be greater than actual input size"},
            {"conv2d 2x2 kernel dilated 3, stride 2",
             [&](const Tensor& x) {
                 return conv2d(x, dilated, {}, {2, 2}, {0, 0}, {3, 3});
             },
             "Kernel size can't be greater than actual input size"},
            {"max_pool2d 4x4, stride 2",
             [](const Tensor& x) {
                 return max_pool2d(x, {.kernel = {4, 4}, .stride = {2, 2}});
             },
             "Output size is too small"},
            {"avg_pool2d 6x6, stride 3, padding 1",
             [](const Tensor& x) {
                 return avg_pool2d(x, {.kernel = {6, 6}, .stride = {3, 3}, .padding = {1, 1}});
             },
             "Output size is too small"},
            {"nn::MaxPool2d", [&](const Tensor& x) { return max_module(x); },
             "Output size is too small"},
            {"nn::AvgPool2d", [&](const Tensor& x) { return avg_module(x); },
             "Output size is too small"},
        };
    Tensor small = randn({1, 2, 3, 3}), fits = randn({1, 2, 9, 9});
    for (auto& [name, fn, message] : cases) {
        BOOST_TEST_CONTEXT(name) {
            BOOST_TEST(fn(fits).dim() == 4);
            raises_containing([&] { fn(small); }, message, "eager");
            for (const char* backend : kBackends) {
                jit::reset();
                auto compiled = compile(fn, {.backend = backend});
                BOOST_TEST(max_diff(compiled(fits), fn(fits)) < 1e-4);
                raises_containing([&] { compiled(small); }, message, backend);
            }
        }
    }
    // The op itself checks too: unfold2d with a window wider than its input.
    raises_containing(
        [&] {
            dispatch(OpId::unfold2d, {small}, {.shape = {4, 4, 2, 2, 0, 0, 1, 1}});
        },
        "does not fit an input of 3x3", "unfold2d");
    // At the edge the output is one window: a 4x4 kernel, stride 2, over 4x4 (and 5x5) inputs.
    for (int64_t n : {4, 5}) {
        Tensor x = randn({1, 2, n, n});
        BOOST_TEST(max_diff(conv2d(x, wide, {}, {2, 2}),
                            conv_reference(x, wide, {}, {2, 2}, {0, 0}, {1, 1}, 1)) < 1e-4);
        BOOST_TEST(max_diff(max_pool2d(x, {.kernel = {4, 4}, .stride = {2, 2}}),
                            pool_loops(x, {.kernel = {4, 4}, .stride = {2, 2}}, true).out) < 1e-6);
    }
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
// argmax mask over the windows, which made training 2-3x slower. A window holding NaNs gives NaN
// and sends its gradient to its first NaN; ceil_mode and the index (return_indices) ride on the
// same op.
BOOST_AUTO_TEST_CASE(max_pool2d_is_one_index_op_and_a_gather) {
    manual_seed(34);
    Window2d w{.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}};
    auto fn = [w](const Tensor& t) { return max_pool2d(t, w); };
    Tensor x = randn({2, 3, 9, 8});
    for (bool grad :
         {false, true}) {  // without a gradient: amax over the windows, fused when compiled
        jit::ExplainOutput ex = jit::explain(fn, grad ? x.detach().requires_grad_() : x);
        BOOST_REQUIRE(ex.ops_per_graph.size() == 1);
        const std::vector<std::string>& ops = ex.ops_per_graph[0];
        BOOST_TEST(std::count(ops.begin(), ops.end(), "max_pool2d_index") == (grad ? 1 : 0));
        BOOST_TEST(std::count(ops.begin(), ops.end(), "gather") == (grad ? 1 : 0));
        BOOST_TEST(std::count(ops.begin(), ops.end(), "unfold2d") == (grad ? 0 : 1));
    }
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
