// conv2d (tensor/composites_conv.cpp over unfold2d/fold2d, or oneDNN) against direct float64
// loops, the errors PyTorch gives, the oneDNN weight cache, and compiled equal to eager
// forward and backward. Pooling: test_pooling.cpp; the loops both use: window_loops.h.
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <limits>
#include <string>
#include <thread>
#include <tuple>

#include "kiln.h"
#include "tensor/gemm.h"
#include "tensor/parallel.h"
#include "tests/tensor/window_loops.h"

using namespace kiln;
using namespace kiln_test;

namespace {

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

// At one kiln thread a oneDNN convolution runs on one thread: OpenMP's count (kept per calling
// thread) is set before oneDNN creates a primitive, which splits its work for the count it was
// created with. Before, a program's first conv primitive was created for every core, and each
// of its calls ran an OpenMP team that size (a worker spinning beside a 1-thread first call).
// Checked on a thread of its own, whose OpenMP count starts at the core count, with a shape
// no other test uses (so its primitive is new): the process gains no thread.
BOOST_AUTO_TEST_CASE(at_one_thread_a_new_conv_primitive_starts_no_openmp_worker) {
#ifndef KILN_HAVE_DNNL
    BOOST_TEST_MESSAGE("built without oneDNN (KILN_HAVE_DNNL unset): no OpenMP team to check");
#else
    auto process_threads = [] {
        auto tasks = std::filesystem::directory_iterator("/proc/self/task");
        return std::distance(std::filesystem::begin(tasks), std::filesystem::end(tasks));
    };
    if (std::thread::hardware_concurrency() < 2) {
        BOOST_TEST_MESSAGE("one core: OpenMP's default team is one thread, nothing to tell apart");
        return;
    }
    set_num_threads(1);
    manual_seed(41);
    Tensor x = randn({1, 5, 13, 11}), w = randn({7, 5, 3, 3});
    long before = -1, after = -1;
    int64_t calls = detail::onednn_conv_calls();
    std::thread([&] {
        before = process_threads();
        for (int i = 0; i < 3; ++i) conv2d(x, w, {}, {1, 1}, {1, 1});
        after = process_threads();
    }).join();
    set_num_threads(0);
    BOOST_TEST(detail::onednn_conv_calls() == calls + 3);
    // <=: a thread of an earlier test (a background build) may end meanwhile.
    BOOST_TEST(after <= before);
#endif
}

// A oneDNN GEMM sets its calling thread's OpenMP count to 1 (kiln's threads split it); a conv
// primitive created after it on that thread must still be made for kiln's count. Before, the
// conv side remembered the count it last set and skipped setting it again, so in a training
// step every backward conv primitive (created after the forward's Linear) ran on one thread.
// On a thread of its own (OpenMP's count is per thread), with shapes no other test uses.
BOOST_AUTO_TEST_CASE(a_conv_after_a_onednn_gemm_is_made_for_kiln_threads) {
#ifndef KILN_HAVE_DNNL
    BOOST_TEST_MESSAGE("built without oneDNN (KILN_HAVE_DNNL unset): no OpenMP count to check");
#else
    set_num_threads(2);
    int threads = num_threads();  // 1 on a one-core machine: then both counts are 1
    manual_seed(43);
    Tensor x = randn({2, 6, 9, 7}), w = randn({5, 6, 3, 3});
    Tensor a = randn({64, 128}), b = randn({128, 64});  // 2^19 multiply-adds: oneDNN's GEMM
    std::vector<int> seen;
    int gemm_threads = -1;
    std::thread([&] {
        conv2d(x, w, {}, {1, 1}, {1, 1});
        seen.push_back(detail::onednn_conv_threads());
        matmul(a, b);
        conv2d(x, w, {}, {2, 2}, {1, 1});  // a new primitive, created after the GEMM
        seen.push_back(detail::onednn_conv_threads());
        Tensor x_grad = randn({2, 6, 9, 7}, {.requires_grad = true});
        conv2d(x_grad, w, {}, {1, 1}, {0, 0}).sum().backward();  // both gradients' primitives too
        seen.push_back(detail::onednn_conv_threads());
        matmul(a, b);  // and a GEMM after a conv still runs each dnnl_sgemm on one thread
        gemm_threads = detail::onednn_gemm_threads();
    }).join();
    set_num_threads(0);
    BOOST_TEST(seen == std::vector<int>(3, threads), boost::test_tools::per_element());
    BOOST_TEST(gemm_threads == 1);
#endif
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

// The reordered weights are blocks of kiln's pool (so a big one gets the pool's huge pages, and
// one dropped for a newer version is reused): caching one adds its bytes to the pool's live
// bytes, clearing the cache gives them back. The values are the im2col reference's.
BOOST_AUTO_TEST_CASE(reordered_weights_live_in_kiln_buffer_pool) {
#ifndef KILN_HAVE_DNNL
    BOOST_TEST_MESSAGE("built without oneDNN (KILN_HAVE_DNNL unset): no weight cache");
#else
    manual_seed(33);
    Tensor x = randn({1, 256, 4, 4}), w = randn({256, 256, 3, 3}) * 0.05;  // 2.4 MB of weights
    Tensor want;
    {
        ConvBackend use("im2col");
        want = conv2d(x, w, {}, {1, 1}, {1, 1});
    }
    detail::conv_weight_cache_clear();
    size_t live = pool_stats().live_bytes;
    Tensor got = conv2d(x, w, {}, {1, 1}, {1, 1});
    BOOST_REQUIRE(detail::conv_weight_cache_stats().entries == 1);  // oneDNN chose a blocked layout
    auto held = size_t(detail::conv_weight_cache_stats().bytes);
    BOOST_TEST(held >= size_t(w.numel()) * 4);
    BOOST_TEST(pool_stats().live_bytes >= live + held);
    size_t before_clear = pool_stats().live_bytes;
    detail::conv_weight_cache_clear();
    BOOST_TEST(pool_stats().live_bytes <= before_clear - held);
    BOOST_TEST(max_diff(got, want) < 1e-4);
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

BOOST_AUTO_TEST_SUITE_END()
