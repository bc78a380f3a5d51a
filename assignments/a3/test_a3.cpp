// Assignment 3's tests, one suite per task. Graph counts are compared with kiln's own JIT on
// the same calls (bar: 3 graphs); results with eager on both branches.
#include <boost/test/unit_test.hpp>

#include "assignments/a3/student.h"

using namespace kiln;

namespace {

// The seed's bar ("Introduction to torch.compile", TorchDynamo and FX Graphs).
Tensor bar(const std::vector<Tensor>& in) {
    Tensor a = in[0], b = in[1];
    Tensor x = a / (abs(a) + 1);
    if (b.sum() < 0) b = b * -1;
    return x * b;
}

// Two branches in a row: a tree of 1 + 2 + 4 segments once every outcome is seen.
Tensor two_ifs(const std::vector<Tensor>& in) {
    Tensor x = in[0] * 2;
    if (x.sum() > 0)
        x = x + 1;
    else
        x = x - 1;
    if (x.mean() > 0.5)
        x = x * 3;
    else
        x = x * -0.5;
    return x * in[1];
}

Tensor no_break(const std::vector<Tensor>& in) { return sin(in[0]) * cos(in[1]); }

// Inputs that make bar take one branch or the other.
std::vector<Tensor> bar_inputs(bool negative_sum) {
    Tensor a = randn({10}), b = randn({10});
    if ((b.sum().item<float>() < 0) != negative_sum) b = -b;
    return {a, b};
}

// Runs a trace's segments in order, by the test's own interpreter.
Tensor run_trace(const student::Trace& t, const std::vector<Tensor>& args) {
    std::vector<std::vector<Tensor>> outs;
    auto value = [&](student::ValueRef r) {
        return r.segment < 0 ? args.at(r.index) : outs.at(r.segment).at(r.index);
    };
    for (const auto& s : t.segments) {
        std::vector<Tensor> in;
        for (auto r : s.inputs) in.push_back(value(r));
        outs.push_back(jit::interpret(*s.graph, in));
    }
    return value(t.result);
}

// Graphs kiln's own JIT compiles for fn over the calls, and whether its results were eager's.
int64_t kiln_graphs(Tensor (*fn)(const std::vector<Tensor>&),
                    const std::vector<std::vector<Tensor>>& calls) {
    jit::reset();
    auto compiled = compile([fn](Tensor a, Tensor b) { return fn({a, b}); }, {.backend = "eager"});
    for (const auto& c : calls) compiled(c[0], c[1]);
    return jit::counters().graphs_compiled;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(task_3_1)

BOOST_AUTO_TEST_CASE(bar_splits_into_two_segments_at_its_branch) {
    manual_seed(1);
    auto in = bar_inputs(true);
    student::Trace t = student::record(bar, in);
    BOOST_TEST_REQUIRE(t.segments.size() == 2u);
    BOOST_TEST(t.conditions.size() == 1u);
    BOOST_TEST((t.outcomes == std::vector<bool>{true}));
    BOOST_TEST((t.segments[0].graph->op_names() ==
                std::vector<std::string>{"abs", "add", "div", "sum", "lt"}));
    BOOST_TEST((t.segments[1].graph->op_names() == std::vector<std::string>{"mul", "mul"}));
    BOOST_TEST(t.conditions[0].segment == 0);  // the condition was computed by segment 0 ...
    BOOST_TEST(t.segments[1].inputs.size() ==
               2u);  // ... which also hands x on, with the argument b
    BOOST_TEST(allclose(t.value, bar(in)));
    BOOST_TEST(dispatch_hook() == nullptr);
}

BOOST_AUTO_TEST_CASE(the_segments_replay_to_fns_result) {
    manual_seed(2);
    for (bool negative : {true, false}) {
        student::Trace t = student::record(bar, bar_inputs(negative));
        BOOST_TEST((t.outcomes == std::vector<bool>{negative}));
        // Same outcome, fresh values: the segments alone compute bar.
        auto fresh = bar_inputs(negative);
        BOOST_TEST(allclose(run_trace(t, fresh), bar(fresh)));
    }
    auto in = std::vector<Tensor>{randn({4}), randn({4})};
    student::Trace t = student::record(two_ifs, in);
    BOOST_TEST(t.segments.size() == 3u);
    BOOST_TEST(t.outcomes.size() == 2u);
    BOOST_TEST(allclose(run_trace(t, in), two_ifs(in)));
}

BOOST_AUTO_TEST_CASE(no_branch_is_one_segment_and_item_is_refused) {
    auto in = std::vector<Tensor>{randn({4}), randn({4})};
    student::Trace t = student::record(no_break, in);
    BOOST_TEST(t.segments.size() == 1u);
    BOOST_TEST(t.conditions.empty());
    BOOST_TEST(allclose(run_trace(t, in), no_break(in)));
    auto reads_item = [](const std::vector<Tensor>& v) { return v[0] * v[0].sum().item<float>(); };
    BOOST_CHECK_THROW(student::record(reads_item, in), kiln::Error);
    BOOST_TEST(dispatch_hook() == nullptr);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(task_3_2)

BOOST_AUTO_TEST_CASE(bar_grows_to_three_graphs_as_kilns_does) {
    manual_seed(3);
    std::vector<std::vector<Tensor>> calls{bar_inputs(true), bar_inputs(false), bar_inputs(true),
                                           bar_inputs(false)};
    std::unique_ptr<student::ProgramNode> root;
    std::vector<int> compiled;
    for (const auto& c : calls)
        compiled.push_back(student::graft(root, student::record(bar, c), "eager"));
    BOOST_TEST((compiled == std::vector<int>{2, 1, 0, 0}));
    BOOST_TEST(kiln_graphs(bar, calls) == 3);
    BOOST_TEST_REQUIRE(root);
    BOOST_TEST(root->ends_in_branch);
    BOOST_TEST_REQUIRE(root->next[0]);
    BOOST_TEST_REQUIRE(root->next[1]);
    BOOST_TEST(!root->next[0]->ends_in_branch);
    BOOST_TEST(!root->next[1]->ends_in_branch);
    BOOST_TEST(root->next[1]->segment.graph->num_ops() == 2);  // b * -1; x * b
    BOOST_TEST(root->next[0]->segment.graph->num_ops() == 1);  // x * b
}

BOOST_AUTO_TEST_CASE(two_branches_grow_a_tree_of_seven) {
    manual_seed(4);
    std::unique_ptr<student::ProgramNode> root;
    std::vector<std::vector<Tensor>> calls;
    int compiled = 0;
    for (int i = 0; i < 24; ++i) {
        calls.push_back({randn({6}) + (i % 3 - 1) * 0.8, randn({6})});
        compiled += student::graft(root, student::record(two_ifs, calls.back()), "eager");
    }
    BOOST_TEST(compiled == kiln_graphs(two_ifs, calls));
    BOOST_TEST(compiled <= 7);
}

BOOST_AUTO_TEST_CASE(the_backend_sees_only_new_segments) {
    int backend_calls = 0;
    auto backend = [&](const jit::Graph& g, std::span<const Tensor>) -> jit::CompiledFn {
        ++backend_calls;
        return [&g](std::span<const Tensor> in) { return jit::interpret(g, in); };
    };
    std::unique_ptr<student::ProgramNode> root;
    auto in = std::vector<Tensor>{randn({3}), randn({3})};
    student::graft(root, student::record(no_break, in), backend);
    student::graft(root, student::record(no_break, in), backend);
    BOOST_TEST(backend_calls == 1);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(task_3_3)

BOOST_AUTO_TEST_CASE(bar_is_right_on_both_branches) {
    manual_seed(5);
    int fn_runs = 0;
    student::CompiledFunction f([&](const std::vector<Tensor>& in) {
        ++fn_runs;
        return bar(in);
    });
    for (int i = 0; i < 8; ++i) {
        auto in = bar_inputs(i % 2 == 0);
        BOOST_TEST(allclose(f(in), bar(in)), "call " << i);
    }
    BOOST_TEST(f.graphs_compiled() == 3);
    BOOST_TEST(f.recordings() == 2);
    BOOST_TEST(fn_runs == 2);  // later calls run the tree, not fn
}

BOOST_AUTO_TEST_CASE(run_program_stops_at_an_unseen_outcome) {
    manual_seed(6);
    std::unique_ptr<student::ProgramNode> root;
    auto seen = bar_inputs(true);
    student::graft(root, student::record(bar, seen), "eager");
    auto again = bar_inputs(true);
    auto out = student::run_program(*root, again);
    BOOST_TEST_REQUIRE(out.has_value());
    BOOST_TEST(allclose(*out, bar(again)));
    BOOST_TEST(!student::run_program(*root, bar_inputs(false)).has_value());
}

BOOST_AUTO_TEST_CASE(two_branches_match_eager_and_kiln) {
    manual_seed(7);
    student::CompiledFunction f(two_ifs);
    std::vector<std::vector<Tensor>> calls;
    for (int i = 0; i < 24; ++i) {
        calls.push_back({randn({6}) + (i % 3 - 1) * 0.8, randn({6})});
        BOOST_TEST(allclose(f(calls.back()), two_ifs(calls.back())), "call " << i);
    }
    BOOST_TEST(f.graphs_compiled() == kiln_graphs(two_ifs, calls));
}

BOOST_AUTO_TEST_SUITE_END()
