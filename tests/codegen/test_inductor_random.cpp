// Differential test of the inductor path, forward AND backward: seeded random programs of
// pointwise, reduction, broadcast and view ops are recorded as jit Graphs, split by AOT
// autograd into forward and backward halves, lowered, and built a few compiler calls at
// a time (compile_cpu_many); outputs and input gradients must equal eager autograd's,
// NaN and inf included.
#include <optional>
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cmath>
#include <iostream>
#include <random>
#include <thread>

#include "compare.h"
#include "random_programs.h"
#include "codegen/cpu_backend.h"
#include "codegen/lower_graph.h"
#include "codegen/toolchain.h"
#include "jit/aot/aot.h"
#include "kiln.h"

using namespace kiln;
using namespace kiln::codegen;

namespace {

using kiln_test::Program;
using kiln_test::ProgramGenerator;

using kiln_test::Reference;
using kiln_test::eager_reference;
using kiln_test::exact_reference;
using kiln_test::relative_error;

}  // namespace

BOOST_AUTO_TEST_SUITE(inductor_random)

// 512 programs -> 1024 halves, built in 4 translation units by 2 threads (2 cores). At -O1:
// this test checks what the code computes, and -O3 takes 1.7x as long to build ~19k lines
// per unit; the other tests run -O3 code.
BOOST_AUTO_TEST_CASE(random_programs_forward_and_backward_match_eager) {
    constexpr int kPrograms = 512, kBatches = 4;
    manual_seed(20240614);
    ProgramGenerator generator(20240614);
    std::vector<Program> programs;
    std::vector<jit::aot::AotPlan> plans;
    std::vector<std::vector<LGraph>> batches(kBatches);
    int cats = 0;  // slice gradients that tile a dim, made one cat  // program i: halves 2k, 2k+1 of batch i % kBatches
    for (int i = 0; i < kPrograms; ++i) {
        programs.push_back(generator.make());
        plans.push_back(jit::aot::plan(*programs.back().graph, programs.back().inputs));
        for (const auto& half : {plans.back().forward, plans.back().backward}) {
            Lowered lowered = lower(*half);
            BOOST_REQUIRE_MESSAGE(lowered.graph, lowered.why_not);
            cats += slice_backwards_to_cat(*lowered.graph);  // as the pipeline does (lower_graph.h)
            batches[i % kBatches].push_back(*lowered.graph);
        }
    }
    ToolchainStats before = toolchain_stats();
    auto start = std::chrono::steady_clock::now();
    std::vector<std::vector<CompiledCpuGraph>> compiled(kBatches);
    for (int round = 0; round < kBatches; round += 2) {
        std::vector<std::thread> threads;
        for (int b = round; b < std::min(round + 2, kBatches); ++b)
            threads.emplace_back([&, b] { compiled[b] = compile_cpu_many(batches[b], {.extra_flags = {"-O1"}}); });
        for (std::thread& t : threads) t.join();
    }
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    int64_t calls = toolchain_stats().compiler_calls - before.compiler_calls;
    // at most compile_jobs() units per batch (+ the PCH if the cache is cold)
    BOOST_TEST(calls <= int64_t(kBatches * compile_jobs() + 1));

    int failures = 0, checked = 0, arbitrated = 0;
    for (int i = 0; i < kPrograms; ++i) {
        const Program& p = programs[i];
        const jit::aot::AotPlan& plan = plans[i];
        const CompiledCpuGraph& fw = compiled[i % kBatches][2 * (i / kBatches)];
        const CompiledCpuGraph& bw = compiled[i % kBatches][2 * (i / kBatches) + 1];
        std::vector<Tensor> tangents;
        for (int k : plan.tangent_outputs) tangents.push_back(randn(p.graph->nodes()[p.graph->outputs()[k]].meta.shape));
        Reference ref = eager_reference(p, plan, tangents);
        std::optional<Reference> exact, nudged;  // computed on the first disagreement
        if (i < 4) {  // the arbiter itself works: float64, and near the float32 reference
            Reference wide = exact_reference(p, plan, tangents);
            for (size_t k = 0; k < wide.outputs.size(); ++k) {
                BOOST_TEST(wide.outputs[k].dtype() == DType::float64);
                BOOST_TEST(relative_error(ref.outputs[k], wide.outputs[k]) < 1e-3);
            }
        }

        std::vector<Tensor> primals;
        for (const Tensor& x : p.inputs) primals.push_back(x.detach());
        std::vector<Tensor> res = fw.run(primals);
        std::vector<Tensor> bw_in(res.begin() + plan.num_outputs, res.end());  // saved, then tangents
        bw_in.insert(bw_in.end(), tangents.begin(), tangents.end());
        std::vector<Tensor> grads = bw.run(bw_in);
        auto check = [&](const Tensor& got, const Tensor& want, const std::string& what, const Tensor& (*pick)(const Reference&, size_t),
                         size_t k) {
            ++checked;
            double error = relative_error(got, want);
            if (error > 1e-4) {
                if (!exact) exact = exact_reference(p, plan, tangents), nudged = exact_reference(p, plan, tangents, 0x1p-24);
                const Tensor& truth = pick(*exact, k);
                double compiled_off = relative_error(got, truth), eager_off = relative_error(want, truth);
                double sensitivity = relative_error(pick(*nudged, k), truth);  // of the exact function, to 1 ulp of its inputs
                ++arbitrated;
                std::cout << "program " << i << " " << what << ": compiled vs eager " << error << "; vs float64: compiled "
                          << compiled_off << ", eager " << eager_off << "; 1-ulp input sensitivity " << sensitivity << "\n";
                if (compiled_off <= eager_off + sensitivity + 1e-5) return;
            }
            if (error > 1e-4 && ++failures <= 5)
                BOOST_ERROR("program " << i << " " << what << ": error " << error << "\n" << *p.graph << "forward:\n"
                                       << fw.schedule().print() << "backward:\n" << bw.schedule().print());
        };
        auto output = [](const Reference& r, size_t k) -> const Tensor& { return r.outputs[k]; };
        auto grad = [](const Reference& r, size_t k) -> const Tensor& { return r.grads[k]; };
        for (int k = 0; k < plan.num_outputs; ++k) check(res[k], ref.outputs[k], "output " + std::to_string(k), output, size_t(k));
        for (size_t j = 0; j < p.inputs.size(); ++j) {
            int slot = plan.input_grad_slot[j];
            check(slot >= 0 ? grads[slot] : Tensor(), ref.grads[j], "grad of input " + std::to_string(j), grad, j);
        }
    }
    std::cout << kPrograms << " random programs, forward + backward: " << checked << " tensors checked (" << arbitrated
              << " judged against float64); " << calls
              << " compiler call(s) in " << seconds << " s\n";
    BOOST_TEST(failures == 0);
    BOOST_TEST(cats > 0, cats << " backward graphs took a cat");  // 5 with this seed
}

BOOST_AUTO_TEST_SUITE_END()
