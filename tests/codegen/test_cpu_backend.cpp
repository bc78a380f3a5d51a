// Differential test of the whole CPU backend: hundreds of seeded random programs (pointwise
// chains, broadcasts, tensor-scalar ops, row reductions and their consumers), all placed in
// ONE LGraph so that one compiler call builds them, each output compared with eager.
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cmath>
#include <iostream>
#include <optional>
#include <random>
#include <thread>

#include "compare.h"
#include "codegen/cpu_backend.h"
#include "codegen/toolchain.h"
#include "kiln.h"
#include "lgraph_builder.h"

using namespace kiln;
using namespace kiln::codegen;
using kiln::codegen::testing::GraphBuilder;

namespace {

class ProgramGenerator {
   public:
    explicit ProgramGenerator(uint32_t seed) : rng_(seed) {}

    // Appends one program to `b`; its inputs' example tensors go to `tensors`.
    void add_program(GraphBuilder& b, std::vector<Tensor>& tensors) {
        static const std::vector<Shape> shapes = {{37}, {8, 16}, {3, 5, 7}, {64, 33}, {2, 1, 9}, {16}, {4, 8, 8}};
        base_ = shapes[pick(shapes.size())];
        int x = new_input(b, tensors, base_);
        int current = x;
        int steps = 2 + int(pick(5));
        for (int step = 0; step < steps; ++step) {
            double r = uniform();
            if (r < 0.4) current = unary(b, current);
            else if (r < 0.7) current = binary(b, tensors, current);
            else if (r < 0.85) current = scalar(b, current);
            else current = reduction(b, current);
            if (uniform() < 0.15) b.output(current);  // an intermediate leaves too
        }
        b.output(current);
    }

   private:
    std::mt19937 rng_;
    Shape base_;

    size_t pick(size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng_); }
    double uniform() { return std::uniform_real_distribution<double>(0, 1)(rng_); }

    int new_input(GraphBuilder& b, std::vector<Tensor>& tensors, const Shape& shape) {
        tensors.push_back(randn(shape) * 2.0);
        return b.input(shape);
    }

    // A shape that broadcasts against the base: some dims 1, maybe fewer leading dims.
    Shape broadcastable() {
        Shape s = base_;
        for (int64_t& d : s)
            if (uniform() < 0.3) d = 1;
        while (s.size() > 1 && uniform() < 0.3) s.erase(s.begin());
        return s;
    }

    // abs(v) + 1: keeps log, sqrt, division and rsqrt away from their poles
    int positive(GraphBuilder& b, int v) { return b.scalar(OpId::add, b.unary(OpId::abs, v), 1.0); }
    // v moved into the domain of op's operand `arg` (tensor/ops.def's domain column).
    int in_domain(GraphBuilder& b, OpId op, int arg, int v) {
        switch (op_info(op).domain[arg]) {
            case Domain::any:
                return v;
            case Domain::positive:
            case Domain::nonzero:
                return positive(b, v);
            default:
                BOOST_FAIL(op_name(op)
                           << ": no sampler for domain " << domain_name(op_info(op).domain[arg]));
        }
        return v;
    }
    int unary_in_domain(GraphBuilder& b, OpId op, int v) {
        return b.unary(op, in_domain(b, op, 0, v));
    }

    int unary(GraphBuilder& b, int v) {
        switch (pick(11)) {
            case 0: return b.unary(OpId::neg, v);
            case 1: return b.unary(OpId::sin, v);
            case 2: return b.unary(OpId::cos, v);
            case 3: return b.unary(OpId::tanh, v);
            case 4: return b.unary(OpId::sigmoid, v);
            case 5: return b.unary(OpId::relu, v);
            case 6: return b.unary(OpId::exp, b.unary(OpId::tanh, v));
            case 7:
                return unary_in_domain(b, OpId::sqrt, v);
            case 8:
                return unary_in_domain(b, OpId::log, v);
            case 9:
                return unary_in_domain(b, OpId::reciprocal, v);
            default:
                return unary_in_domain(b, OpId::rsqrt, v);
        }
    }

    int binary(GraphBuilder& b, std::vector<Tensor>& tensors, int v) {
        Shape shape = b.value(v).shape;
        int other = new_input(b, tensors, shape == base_ ? broadcastable() : shape);
        switch (pick(6)) {
            case 0: return b.binary(OpId::add, v, other);
            case 1: return b.binary(OpId::sub, other, v);
            case 2: return b.binary(OpId::mul, v, other);
            case 3: return b.binary(OpId::maximum, v, other);
            case 4: return b.binary(OpId::minimum, other, v);
            default:
                return b.binary(OpId::div, v, in_domain(b, OpId::div, 1, other));
        }
    }

    int scalar(GraphBuilder& b, int v) {
        ScalarPos side = uniform() < 0.5 ? ScalarPos::left : ScalarPos::right;
        double s = std::round(uniform() * 40.0 - 20.0) / 8.0;
        switch (pick(5)) {
            case 0: return b.scalar(OpId::add, v, s, side);
            case 1: return b.scalar(OpId::sub, v, s, side);
            case 2: return b.scalar(OpId::mul, v, s, side);
            case 3: return b.scalar(OpId::maximum, v, s, side);
            default: return b.scalar(OpId::div, v, s == 0 ? 3.0 : s, ScalarPos::right);
        }
    }

    // A reduction over the trailing dims, and often a row-wise consumer of it (x - max(x)).
    int reduction(GraphBuilder& b, int v) {
        Shape shape = b.value(v).shape;
        if (shape.empty()) return unary(b, v);
        Shape dims = {-1};
        if (shape.size() >= 2 && uniform() < 0.3) dims = {-2, -1};
        bool keepdim = uniform() < 0.6;
        OpId op = reduction_ops()[pick(reduction_ops().size())];  // tensor/reductions.def
        int reduced = b.reduce(op, v, dims, keepdim);
        if (keepdim && uniform() < 0.7) return b.binary(OpId::sub, v, reduced);
        base_ = b.value(reduced).shape;  // later inputs broadcast against the new shape
        return reduced;
    }
};

using kiln_test::relative_error;

}  // namespace

// 500 programs in two graphs compiled at once, each graph's kernels split over two units
// (KILN_COMPILE_JOBS=2, emit_units): four compiler calls, two running at a time.
BOOST_AUTO_TEST_CASE(random_programs_match_eager) {
    setenv("KILN_COMPILE_JOBS", "2", 1);
    constexpr int kGraphs = 2, kProgramsPerGraph = 250;
    std::vector<GraphBuilder> builders(kGraphs);
    std::vector<std::vector<Tensor>> inputs(kGraphs);
    ProgramGenerator generator(20240613);
    for (int g = 0; g < kGraphs; ++g)
        for (int i = 0; i < kProgramsPerGraph; ++i) generator.add_program(builders[g], inputs[g]);
    ToolchainStats before = toolchain_stats();
    auto start = std::chrono::steady_clock::now();
    std::vector<std::optional<CompiledCpuGraph>> compiled(kGraphs);
    std::vector<std::thread> threads;
    for (int g = 0; g < kGraphs; ++g) threads.emplace_back([&, g] { compiled[g].emplace(compile_cpu(builders[g].graph)); });
    for (std::thread& t : threads) t.join();
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    int64_t calls = toolchain_stats().compiler_calls - before.compiler_calls;
    unsetenv("KILN_COMPILE_JOBS");
    // two per graph (+ the PCH if the cache is cold), or all four from the cache
    BOOST_TEST((calls == 0 || calls == 2 * kGraphs || calls == 2 * kGraphs + 1), calls);
    for (int g = 0; g < kGraphs; ++g) BOOST_TEST(compiled[g]->libraries() == 2u);
    int failures = 0, outputs = 0;
    for (int g = 0; g < kGraphs; ++g) {
        const LGraph& graph = builders[g].graph;
        std::cout << kProgramsPerGraph << " random programs (" << graph.nodes.size() << " nodes) -> "
                  << compiled[g]->schedule().kernels.size() << " kernels\n";
        std::vector<Tensor> got = compiled[g]->run(inputs[g]), want = run_eager(graph, inputs[g]);
        BOOST_REQUIRE(got.size() == want.size());
        for (size_t i = 0; i < got.size(); ++i, ++outputs) {
            double error = relative_error(got[i], want[i]);
            if (error > 1e-4 && ++failures <= 5) BOOST_ERROR("graph " << g << " value " << graph.outputs[i] << ": error " << error);
        }
    }
    std::cout << outputs << " outputs checked; " << calls << " compiler call(s) in " << seconds << " s\n";
    BOOST_TEST(failures == 0);
}
