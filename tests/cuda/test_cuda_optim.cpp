// The optimizers' multi-tensor CUDA step (tensor/cuda_optim.cpp) against their per-tensor
// path (KILN_FUSED_OPTIM=0, the reference): SGD with and without momentum and weight decay,
// Adam with and without weight decay, over more parameters than one launch takes, float32
// and float64, a parameter left without a gradient on one step. Compile-only: the kernels'
// sources through NVRTC (no GPU needed).
#include <boost/test/unit_test.hpp>
#include <functional>
#include <iostream>
#include <memory>

#include "kiln.h"
#include "tensor/cuda.h"
#include "tensor/cuda_optim.h"
#include "tensor/cuda_runtime.h"
#include "tests/cuda/needs_gpu.h"
#include "tests/scoped_env.h"

using namespace kiln;
namespace utf = boost::unit_test;

namespace {

// The worst |got - want| / (|want| + 1), in float64.
double relative_error(const Tensor& got, const Tensor& want) {
    BOOST_REQUIRE(got.shape() == want.shape());
    Tensor a = got.detach().cpu().to(DType::float64), b = want.detach().cpu().to(DType::float64);
    return ((a - b).abs() / (b.abs() + 1.0)).amax().item<double>();
}

// 70 float32 parameters of assorted shapes (two launches) and 2 float64 ones.
std::vector<Tensor> start_params() {
    manual_seed(5);
    std::vector<Tensor> out;
    std::vector<Shape> shapes = {{3}, {17, 5}, {100000}, {1}, {64, 3, 3, 3}, {257}};
    for (int i = 0; i < 70; ++i) out.push_back(randn(shapes[size_t(i) % shapes.size()]));
    out.push_back(randn({33}).to(DType::float64));
    out.push_back(randn({4, 4}).to(DType::float64));
    return out;
}

using MakeOptimizer = std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)>;

// Four steps from the same start and gradients; parameter 5 has no gradient on step 2.
std::vector<Tensor> train(const MakeOptimizer& make, int64_t& launches) {
    std::vector<Tensor> params;
    for (const Tensor& t : start_params()) params.push_back(t.cuda().requires_grad_());
    std::unique_ptr<optim::Optimizer> opt = make(params);
    manual_seed(9);
    int64_t before = cuda::fused_optim_launches();
    for (int step = 0; step < 4; ++step) {
        for (size_t i = 0; i < params.size(); ++i) {
            Tensor g = randn(params[i].shape()).to(params[i].dtype());
            if (!(step == 2 && i == 5))
                params[i].set_grad(g.cuda());
            else
                params[i].zero_grad();
        }
        opt->step();
    }
    launches = cuda::fused_optim_launches() - before;
    std::vector<Tensor> out;
    for (const Tensor& p : params) out.push_back(p.detach().cpu());
    return out;
}

// `launches_per_chunk`: SGD's update alone, Adam's count of the step and its update.
void check_against_per_tensor(const std::string& what, const MakeOptimizer& make,
                              int launches_per_chunk = 1) {
    BOOST_TEST_CONTEXT(what) {
        int64_t fused_launches = 0, reference_launches = 0;
        std::vector<Tensor> fused = train(make, fused_launches), reference;
        {
            kiln_test::ScopedEnv off("KILN_FUSED_OPTIM", "0");
            reference = train(make, reference_launches);
        }
        BOOST_TEST(fused_launches == 4 * 3 * launches_per_chunk,
                   "per step: two float32 chunks (70 parameters) and one float64");
        BOOST_TEST(reference_launches == 0);
        std::vector<Tensor> start = start_params();
        for (size_t i = 0; i < fused.size(); ++i) {
            double tol = fused[i].dtype() == DType::float64 ? 1e-12 : 2e-6;
            BOOST_TEST(relative_error(fused[i], reference[i]) < tol, "parameter " << i);
            BOOST_TEST(relative_error(fused[i], start[i]) > 0, "parameter " << i << " moved");
        }
    }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(cuda_optim)

BOOST_AUTO_TEST_CASE(multi_tensor_kernel_sources_compile_with_nvrtc) {
    if (!cuda::detail::nvrtc_unavailable_reason().empty()) {
        std::cout << "cuda optim: SKIPPED compile-only test ("
                  << cuda::detail::nvrtc_unavailable_reason() << ")\n";
        return;
    }
    auto sources = cuda::fused_optim_kernel_sources();
    BOOST_TEST(sources.size() == 4u);
    for (const auto& [entry, source] :
         sources)  // a cubin for sm_90: ptxas checks the 4 KB argument block too
        BOOST_TEST_CONTEXT(entry) {
            BOOST_CHECK_NO_THROW(cuda::detail::compile_cubin(source, entry, 90));
        }
}

BOOST_AUTO_TEST_CASE(sgd_multi_tensor_step_equals_the_per_tensor_step,
                     *utf::precondition(kiln_test::NeedsGpu{"cuda optim"})) {
    check_against_per_tensor(
        "SGD", [](std::vector<Tensor> p) { return std::make_unique<optim::SGD>(p, 0.1); });
    check_against_per_tensor("SGD momentum", [](std::vector<Tensor> p) {
        return std::make_unique<optim::SGD>(p, 0.1, 0.9);
    });
    check_against_per_tensor("SGD momentum, weight decay", [](std::vector<Tensor> p) {
        return std::make_unique<optim::SGD>(p, 0.05, 0.9, 1e-2);
    });
}

BOOST_AUTO_TEST_CASE(adam_multi_tensor_step_equals_the_per_tensor_step,
                     *utf::precondition(kiln_test::NeedsGpu{"cuda optim"})) {
    check_against_per_tensor(
        "Adam", [](std::vector<Tensor> p) { return std::make_unique<optim::Adam>(p, 1e-2); }, 2);
    check_against_per_tensor(
        "Adam, weight decay",
        [](std::vector<Tensor> p) {
            return std::make_unique<optim::Adam>(p, 1e-3, std::pair{0.8, 0.99}, 1e-6, 0.05);
        },
        2);
}

// Inside a compiled function the step is recorded op by op (the JIT replays it), so the
// multi-tensor kernel stays out; the result equals eager's.
BOOST_AUTO_TEST_CASE(a_compiled_training_step_records_the_per_tensor_update,
                     *utf::precondition(kiln_test::NeedsGpu{"cuda optim"})) {
    auto run = [](bool compiled) {
        manual_seed(2);
        std::vector<Tensor> ps = {(randn({8, 4}) * 0.3).cuda().requires_grad_(),
                                  zeros({4}).cuda().requires_grad_()};
        Tensor x = randn({16, 8}).cuda(), t = randn({16, 4}).cuda();
        optim::SGD opt(ps, 0.1, 0.9);
        auto step = [&](const Tensor& input, const Tensor& target) {
            opt.zero_grad();
            Tensor d = matmul(input, ps[0]) + ps[1] - target;
            Tensor loss = (d * d).mean();
            loss.backward();
            opt.step();
            return loss.detach();
        };
        auto fn = compile(step);
        for (int i = 0; i < 3; ++i) compiled ? fn(x, t) : step(x, t);
        return std::vector<Tensor>{ps[0].detach().cpu(), ps[1].detach().cpu()};
    };
    std::vector<Tensor> eager = run(false);
    int64_t before = cuda::fused_optim_launches();
    std::vector<Tensor> compiled = run(true);
    std::cout << "cuda optim: a compiled step made " << cuda::fused_optim_launches() - before
              << " multi-tensor launches\n";
    for (size_t i = 0; i < eager.size(); ++i)
        BOOST_TEST(relative_error(compiled[i], eager[i]) < 1e-5, "parameter " << i);
}

BOOST_AUTO_TEST_SUITE_END()
