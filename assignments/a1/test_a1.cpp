// Assignment 1's tests, one suite per task (task_1_1 ...). Derivatives are graded by
// gradcheck (central differences in float64) and against kiln's own autograd.
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <limits>
#include <random>
#include <set>

#include "assignments/a1/student.h"

using namespace kiln;

namespace {

// The student's formula, run as kiln's backward pass runs formulas (grad mode off) with a
// hook on kiln's autograd tape: a formula computes the gradient itself, so nothing it does
// is recorded. Turning grad mode on so that the node the tape records for the op computes
// the gradient (grad_fn()->apply) would be kiln's formula, not the student's.
template <class F>
auto off_the_tape(const char* what, F&& f) {
    int recorded = 0;
    autograd::SavedTensorsHooks hook([&](const Tensor&) { ++recorded; });
    NoGradGuard no_grad;
    auto result = f();
    BOOST_TEST(recorded == 0, what << " recorded ops on kiln's autograd tape: the gradient "
                                      "came from kiln's formula (grad_fn()->apply), not yours");
    return result;
}
Tensor unary(OpId op, const Tensor& grad, const Tensor& x, const Tensor& out) {
    return off_the_tape("unary_backward",
                        [&] { return student::unary_backward(op, grad, x, out); });
}
std::pair<Tensor, Tensor> binary(OpId op, const Tensor& grad, const Tensor& x, const Tensor& y,
                                 const Tensor& out) {
    return off_the_tape("binary_backward",
                        [&] { return student::binary_backward(op, grad, x, y, out); });
}

// A kiln autograd::Function whose backward is the student's formula: gradcheck then
// compares the student's derivative with finite differences.
struct StudentUnary : autograd::Function<StudentUnary> {
    static Tensor forward(const Tensor& x, OpId op) { return dispatch(op, {x}); }
    static void setup_context(autograd::Ctx& ctx, const std::vector<Tensor>& inputs,
                              const Tensor& out) {
        ctx.save_for_backward(inputs[0], out);
    }
    static std::vector<Tensor> backward(autograd::Ctx& ctx, const Tensor& grad) {
        const auto& s = ctx.saved_tensors();
        return {unary(ctx.arg<OpId>(1), grad, s[0], s[1])};
    }
};
struct StudentBinary : autograd::Function<StudentBinary> {
    static Tensor forward(const Tensor& x, const Tensor& y, OpId op) {
        return dispatch(op, {x, y});
    }
    static void setup_context(autograd::Ctx& ctx, const std::vector<Tensor>& inputs,
                              const Tensor& out) {
        ctx.save_for_backward(inputs[0], inputs[1], out);
    }
    static std::vector<Tensor> backward(autograd::Ctx& ctx, const Tensor& grad) {
        const auto& s = ctx.saved_tensors();
        auto [gx, gy] = binary(ctx.arg<OpId>(2), grad, s[0], s[1], s[2]);
        return {gx, gy};
    }
};

bool check_unary(OpId op, const Tensor& x) {
    return gradcheck([op](const std::vector<Tensor>& in) { return StudentUnary::apply(in[0], op); },
                     {x}, {.raise_exception = false});
}
bool check_binary(OpId op, const Tensor& x, const Tensor& y) {
    return gradcheck(
        [op](const std::vector<Tensor>& in) { return StudentBinary::apply(in[0], in[1], op); },
        {x, y}, {.raise_exception = false});
}

Tensor away_from_zero(const Shape& shape) {  // |x| >= 0.2: relu's kink stays out of the differences
    Tensor x = randn(shape);
    return where(abs(x) < 0.2, x + 0.5, x);
}

// kiln's own formula for `op` (the derivative column of ops.def), computed while grading.
std::vector<Tensor> kiln_formula(OpId op, const Tensor& grad, std::vector<Tensor> inputs,
                                 const Tensor& out) {
    std::vector<Shape> shapes;
    std::vector<DType> dtypes;
    for (const Tensor& t : inputs) shapes.push_back(t.shape()), dtypes.push_back(t.dtype());
    BackwardArgs args{inputs, out, grad, {}, shapes, dtypes, (1u << inputs.size()) - 1};
    NoGradGuard no_grad;
    return op_info(op).backward(args);
}

// Equal to kiln's formula element by element: within rtol (relative to the larger
// magnitude), infinities equal, and NaN only where kiln's is NaN.
bool same_as_kiln(const Tensor& student, const Tensor& kiln, double rtol) {
    if (student.shape() != kiln.shape()) return false;
    std::vector<double> s = student.to(DType::float64).to_vector<double>();
    std::vector<double> k = kiln.to(DType::float64).to_vector<double>();
    for (size_t i = 0; i < s.size(); ++i) {
        if (std::isnan(k[i]) || std::isnan(s[i])) {
            if (std::isnan(k[i]) != std::isnan(s[i])) return false;
        } else if (std::isinf(k[i]) || std::isinf(s[i])) {
            if (s[i] != k[i]) return false;
        } else if (std::abs(s[i] - k[i]) >
                   rtol * std::max({std::abs(s[i]), std::abs(k[i]), 1e-300})) {
            return false;
        }
    }
    return true;
}

// Points where a difference quotient cannot stand in for the derivative: relu's kink at 0
// and +inf, where exp, log, sqrt and relu are still defined (f(inf + h) - f(inf - h) is NaN).
Tensor with_difference_breakers(const Tensor& x) {
    return cat(
        {x, tensor({0.0, std::numeric_limits<double>::infinity()}, {.dtype = DType::float64})});
}

}  // namespace

BOOST_AUTO_TEST_SUITE(task_1_1)

BOOST_AUTO_TEST_CASE(exp_log_sqrt_pass_gradcheck) {
    manual_seed(1);
    BOOST_TEST(check_unary(OpId::exp, randn({3, 4})));
    BOOST_TEST(check_unary(OpId::log, rand({3, 4}) + 0.5));
    BOOST_TEST(check_unary(OpId::sqrt, rand({5}) + 0.5));
}

BOOST_AUTO_TEST_CASE(sin_cos_tanh_pass_gradcheck) {
    manual_seed(2);
    BOOST_TEST(check_unary(OpId::sin, randn({4, 3})));
    BOOST_TEST(check_unary(OpId::cos, randn({4, 3})));
    BOOST_TEST(check_unary(OpId::tanh, randn({7})));
}

BOOST_AUTO_TEST_CASE(sigmoid_relu_pass_gradcheck) {
    manual_seed(3);
    BOOST_TEST(check_unary(OpId::sigmoid, randn({6})));
    BOOST_TEST(check_unary(OpId::relu, away_from_zero({2, 5})));
}

// A formula, not a difference quotient of the op: in float64 on [0.1, 2] the gradient is
// kiln's formula to 1e-12 relative (a central difference is off by about 1e-10, its
// rounding error), and it holds at relu's kink and at +inf, where differences fail.
BOOST_AUTO_TEST_CASE(formulas_not_difference_quotients) {
    manual_seed(41);
    Tensor x = rand({16}, {.dtype = DType::float64}) * 1.9 + 0.1;
    for (OpId op : {OpId::exp, OpId::log, OpId::sin, OpId::cos, OpId::tanh, OpId::sigmoid,
                    OpId::sqrt, OpId::relu}) {
        bool breakers = op == OpId::exp || op == OpId::log || op == OpId::sqrt || op == OpId::relu;
        Tensor xi = breakers ? with_difference_breakers(x) : x;
        Tensor out = dispatch(op, {xi});
        Tensor grad = randn(xi.shape(), {.dtype = DType::float64});
        Tensor mine = unary(op, grad, xi, out);
        BOOST_TEST(same_as_kiln(mine, kiln_formula(op, grad, {xi}, out).at(0), 1e-12),
                   op_name(op) << ": " << mine << " vs kiln's "
                               << kiln_formula(op, grad, {xi}, out).at(0));
    }
}

BOOST_AUTO_TEST_CASE(equal_kiln_autograd_on_a_chain) {
    manual_seed(4);
    Tensor x = (rand({8}) + 0.5).requires_grad_();
    Tensor y = StudentUnary::apply(
        StudentUnary::apply(StudentUnary::apply(x, OpId::sqrt), OpId::sin), OpId::exp);
    y.sum().backward();
    Tensor x2 = x.detach().requires_grad_();
    exp(sin(sqrt(x2))).sum().backward();
    BOOST_TEST(allclose(x.grad(), x2.grad(), 1e-5, 1e-6));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(task_1_2)

BOOST_AUTO_TEST_CASE(add_sub_pass_gradcheck) {
    manual_seed(5);
    BOOST_TEST(check_binary(OpId::add, randn({3, 4}), randn({3, 4})));
    BOOST_TEST(check_binary(OpId::sub, randn({3, 4}), randn({3, 4})));
}

BOOST_AUTO_TEST_CASE(mul_div_pass_gradcheck) {
    manual_seed(6);
    BOOST_TEST(check_binary(OpId::mul, randn({5}), randn({5})));
    BOOST_TEST(check_binary(OpId::div, randn({5}), rand({5}) + 0.5));
}

// The same for binary ops: kiln's formula to 1e-12 in float64, and +inf in x, where
// ((x + h) op y - (x - h) op y) / 2h is NaN but every formula here is not.
BOOST_AUTO_TEST_CASE(formulas_not_difference_quotients) {
    manual_seed(42);
    Tensor x = cat({rand({15}, {.dtype = DType::float64}) * 1.9 + 0.1,
                    tensor({std::numeric_limits<double>::infinity()}, {.dtype = DType::float64})});
    Tensor y = rand({16}, {.dtype = DType::float64}) * 1.9 + 0.1;
    for (OpId op : {OpId::add, OpId::sub, OpId::mul, OpId::div}) {
        Tensor out = dispatch(op, {x, y});
        Tensor grad = randn(x.shape(), {.dtype = DType::float64});
        auto [gx, gy] = binary(op, grad, x, y, out);
        auto kiln = kiln_formula(op, grad, {x, y}, out);
        BOOST_TEST(same_as_kiln(gx, kiln.at(0), 1e-12),
                   op_name(op) << " dx: " << gx << " vs kiln's " << kiln.at(0));
        BOOST_TEST(same_as_kiln(gy, kiln.at(1), 1e-12),
                   op_name(op) << " dy: " << gy << " vs kiln's " << kiln.at(1));
    }
}

BOOST_AUTO_TEST_CASE(broadcast_gradients_take_their_input_shapes) {
    manual_seed(7);
    BOOST_TEST(check_binary(OpId::mul, randn({3, 4}), randn({4})));
    BOOST_TEST(check_binary(OpId::div, randn({3, 1}), rand({1, 4}) + 0.5));
    BOOST_TEST(check_binary(OpId::sub, randn({2, 3, 4}), randn({3, 1})));
    Tensor x = randn({3, 4}), y = randn({4});
    auto [gx, gy] = binary(OpId::add, ones({3, 4}), x, y, x + y);
    BOOST_TEST(gx.shape() == x.shape());
    BOOST_TEST(gy.shape() == y.shape());
    BOOST_TEST(allclose(gy, full({4}, 3.0)));
}

BOOST_AUTO_TEST_SUITE_END()

namespace {

// The engine expression of the tests: z = sum(sin(x * y) + exp(x) * x), x used three times.
student::VarPtr expression(const student::VarPtr& x, const student::VarPtr& y) {
    auto xy = student::apply(OpId::mul, x, y);
    auto ex = student::apply(OpId::mul, student::apply(OpId::exp, x), x);
    return student::sum(student::apply(OpId::add, student::apply(OpId::sin, xy), ex));
}

int position(const std::vector<student::Var*>& order, const student::Var* v) {
    auto it = std::find(order.begin(), order.end(), v);
    return it == order.end() ? -1 : int(it - order.begin());
}

// Every Var reachable from root, by a plain walk (the tests' own, to compare with).
void reachable(student::Var* v, std::set<student::Var*>& seen) {
    if (!seen.insert(v).second) return;
    for (auto& p : v->parents) reachable(p.get(), seen);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(task_1_3)

BOOST_AUTO_TEST_CASE(a_chain_comes_leaf_first) {
    auto x = student::leaf(randn({3}));
    auto a = student::apply(OpId::sin, x);
    auto b = student::apply(OpId::exp, a);
    auto c = student::apply(OpId::cos, b);
    auto order = student::topo_order(c);
    BOOST_TEST(order.size() == 4u);
    BOOST_TEST((order == std::vector<student::Var*>{x.get(), a.get(), b.get(), c.get()}));
}

BOOST_AUTO_TEST_CASE(a_diamond_lists_each_var_once) {
    auto x = student::leaf(randn({3}));
    auto a = student::apply(OpId::sin, x), b = student::apply(OpId::cos, x);
    auto d = student::apply(OpId::mul, a, b);
    auto order = student::topo_order(student::apply(OpId::add, d, x));
    BOOST_TEST(order.size() == 5u);
    std::set<student::Var*> unique(order.begin(), order.end());
    BOOST_TEST(unique.size() == 5u);
    BOOST_TEST(position(order, x.get()) == 0);
}

BOOST_AUTO_TEST_CASE(every_edge_points_forward_in_a_random_dag) {
    std::mt19937 rng(11);
    std::vector<student::VarPtr> vars{student::leaf(randn({2})), student::leaf(randn({2}))};
    const OpId unary[] = {OpId::sin, OpId::cos, OpId::tanh};
    const OpId binary[] = {OpId::add, OpId::mul, OpId::sub};
    for (int i = 0; i < 40; ++i) {
        auto pick = [&] { return vars[rng() % vars.size()]; };
        vars.push_back(rng() % 2 ? student::apply(unary[rng() % 3], pick())
                                 : student::apply(binary[rng() % 3], pick(), pick()));
    }
    auto root = vars.back();
    auto order = student::topo_order(root);
    std::set<student::Var*> expected;
    reachable(root.get(), expected);
    BOOST_TEST(order.size() == expected.size());
    BOOST_TEST(std::set<student::Var*>(order.begin(), order.end()) == expected);
    BOOST_TEST(order.back() == root.get());
    for (student::Var* v : order)
        for (auto& p : v->parents) BOOST_TEST(position(order, p.get()) < position(order, v));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(task_1_4)

BOOST_AUTO_TEST_CASE(gradients_equal_kiln_autograd) {
    manual_seed(8);
    Tensor xv = randn({4, 3}), yv = randn({4, 3});
    auto x = student::leaf(xv), y = student::leaf(yv);
    student::backward(expression(x, y));
    Tensor xk = xv.clone().requires_grad_(), yk = yv.clone().requires_grad_();
    (sin(xk * yk) + exp(xk) * xk).sum().backward();
    BOOST_TEST_REQUIRE(x->grad.defined());
    BOOST_TEST(allclose(x->grad, xk.grad(), 1e-5, 1e-6));
    BOOST_TEST(allclose(y->grad, yk.grad(), 1e-5, 1e-6));
}

BOOST_AUTO_TEST_CASE(gradients_equal_central_differences) {
    manual_seed(9);
    Tensor xv = randn({5}).to(float64), yv = randn({5}).to(float64);
    auto x = student::leaf(xv), y = student::leaf(yv);
    student::backward(expression(x, y));
    BOOST_TEST_REQUIRE(x->grad.defined());
    auto f = [&](const Tensor& a) {
        return expression(student::leaf(a), student::leaf(yv))->value.item<double>();
    };
    std::vector<double> analytic = x->grad.to_vector<double>();
    for (int64_t i = 0; i < 5; ++i) {
        Tensor plus = xv.clone(), minus = xv.clone();
        plus.data_ptr<double>()[i] += 1e-6;
        minus.data_ptr<double>()[i] -= 1e-6;
        double numeric = (f(plus) - f(minus)) / 2e-6;
        BOOST_TEST(std::abs(analytic[i] - numeric) < 1e-5 + 1e-4 * std::abs(numeric));
    }
}

BOOST_AUTO_TEST_CASE(a_reused_var_accumulates_its_gradients) {
    Tensor xv = tensor({1.0, 2.0, -3.0});
    auto x = student::leaf(xv);
    // d/dx sum(x * x + x) = 2x + 1
    student::backward(student::sum(student::apply(OpId::add, student::apply(OpId::mul, x, x), x)));
    BOOST_TEST_REQUIRE(x->grad.defined());
    BOOST_TEST(allclose(x->grad, tensor({3.0, 5.0, -5.0})));
}

BOOST_AUTO_TEST_CASE(each_var_runs_backward_once) {
    // A ladder of diamonds: a walk without a topological order runs the bottom 2^10 times.
    auto x = student::leaf(randn({2}));
    auto v = x;
    std::vector<student::VarPtr> all;
    for (int i = 0; i < 10; ++i) {
        v = student::apply(OpId::add, student::apply(OpId::sin, v), student::apply(OpId::cos, v));
        all.push_back(v);
    }
    auto root = student::sum(v);
    student::backward(root);
    BOOST_TEST(root->backward_calls == 1);
    for (auto& a : all) BOOST_TEST(a->backward_calls == 1);
    BOOST_TEST(x->grad.defined());
}

BOOST_AUTO_TEST_SUITE_END()
