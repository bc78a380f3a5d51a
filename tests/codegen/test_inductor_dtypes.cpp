// Generated kernels over bool, int64 and float64 values: seeded random programs of
// comparisons, where, casts and mixed-dtype arithmetic compiled and checked against eager,
// and the model patterns that must become one generated kernel (batch norm, GELU, masked
// softmax, residual add + relu). Every group of graphs is built by one compiler call.
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <iostream>
#include <map>
#include <thread>

#include "codegen/cpu_backend.h"
#include "codegen/lower_graph.h"
#include "codegen/toolchain.h"
#include "kiln.h"
#include "random_dtype_programs.h"

using namespace kiln;
using namespace kiln::codegen;
using kiln_test::dtype_error;
using kiln_test::Program;
using kiln_test::Recorder;

namespace {

LGraph lowered(const jit::Graph& graph) {
    Lowered l = lower(graph);
    BOOST_REQUIRE_MESSAGE(l.graph, l.why_not);
    return *l.graph;
}

int count_kernels(const Schedule& s, KernelKind kind) {
    int n = 0;
    for (const Kernel& k : s.kernels) n += k.kind == kind;
    return n;
}

// A generated kernel that reads or computes a value of dtype d.
bool kernel_has_dtype(const Schedule& s, const Kernel& k, DType d) {
    if (k.kind != KernelKind::pointwise && k.kind != KernelKind::row) return false;
    for (int index : k.nodes) {
        const LNode& n = s.graph.nodes[index];
        if (n.out.dtype == d) return true;
        for (int v : n.inputs)
            if (s.value(v).dtype == d) return true;
    }
    return false;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(inductor_dtypes)

// 300 programs in 2 translation units (2 cores), at -O1 as the float32 random test.
BOOST_AUTO_TEST_CASE(random_dtype_programs_match_eager) {
    constexpr int kPrograms = 300, kBatches = 2;
    manual_seed(20261125);
    kiln_test::DtypeProgramGenerator generator(20261125);
    std::vector<Program> programs;
    std::vector<std::vector<LGraph>> batches(kBatches);
    for (int i = 0; i < kPrograms; ++i) {
        programs.push_back(generator.make());
        batches[i % kBatches].push_back(lowered(*programs.back().graph));
    }
    ToolchainStats before = toolchain_stats();
    std::vector<std::vector<CompiledCpuGraph>> compiled(kBatches);
    std::vector<std::thread> threads;
    for (int b = 0; b < kBatches; ++b)
        threads.emplace_back(
            [&, b] { compiled[b] = compile_cpu_many(batches[b], {.extra_flags = {"-O1"}}); });
    for (std::thread& t : threads) t.join();
    // a batch's kernels may be split over compile_jobs() units (+ the PCH if the cache is cold)
    BOOST_TEST(toolchain_stats().compiler_calls - before.compiler_calls <=
               int64_t(kBatches * compile_jobs() + 1));

    int failures = 0, checked = 0, fallbacks = 0;
    std::map<DType, int> generated_with;  // generated kernels that read or compute each dtype
    for (int i = 0; i < kPrograms; ++i) {
        const CompiledCpuGraph& g = compiled[i % kBatches][i / kBatches];
        const Schedule& s = g.schedule();
        for (const Kernel& k : s.kernels) {
            fallbacks += k.kind == KernelKind::fallback;
            for (DType d : {DType::boolean, DType::int64, DType::float64})
                generated_with[d] += kernel_has_dtype(s, k, d);
        }
        std::vector<Tensor> want = jit::interpret(*programs[i].graph, programs[i].inputs);
        std::vector<Tensor> got = g.run(programs[i].inputs);
        for (size_t k = 0; k < want.size(); ++k) {
            ++checked;
            double error = dtype_error(got[k], want[k]);
            if (error > 1e-5 && ++failures <= 5)
                BOOST_ERROR("program " << i << " output " << k << " (" << want[k].dtype()
                                       << "): error " << error << "\n"
                                       << *programs[i].graph << s.print());
        }
    }
    std::cout << kPrograms << " random dtype programs: " << checked
              << " outputs checked; generated kernels with bool " << generated_with[DType::boolean]
              << ", int64 " << generated_with[DType::int64] << ", float64 "
              << generated_with[DType::float64] << " values; " << fallbacks
              << " fallback kernels\n";
    BOOST_TEST(failures == 0);
    for (DType d : {DType::boolean, DType::int64, DType::float64})
        BOOST_TEST(generated_with[d] > 20);
}

// Model patterns, recorded as graphs and built by one compiler call: each is one generated
// kernel and no fallback.
BOOST_AUTO_TEST_CASE(model_patterns_fuse_into_one_kernel) {
    manual_seed(7);
    struct Case {
        std::string name;
        Program program;
        int generated;  // kernels expected (pointwise + row)
        int fallback;
    };
    std::vector<Case> cases;
    auto scalar = [](double s, ScalarPos pos = ScalarPos::right) {
        return Attrs{.scalar = s, .scalar_pos = pos};
    };
    auto input = [](Recorder& r, Program& p, Tensor t, const std::string& name) {
        p.inputs.push_back(t);
        return r.input(t, name);
    };
    {  // batch norm, eval: (x - mean) * rsqrt(var + eps) * w + b, then relu. The per-channel
       // rsqrt(var + eps), shape [C, 1, 1], starts a kernel of its own, which is then folded
       // into the pass over x (its only reader) and recomputed there.
        Recorder r;
        Program p;
        int x = input(r, p, randn({2, 4, 5, 5}), "x"), mean = input(r, p, randn({4, 1, 1}), "mean");
        int var = input(r, p, randn({4, 1, 1}).abs(), "var"),
            w = input(r, p, randn({4, 1, 1}), "w");
        int b = input(r, p, randn({4, 1, 1}), "b");
        int scale = r.call(OpId::rsqrt, {r.call(OpId::add, {var}, scalar(1e-5))});
        int y = r.call(OpId::mul, {r.call(OpId::mul, {r.call(OpId::sub, {x, mean}), scale}), w});
        p.graph = r.b.build({r.call(OpId::relu, {r.call(OpId::add, {y, b})})});
        cases.push_back({"batch norm (eval) + relu", p, 1, 0});
    }
    {  // batch norm, training: normalization given the batch statistics, as [C, 1, 1] inputs.
        Recorder r;
        Program p;
        int x = input(r, p, randn({2, 4, 5, 5}), "x"), mean = input(r, p, randn({4, 1, 1}), "mean");
        int var = input(r, p, randn({4, 1, 1}).abs(), "var"),
            w = input(r, p, randn({4, 1, 1}), "w");
        int b = input(r, p, randn({4, 1, 1}), "b");
        int std = r.call(OpId::sqrt, {r.call(OpId::add, {var}, scalar(1e-5))});
        int y = r.call(OpId::mul, {r.call(OpId::div, {r.call(OpId::sub, {x, mean}), std}), w});
        p.graph = r.b.build({r.call(OpId::add, {y, b})});
        cases.push_back({"batch norm (training) normalization", p, 1, 0});
    }
    {  // exact GELU: 0.5 * x * (1 + erf(x / sqrt(2)))
        Recorder r;
        Program p;
        int x = input(r, p, randn({8, 64}), "x");
        int e = r.call(OpId::erf, {r.call(OpId::mul, {x}, scalar(0.7071067811865476))});
        int y = r.call(OpId::mul,
                       {r.call(OpId::mul, {x}, scalar(0.5)), r.call(OpId::add, {e}, scalar(1.0))});
        p.graph = r.b.build({y});
        cases.push_back({"exact GELU", p, 1, 0});
    }
    {  // attention softmax with a causal mask: masked_fill(mask, -inf) then softmax, one row
       // kernel (the -inf is a 0-d `full`: a literal in the kernel, never in memory).
        Recorder r;
        Program p;
        int s = input(r, p, randn({2, 8, 8}), "scores");
        std::vector<float> above(64);
        for (int i = 0; i < 8; ++i)
            for (int j = 0; j < 8; ++j) above[i * 8 + j] = j > i ? 1.0f : 0.0f;
        int mask = input(r, p, tensor(above, {8, 8}) > 0.5, "mask");
        int fill = r.call(OpId::full, {}, {.shape = {}, .scalar = -INFINITY});
        int masked = r.call(OpId::where, {mask, fill, s});
        int shifted = r.call(
            OpId::sub, {masked, r.call(OpId::amax, {masked}, {.dims = {-1}, .keepdim = true})});
        int e = r.call(OpId::exp, {shifted});
        p.graph = r.b.build(
            {r.call(OpId::div, {e, r.call(OpId::sum, {e}, {.dims = {-1}, .keepdim = true})})});
        cases.push_back({"causal attention softmax", p, 1, 0});
    }
    {  // residual add + relu
        Recorder r;
        Program p;
        int x = input(r, p, randn({4, 16, 6, 6}), "x"),
            skip = input(r, p, randn({4, 16, 6, 6}), "skip");
        p.graph = r.b.build({r.call(OpId::relu, {r.call(OpId::add, {x, skip})})});
        cases.push_back({"residual add + relu", p, 1, 0});
    }
    {  // a comparison, where and a cast in float64: still one kernel
        Recorder r;
        Program p;
        int x = input(r, p, randn({16, 9}).to(DType::float64), "x");
        int pos = r.call(OpId::gt, {x}, scalar(0.25));
        int y = r.call(OpId::where, {pos, x, r.call(OpId::mul, {x}, scalar(0.01))});
        p.graph = r.b.build({r.call(OpId::cast, {y}, {.dtype = DType::float32}), pos});
        cases.push_back({"float64 leaky threshold", p, 1, 0});
    }
    std::vector<LGraph> graphs;
    for (const Case& c : cases) graphs.push_back(lowered(*c.program.graph));
    ToolchainStats before = toolchain_stats();
    std::vector<CompiledCpuGraph> compiled = compile_cpu_many(graphs);
    BOOST_TEST(toolchain_stats().compiler_calls - before.compiler_calls <= 2);  // + the PCH if cold
    for (size_t i = 0; i < cases.size(); ++i) {
        const Schedule& s = compiled[i].schedule();
        int generated = count_kernels(s, KernelKind::pointwise) + count_kernels(s, KernelKind::row);
        BOOST_TEST(generated == cases[i].generated, cases[i].name << ":\n" << s.print());
        BOOST_TEST(count_kernels(s, KernelKind::fallback) == cases[i].fallback, cases[i].name
                                                                                    << ":\n"
                                                                                    << s.print());
        std::vector<Tensor> want = jit::interpret(*cases[i].program.graph, cases[i].program.inputs);
        std::vector<Tensor> got = compiled[i].run(cases[i].program.inputs);
        for (size_t k = 0; k < want.size(); ++k)
            BOOST_TEST(dtype_error(got[k], want[k]) < 1e-5, cases[i].name);
    }
}

BOOST_AUTO_TEST_SUITE_END()
