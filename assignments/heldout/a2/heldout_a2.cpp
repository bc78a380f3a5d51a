// Assignment 2's held-out tests (not in the student release): call sequences, shapes and
// numbers drawn from the grading run's seed (assignments/heldout/seed.h), each compared
// with kiln's own JIT on the same calls.
#include <boost/test/unit_test.hpp>

#include "assignments/a2/student.h"
#include "assignments/heldout/seed.h"

using namespace kiln;
using student::Fn;

namespace {

Tensor scaled_chain(const std::vector<Tensor>& t, const std::vector<double>& s) {
    return tanh(t[0] * s[0]) + sigmoid(t[1]) * s[1];
}

std::vector<std::string> kiln_ops(const Fn& fn, const std::vector<Tensor>& t,
                                  const std::vector<double>& s) {
    std::vector<std::string> names;
    auto backend = [&names](const jit::Graph& g, std::span<const Tensor>) -> jit::CompiledFn {
        names = g.op_names();
        return [&g](std::span<const Tensor> in) { return jit::interpret(g, in); };
    };
    compile([fn](const std::vector<Tensor>& t, const std::vector<double>& s) { return fn(t, s); },
            {.backend = backend})(t, s);
    return names;
}

Shape random_shape(std::mt19937_64& rng) {
    Shape s(1 + rng() % 3);
    for (auto& d : s) d = int64_t(2 + rng() % 6);
    return s;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(task_2_1)

BOOST_AUTO_TEST_CASE(heldout_drawn_shapes_and_numbers_record_kilns_graph) {
    auto rng = heldout::rng(21);
    manual_seed(int64_t(rng() % 100000));
    for (int trial = 0; trial < 4; ++trial) {
        Shape shape = random_shape(rng);
        std::vector<Tensor> t{randn(shape), randn(shape)};
        std::vector<double> s{double(rng() % 7) - 3.0, double(rng() % 5) + 0.5};
        auto g = student::trace(scaled_chain, t, s);
        BOOST_TEST_REQUIRE(g);
        BOOST_TEST(g->op_names() == kiln_ops(scaled_chain, t, s), "seed " << heldout::seed());
        std::vector<Tensor> fresh{randn(shape), randn(shape)};
        BOOST_TEST(allclose(jit::interpret(*g, fresh).at(0), scaled_chain(fresh, s), 1e-5, 1e-6),
                   "seed " << heldout::seed());
    }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(task_2_2)

BOOST_AUTO_TEST_CASE(heldout_one_drawn_change_fails_and_is_named) {
    auto rng = heldout::rng(22);
    for (int trial = 0; trial < 12; ++trial) {
        int n = 1 + int(rng() % 4);
        std::vector<Tensor> t;
        for (int i = 0; i < n; ++i) t.push_back(randn(random_shape(rng)));
        std::vector<double> s{double(rng() % 100) / 10};
        auto g = student::guard_build(t, s);
        BOOST_TEST(student::guard_check(g, t, s) == "");
        int i = int(rng() % n);
        std::vector<Tensor> changed = t;
        std::vector<double> number = s;
        std::string who = "tensors[" + std::to_string(i) + "]";
        switch (rng() % 4) {
            case 0: {
                Shape bigger = t[i].shape();
                bigger.back() += 1;
                changed[i] = randn(bigger);
                break;
            }
            case 1:
                changed[i] = t[i].to(float64);
                break;
            case 2:
                changed[i] = t[i].detach().requires_grad_();
                break;
            default:
                number[0] = std::nextafter(s[0], 1e9), who = "scalars[0]";
        }
        std::string why = student::guard_check(g, changed, number);
        BOOST_TEST(why.find(who) != std::string::npos,
                   "trial " << trial << ": expected a failure naming " << who << ", got '" << why
                            << "' (seed " << heldout::seed() << ")");
    }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(task_2_3)

BOOST_AUTO_TEST_CASE(heldout_a_drawn_call_sequence_has_kilns_entries) {
    auto rng = heldout::rng(23);
    manual_seed(int64_t(rng() % 100000));
    std::vector<Shape> shapes{random_shape(rng), random_shape(rng)};
    std::vector<double> numbers{1.0, -2.0, 0.5};
    student::CompiledFunction mine(scaled_chain);
    jit::reset();
    auto theirs = compile([](const std::vector<Tensor>& t,
                             const std::vector<double>& s) { return scaled_chain(t, s); },
                          {.backend = "eager", .dynamic = jit::Dynamic::never});
    for (int call = 0; call < 12; ++call) {
        Shape shape = shapes[rng() % 2];
        std::vector<Tensor> t{randn(shape), randn(shape)};
        std::vector<double> s{numbers[rng() % 3], 2.0};
        BOOST_TEST(allclose(mine(t, s), scaled_chain(t, s), 1e-5, 1e-6), "call " << call);
        theirs(t, s);
        BOOST_TEST(int64_t(mine.entries().size()) == jit::counters().compiles,
                   "after call " << call << " (seed " << heldout::seed() << ")");
    }
}

BOOST_AUTO_TEST_SUITE_END()
