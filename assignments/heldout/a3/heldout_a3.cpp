// Assignment 3's held-out tests (not in the student release): a function with three
// branches, shapes and call sequences drawn from the grading run's seed
// (assignments/heldout/seed.h); graph counts against kiln's JIT, results against eager.
#include <boost/test/unit_test.hpp>

#include "assignments/a3/student.h"
#include "assignments/heldout/seed.h"

using namespace kiln;

namespace {

// Three branches in a row: a tree of up to 1 + 2 + 4 + 8 segments.
Tensor three_ifs(const std::vector<Tensor>& in) {
    Tensor x = in[0] + in[1];
    if (x.sum() > 0) x = x * 2;
    if (x.mean() > 0.25)
        x = tanh(x);
    else
        x = x - 1;
    if ((x * in[1]).sum() < 0) x = -x;
    return x * in[0];
}

std::vector<std::vector<Tensor>> drawn_calls(std::mt19937_64& rng, int n) {
    Shape shape{int64_t(2 + rng() % 30)};
    std::vector<std::vector<Tensor>> calls;
    for (int i = 0; i < n; ++i) calls.push_back({randn(shape), randn(shape) * 2});
    return calls;
}

int64_t kiln_graphs(const std::vector<std::vector<Tensor>>& calls) {
    jit::reset();
    auto compiled = compile(
        [](Tensor a, Tensor b) {
            return three_ifs({a, b});
        },
        {.backend = "eager"});
    for (const auto& c : calls) compiled(c[0], c[1]);
    return jit::counters().graphs_compiled;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(task_3_1)

BOOST_AUTO_TEST_CASE(heldout_drawn_inputs_record_one_segment_per_branch_and_one_more) {
    auto rng = heldout::rng(31);
    manual_seed(int64_t(rng() % 100000));
    for (const auto& args : drawn_calls(rng, 4)) {
        student::Trace t = student::record(three_ifs, args);
        BOOST_TEST(t.segments.size() == 4u, "seed " << heldout::seed());
        BOOST_TEST(t.outcomes.size() == 3u);
        BOOST_TEST(allclose(t.value, three_ifs(args), 1e-5, 1e-6));
    }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(task_3_3)

BOOST_AUTO_TEST_CASE(heldout_a_drawn_call_sequence_equals_eager_with_kilns_graph_count) {
    auto rng = heldout::rng(33);
    manual_seed(int64_t(rng() % 100000));
    auto calls = drawn_calls(rng, 16);
    student::CompiledFunction f(three_ifs);
    for (size_t i = 0; i < calls.size(); ++i)
        BOOST_TEST(allclose(f(calls[i]), three_ifs(calls[i]), 1e-5, 1e-6),
                   "call " << i << " (seed " << heldout::seed() << ")");
    BOOST_TEST(f.graphs_compiled() == kiln_graphs(calls), "seed " << heldout::seed());
}

BOOST_AUTO_TEST_SUITE_END()
