// docs/adding-an-op.md, "Adding a math function", done as the page says: cbrt is added as
// one KILN_MATH line, through the KILN_MATH_EXTRA hook of tensor/math_functions.def (so
// this test build adds it without rebuilding the library), and then used everywhere ops.def's
// math runs: the CPU vocabulary of tensor/pointwise_math.h (eager kernels: scalars and xsimd
// batches), a kernel built by the JIT's C++ toolchain (generated kernels include the same
// header), and the CUDA prelude under NVRTC (eager and generated CUDA kernels).
#define KILN_DOC_CBRT_LINE KILN_MATH(cbrt, 1, std_xsimd, cbrtf, ::cbrt, none)
#define KILN_MATH_EXTRA KILN_DOC_CBRT_LINE
#include "tensor/pointwise_math.h"  // first: every later include of it is a no-op
//
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <iostream>
#include <vector>

#include "codegen/toolchain.h"
#include "tensor/cuda_prelude.h"
#include "tensor/cuda_runtime.h"
#include "tensor/error.h"
#include "tensor/kernels.h"

namespace {

// Inputs over cbrt's whole line: negatives, zeros, subnormal to huge.
std::vector<float> inputs() {
    std::vector<float> v = {0.0f, -0.0f, 1.0f, -8.0f, 27.0f, 1e-40f, -3e38f, 3e38f};
    for (int i = 0; i < 40; ++i) v.push_back(-10.0f + 0.5f * float(i));
    return v;
}

bool close(double got, double want) {
    return std::abs(got - want) <= 4e-7 * std::abs(want) + 1e-45;
}

// A batch body and a scalar tail of cbrt, inside kiln_math as emitted kernels are: compiled
// here (the eager vocabulary) and, as the text below, by the JIT's toolchain.
#define KILN_DOC_CBRT_KERNEL                                                    \
    void doc_cbrt(const float* x, float* out, int64_t n) {                      \
        using B = xsimd::batch<float>;                                          \
        int64_t i = 0;                                                          \
        for (; i + int64_t(B::size) <= n; i += B::size)                         \
            kiln_math::cbrt(B::load_unaligned(x + i)).store_unaligned(out + i); \
        for (; i < n; ++i) out[i] = kiln_math::cbrt(x[i]);                      \
    }
#define KILN_DOC_TEXT(...) #__VA_ARGS__
#define KILN_DOC_STRING(macro) KILN_DOC_TEXT(macro)
const std::string kKernelSource =
    std::string("#include \"tensor/pointwise_math.h\"\nnamespace kiln_math {\nextern \"C\" ") +
    KILN_DOC_STRING(KILN_DOC_CBRT_KERNEL) + "\n}  // namespace kiln_math\n";

}  // namespace

namespace kiln_math {
KILN_DOC_CBRT_KERNEL
}  // namespace kiln_math

BOOST_AUTO_TEST_SUITE(adding_a_math_function)

BOOST_AUTO_TEST_CASE(one_def_line_gives_the_cpu_vocabulary_scalars_and_batches) {
    using B = xsimd::batch<float>;
    std::vector<float> x = inputs();
    x.resize((x.size() + B::size - 1) / B::size * B::size, 2.0f);
    for (size_t i = 0; i < x.size(); i += B::size) {
        alignas(64) float lanes[B::size];
        kiln_math::cbrt(B::load_unaligned(x.data() + i)).store_aligned(lanes);
        for (size_t k = 0; k < B::size; ++k) {
            double want = std::cbrt(double(x[i + k]));
            BOOST_TEST(close(lanes[k], want),
                       "batch cbrt(" << x[i + k] << ") = " << lanes[k] << ", want " << want);
            BOOST_TEST(close(kiln_math::cbrt(x[i + k]), want), "scalar cbrt(" << x[i + k] << ")");
            BOOST_TEST(kiln_math::cbrt(double(x[i + k])) == want);
        }
    }
}

BOOST_AUTO_TEST_CASE(one_def_line_reaches_kernels_built_by_the_jit_toolchain) {
    if (!kiln::codegen::compiler_available()) {
        std::cout << "adding_a_math_function: SKIPPED the JIT compile (no C++ compiler)\n";
        return;
    }
    kiln::codegen::BuildOptions with{
        {KILN_SOURCE_DIR},
        {"-DKILN_MATH_EXTRA=KILN_MATH(cbrt, 1, std_xsimd, cbrtf, ::cbrt, none)"},
        false};
    auto library = kiln::codegen::build_library(kKernelSource, with);
    auto run =
        reinterpret_cast<void (*)(const float*, float*, int64_t)>(library->symbol("doc_cbrt"));
    std::vector<float> x = inputs(), out(x.size());
    run(x.data(), out.data(), int64_t(x.size()));
    std::vector<float> eager(x.size());
    kiln_math::doc_cbrt(x.data(), eager.data(), int64_t(x.size()));
    for (size_t i = 0; i < x.size(); ++i)
        BOOST_TEST(out[i] == eager[i], "compiled cbrt(" << x[i] << ") = " << out[i]
                                                        << ", eager vocabulary " << eager[i]);
    // Without the line, kiln_math has no cbrt: the same kernel does not compile.
    kiln::codegen::BuildOptions without{{KILN_SOURCE_DIR}, {}, false};
    BOOST_CHECK_THROW(kiln::codegen::build_library(kKernelSource, without), kiln::Error);
}

BOOST_AUTO_TEST_CASE(one_def_line_reaches_the_cuda_prelude) {
    std::string prelude = std::string(kiln::cuda_prelude::kHead) +
                          kiln::cuda_prelude::kMathFunctions + kiln::cuda_prelude::kTail;
    BOOST_TEST(prelude.find("KILN_F1(cbrt, cbrtf, ::cbrt)") != std::string::npos, prelude);
    BOOST_TEST(std::string(kiln::cuda_math_prelude()).find("cbrt") ==
               std::string::npos);  // the library's own
    std::string reason = kiln::cuda::detail::nvrtc_unavailable_reason();
    if (!reason.empty()) {
        std::cout << "adding_a_math_function: SKIPPED the NVRTC compile (" << reason << ")\n";
        return;
    }
    const std::string kernel =
        "namespace kiln_math {\nextern \"C\" __global__ void doc_cbrt(const float* x, float* y, "
        "const double* xd, double* yd) {\n"
        "    y[0] = kiln_math::cbrt(x[0]);\n    yd[0] = kiln_math::cbrt(xd[0]);\n}\n}  // "
        "namespace kiln_math\n";
    BOOST_TEST(
        kiln::cuda::detail::compile_cubin(prelude + kernel, "doc_cbrt", 90, /*ptx_only=*/true)
            .size() > 100u);
    BOOST_CHECK_THROW(
        kiln::cuda::detail::compile_cubin(kiln::cuda_math_prelude() + kernel, "doc_cbrt", 90, true),
        kiln::Error);
}

BOOST_AUTO_TEST_SUITE_END()
