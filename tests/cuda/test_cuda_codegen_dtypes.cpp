// The CUDA emitter over bool, int64 and float64 values: the seeded random dtype programs of
// tests/codegen/random_dtype_programs.h (comparisons, where, casts, promotion) are emitted
// for the device and compiled to PTX with NVRTC (no GPU needed, so this runs in CI); on a
// GPU machine they also run and must equal eager CPU.
#include <boost/test/unit_test.hpp>
#include <iostream>

#include "codegen/cpu_backend.h"
#include "codegen/cuda_backend.h"
#include "codegen/emit_cuda.h"
#include "codegen/lower_graph.h"
#include "kiln.h"
#include "tensor/cuda_runtime.h"
#include "tests/codegen/random_dtype_programs.h"
#include "tests/codegen/reduction_programs.h"
#include "tests/cuda/needs_gpu.h"

using namespace kiln;
using namespace kiln::codegen;
namespace utf = boost::unit_test;

namespace {

struct DtypePrograms {
    std::vector<kiln_test::Program> programs;
    std::vector<LGraph> graphs;  // lowered, on the device
};
DtypePrograms dtype_programs(int n, uint32_t seed) {
    DtypePrograms out;
    manual_seed(seed);
    kiln_test::DtypeProgramGenerator generator(seed);
    for (int i = 0; i < n; ++i) {
        out.programs.push_back(generator.make());
        Lowered lowered = lower(*out.programs.back().graph);
        BOOST_REQUIRE_MESSAGE(lowered.graph, lowered.why_not);
        lowered.graph->device = kiln_test::kCuda;
        out.graphs.push_back(*lowered.graph);
    }
    return out;
}

int count(const std::string& text, const std::string& what) {
    int n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(cuda_codegen_dtypes)

// 200 programs in 2 NVRTC programs; a failing batch is retried graph by graph.
BOOST_AUTO_TEST_CASE(the_emitted_source_of_random_dtype_programs_compiles_with_nvrtc) {
    if (!cuda::detail::nvrtc_unavailable_reason().empty()) {
        std::cout << "cuda codegen dtypes: SKIPPED compile-only test ("
                  << cuda::detail::nvrtc_unavailable_reason() << ")\n";
        return;
    }
    DtypePrograms p = dtype_programs(200, 20261125);
    auto compile_ptx = [](const std::string& source) {
        return cuda::detail::compile_cubin(source, "generated", 90, true);
    };
    size_t compiled = 0;
    int bool_arrays = 0, int_arrays = 0, double_arrays = 0;
    const size_t batch = 100;
    for (size_t first = 0; first < p.graphs.size(); first += batch) {
        std::vector<LGraph> graphs(p.graphs.begin() + first,
                                   p.graphs.begin() + std::min(p.graphs.size(), first + batch));
        std::string source = emit_cuda_many(schedule_many(graphs));
        bool_arrays += count(source, "bool* __restrict__");
        int_arrays += count(source, "long long* __restrict__");
        double_arrays += count(source, "double* __restrict__");
        try {
            BOOST_TEST(compile_ptx(source).size() > 100u);
            compiled += graphs.size();
        } catch (const Error&) {
            for (size_t i = 0; i < graphs.size(); ++i)
                BOOST_TEST_CONTEXT("program " << first + i << "\n" << schedule(graphs[i]).print()) {
                    try {
                        compile_ptx(emit_cuda(schedule(graphs[i])));
                    } catch (const Error& e) {
                        BOOST_ERROR(std::string(e.what()).substr(0, 4000));
                    }
                }
        }
    }
    BOOST_TEST(compiled == p.graphs.size());
    BOOST_TEST(bool_arrays > 20);  // kernels read and write each dtype
    BOOST_TEST(int_arrays > 20);
    BOOST_TEST(double_arrays > 20);
    std::cout << "cuda codegen dtypes: " << compiled
              << " random dtype graphs compiled with NVRTC (kernel arrays: " << bool_arrays
              << " bool, " << int_arrays << " int64, " << double_arrays << " float64)\n";
}

BOOST_AUTO_TEST_CASE(random_dtype_programs_on_the_gpu_match_eager_cpu,
                     *utf::precondition(kiln_test::NeedsGpu{"cuda codegen dtypes"})) {
    DtypePrograms p = dtype_programs(120, 20261126);
    std::vector<CompiledCudaGraph> compiled = compile_cuda_many(p.graphs);
    int failures = 0;
    for (size_t i = 0; i < p.programs.size(); ++i) {
        std::vector<Tensor> want = jit::interpret(*p.programs[i].graph, p.programs[i].inputs);
        std::vector<Tensor> on_device;
        for (const Tensor& x : p.programs[i].inputs) on_device.push_back(x.cuda());
        std::vector<Tensor> got = compiled[i].run(on_device);
        for (size_t k = 0; k < want.size(); ++k) {
            double error = kiln_test::dtype_error(got[k].cpu(), want[k]);
            if (error > 1e-5 && ++failures <= 5)
                BOOST_ERROR("program " << i << " output " << k << ": error " << error << "\n"
                                       << *p.programs[i].graph << compiled[i].schedule().print());
        }
    }
    BOOST_TEST(failures == 0);
}

// Reductions over every set of dims of 1-D to 4-D values, of every dtype (the CPU's
// generated_reductions programs, on the device): no fallback kernel, and the source compiles.
BOOST_AUTO_TEST_CASE(reductions_over_any_dims_of_every_dtype_compile_with_nvrtc) {
    if (!cuda::detail::nvrtc_unavailable_reason().empty()) {
        std::cout << "cuda codegen dtypes: SKIPPED compile-only test ("
                  << cuda::detail::nvrtc_unavailable_reason() << ")\n";
        return;
    }
    manual_seed(11);
    std::vector<kiln_test::GraphBuilder> builders;
    std::vector<std::vector<Tensor>> inputs;
    int n = kiln_test::add_every_reduction(builders, inputs);
    std::vector<LGraph> graphs;
    for (kiln_test::GraphBuilder& b : builders)
        graphs.push_back(b.graph), graphs.back().device = kiln_test::kCuda;
    std::vector<Schedule> schedules = schedule_many(graphs);
    for (const Schedule& s : schedules)
        for (const Kernel& k : s.kernels) BOOST_TEST(k.kind != KernelKind::fallback, s.print());
    std::string source = emit_cuda_many(schedules);
    BOOST_TEST(count(source, " = 0LL;") > 0);                           // int64 sums
    BOOST_TEST(count(source, "__shared__ int shared_i32[32]") > 0);     // bool amax/amin
    BOOST_TEST(count(source, "__shared__ double shared_f64[32]") > 0);  // float64
    try {
        BOOST_TEST(cuda::detail::compile_cubin(source, "generated", 90, true).size() > 100u);
    } catch (const Error& e) {
        BOOST_ERROR(std::string(e.what()).substr(0, 4000));
    }
    std::cout << "cuda codegen dtypes: " << n << " reductions over any dims compiled with NVRTC\n";
}

// The same programs run on the GPU, against eager on the CPU.
BOOST_AUTO_TEST_CASE(reductions_over_any_dims_on_the_gpu_match_eager_cpu,
                     *utf::precondition(kiln_test::NeedsGpu{"cuda codegen dtypes"})) {
    manual_seed(11);
    std::vector<kiln_test::GraphBuilder> builders;
    std::vector<std::vector<Tensor>> inputs;
    kiln_test::add_every_reduction(builders, inputs);
    int failures = 0;
    for (size_t g = 0; g < builders.size(); ++g) {
        LGraph graph = builders[g].graph;
        graph.device = kiln_test::kCuda;
        CompiledCudaGraph compiled = compile_cuda(graph);
        std::vector<Tensor> on_device;
        for (const Tensor& x : inputs[g]) on_device.push_back(x.cuda());
        std::vector<Tensor> got = compiled.run(on_device),
                            want = run_eager(builders[g].graph, inputs[g]);
        BOOST_REQUIRE(got.size() == want.size());
        for (size_t k = 0; k < want.size(); ++k) {
            double error = kiln_test::dtype_error(got[k].cpu(), want[k]);
            if (error > 1e-5 && ++failures <= 5)
                BOOST_ERROR("graph " << g << " output " << k << ": error " << error << "\n"
                                     << compiled.schedule().print());
        }
    }
    BOOST_TEST(failures == 0);
}

// Batch norm's statistics over (0, 2, 3) and a column sum on the GPU: one row kernel each
// (rows = channels or columns), equal to the CPU.
BOOST_AUTO_TEST_CASE(batch_norm_statistics_and_column_sums_on_the_gpu_match_the_cpu,
                     *utf::precondition(kiln_test::NeedsGpu{"cuda codegen dtypes"})) {
    auto bn = [](const Tensor& x) {
        Tensor mean = x.mean({0, 2, 3}, true), d = x - mean;
        Tensor var = (d * d).mean({0, 2, 3}, true);
        return std::vector<Tensor>{relu(d * rsqrt(var + 1e-5)), mean, var};
    };
    auto cols = [](const Tensor& x, const Tensor& i) {
        return std::vector<Tensor>{x.sum({0}), x.amax({0}, true), i.sum({0}), (i > 0).amax({0})};
    };
    auto f = compile(bn);
    auto g = compile(cols);
    Tensor x = randn({8, 16, 9, 9}) * 2.0 + 1.0;
    std::vector<Tensor> got = f(x.cuda()), want = bn(x);
    for (size_t k = 0; k < want.size(); ++k)
        BOOST_TEST(kiln_test::dtype_error(got[k].cpu(), want[k]) < 1e-4, "bn output " << k);
    BOOST_TEST(codegen::last_compiled().fallbacks.empty());
    Tensor y = randn({300, 203}), ints = randint(-100, 100, {300, 203});
    got = g(y.cuda(), ints.cuda()), want = cols(y, ints);
    for (size_t k = 0; k < want.size(); ++k)
        BOOST_TEST(kiln_test::dtype_error(got[k].cpu(), want[k]) < 1e-4, "column output " << k);
    BOOST_TEST(codegen::last_compiled().fallbacks.empty());
}

BOOST_AUTO_TEST_SUITE_END()
