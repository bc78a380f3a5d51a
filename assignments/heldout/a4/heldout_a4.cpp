// Assignment 4's held-out tests (not in the student release): networks and shapes drawn
// from the grading run's seed (assignments/heldout/seed.h); references are kiln's
// (aot::min_cut, aot::partition_input, aot::partition), computed while grading.
#include <boost/test/unit_test.hpp>

#include "assignments/a4/student.h"
#include "assignments/heldout/seed.h"
#include "jit/aot/aot.h"

using namespace kiln;
namespace aot = kiln::jit::aot;

namespace {

Tensor chain(Tensor x, Tensor y) { return cos(sin(x) * y + exp(-x)) * tanh(y); }
Tensor normalized(Tensor x, Tensor y) { return (x - x.mean({1}, true)) * sigmoid(y * 2); }
Tensor product(Tensor x, Tensor w) { return tanh(matmul(x, w)) * 2; }

struct Drawn {
    aot::AotPlan plan;
    std::vector<Tensor> primals;  // in the graph's placeholder order
    Tensor (*fn)(Tensor, Tensor);
    Tensor x, y;
};

// fn's joint graph at shapes drawn from `rng` (rows 1-9, columns 1-17).
Drawn drawn(std::mt19937_64& rng, int which) {
    int64_t r = 1 + int64_t(rng() % 9), c = 1 + int64_t(rng() % 17), k = 1 + int64_t(rng() % 7);
    manual_seed(int64_t(rng() % 100000));
    Drawn d;
    d.fn = which == 0 ? chain : which == 1 ? normalized : product;
    d.x = randn({r, c}).requires_grad_();
    d.y = (which == 2 ? randn({c, k}) : randn({r, c})).requires_grad_();
    std::shared_ptr<const jit::Graph> kept;
    auto backend = [&kept](const jit::Graph& g, std::span<const Tensor>) -> jit::CompiledFn {
        kept = std::make_shared<jit::Graph>(g);
        return [&g](std::span<const Tensor> in) { return jit::interpret(g, in); };
    };
    jit::reset();
    compile(d.fn, {.backend = backend})(d.x, d.y);
    for (const jit::Node& n : kept->nodes())
        if (n.kind == jit::NodeKind::placeholder) d.primals.push_back(n.name == "arg0" ? d.x : d.y);
    d.plan = aot::plan(*kept, d.primals);
    return d;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(task_4_1)

BOOST_AUTO_TEST_CASE(heldout_drawn_shapes_give_kilns_partitioner_input) {
    auto rng = heldout::rng(41);
    for (int which = 0; which < 3; ++which) {
        Drawn d = drawn(rng, which);
        auto mine = student::partition_input(d.plan.joint);
        auto ref = aot::partition_input(d.plan.joint);
        BOOST_TEST_REQUIRE(mine.size() == ref.size());
        for (size_t i = 0; i < ref.size(); ++i) {
            std::string what = ref[i].name + " (seed " + std::to_string(heldout::seed()) + ")";
            BOOST_TEST(mine[i].inputs == ref[i].inputs, what);
            BOOST_TEST(mine[i].bytes == ref[i].bytes, what);
            BOOST_TEST(mine[i].is_primal == ref[i].is_primal, what);
            BOOST_TEST(mine[i].is_tangent == ref[i].is_tangent, what);
            BOOST_TEST(mine[i].is_fw_output == ref[i].is_fw_output, what);
            BOOST_TEST(mine[i].is_bw_output == ref[i].is_bw_output, what);
            BOOST_TEST(mine[i].recomputable == ref[i].recomputable, what);
        }
    }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(task_4_2)

BOOST_AUTO_TEST_CASE(heldout_drawn_networks_of_60_to_120_vertices) {
    auto rng = heldout::rng(42);
    for (int trial = 0; trial < 20; ++trial) {
        int n = 60 + int(rng() % 61), s = int(rng() % n), t = int(rng() % n);
        if (s == t) t = (s + 1) % n;
        std::vector<student::FlowEdge> edges;
        for (int k = 0; k < 5 * n; ++k) {
            int a = int(rng() % n), b = int(rng() % n);
            if (a != b) edges.push_back({a, b, int64_t(rng() % 1000)});
        }
        std::vector<aot::FlowEdge> copy;
        for (const auto& e : edges) copy.push_back({e.from, e.to, e.capacity});
        aot::MinCut ref = aot::min_cut(n, copy, s, t);
        student::Cut cut = student::min_cut(n, edges, s, t);
        std::string what = "trial " + std::to_string(trial) + ", " + std::to_string(n) +
                           " vertices (seed " + std::to_string(heldout::seed()) + ")";
        BOOST_TEST(cut.value == ref.value, what);
        BOOST_TEST_REQUIRE(cut.source_side.size() == size_t(n), what);
        BOOST_TEST((cut.source_side[s] && !cut.source_side[t]), what);
        int64_t capacity = 0;
        for (const auto& e : edges)
            if (cut.source_side[e.from] && !cut.source_side[e.to]) capacity += e.capacity;
        BOOST_TEST(capacity == ref.value, what << ": your source side's cut");
    }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(task_4_3)

BOOST_AUTO_TEST_CASE(heldout_drawn_shapes_save_what_kilns_partitioner_saves) {
    auto rng = heldout::rng(43);
    for (int which = 0; which < 3; ++which) {
        Drawn d = drawn(rng, which);
        auto nodes = aot::partition_input(d.plan.joint);
        BOOST_TEST(student::partition(nodes).saved_bytes == aot::partition(nodes).saved_bytes,
                   "function " << which << " (seed " << heldout::seed() << ")");
    }
}

BOOST_AUTO_TEST_SUITE_END()
