// Assignment 2's tests, one suite per task. Graphs are compared with the graph kiln's own
// JIT records for the same function; entry counts with kiln's (static shapes) on the same calls.
#include <boost/test/unit_test.hpp>
#include <set>

#include "assignments/a2/student.h"

using namespace kiln;
using student::Fn;

namespace {

// Seed-style functions (the tutorials' foo, the walk-through's log(mod(x)), the design
// card's modified sigmoid without its branch), tensors and numbers in.
Tensor foo(const std::vector<Tensor>& t, const std::vector<double>&) {
    return sin(t[0]) + cos(t[1]);
}
Tensor log_of_module(const std::vector<Tensor>& t, const std::vector<double>& s) {
    return log(exp(s[0] * t[0]));
}
Tensor modified_sigmoid(const std::vector<Tensor>& t, const std::vector<double>&) {
    Tensor x = 1.0 / (exp(-t[0]) + 5);
    return x * t[1];
}
Tensor norm_rows(const std::vector<Tensor>& t, const std::vector<double>& s) {
    Tensor x = t[0] - t[0].mean({1}, true);
    return x / (sqrt((x * x).sum({1}, true)) + s[0]);
}

// The op names of the graph kiln's own JIT records for fn.
std::vector<std::string> kiln_graph_ops(const Fn& fn, const std::vector<Tensor>& t,
                                        const std::vector<double>& s) {
    std::vector<std::string> names;
    auto backend = [&names](const jit::Graph& g, std::span<const Tensor>) -> jit::CompiledFn {
        names = g.op_names();
        return [&g](std::span<const Tensor> in) { return jit::interpret(g, in); };
    };
    auto compiled = compile(
        [fn](const std::vector<Tensor>& t, const std::vector<double>& s) { return fn(t, s); },
        {.backend = backend});
    compiled(t, s);
    return names;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(task_2_1)

BOOST_AUTO_TEST_CASE(records_the_ops_and_replays_on_new_values) {
    manual_seed(1);
    auto g = student::trace(foo, {randn({4}), randn({4})}, {});
    BOOST_TEST_REQUIRE(g);
    BOOST_TEST(g->num_inputs() == 2);
    // C++ leaves the order of `+`'s operands open: sin and cos may come either way round.
    std::vector<std::string> ops = g->op_names();
    BOOST_TEST_REQUIRE(ops.size() == 3u, g->str());
    BOOST_TEST(ops[2] == "add");
    BOOST_TEST((std::multiset<std::string>(ops.begin(), ops.end()) ==
                std::multiset<std::string>{"add", "cos", "sin"}));
    Tensor a = randn({4}), b = randn({4});
    std::vector<Tensor> in{a, b};
    BOOST_TEST(allclose(jit::interpret(*g, in).at(0), foo(in, {})));
}

BOOST_AUTO_TEST_CASE(graphs_equal_kilns_on_seed_functions) {
    manual_seed(2);
    struct Case {
        Fn fn;
        std::vector<Tensor> t;
        std::vector<double> s;
    };
    std::vector<Case> cases{{foo, {randn({3, 4}), randn({3, 4})}, {}},
                            {log_of_module, {randn({5})}, {2.0}},
                            {modified_sigmoid, {randn({10}), randn({10})}, {}},
                            {norm_rows, {randn({3, 6})}, {1e-3}}};
    for (const Case& c : cases) {
        auto g = student::trace(c.fn, c.t, c.s);
        BOOST_TEST_REQUIRE(g);
        BOOST_TEST(g->op_names() == kiln_graph_ops(c.fn, c.t, c.s));
        std::vector<Tensor> fresh;
        for (const Tensor& t : c.t) fresh.push_back(randn(t.shape()));
        BOOST_TEST(allclose(jit::interpret(*g, fresh).at(0), c.fn(fresh, c.s), 1e-5, 1e-6));
    }
}

BOOST_AUTO_TEST_CASE(the_hook_is_removed_after_fn_returns_or_throws) {
    BOOST_TEST_REQUIRE(student::trace(foo, {randn({2}), randn({2})}, {}));
    BOOST_TEST(dispatch_hook() == nullptr);
    Fn throws = [](const std::vector<Tensor>& t, const std::vector<double>&) -> Tensor {
        Tensor y = sin(t[0]);
        throw std::logic_error("fn failed");
    };
    BOOST_CHECK_EXCEPTION(
        student::trace(throws, {randn({2})}, {}), std::logic_error,
        [](const std::logic_error& e) { return std::string(e.what()) == "fn failed"; });
    BOOST_TEST(dispatch_hook() == nullptr);
}

BOOST_AUTO_TEST_CASE(captured_tensors_and_breaks_are_refused) {
    BOOST_TEST_REQUIRE(student::trace(foo, {randn({2}), randn({2})}, {}));  // a plain fn traces
    Tensor outside = randn({3});
    Fn captures = [outside](const std::vector<Tensor>& t, const std::vector<double>&) {
        return t[0] * outside;
    };
    BOOST_CHECK_THROW(student::trace(captures, {randn({3})}, {}), kiln::Error);
    BOOST_TEST(dispatch_hook() == nullptr);
    Fn branches = [](const std::vector<Tensor>& t, const std::vector<double>&) {
        return t[0].sum() > 0 ? t[0] : -t[0];
    };
    BOOST_CHECK_THROW(student::trace(branches, {randn({3})}, {}), kiln::Error);
    BOOST_TEST(dispatch_hook() == nullptr);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(task_2_2)

BOOST_AUTO_TEST_CASE(equal_properties_pass) {
    auto g = student::guard_build({randn({3, 4}), randn({4})}, {2.0, -1.5});
    BOOST_TEST(student::guard_check(g, {randn({3, 4}), randn({4})}, {2.0, -1.5}) == "");
    BOOST_TEST(g.tensors.size() == 2u);
    BOOST_TEST(g.scalars.size() == 2u);
}

BOOST_AUTO_TEST_CASE(a_changed_tensor_fails_and_is_named) {
    auto g = student::guard_build({randn({3, 4}), randn({4})}, {});
    auto fails_on = [&](std::vector<Tensor> t, const std::string& who) {
        std::string why = student::guard_check(g, t, {});
        BOOST_TEST(why.find(who) != std::string::npos,
                   "expected a failure naming " << who << ", got '" << why << "'");
    };
    fails_on({randn({3, 5}), randn({4})}, "tensors[0]");                   // a size
    fails_on({randn({3, 4}), randn({1, 4})}, "tensors[1]");                // the rank
    fails_on({randn({3, 4}), randn({4}).to(float64)}, "tensors[1]");       // the dtype
    fails_on({randn({3, 4}).requires_grad_(), randn({4})}, "tensors[0]");  // requires_grad
    fails_on({randn({3, 4})}, "number of tensors");
}

BOOST_AUTO_TEST_CASE(a_changed_number_fails_bit_for_bit) {
    auto g = student::guard_build({randn({2})}, {0.3});
    BOOST_TEST(student::guard_check(g, {randn({2})}, {0.3}) == "");
    BOOST_TEST(student::guard_check(g, {randn({2})}, {0.1 + 0.2}).find("scalars[0]") !=
               std::string::npos);
    BOOST_TEST(student::guard_check(g, {randn({2})}, {2.0}).find("scalars[0]") !=
               std::string::npos);
    BOOST_TEST(student::guard_check(g, {randn({2})}, {}).find("number of scalars") !=
               std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(task_2_3)

BOOST_AUTO_TEST_CASE(a_hit_reuses_the_graph_without_running_fn) {
    int fn_runs = 0, backend_calls = 0, code_runs = 0;
    Fn counted = [&](const std::vector<Tensor>& t, const std::vector<double>& s) {
        ++fn_runs;
        return foo(t, s);
    };
    auto backend = [&](const jit::Graph& g, std::span<const Tensor>) -> jit::CompiledFn {
        ++backend_calls;
        return [&g, &code_runs](std::span<const Tensor> in) {
            ++code_runs;
            return jit::interpret(g, in);
        };
    };
    student::CompiledFunction f(counted, backend);
    for (int i = 0; i < 5; ++i) {
        std::vector<Tensor> in{randn({6}), randn({6})};
        BOOST_TEST(allclose(f(in), foo(in, {})));
    }
    BOOST_TEST(f.entries().size() == 1u);
    BOOST_TEST(fn_runs == 1);
    BOOST_TEST(backend_calls == 1);
    BOOST_TEST(code_runs == 5);
    BOOST_TEST(f.num_hits() == 4);
}

BOOST_AUTO_TEST_CASE(entries_equal_kilns_static_jit_on_the_same_calls) {
    manual_seed(3);
    std::vector<std::pair<std::vector<Tensor>, std::vector<double>>> calls{
        {{randn({10})}, {2.0}},
        {{randn({10})}, {2.0}},              // hit
        {{randn({8})}, {2.0}},               // a new size
        {{randn({10})}, {-1.0}},             // a new number (the walk-through's other module)
        {{randn({10}).to(float64)}, {2.0}},  // a new dtype
        {{randn({8})}, {2.0}},
        {{randn({10})}, {-1.0}},  // hits of earlier entries
    };
    student::CompiledFunction mine(log_of_module);
    jit::reset();
    auto theirs = compile([](const std::vector<Tensor>& t,
                             const std::vector<double>& s) { return log_of_module(t, s); },
                          {.backend = "eager", .dynamic = jit::Dynamic::never});
    size_t i = 0;
    for (auto& [t, s] : calls) {
        Tensor expected = log_of_module(t, s);
        BOOST_TEST(allclose(mine(t, s), expected, 1e-5, 1e-6), "call " << i);
        theirs(t, s);
        BOOST_TEST(int64_t(mine.entries().size()) == jit::counters().compiles, "after call " << i);
        ++i;
    }
    BOOST_TEST(mine.entries().size() == 4u);
    BOOST_TEST(mine.num_hits() == 3);
}

BOOST_AUTO_TEST_CASE(a_new_number_gives_a_new_entry_with_its_value) {
    student::CompiledFunction f(log_of_module);
    Tensor x = randn({4});
    BOOST_TEST(allclose(f({x}, {2.0}), 2.0 * x, 1e-5, 1e-5));
    BOOST_TEST(allclose(f({x}, {3.0}), 3.0 * x, 1e-5, 1e-5));
    BOOST_TEST(allclose(f({x}, {2.0}), 2.0 * x, 1e-5, 1e-5));
    BOOST_TEST(f.entries().size() == 2u);
}

BOOST_AUTO_TEST_CASE(gradients_flow_through_a_requires_grad_entry) {
    student::CompiledFunction f(modified_sigmoid);
    Tensor a = randn({5}), b = randn({5});
    f({a, b});  // an entry for inputs that need no grad
    Tensor x = a.clone().requires_grad_(), y = b.clone().requires_grad_();
    f({x, y}).sum().backward();
    BOOST_TEST(f.entries().size() == 2u);
    Tensor x2 = a.clone().requires_grad_(), y2 = b.clone().requires_grad_();
    modified_sigmoid({x2, y2}, {}).sum().backward();
    BOOST_TEST_REQUIRE(x.grad().defined());
    BOOST_TEST(allclose(x.grad(), x2.grad(), 1e-5, 1e-6));
    BOOST_TEST(allclose(y.grad(), y2.grad(), 1e-5, 1e-6));
}

BOOST_AUTO_TEST_SUITE_END()
