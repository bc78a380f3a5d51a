// cublasLt GEMMs with epilogues (tensor/cublaslt.cpp) against the unfused ops they replace:
// the library call itself for bias, bias + ReLU and bias + tanh-GELU; nn::Linear on CUDA
// against KILN_CUBLASLT=0 (matmul and add, the reference), values and gradients; a compiled
// Linear records matmul and add. Without a GPU the cases say why they are skipped.
#include <boost/test/unit_test.hpp>
#include <iostream>

#include "kiln.h"
#include "tensor/cublaslt.h"
#include "tensor/cuda.h"
#include "tests/cuda/needs_gpu.h"
#include "tests/scoped_env.h"

using namespace kiln;
namespace F = kiln::nn::functional;
namespace utf = boost::unit_test;
using cuda::detail::Epilogue;

namespace {

struct NeedsCublasLt {
    boost::test_tools::assertion_result operator()(boost::unit_test::test_unit_id id) {
        if (auto gpu = kiln_test::NeedsGpu{"cublaslt"}(id); !gpu) return gpu;
        if (cuda::detail::cublaslt_unavailable_reason().empty()) return true;
        std::cout << "cublaslt: SKIPPED (" << cuda::detail::cublaslt_unavailable_reason() << ")\n";
        boost::test_tools::assertion_result r(false);
        r.message() << cuda::detail::cublaslt_unavailable_reason();
        return r;
    }
};

double relative_error(const Tensor& got, const Tensor& want) {
    BOOST_REQUIRE(got.defined() && want.defined());
    BOOST_REQUIRE(got.shape() == want.shape());
    Tensor a = got.detach().cpu().to(DType::float64), b = want.detach().cpu().to(DType::float64);
    return ((a - b).abs() / (b.abs() + 1.0)).amax().item<double>();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(cuda_cublaslt)

BOOST_AUTO_TEST_CASE(cpu_linear_never_calls_cublaslt) {
    int64_t before = cuda::detail::cublaslt_calls();
    nn::Linear layer(4, 3);
    Tensor y = layer.forward(randn({2, 4}));
    BOOST_TEST(y.shape() == (Shape{2, 3}));
    BOOST_TEST(cuda::detail::cublaslt_calls() == before);
    if (!cuda::is_available())
        BOOST_TEST(cuda::detail::cublaslt_unavailable_reason().find("CUDA is not available") !=
                   std::string::npos);
}

BOOST_AUTO_TEST_CASE(gemm_epilogues_equal_matmul_then_the_pointwise_ops,
                     *utf::precondition(NeedsCublasLt{})) {
    struct Size {
        int64_t m, n, k;
    };
    for (Size s : {Size{1, 1, 1}, Size{7, 13, 5}, Size{128, 768, 768}, Size{300, 50, 1000}}) {
        Tensor x = randn({s.m, s.k}).cuda(), w = (randn({s.n, s.k}) * 0.1).cuda(),
               b = randn({s.n}).cuda();
        Tensor z = matmul(x, w.t()) + b;
        for (Epilogue e : {Epilogue::bias, Epilogue::bias_relu, Epilogue::bias_gelu}) {
            BOOST_TEST_CONTEXT("m " << s.m << ", n " << s.n << ", k " << s.k << ", epilogue "
                                    << int(e)) {
                Tensor want = e == Epilogue::bias        ? z
                              : e == Epilogue::bias_relu ? relu(z)
                                                         : F::gelu(z, "tanh");
                Tensor got = empty({s.m, s.n}, DType::float32, x.device());
                int64_t before = cuda::detail::cublaslt_calls();
                cuda::detail::gemm_epilogue(s.m, s.n, s.k, static_cast<const float*>(x.raw_data()),
                                            static_cast<const float*>(w.raw_data()),
                                            static_cast<const float*>(b.raw_data()),
                                            static_cast<float*>(got.raw_data()), e);
                BOOST_TEST(cuda::detail::cublaslt_calls() == before + 1);
                // cublasLt's GELU may use a fast tanh: looser there.
                BOOST_TEST(relative_error(got, want) < (e == Epilogue::bias_gelu ? 1e-3 : 1e-5));
            }
        }
    }
}

BOOST_AUTO_TEST_CASE(cuda_linear_values_and_gradients_equal_matmul_and_add,
                     *utf::precondition(NeedsCublasLt{})) {
    manual_seed(4);
    nn::Linear layer(16, 24);
    layer.to(kiln_test::kCuda);
    Tensor x0 = randn({2, 5, 16}), weighting = randn({2, 5, 24});
    auto run = [&](int64_t& calls) {
        layer.zero_grad();
        Tensor x = x0.cuda().requires_grad_();
        int64_t before = cuda::detail::cublaslt_calls();
        Tensor y = layer.forward(x);
        calls = cuda::detail::cublaslt_calls() - before;
        (y * weighting.cuda()).sum().backward();
        return std::vector<Tensor>{y.detach().cpu(), x.grad().cpu(), layer.weight.grad().cpu(),
                                   layer.bias.grad().cpu()};
    };
    int64_t fused_calls = 0, reference_calls = 0;
    std::vector<Tensor> fused = run(fused_calls), reference;
    {
        kiln_test::ScopedEnv off("KILN_CUBLASLT", "0");
        reference = run(reference_calls);
    }
    BOOST_TEST(fused_calls == 1);
    BOOST_TEST(reference_calls == 0);
    const char* names[] = {"output", "input gradient", "weight gradient", "bias gradient"};
    for (size_t i = 0; i < fused.size(); ++i)
        BOOST_TEST(relative_error(fused[i], reference[i]) < 1e-5, names[i]);
}

// Under compile() Linear records matmul and add (the inductor fuses the add itself).
BOOST_AUTO_TEST_CASE(a_compiled_linear_records_matmul_and_add,
                     *utf::precondition(NeedsCublasLt{})) {
    manual_seed(6);
    auto layer = std::make_shared<nn::Linear>(8, 4);
    layer->to(kiln_test::kCuda);
    Tensor x = randn({3, 8}).cuda();
    Tensor eager = layer->forward(x);
    auto f = compile([&](const Tensor& input) { return relu(layer->forward(input)); });
    int64_t before = cuda::detail::cublaslt_calls();
    Tensor got = f(x);
    BOOST_TEST(cuda::detail::cublaslt_calls() == before, "no cublasLt call while recording");
    BOOST_TEST(relative_error(got, relu(eager)) < 1e-5);
}

BOOST_AUTO_TEST_SUITE_END()
