// Assignment 5's tests, one suite per task: group counts on seed-style functions, kernels
// that compile and compute eager's values, and the backend end to end through kiln::compile.
// report_5 (not graded) times the backend against eager and kiln's own inductor.
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <cstdio>
#include <set>

#include "assignments/a5/student.h"

using namespace kiln;

namespace {

// Seed-style functions: the tutorials' foo, the design card's modified sigmoid without its
// branch, a matmul with a pointwise epilogue, a reduction between two chains, and a
// broadcasting add (not fusible here).
Tensor foo(Tensor x, Tensor y) { return sin(x) + cos(y); }
Tensor sigmoid_like(Tensor x, Tensor y) { return 1.0 / (exp(-x) + 5) * y; }
Tensor mm_epilogue(Tensor x, Tensor w) { return tanh(relu(matmul(x, w)) * 2); }
Tensor two_chains(Tensor x, Tensor y) {
    Tensor a = sin(x) * 2;
    Tensor s = a.sum({1}, true);
    return cos(a) * 3 + y - s;  // `- s` broadcasts [4, 1] over [4, 8]: it ends the second chain
}

// Two chains of different shapes, one after the other in the graph: two kernels.
Tensor two_shapes(Tensor x, Tensor y) {
    Tensor a = exp(x) * 2;  // [4, 8]
    Tensor b = cos(y) + 1;  // [8]
    return a + b;           // broadcasts: not fusible
}

struct Case {
    const char* name;
    Tensor (*fn)(Tensor, Tensor);
    Shape x, y;
    size_t groups;  // expected kernels
};
const Case kCases[] = {{"foo", foo, {64, 33}, {64, 33}, 1},
                       {"sigmoid_like", sigmoid_like, {1000}, {1000}, 1},
                       {"mm_epilogue", mm_epilogue, {16, 8}, {8, 12}, 1},
                       {"two_chains", two_chains, {4, 8}, {4, 8}, 2},
                       {"two_shapes", two_shapes, {4, 8}, {8}, 2}};

// The graph kiln's JIT records for fn (a custom backend keeps a copy).
std::shared_ptr<const jit::Graph> graph_of(Tensor (*fn)(Tensor, Tensor), const Tensor& x,
                                           const Tensor& y) {
    std::shared_ptr<const jit::Graph> kept;
    auto backend = [&kept](const jit::Graph& g, std::span<const Tensor>) -> jit::CompiledFn {
        kept = std::make_shared<jit::Graph>(g);
        return [&g](std::span<const Tensor> in) { return jit::interpret(g, in); };
    };
    jit::reset();
    compile(fn, {.backend = backend})(x, y);
    return kept;
}

// x, y in the graph's placeholder order (first use).
std::vector<Tensor> placeholder_inputs(const jit::Graph& g, const Tensor& x, const Tensor& y) {
    std::vector<Tensor> in;
    for (const jit::Node& n : g.nodes())
        if (n.kind == jit::NodeKind::placeholder) in.push_back(n.name == "arg0" ? x : y);
    return in;
}

int64_t library_requests() {
    auto s = codegen::toolchain_stats();
    return s.compiler_calls + s.disk_hits + s.memory_hits;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(task_5_1)

BOOST_AUTO_TEST_CASE(group_counts_on_seed_functions) {
    for (const Case& c : kCases) {
        auto g = graph_of(c.fn, randn(c.x), randn(c.y));
        auto groups = student::group_pointwise(*g);
        BOOST_TEST(groups.size() == c.groups, c.name << ":\n" << g->str());
        std::set<int> seen;
        for (const auto& gr : groups)
            for (int id : gr.nodes) {
                BOOST_TEST(seen.insert(id).second, c.name << ": node " << id << " in two groups");
                BOOST_TEST(student::fusible(*g, id));
            }
    }
}

BOOST_AUTO_TEST_CASE(matmul_reductions_broadcasts_and_compares_are_not_fusible) {
    auto g = graph_of(
        [](Tensor x, Tensor w) { return where(matmul(x, w).sum({1}, true) + w.sum() > 0, x, -x); },
        randn({3, 3}), randn({3, 3}));
    for (int i = 0; i < int(g->nodes().size()); ++i) {
        const jit::Node& n = g->nodes()[i];
        if (n.kind != jit::NodeKind::call)
            BOOST_TEST(!student::fusible(*g, i), n.name);
        else if (n.op == OpId::matmul || n.op == OpId::sum || n.op == OpId::gt ||
                 n.op == OpId::where)
            BOOST_TEST(!student::fusible(*g, i), n.name);
        else if (n.op == OpId::add)  // [3, 1] + [] broadcasts
            BOOST_TEST(!student::fusible(*g, i), n.name);
    }
}

BOOST_AUTO_TEST_CASE(group_inputs_and_outputs) {
    auto g = graph_of(two_chains, randn({4, 8}), randn({4, 8}));
    auto groups = student::group_pointwise(*g);
    BOOST_TEST_REQUIRE(groups.size() == 2u);
    const auto& nodes = g->nodes();
    // Chain 1 (sin, mul) reads x and hands `mul` on, to the sum and to chain 2.
    BOOST_TEST(groups[0].nodes.size() == 2u);
    BOOST_TEST_REQUIRE(groups[0].inputs.size() == 1u);
    BOOST_TEST((nodes[groups[0].inputs[0]].kind == jit::NodeKind::placeholder));
    BOOST_TEST_REQUIRE(groups[0].outputs.size() == 1u);
    BOOST_TEST(groups[0].outputs[0] == groups[0].nodes.back());
    // Chain 2 (cos, mul, add) reads chain 1's value and y, and hands `add` to the broadcasting sub.
    BOOST_TEST(groups[1].nodes.size() == 3u);
    BOOST_TEST(groups[1].inputs.size() == 2u);
    BOOST_TEST((groups[1].outputs == std::vector<int>{groups[1].nodes.back()}));
}

BOOST_AUTO_TEST_SUITE_END()

namespace {
// Builds one group's kernel alone and runs it on the group's inputs (taken from the interpreter).
std::vector<Tensor> run_one_kernel(const jit::Graph& g, const student::Group& group,
                                   std::span<const Tensor> inputs) {
    // The interpreter's values of every node: the kernel's inputs, and what its outputs must be.
    std::vector<Tensor> env(g.nodes().size());
    for (int i = 0; i < g.num_inputs(); ++i) env[i] = inputs[i];
    for (int i = g.num_inputs(); i + 1 < int(g.nodes().size()); ++i) {
        std::vector<Tensor> args;
        for (int a : g.nodes()[i].args) args.push_back(env[a]);
        env[i] = dispatch(g.nodes()[i].op, args, g.nodes()[i].attrs);
    }
    std::string src = student::kernel_preamble() + student::emit_kernel(g, group, "test_kernel");
    auto lib = codegen::build_library(src, {.include_dirs = {KILN_SOURCE_DIR}});
    auto kernel = reinterpret_cast<student::KernelFn>(lib->symbol("test_kernel"));
    std::vector<Tensor> ins;
    std::vector<const float*> in_ptrs;
    for (int a : group.inputs)
        ins.push_back(env[a].contiguous()),
            in_ptrs.push_back(static_cast<const float*>(ins.back().raw_data()));
    std::vector<Tensor> outs;
    std::vector<float*> out_ptrs;
    for (int o : group.outputs)
        outs.push_back(empty(env[o].shape())),
            out_ptrs.push_back(static_cast<float*>(outs.back().raw_data()));
    kernel(in_ptrs.data(), out_ptrs.data(), ins.front().numel());
    for (size_t k = 0; k < outs.size(); ++k)
        BOOST_TEST(allclose(outs[k], env[group.outputs[k]], 1e-4, 1e-5), "output " << k << " of\n"
                                                                                   << src);
    return outs;
}

// A group of every fusible node of a one-chain graph, with its inputs and outputs (the tests'
// own grouping, so that 5.2 is graded apart from 5.1).
student::Group whole_chain(const jit::Graph& g) {
    student::Group group;
    for (int i = g.num_inputs(); i + 1 < int(g.nodes().size()); ++i) group.nodes.push_back(i);
    for (int i = 0; i < g.num_inputs(); ++i) group.inputs.push_back(i);
    group.outputs = g.outputs();
    return group;
}
}  // namespace

BOOST_AUTO_TEST_SUITE(task_5_2)

BOOST_AUTO_TEST_CASE(a_kernel_computes_foo) {
    Tensor x = randn({5, 7}), y = randn({5, 7});
    auto g = graph_of(foo, x, y);
    BOOST_TEST(run_one_kernel(*g, whole_chain(*g), placeholder_inputs(*g, x, y)).size() == 1u);
}

BOOST_AUTO_TEST_CASE(scalar_operands_on_either_side) {
    Tensor x = randn({100}), y = randn({100});
    auto g = graph_of(sigmoid_like, x, y);  // 1.0 / (...): a scalar on the left; + 5: on the right
    run_one_kernel(*g, whole_chain(*g), placeholder_inputs(*g, x, y));
}

BOOST_AUTO_TEST_CASE(two_outputs_from_one_kernel) {
    Tensor x = randn({9}), y = randn({9});
    auto g = graph_of(
        [](Tensor a, Tensor b) {
            Tensor t = tanh(a) * b;
            return t + sigmoid(t) - relu(a);  // one chain; the test's group returns `t` as well
        },
        x, y);
    student::Group group = whole_chain(*g);
    group.outputs.insert(group.outputs.begin(), group.nodes[1]);  // tanh(a) * b
    BOOST_TEST((g->nodes()[group.nodes[1]].op == OpId::mul));
    run_one_kernel(*g, group, placeholder_inputs(*g, x, y));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(task_5_3)

BOOST_AUTO_TEST_CASE(one_library_per_graph_with_one_kernel_per_group) {
    for (const Case& c : kCases) {
        auto g = graph_of(c.fn, randn(c.x), randn(c.y));
        int64_t before = library_requests();
        student::FusedGraph f = student::compile_fused(*g);
        BOOST_TEST(library_requests() - before == 1, c.name);
        BOOST_TEST(f.groups.size() == c.groups, c.name);
        BOOST_TEST_REQUIRE(f.library, c.name);
        for (size_t k = 0; k < f.groups.size(); ++k)
            BOOST_CHECK_NO_THROW(f.library->symbol("kernel_" + std::to_string(k)));
        size_t kernels = 0;
        for (size_t at = f.source.find("extern \"C\""); at != std::string::npos;
             at = f.source.find("extern \"C\"", at + 1))
            ++kernels;
        BOOST_TEST(kernels == c.groups, c.name);
    }
}

BOOST_AUTO_TEST_CASE(compiled_results_equal_eager) {
    for (const Case& c : kCases) {
        jit::reset();
        auto f = compile(c.fn, {.backend = student::fusion_backend});
        for (int call = 0; call < 3; ++call) {
            Tensor x = randn(c.x), y = randn(c.y);
            BOOST_TEST(allclose(f(x, y), c.fn(x, y), 1e-4, 1e-5), c.name << " call " << call);
        }
        BOOST_TEST(jit::counters().graphs_compiled == 1, c.name);
    }
}

BOOST_AUTO_TEST_CASE(non_contiguous_inputs_are_read_right) {
    jit::reset();
    auto f = compile(foo, {.backend = student::fusion_backend});
    Tensor x = randn({6, 4}).t(), y = randn({4, 6});  // x is a transposed view
    BOOST_TEST(allclose(f(x, y), foo(x, y), 1e-4, 1e-5));
}

// run_fused with every kernel swapped for one of the test's own, which writes a marker
// (1000 + 10 k + j to output j of kernel k) and counts its calls: each kernel must run once
// per call, over the group's elements, and a graph output that a group computes must be
// exactly what its kernel wrote, not a value recomputed some other way.
BOOST_AUTO_TEST_CASE(each_kernel_runs_once_and_its_outputs_are_returned) {
    for (const Case& c : kCases) {
        Tensor x = randn(c.x), y = randn(c.y);
        auto g = graph_of(c.fn, x, y);
        student::FusedGraph f = student::compile_fused(*g);
        BOOST_TEST_REQUIRE(f.groups.size() == c.groups, c.name);
        std::string src =
            "#include <cstdint>\nextern \"C\" { int64_t marker_calls[64]; int64_t marker_n[64]; "
            "}\n";
        for (size_t k = 0; k < f.groups.size(); ++k)
            src += "extern \"C\" void kernel_" + std::to_string(k) +
                   "(const float* const*, float* const* out, int64_t n) {\n    ++marker_calls[" +
                   std::to_string(k) + "], marker_n[" + std::to_string(k) +
                   "] = n;\n    for (int j = 0; j < " + std::to_string(f.groups[k].outputs.size()) +
                   "; ++j)\n        for (int64_t i = 0; i < n; ++i) out[j][i] = float(" +
                   std::to_string(1000 + 10 * k) + " + j);\n}\n";
        f.library = codegen::build_library(src, {});
        auto* calls = static_cast<int64_t*>(f.library->symbol("marker_calls"));
        auto* sizes = static_cast<int64_t*>(f.library->symbol("marker_n"));
        std::fill(calls, calls + 64, 0);
        auto inputs = placeholder_inputs(*g, x, y);
        std::vector<Tensor> out = student::run_fused(f, *g, inputs);
        for (size_t k = 0; k < f.groups.size(); ++k) {
            BOOST_TEST(calls[k] == 1, c.name << ": kernel_" << k << " ran " << calls[k]
                                             << " times in one run_fused (once expected)");
            int64_t numel = shape_numel(g->nodes()[f.groups[k].nodes.front()].meta.shape);
            BOOST_TEST(sizes[k] == numel, c.name << ": kernel_" << k << " was given n = "
                                                 << sizes[k] << ", its group has " << numel);
        }
        BOOST_TEST_REQUIRE(out.size() == g->outputs().size(), c.name);
        for (size_t o = 0; o < out.size(); ++o)
            for (size_t k = 0; k < f.groups.size(); ++k)
                for (size_t j = 0; j < f.groups[k].outputs.size(); ++j)
                    if (f.groups[k].outputs[j] == g->outputs()[o])
                        BOOST_TEST(allclose(out[o], full_like(out[o], double(1000 + 10 * k + j))),
                                   c.name << ": output " << o << " is not what kernel_" << k
                                          << " wrote: the graded values must come from your "
                                             "kernels");
    }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(report_5)

// Not graded: the speed of your kernels (scalar loops) against eager and kiln's inductor
// (xsimd vectors, threads) on the seed's chain of pointwise ops over 2^20 elements.
BOOST_AUTO_TEST_CASE(speed_against_kilns_backend) {
    auto fn = [](Tensor x, Tensor y) { return sin(x) * cos(y) + exp(-x) * 0.5; };
    Tensor x = randn({1 << 20}), y = randn({1 << 20});
    auto time_ms = [&](auto&& f) {
        f(x, y);  // compile, warm up
        auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < 20; ++i) f(x, y);
        return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                   .count() /
               20;
    };
    double eager = time_ms(fn);
    jit::reset();
    double mine = time_ms(compile(fn, {.backend = student::fusion_backend}));
    double inductor = time_ms(compile(fn, {.backend = "inductor"}));
    std::printf(
        "  sin(x)*cos(y) + exp(-x)*0.5 over 2^20 floats: eager %.2f ms, your backend %.2f ms, kiln "
        "inductor %.2f ms\n",
        eager, mine, inductor);
}

BOOST_AUTO_TEST_SUITE_END()
