// mode="reduce-overhead" on the GPU (codegen/cuda_backend.h): compiled functions captured
// into CUDA graphs and replayed, against the default mode and eager, with inputs read in
// place where their addresses stay the same.
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "codegen/cuda_backend.h"
#include "kiln.h"
#include "tests/codegen/compare.h"
#include "tests/cuda/needs_gpu.h"

using namespace kiln;
namespace utf = boost::unit_test;

BOOST_AUTO_TEST_SUITE(cuda_graphs)

// mode="reduce-overhead" on the GPU: the first call warms up, the second captures a CUDA
// graph, later ones replay it; results equal the default mode's (the same kernels: exactly),
// results already returned are not overwritten by later replays, new shapes capture again,
// and a training step (cuBLAS inside the graph, forward and backward halves) trains alike.
BOOST_AUTO_TEST_CASE(reduce_overhead_replays_cuda_graphs_like_the_default_mode, *utf::precondition(kiln_test::NeedsGpu{"cuda codegen"})) {
    auto foo = [](const Tensor& x, const Tensor& y) { return sin(x) + cos(y) * x.sum(); };
    auto plain = compile(foo), graphed = compile(foo, {.mode = "reduce-overhead"});
    codegen::CudaGraphStats before = codegen::cuda_graph_stats();
    std::vector<Tensor> kept, want;
    for (int i = 0; i < 5; ++i) {
        Tensor x = randn({1000}).cuda(), y = randn({1000}).cuda();
        kept.push_back(graphed(x, y));
        want.push_back(plain(x, y));
    }
    for (size_t i = 0; i < kept.size(); ++i) BOOST_TEST(kiln_test::relative_error(kept[i].cpu(), want[i].cpu()) == 0.0, "call " << i);
    codegen::CudaGraphStats after = codegen::cuda_graph_stats();
    BOOST_TEST(after.captures - before.captures == 1);
    BOOST_TEST(after.replays - before.replays == 4);
    BOOST_TEST(after.not_captured == before.not_captured);
    Tensor x = randn({64, 7}).cuda(), y = randn({64, 7}).cuda();  // new sizes: a new entry, warm-up, capture
    for (int i = 0; i < 3; ++i) BOOST_TEST(kiln_test::relative_error(graphed(x, y).cpu(), foo(x, y).cpu()) < 1e-5);
    BOOST_TEST(codegen::cuda_graph_stats().captures - after.captures == 1);

    // An MLP trained 4 SGD steps in each mode from the same start.
    auto train = [](const std::string& mode) {
        manual_seed(3);
        std::vector<Tensor> ps = {(randn({20, 16}) * 0.2).cuda().requires_grad_(), zeros({16}).cuda().requires_grad_(),
                                  (randn({16, 4}) * 0.2).cuda().requires_grad_()};
        Tensor xb = randn({32, 20}).cuda(), t = randn({32, 4}).cuda();
        auto loss_fn = [&](const Tensor& input, const Tensor& target) {
            Tensor h = relu(matmul(input, ps[0]) + ps[1]);
            Tensor d = matmul(h, ps[2]) - target;
            return (d * d).mean();
        };
        auto step = compile(loss_fn, {.mode = mode});
        std::vector<double> losses;
        for (int i = 0; i < 4; ++i) {
            for (Tensor& p : ps) p.zero_grad();
            Tensor l = step(xb, t);
            l.backward();
            losses.push_back(l.item<double>());
            autograd::NoGradGuard no_grad;
            for (Tensor& p : ps) p.add_(p.grad(), -0.1);
        }
        return std::pair{losses, ps};
    };
    codegen::CudaGraphStats mlp_before = codegen::cuda_graph_stats();
    auto [l_plain, p_plain] = train("default");
    auto [l_graph, p_graph] = train("reduce-overhead");
    for (size_t i = 0; i < l_plain.size(); ++i) BOOST_TEST(std::abs(l_plain[i] - l_graph[i]) < 1e-6 * (1 + std::abs(l_plain[i])), "step " << i);
    for (size_t i = 0; i < p_plain.size(); ++i) BOOST_TEST(kiln_test::relative_error(p_graph[i].detach().cpu(), p_plain[i].detach().cpu()) < 1e-6);
    BOOST_TEST(l_plain.back() < l_plain.front());
    codegen::CudaGraphStats mlp_after = codegen::cuda_graph_stats();
    BOOST_TEST(mlp_after.captures - mlp_before.captures >= 1, "the forward (cuBLAS inside) captured");
    BOOST_TEST(mlp_after.not_captured == mlp_before.not_captured, "not captured: " << mlp_after.last_not_captured.substr(0, 300));
    std::cout << "cuda codegen: reduce-overhead: " << mlp_after.captures << " captures, " << mlp_after.replays << " replays, "
              << mlp_after.not_captured << " graphs not capturable\n";
}

// An input at the same address on the warm-up and the capture call is read in place, not
// copied: refilling it in place changes the result, and the same input at a new address (or
// strided) captures again, copied from then on; every result equals eager's.
BOOST_AUTO_TEST_CASE(reduce_overhead_reads_inputs_at_stable_addresses_in_place, *utf::precondition(kiln_test::NeedsGpu{"cuda codegen"})) {
    auto fn = [](const Tensor& w, const Tensor& x) { return matmul(x, w).tanh() + w.sum(); };
    auto graphed = compile(fn, {.mode = "reduce-overhead"});
    Tensor w = randn({32, 32}).cuda(), x = randn({8, 32}).cuda();
    codegen::CudaGraphStats before = codegen::cuda_graph_stats();
    auto check = [&](const Tensor& wi, const Tensor& xi, const char* what) {
        Tensor got = graphed(wi, xi).cpu();
        BOOST_TEST(kiln_test::relative_error(got, fn(wi.cpu(), xi.cpu())) < 1e-5, what);
    };
    check(w, x, "warm-up");
    check(w, x, "capture");
    {
        autograd::NoGradGuard no_grad;
        w.copy_(randn({32, 32}).cuda());  // refilled in place: the graph reads the new values
        x.mul_(2.0);
    }
    check(w, x, "replay after in-place refills");
    BOOST_TEST(codegen::cuda_graph_stats().captures - before.captures == 1);
    Tensor w2 = randn({32, 32}).cuda();
    check(w2, x, "the weight at a new address");
    check(w2, x, "replay with the weight copied");
    check(w, x, "the old weight again, copied");
    check(w, (randn({32, 8}).cuda()).t(), "a strided input");
    BOOST_TEST(codegen::cuda_graph_stats().captures - before.captures <= 3);
    BOOST_TEST(codegen::cuda_graph_stats().not_captured == before.not_captured);
}

BOOST_AUTO_TEST_SUITE_END()
