// CUDA conv2d through cuDNN (tensor/cudnn.cpp) against the im2col + GEMM path it replaces
// (KILN_CUDNN=0, the reference): values and both gradients over strides, padding, dilation,
// groups and bias, float32 and float64; the backend API's plan cache (one plan per direction
// and geometry, reused), operand alignment, exact float32 against TF32, benchmark mode;
// compiled (default and reduce-overhead) against eager. Without a GPU or without
// libcudnn.so.9 the cases say why they are skipped.
#include <boost/test/unit_test.hpp>
#include <cstdint>
#include <iostream>
#include <sstream>
#include <string>

#include "jit/log.h"
#include "kiln.h"
#include "tensor/cuda.h"
#include "tensor/cudnn.h"
#include "tests/cuda/needs_gpu.h"
#include "tests/scoped_env.h"

using namespace kiln;
namespace utf = boost::unit_test;

namespace {

// A GPU, and cuDNN loaded on it.
struct NeedsCudnn {
    boost::test_tools::assertion_result operator()(boost::unit_test::test_unit_id id) {
        if (auto gpu = kiln_test::NeedsGpu{"cudnn"}(id); !gpu) return gpu;
        if (cuda::detail::cudnn_unavailable_reason().empty()) return true;
        std::cout << "cudnn: SKIPPED (" << cuda::detail::cudnn_unavailable_reason() << ")\n";
        boost::test_tools::assertion_result r(false);
        r.message() << cuda::detail::cudnn_unavailable_reason();
        return r;
    }
};

// The worst |got - want| / (|want| + 1), in float64 (either dtype), over same-shaped tensors.
double relative_error(const Tensor& got, const Tensor& want) {
    BOOST_REQUIRE(got.defined() && want.defined());
    BOOST_REQUIRE(got.shape() == want.shape());
    Tensor a = got.detach().cpu().to(DType::float64), b = want.detach().cpu().to(DType::float64);
    return ((a - b).abs() / (b.abs() + 1.0)).amax().item<double>();
}

struct ConvCase {
    int64_t n, c, h, w, o, kh, kw;
    std::pair<int64_t, int64_t> stride, padding, dilation;
    int64_t groups;
    bool bias;
};

std::ostream& operator<<(std::ostream& os, const ConvCase& k) {
    return os << "input [" << k.n << ", " << k.c << ", " << k.h << ", " << k.w << "], weight ["
              << k.o << ", " << k.c / k.groups << ", " << k.kh << ", " << k.kw << "], stride "
              << k.stride.first << "x" << k.stride.second << ", padding " << k.padding.first << "x"
              << k.padding.second << ", dilation " << k.dilation.first << "x" << k.dilation.second
              << ", groups " << k.groups << (k.bias ? ", bias" : "");
}

struct Result {
    Tensor y, gx, gw, gb;
};

// conv2d on CUDA copies of the leaves, and the gradients of a random weighting of its output.
Result run_conv(const ConvCase& k, const std::vector<Tensor>& leaves, const Tensor& weighting) {
    std::vector<Tensor> on_gpu;
    for (const Tensor& t : leaves) on_gpu.push_back(t.cuda().requires_grad_());
    Tensor bias = k.bias ? on_gpu[2] : Tensor();
    Tensor y = conv2d(on_gpu[0], on_gpu[1], bias, k.stride, k.padding, k.dilation, k.groups);
    (y * weighting.cuda()).sum().backward();
    return {y.detach().cpu(), on_gpu[0].grad().cpu(), on_gpu[1].grad().cpu(),
            k.bias ? on_gpu[2].grad().cpu() : Tensor()};
}

const std::vector<ConvCase> kCases = {
    {2, 3, 9, 11, 4, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true},     // same padding
    {2, 4, 10, 10, 6, 3, 3, {2, 2}, {1, 0}, {1, 1}, 2, false},   // strided, grouped
    {1, 6, 12, 12, 6, 3, 3, {1, 1}, {2, 2}, {2, 2}, 6, true},    // depthwise, dilated
    {3, 8, 7, 7, 16, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, true},     // 1x1
    {2, 3, 20, 20, 8, 7, 7, {2, 2}, {3, 3}, {1, 1}, 1, false},   // a ResNet stem
    {2, 4, 9, 8, 4, 2, 3, {3, 2}, {0, 1}, {1, 2}, 1, true},      // uneven everything
    {4, 16, 8, 8, 32, 3, 3, {2, 2}, {1, 1}, {1, 1}, 1, false},   // a ResNet downsampling block
    {1, 3, 11, 13, 5, 3, 3, {2, 2}, {1, 1}, {1, 1}, 1, true},    // batch 1, stride 2, odd sizes
    {2, 8, 9, 9, 12, 3, 3, {1, 1}, {1, 1}, {1, 1}, 4, false},    // 4 groups, 2 in and 3 out each
    {2, 8, 15, 15, 8, 3, 3, {2, 2}, {1, 1}, {1, 1}, 8, false},   // depthwise, stride 2, odd
    {2, 8, 13, 13, 16, 1, 1, {2, 2}, {0, 0}, {1, 1}, 1, false},  // 1x1 stride 2 (a shortcut)
    {2, 4, 12, 10, 6, 3, 3, {1, 1}, {0, 0}, {3, 2}, 2, true},    // dilated, grouped, no padding
    {2, 4, 9, 9, 4, 5, 5, {1, 1}, {2, 2}, {1, 1}, 1, false},     // 5x5
    {1, 1, 1, 1, 3, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, true},      // one pixel
};

// The cache counters, read before a step: what one forward and backward added.
struct PlanCount {
    int64_t calls = detail::cudnn_conv_calls();
    int64_t plans = cuda::detail::cudnn_stats().plans;
    int64_t reuses = cuda::detail::cudnn_stats().plan_reuses;
    int64_t new_calls() const { return detail::cudnn_conv_calls() - calls; }
    int64_t new_plans() const { return cuda::detail::cudnn_stats().plans - plans; }
    int64_t new_reuses() const { return cuda::detail::cudnn_stats().plan_reuses - reuses; }
};

// Random leaves for a case (the bias leaf is used only when the case has one), and a random
// weighting of its output.
std::vector<Tensor> leaves_for(const ConvCase& k, DType dt) {
    return {randn({k.n, k.c, k.h, k.w}).to(dt),
            (randn({k.o, k.c / k.groups, k.kh, k.kw}) * 0.3).to(dt), randn({k.o}).to(dt)};
}
Tensor weighting_for(const ConvCase& k, const std::vector<Tensor>& leaves) {
    Tensor probe = conv2d(leaves[0], leaves[1], k.bias ? leaves[2] : Tensor(), k.stride, k.padding,
                          k.dilation, k.groups);
    return randn(probe.shape()).to(leaves[0].dtype());
}

// cuDNN's output and gradients against the im2col path's (KILN_CUDNN=0).
void expect_equal_to_im2col(const ConvCase& k, const std::vector<Tensor>& leaves,
                            const Tensor& weighting, const Result& fast, double tol) {
    kiln_test::ScopedEnv off("KILN_CUDNN", "0");
    Result ref = run_conv(k, leaves, weighting);
    BOOST_TEST(relative_error(fast.y, ref.y) < tol, "output");
    BOOST_TEST(relative_error(fast.gx, ref.gx) < tol, "input gradient");
    BOOST_TEST(relative_error(fast.gw, ref.gw) < tol, "weight gradient");
    if (k.bias) BOOST_TEST(relative_error(fast.gb, ref.gb) < tol, "bias gradient");
}

// `k` run twice in float32 and in float64: the first call plans its three directions, the
// second only runs the cached plans; both give im2col's values.
void expect_planned_once_then_reused(const ConvCase& k) {
    for (DType dt : {DType::float32, DType::float64}) {
        BOOST_TEST_CONTEXT(dtype_name(dt)) {
            std::vector<Tensor> leaves = leaves_for(k, dt);
            Tensor weighting = weighting_for(k, leaves);
            PlanCount first;
            Result fast = run_conv(k, leaves, weighting);
            BOOST_TEST(first.new_calls() == 3);
            BOOST_TEST(first.new_plans() == 3, "forward, input and weight gradient planned");
            BOOST_TEST(first.new_reuses() == 0);
            PlanCount second;
            Result again = run_conv(k, leaves, weighting);
            BOOST_TEST(second.new_calls() == 3);
            BOOST_TEST(second.new_plans() == 0, "nothing planned again");
            BOOST_TEST(second.new_reuses() == 3, "the three cached plans ran");
            double tol = dt == DType::float64 ? 1e-12 : 1e-4;
            expect_equal_to_im2col(k, leaves, weighting, fast, tol);
            expect_equal_to_im2col(k, leaves, weighting, again, tol);
        }
    }
}

struct CerrCapture {
    std::ostringstream out;
    std::streambuf* old = std::cerr.rdbuf(out.rdbuf());
    ~CerrCapture() { std::cerr.rdbuf(old); }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(cuda_cudnn)

// Without a GPU: the CPU never routes through cuDNN, and the reason names what is missing.
BOOST_AUTO_TEST_CASE(cpu_tensors_never_use_cudnn_and_the_reason_says_why) {
    BOOST_TEST(!detail::conv_uses_cudnn(randn({1, 1, 3, 3})));
    if (!cuda::is_available()) {
        std::string why = cuda::detail::cudnn_unavailable_reason();
        BOOST_TEST(why.find("CUDA is not available") != std::string::npos, why);
        BOOST_TEST(cuda::detail::cudnn_version() == 0);
        return;
    }
    std::string why = cuda::detail::cudnn_unavailable_reason();
    std::cout << "cudnn: "
              << (why.empty() ? "version " + std::to_string(cuda::detail::cudnn_version()) : why)
              << "\n";
    kiln_test::ScopedEnv off("KILN_CUDNN", "0");
    BOOST_TEST(!detail::conv_uses_cudnn(randn({1, 1, 3, 3}).cuda()));
}

BOOST_AUTO_TEST_CASE(conv2d_values_and_gradients_equal_the_im2col_path,
                     *utf::precondition(NeedsCudnn{})) {
    for (DType dt : {DType::float32, DType::float64}) {
        for (const ConvCase& k : kCases) {
            BOOST_TEST_CONTEXT(k << ", " << dtype_name(dt)) {
                std::vector<Tensor> leaves = leaves_for(k, dt);
                Tensor probe = conv2d(leaves[0], leaves[1], k.bias ? leaves[2] : Tensor(), k.stride,
                                      k.padding, k.dilation, k.groups);
                Tensor weighting = randn(probe.shape()).to(dt);
                PlanCount before;
                Result fast = run_conv(k, leaves, weighting);
                BOOST_TEST(before.new_calls() == 3,
                           "forward, input and weight gradient through cuDNN");
                BOOST_TEST(before.new_plans() <= 3, "at most one plan per direction");
                Result ref;
                {
                    kiln_test::ScopedEnv off("KILN_CUDNN", "0");
                    PlanCount off_before;
                    ref = run_conv(k, leaves, weighting);
                    BOOST_TEST(off_before.new_calls() == 0, "KILN_CUDNN=0 runs no cuDNN call");
                }
                // float32: cuDNN's algorithms (Winograd, FFT) round differently from one GEMM.
                double tol = dt == DType::float64 ? 1e-12 : 1e-4;
                BOOST_TEST(fast.y.dtype() == dt);
                BOOST_TEST(fast.y.shape() == ref.y.shape());
                BOOST_TEST(relative_error(fast.y, ref.y) < tol, "output");
                BOOST_TEST(relative_error(fast.gx, ref.gx) < tol, "input gradient");
                BOOST_TEST(relative_error(fast.gw, ref.gw) < tol, "weight gradient");
                if (k.bias) BOOST_TEST(relative_error(fast.gb, ref.gb) < tol, "bias gradient");
                // The CPU agrees too (oneDNN or im2col there).
                BOOST_TEST(relative_error(fast.y, probe) < tol, "CPU output");
            }
        }
    }
}

// Each direction of a geometry is planned once (operation graph, engine config, finalized
// execution plan) and its later calls only execute the cached plan; float64 has plans of its own.
BOOST_AUTO_TEST_CASE(each_direction_is_planned_once_then_its_plan_is_reused,
                     *utf::precondition(NeedsCudnn{})) {
    const ConvCase k = {3, 5,      13,     11,     7, 3,
                        3, {1, 1}, {1, 1}, {1, 1}, 1, false};  // sizes no other case uses
    expect_planned_once_then_reused(k);
}

// A contiguous view that starts 4 bytes into its storage reaches cuDNN as it is: its plan is
// made for that alignment (a plan for 16-byte aligned data could read it misaligned), and an
// aligned copy of the same geometry gets a plan of its own.
BOOST_AUTO_TEST_CASE(a_view_starting_mid_storage_is_planned_for_its_alignment,
                     *utf::precondition(NeedsCudnn{})) {
    const int64_t numel = 2 * 3 * 7 * 9;
    Tensor x = randn({numel + 1}).cuda().narrow(0, 1, numel).view({2, 3, 7, 9});
    BOOST_REQUIRE(x.is_contiguous());
    BOOST_REQUIRE(reinterpret_cast<uintptr_t>(x.raw_data()) % 16 == 4);
    Tensor w = randn({5, 3, 3, 3}).cuda();
    PlanCount view;
    Tensor y = conv2d(x, w, {}, {1, 1}, {1, 1}).cpu();
    BOOST_TEST(view.new_plans() == 1);
    PlanCount aligned;
    Tensor y_aligned = conv2d(x.clone(), w, {}, {1, 1}, {1, 1}).cpu();
    BOOST_TEST(aligned.new_plans() == 1, "16-byte aligned data: another plan");
    kiln_test::ScopedEnv off("KILN_CUDNN", "0");
    Tensor ref = conv2d(x, w, {}, {1, 1}, {1, 1}).cpu();
    BOOST_TEST(relative_error(y, ref) < 1e-4);
    BOOST_TEST(relative_error(y_aligned, ref) < 1e-4);
}

// Without KILN_CUDNN_TF32 float32 stays float32 (no engine that cuDNN notes as using tensor
// cores): a 576-term sum per output is within float32 rounding of float64, where TF32's
// 10-bit mantissas are ~1e-3 off. KILN_CUDNN_TF32=1 stays within TF32's rounding.
BOOST_AUTO_TEST_CASE(float32_is_exact_unless_tf32_is_allowed, *utf::precondition(NeedsCudnn{})) {
    Tensor x = randn({4, 64, 12, 12}), w = randn({64, 64, 3, 3}) * 0.1;
    Tensor y_weight = randn({4, 64, 12, 12});
    auto grads = [&](DType dt, bool on_gpu) {
        Tensor xd = on_gpu ? x.to(dt).cuda() : x.to(dt), wd = on_gpu ? w.to(dt).cuda() : w.to(dt);
        xd.requires_grad_();
        wd.requires_grad_();
        Tensor y = conv2d(xd, wd, {}, {1, 1}, {1, 1});
        (y * (on_gpu ? y_weight.to(dt).cuda() : y_weight.to(dt))).sum().backward();
        return std::vector<Tensor>{y.detach().cpu(), xd.grad().cpu(), wd.grad().cpu()};
    };
    std::vector<Tensor> want = grads(DType::float64, false);
    const char* names[3] = {"output", "input gradient", "weight gradient"};
    std::vector<Tensor> exact = grads(DType::float32, true);
    for (int i = 0; i < 3; ++i) BOOST_TEST(relative_error(exact[i], want[i]) < 1e-4, names[i]);
    kiln_test::ScopedEnv tf32("KILN_CUDNN_TF32", "1");
    PlanCount before;
    std::vector<Tensor> fast = grads(DType::float32, true);
    BOOST_TEST(before.new_plans() == 3, "TF32 plans of their own");
    for (int i = 0; i < 3; ++i) BOOST_TEST(relative_error(fast[i], want[i]) < 2e-2, names[i]);
}

// KILN_CUDNN_BENCHMARK=1: each direction's candidates are timed once (then the cached plan
// runs), and the fastest gives im2col's values, in float32 and float64.
BOOST_AUTO_TEST_CASE(benchmark_mode_plans_each_direction_once_and_equals_im2col,
                     *utf::precondition(NeedsCudnn{})) {
    kiln_test::ScopedEnv bench("KILN_CUDNN_BENCHMARK", "1");
    const ConvCase k = {2, 6,      17,     15,     10, 3,
                        3, {2, 2}, {1, 1}, {1, 1}, 2,  true};  // sizes no other case uses
    expect_planned_once_then_reused(k);
}

// KILN_LOGS=cudnn prints one line per plan made: the direction, the geometry and the engine.
BOOST_AUTO_TEST_CASE(kiln_logs_cudnn_names_each_plan_and_its_engine,
                     *utf::precondition(NeedsCudnn{})) {
    Tensor x = randn({1, 2, 19, 17}).cuda(), w = randn({3, 2, 3, 3}).cuda();  // a fresh geometry
    std::string log;
    {
        kiln_test::ScopedEnv logs("KILN_LOGS", "cudnn");
        log_reload();
        CerrCapture cap;
        conv2d(x, w, {}, {1, 1}, {1, 1});
        conv2d(x, w, {}, {1, 1}, {1, 1});  // the cached plan: no second line
        log = cap.out.str();
    }
    log_reload();
    BOOST_TEST_MESSAGE(log);
    size_t at = log.find("[kiln:cudnn] forward of input [1, 2, 19, 17], weight [3, 2, 3, 3]");
    BOOST_TEST(at != std::string::npos);
    BOOST_TEST(log.find("engine ") != std::string::npos);
    BOOST_TEST(log.find("planned in") != std::string::npos);
    BOOST_TEST(log.find("[kiln:cudnn]", at + 1) == std::string::npos, "one line");
}

// Non-contiguous operands (a transposed input, an expanded gradient) give the same result.
BOOST_AUTO_TEST_CASE(strided_operands_are_made_contiguous_first, *utf::precondition(NeedsCudnn{})) {
    Tensor x = randn({2, 3, 10, 9}).cuda().transpose(2, 3);  // [2, 3, 9, 10], strided
    Tensor w = randn({5, 3, 3, 3}).cuda();
    Tensor y = conv2d(x, w, {}, {1, 1}, {1, 1});
    kiln_test::ScopedEnv off("KILN_CUDNN", "0");
    Tensor ref = conv2d(x, w, {}, {1, 1}, {1, 1});
    BOOST_TEST(relative_error(y.cpu(), ref.cpu()) < 1e-4);
}

// KILN_CUDNN_BENCHMARK=1 (algorithms timed once per geometry) gives the heuristic's values;
// KILN_CUDNN_TF32=1 (TF32 tensor cores) stays within TF32's rounding (10-bit mantissas) of them.
BOOST_AUTO_TEST_CASE(benchmarked_and_tf32_plans_agree_with_the_default_one,
                     *utf::precondition(NeedsCudnn{})) {
    Tensor x = randn({4, 32, 28, 28}).cuda(), w = (randn({48, 32, 3, 3}) * 0.1).cuda();
    auto conv = [&] { return conv2d(x, w, {}, {1, 1}, {1, 1}).cpu(); };
    Tensor plain = conv();
    int64_t plans = cuda::detail::cudnn_stats().plans;
    {
        kiln_test::ScopedEnv tf32("KILN_CUDNN_TF32", "1");
        Tensor t = conv();
        BOOST_TEST(cuda::detail::cudnn_stats().plans == plans + 1, "a plan of its own");
        BOOST_TEST(relative_error(t, plain) < 2e-2);
    }
    kiln_test::ScopedEnv bench("KILN_CUDNN_BENCHMARK", "1");
    Tensor x2 = randn({4, 32, 27, 27}).cuda();  // a new geometry: planned with cudnnFind*
    Tensor measured = conv2d(x2, w, {}, {1, 1}, {1, 1}).cpu();
    kiln_test::ScopedEnv off("KILN_CUDNN", "0");
    BOOST_TEST(relative_error(measured, conv2d(x2, w, {}, {1, 1}, {1, 1}).cpu()) < 1e-4);
}

// compile() records the conv2d op; its fallback kernel runs cuDNN, in a CUDA graph too.
BOOST_AUTO_TEST_CASE(compiled_convolutions_equal_eager_with_gradients,
                     *utf::precondition(NeedsCudnn{})) {
    auto block = [](const Tensor& x, const Tensor& w1, const Tensor& b1, const Tensor& w2) {
        Tensor h = relu(conv2d(x, w1, b1, {1, 1}, {1, 1}));
        return (conv2d(h, w2, {}, {2, 2}, {1, 1}) + 1.0).relu().mean();
    };
    std::vector<Tensor> start = {randn({4, 8, 16, 16}), randn({16, 8, 3, 3}) * 0.2,
                                 randn({16}) * 0.1, randn({16, 16, 3, 3}) * 0.2};
    auto grads = [&](auto&& f) {
        std::vector<Tensor> ps;
        for (const Tensor& t : start) ps.push_back(t.cuda().requires_grad_());
        Tensor loss = f(ps[0], ps[1], ps[2], ps[3]);
        loss.backward();
        std::vector<Tensor> out = {loss.detach().cpu()};
        for (const Tensor& p : ps) out.push_back(p.grad().cpu());
        return out;
    };
    std::vector<Tensor> eager = grads(block);
    for (const char* mode : {"default", "reduce-overhead"}) {
        auto compiled = compile(block, {.mode = mode});
        for (int call = 0; call < 3; ++call) {  // reduce-overhead: warm-up, capture, replay
            int64_t calls = detail::cudnn_conv_calls();
            std::vector<Tensor> got = grads(compiled);
            if (std::string(mode) == "default")  // two forwards, two input and two weight gradients
                BOOST_TEST(detail::cudnn_conv_calls() - calls >= 6, "call " << call);
            for (size_t i = 0; i < got.size(); ++i)
                BOOST_TEST(relative_error(got[i], eager[i]) < 1e-5,
                           mode << " call " << call << " tensor " << i);
        }
    }
}

BOOST_AUTO_TEST_SUITE_END()
