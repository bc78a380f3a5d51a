// Assignment 1's held-out tests (not in the student release): the public tests' checks on
// shapes, values and graphs drawn from the grading run's seed (assignments/heldout/seed.h).
#include <boost/test/unit_test.hpp>
#include <map>
#include <set>
#include <string>

#include "assignments/a1/student.h"
#include "assignments/heldout/seed.h"

using namespace kiln;

namespace {

struct HeldoutUnary : autograd::Function<HeldoutUnary> {
    static Tensor forward(const Tensor& x, OpId op) { return dispatch(op, {x}); }
    static void setup_context(autograd::Ctx& ctx, const std::vector<Tensor>& inputs,
                              const Tensor& out) {
        ctx.save_for_backward(inputs[0], out);
    }
    static std::vector<Tensor> backward(autograd::Ctx& ctx, const Tensor& grad) {
        const auto& s = ctx.saved_tensors();
        return {student::unary_backward(ctx.arg<OpId>(1), grad, s[0], s[1])};
    }
};
struct HeldoutBinary : autograd::Function<HeldoutBinary> {
    static Tensor forward(const Tensor& x, const Tensor& y, OpId op) {
        return dispatch(op, {x, y});
    }
    static void setup_context(autograd::Ctx& ctx, const std::vector<Tensor>& inputs,
                              const Tensor& out) {
        ctx.save_for_backward(inputs[0], inputs[1], out);
    }
    static std::vector<Tensor> backward(autograd::Ctx& ctx, const Tensor& grad) {
        const auto& s = ctx.saved_tensors();
        auto [gx, gy] = student::binary_backward(ctx.arg<OpId>(2), grad, s[0], s[1], s[2]);
        return {gx, gy};
    }
};

// A shape of rank 1-3, each size 1-6.
Shape random_shape(std::mt19937_64& rng) {
    Shape s(1 + rng() % 3);
    for (auto& d : s) d = int64_t(1 + rng() % 6);
    return s;
}

// A shape that broadcasts against `s`: some sizes set to 1, some leading dims dropped.
Shape broadcast_partner(std::mt19937_64& rng, const Shape& s) {
    Shape p(s.begin() + int(rng() % s.size()), s.end());
    for (auto& d : p)
        if (rng() % 2) d = 1;
    return p;
}

std::string str(const Shape& s) {
    std::string out = "[";
    for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
    return out + "]";
}

}  // namespace

BOOST_AUTO_TEST_SUITE(task_1_1)

BOOST_AUTO_TEST_CASE(heldout_every_op_on_drawn_shapes_passes_gradcheck) {
    auto rng = heldout::rng(11);
    manual_seed(int64_t(rng() % 100000));
    const OpId ops[] = {OpId::exp,  OpId::log,     OpId::sin,  OpId::cos,
                        OpId::tanh, OpId::sigmoid, OpId::sqrt, OpId::relu};
    for (OpId op : ops) {
        Shape shape = random_shape(rng);
        Tensor x = op == OpId::log || op == OpId::sqrt ? rand(shape) + 0.5 : randn(shape);
        if (op == OpId::relu) x = where(abs(x) < 0.2, x + 0.5, x);
        bool ok = gradcheck(
            [op](const std::vector<Tensor>& in) { return HeldoutUnary::apply(in[0], op); }, {x},
            {.raise_exception = false});
        BOOST_TEST(ok, op_name(op) << " on " << str(shape) << " (seed " << heldout::seed() << ")");
    }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(task_1_2)

BOOST_AUTO_TEST_CASE(heldout_every_op_on_drawn_broadcasts_passes_gradcheck) {
    auto rng = heldout::rng(12);
    manual_seed(int64_t(rng() % 100000));
    const OpId ops[] = {OpId::add, OpId::sub, OpId::mul, OpId::div};
    for (int trial = 0; trial < 8; ++trial) {
        OpId op = ops[trial % 4];
        Shape a = random_shape(rng), b = broadcast_partner(rng, a);
        if (rng() % 2) std::swap(a, b);
        Tensor x = randn(a), y = op == OpId::div ? rand(b) + 0.5 : randn(b);
        bool ok = gradcheck(
            [op](const std::vector<Tensor>& in) { return HeldoutBinary::apply(in[0], in[1], op); },
            {x, y}, {.raise_exception = false});
        BOOST_TEST(ok, op_name(op) << " on " << str(a) << " and " << str(b) << " (seed "
                                   << heldout::seed() << ")");
    }
}

BOOST_AUTO_TEST_SUITE_END()

namespace {
// A random DAG of `n` ops over two leaves, each op reading earlier values.
std::vector<student::VarPtr> random_dag(std::mt19937_64& rng, int n, const Shape& shape) {
    std::vector<student::VarPtr> vars{student::leaf(randn(shape)), student::leaf(randn(shape))};
    const OpId unary[] = {OpId::sin, OpId::cos, OpId::tanh};
    const OpId binary[] = {OpId::add, OpId::mul, OpId::sub};
    for (int i = 0; i < n; ++i) {
        auto pick = [&] {
            return vars[vars.size() - 1 - rng() % std::min<size_t>(vars.size(), 6)];
        };
        vars.push_back(rng() % 2 ? student::apply(unary[rng() % 3], pick())
                                 : student::apply(binary[rng() % 3], pick(), pick()));
    }
    return vars;
}
}  // namespace

BOOST_AUTO_TEST_SUITE(task_1_3)

BOOST_AUTO_TEST_CASE(heldout_a_drawn_dag_is_in_topological_order) {
    auto rng = heldout::rng(13);
    auto vars = random_dag(rng, 60 + int(rng() % 60), {2});
    auto order = student::topo_order(vars.back());
    std::set<student::Var*> expected, listed(order.begin(), order.end());
    std::vector<student::Var*> stack{vars.back().get()};
    while (!stack.empty()) {
        student::Var* v = stack.back();
        stack.pop_back();
        if (expected.insert(v).second)
            for (auto& p : v->parents) stack.push_back(p.get());
    }
    BOOST_TEST(order.size() == expected.size(), "seed " << heldout::seed());
    BOOST_TEST((listed == expected));
    std::map<student::Var*, size_t> at;
    for (size_t i = 0; i < order.size(); ++i) at[order[i]] = i;
    for (student::Var* v : order)
        for (auto& p : v->parents) BOOST_TEST(at[p.get()] < at[v], "seed " << heldout::seed());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(task_1_4)

BOOST_AUTO_TEST_CASE(heldout_a_drawn_dag_gets_kilns_gradients_once_per_var) {
    auto rng = heldout::rng(14);
    manual_seed(int64_t(rng() % 100000));
    Shape shape = random_shape(rng);
    auto vars = random_dag(rng, 30 + int(rng() % 30), shape);
    auto root = student::sum(vars.back());
    student::backward(root);
    // The same DAG in kiln's autograd: replay each Var's op on fresh leaves.
    Tensor a = vars[0]->value.detach().requires_grad_(),
           b = vars[1]->value.detach().requires_grad_();
    std::map<student::Var*, Tensor> k{{vars[0].get(), a}, {vars[1].get(), b}};
    for (size_t i = 2; i < vars.size(); ++i) {
        std::vector<Tensor> in;
        for (auto& p : vars[i]->parents) in.push_back(k.at(p.get()));
        k[vars[i].get()] = dispatch(op_by_name(vars[i]->op), in);
    }
    k.at(vars.back().get()).sum().backward();
    for (int leaf = 0; leaf < 2; ++leaf) {
        Tensor expected = leaf == 0 ? a.grad() : b.grad();
        if (!expected.defined()) continue;  // the root does not reach this leaf
        BOOST_TEST_REQUIRE(vars[leaf]->grad.defined(), "leaf " << leaf);
        BOOST_TEST(allclose(vars[leaf]->grad, expected, 1e-4, 1e-5),
                   "leaf " << leaf << " (seed " << heldout::seed() << ")");
    }
    for (auto& v : vars)
        BOOST_TEST(v->backward_calls <= 1,
                   v->op << " ran backward " << v->backward_calls << " times");
}

BOOST_AUTO_TEST_SUITE_END()
