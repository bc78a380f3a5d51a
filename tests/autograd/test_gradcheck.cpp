// Every differentiable op of tensor/ops.def against central differences. Pointwise entries
// are checked straight from the table (a new KILN_UNARY/KILN_BINARY needs no test code);
// each KILN_OP needs a case in structural_cases(), and a test fails until it has one.
#include <boost/test/unit_test.hpp>

#include <functional>

#include "kiln.h"

using namespace kiln;

namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

struct Case {
    OpId op;  // the table op under test; OpId::count_ for composites
    std::string label;
    Fn fn;
    std::vector<Tensor> inputs;
    GradcheckOptions options{};
};

constexpr double kScalar = 0.1;  // the scalar operand of tensor-scalar forms; no ties with inputs

Tensor positive(const Shape& s) { return rand(s, {.dtype = float64}) + 0.5; }  // in [0.5, 1.5)
// Both signs, |v| in [0.3, 1.3): away from the kinks of relu, abs, sign at 0 and from kScalar.
Tensor away_from_zero(const Shape& s) {
    Tensor m = rand(s, {.dtype = float64}) + 0.3;
    return where(rand(s) < 0.5, -m, m);
}
// Operand `arg` of a table op, inside its `domain` column in tensor/ops.def.
Tensor domain(OpId op, const Shape& s, int arg = 0) {
    switch (op_info(op).domain[arg]) {
        case Domain::positive:
        case Domain::above_minus_one:
            return positive(s);
        case Domain::inside_unit:
            return away_from_zero(s) * 0.7;  // |x| < 0.91
        case Domain::any:
        case Domain::inside_half_pi:  // |x| < 1.3
        case Domain::nonzero:
            return away_from_zero(s);
    }
    return away_from_zero(s);
}

void add_unary(std::vector<Case>& cases, OpId op, const std::string& name, Tensor (*f)(const Tensor&)) {
    cases.push_back({op, name + "(x)", [f](const std::vector<Tensor>& in) { return f(in[0]); }, {domain(op, {3, 4})}});
    cases.push_back({op, name + "(x.t())", [f](const std::vector<Tensor>& in) { return f(in[0].t()); }, {domain(op, {4, 3})}});
}

using BinaryTT = Tensor (*)(const Tensor&, const Tensor&);
using BinaryTS = Tensor (*)(const Tensor&, double);
using BinaryST = Tensor (*)(double, const Tensor&);
void add_binary(std::vector<Case>& cases, OpId op, const std::string& name, BinaryTT tt, BinaryTS ts, BinaryST st) {
    auto both = [tt](const std::vector<Tensor>& in) { return tt(in[0], in[1]); };
    cases.push_back({op, name + "(x, y)", both, {domain(op, {3, 4}), domain(op, {3, 4}, 1)}});
    cases.push_back(
        {op, name + "(x[2,1,4], y[3,1])", both, {domain(op, {2, 1, 4}), domain(op, {3, 1}, 1)}});
    cases.push_back({op, name + "(x[4], y[3,4])", both, {domain(op, {4}), domain(op, {3, 4}, 1)}});
    cases.push_back({op, name + "(x, scalar)", [ts](const std::vector<Tensor>& in) { return ts(in[0], kScalar); },
                     {domain(op, {3, 4})}});
    cases.push_back({op,
                     name + "(scalar, y)",
                     [st](const std::vector<Tensor>& in) { return st(kScalar, in[0]); },
                     {domain(op, {3, 4}, 1)}});
}

std::vector<Case> pointwise_cases() {
    manual_seed(1);
    std::vector<Case> cases;
#define KILN_UNARY(name, ...) add_unary(cases, OpId::name, #name, [](const Tensor& x) { return kiln::name(x); });
#define KILN_BINARY(name, ...)                                                                       \
    add_binary(                                                                                      \
        cases, OpId::name, #name, [](const Tensor& x, const Tensor& y) { return kiln::name(x, y); }, \
        [](const Tensor& x, double s) { return kiln::name(x, s); }, [](double s, const Tensor& y) { return kiln::name(s, y); });
#include "tensor/ops.def"
    return cases;
}

// One or more cases per KILN_OP entry with a derivative.
std::vector<Case> structural_cases() {
    manual_seed(2);
    Tensor mask = rand({3, 4}) < 0.5;
    GradcheckOptions loose{.eps = 1e-3, .atol = 1e-3, .rtol = 1e-2};  // through float32
    return {
        {OpId::where, "where(mask, a, b[4])", [](auto& in) { return where(in[0], in[1], in[2]); },
         {mask, randn({3, 4}, {.dtype = float64}), randn({4}, {.dtype = float64})}},
        {OpId::where, "where(mask, a, 0.5)", [](auto& in) { return where(in[0], in[1], 0.5); }, {mask, randn({3, 4})}},
        {OpId::where, "where(mask, 0.5, b)", [](auto& in) { return where(in[0], 0.5, in[1]); }, {mask, randn({3, 4})}},
        {OpId::cast, "clone", [](auto& in) { return in[0].clone(); }, {randn({3, 4})}},
        // A move to the device it is on (a copy): the formula; moves to a GPU: tests/cuda.
        {OpId::to_device, "to_device(cpu)", [](auto& in) { return dispatch(OpId::to_device, {in[0]}, {.device = cpu, .from = cpu}); }, {randn({3, 4})}},
        // unfold2d (im2col) through the composites built on it, and its adjoint fold2d.
        {OpId::unfold2d, "conv2d(x, w, b, stride (2, 1), padding 1)", [](auto& in) { return conv2d(in[0], in[1], in[2], {2, 1}, {1, 1}); },
         {randn({2, 3, 5, 4}), randn({4, 3, 3, 2}), randn({4})}},
        {OpId::unfold2d, "conv2d(groups 2, dilation 2)", [](auto& in) { return conv2d(in[0], in[1], {}, {1, 1}, {0, 0}, {2, 2}, 2); },
         {randn({1, 4, 6, 6}), randn({2, 2, 2, 2})}},
        // max_pool2d with a gradient: max_pool2d_index (int64, no derivative of its own) + gather
        {OpId::max_pool2d_index, "max_pool2d(2x2, padding 1)", [](auto& in) { return max_pool2d(in[0], {.kernel = {2, 2}, .stride = {2, 2}, .padding = {1, 1}}); },
         {randn({1, 2, 4, 5})}},
        {OpId::unfold2d, "avg_pool2d(3x3, stride 2)", [](auto& in) { return avg_pool2d(in[0], {.kernel = {3, 3}, .stride = {2, 2}}); },
         {randn({2, 1, 5, 5})}},
        {OpId::fold2d, "fold2d(2x2 window over 3x3)", [](auto& in) { return dispatch(OpId::fold2d, {in[0]}, {.shape = {2, 2, 1, 1, 0, 0, 1, 1}, .dims = {3, 3}}); },
         {randn({1, 8, 4})}},
        // The convolution ops oneDNN runs (float64 here: their im2col reference), each one's
        // derivative, which is the other two: conv2d's backward, and the double backward.
        {OpId::conv2d, "conv2d op (stride (2, 1), padding 1, bias)", [](auto& in) { return dispatch(OpId::conv2d, {in[0], in[1], in[2]}, {.shape = {3, 2, 2, 1, 1, 1, 1, 1}, .dim = 1}); },
         {randn({2, 3, 5, 4}), randn({4, 3, 3, 2}), randn({4})}},
        {OpId::conv2d_input_grad, "conv2d_input_grad (groups 2, dilation 2)", [](auto& in) { return dispatch(OpId::conv2d_input_grad, {in[0], in[1]}, {.shape = {2, 2, 1, 1, 0, 0, 2, 2}, .dims = {6, 6}, .dim = 2}); },
         {randn({1, 2, 4, 4}), randn({2, 2, 2, 2})}},
        {OpId::conv2d_weight_grad, "conv2d_weight_grad (stride 2, padding 1)", [](auto& in) { return dispatch(OpId::conv2d_weight_grad, {in[0], in[1]}, {.shape = {3, 3, 2, 2, 1, 1, 1, 1}, .dim = 1}); },
         {randn({2, 3, 5, 5}), randn({2, 4, 3, 3})}},
        // attention: the weights recomputed from q and k, key batch broadcast; causal, and
        // the heads-last result the inductor asks for.
        {OpId::attention, "attention(q, k[1, ...], v, causal)", [](auto& in) { return attention(in[0], in[1], in[2], 0.6, true); },
         {randn({2, 2, 4, 3}), randn({1, 2, 5, 3}), randn({2, 2, 5, 2})}},
        {OpId::attention, "attention(heads last)", [](auto& in) { return dispatch(OpId::attention, {in[0], in[1], in[2]}, {.scalar = 0.6, .keepdim = true}); },
         {randn({2, 2, 4, 3}), randn({2, 2, 3, 3}), randn({2, 2, 3, 2})}},
        // gather through index_select and embedding; scatter_add in both of its inputs.
        {OpId::gather, "gather(x, 1, index)", [](auto& in) { return gather(in[0], 1, tensor(std::vector<int64_t>{2, 0, 0, 1, 1, 1}, {2, 3})); },
         {randn({2, 3})}},
        {OpId::gather, "index_select(x, 0, [2, 0, 2])", [](auto& in) { return index_select(in[0], 0, tensor(std::vector<int64_t>{2, 0, 2})); },
         {randn({3, 4})}},
        {OpId::gather, "embedding(index [2, 2], weight)", [](auto& in) { return embedding(tensor(std::vector<int64_t>{1, 3, 3, 0}, {2, 2}), in[0]); },
         {randn({4, 3})}},
        {OpId::scatter_add, "scatter_add(x, 0, index, src)",
         [](auto& in) { return scatter_add(in[0], 0, tensor(std::vector<int64_t>{1, 0, 1, 1, 2, 0}, {2, 3}), in[1]); },
         {randn({3, 3}), randn({2, 3})}},
        {OpId::cast, "to(float32).to(float64)", [](auto& in) { return in[0].to(float32).to(float64); }, {randn({3, 4})}, loose},
        {OpId::sum, "sum()", [](auto& in) { return in[0].sum(); }, {randn({3, 4})}},
        {OpId::sum, "sum({1})", [](auto& in) { return in[0].sum({1}); }, {randn({3, 4})}},
        {OpId::sum, "sum({0, 2}, keepdim)", [](auto& in) { return in[0].sum({0, 2}, true); }, {randn({2, 3, 4})}},
        {OpId::sum, "sum({-1})", [](auto& in) { return in[0].sum({-1}); }, {randn({2, 3, 4})}},
        {OpId::amax, "amax()", [](auto& in) { return in[0].amax(); }, {randn({3, 4})}},
        {OpId::amax, "amax({1})", [](auto& in) { return in[0].amax({1}); }, {randn({3, 4})}},
        {OpId::amax, "amax({0}, keepdim)", [](auto& in) { return in[0].amax({0}, true); }, {randn({2, 3, 4})}},
        {OpId::amin, "amin()", [](auto& in) { return in[0].amin(); }, {randn({3, 4})}},
        {OpId::amin, "amin({1})", [](auto& in) { return in[0].amin({1}); }, {randn({3, 4})}},
        {OpId::matmul, "[3,4] @ [4,5]", [](auto& in) { return matmul(in[0], in[1]); }, {randn({3, 4}), randn({4, 5})}},
        {OpId::matmul, "[2,3,4] @ [4,5]", [](auto& in) { return matmul(in[0], in[1]); }, {randn({2, 3, 4}), randn({4, 5})}},
        {OpId::matmul, "[2,1,3,4] @ [3,4,2]", [](auto& in) { return matmul(in[0], in[1]); },
         {randn({2, 1, 3, 4}), randn({3, 4, 2})}},
        {OpId::matmul, "[4] @ [4,5]", [](auto& in) { return matmul(in[0], in[1]); }, {randn({4}), randn({4, 5})}},
        {OpId::matmul, "[3,4] @ [4]", [](auto& in) { return matmul(in[0], in[1]); }, {randn({3, 4}), randn({4})}},
        {OpId::matmul, "[4] @ [4]", [](auto& in) { return matmul(in[0], in[1]); }, {randn({4}), randn({4})}},
        {OpId::matmul, "x.t() @ y", [](auto& in) { return matmul(in[0].t(), in[1]); }, {randn({4, 3}), randn({4, 2})}},
        {OpId::reshape, "reshape({4, 3})", [](auto& in) { return in[0].reshape({4, 3}); }, {randn({3, 4})}},
        {OpId::reshape, "x.t().reshape({-1})", [](auto& in) { return in[0].t().reshape({-1}); }, {randn({3, 4})}},
        {OpId::permute, "permute({2, 0, 1})", [](auto& in) { return in[0].permute({2, 0, 1}); }, {randn({2, 3, 4})}},
        {OpId::expand, "[3,1].expand({2, 3, 4})", [](auto& in) { return in[0].expand({2, 3, 4}); }, {randn({3, 1})}},
        {OpId::slice, "slice(1, 1, 5, 2)", [](auto& in) { return in[0].slice(1, 1, 5, 2); }, {randn({3, 5})}},
        {OpId::slice, "slice(0, -2, 3)", [](auto& in) { return in[0].slice(0, -2, 3); }, {randn({3, 5})}},
        {OpId::slice_backward, "slice_backward into [3, 5]",
         [](auto& in) {
             return dispatch(OpId::slice_backward, {in[0]}, {.shape = {3, 5}, .dim = 1, .start = 1, .end = 5, .step = 2});
         },
         {randn({3, 2})}},
        {OpId::contiguous, "x.t().contiguous()", [](auto& in) { return in[0].t().contiguous(); }, {randn({3, 4})}},
        {OpId::cat, "cat({a, b, c}, 1)", [](auto& in) { return cat({in[0], in[1], in[2]}, 1); },
         {randn({2, 1}), randn({2, 3}), randn({2, 2})}},
        {OpId::cat, "cat({a, b}, 0)", [](auto& in) { return cat({in[0], in[1]}, 0); }, {randn({1, 3}), randn({2, 3})}},
    };
}

// Functions built from several table ops, as users and nn:: write them.
std::vector<Case> composite_cases() {
    manual_seed(3);
    constexpr OpId none = OpId::count_;
    return {
        {none, "softmax(1)", [](auto& in) { return in[0].softmax(1); }, {randn({3, 5})}},
        {none, "log_softmax(0)", [](auto& in) { return in[0].log_softmax(0); }, {randn({3, 5})}},
        {none, "mean({1})", [](auto& in) { return in[0].mean({1}); }, {randn({3, 4})}},
        {none, "select(1, 2)", [](auto& in) { return in[0].select(1, 2); }, {randn({3, 4})}},
        {none, "narrow + transpose", [](auto& in) { return in[0].narrow(0, 1, 2).transpose(0, 1); }, {randn({3, 4})}},
        {none, "unsqueeze + squeeze", [](auto& in) { return in[0].unsqueeze(1).squeeze(1) * 2.0; }, {randn({3, 4})}},
        {none, "x used twice", [](auto& in) { return in[0] * exp(in[0]) - in[0].sum(); }, {randn({3, 4})}},
        {none, "linear + relu", [](auto& in) { return relu(matmul(in[0], in[1].t()) + in[2]) * 1.0; },
         {randn({4, 3}), randn({5, 3}), full({5}, 0.05) + randn({5})}},
        {none, "sum_to([1, 4])", [](auto& in) { return sum_to(in[0], {1, 4}); }, {randn({3, 4})}},
        {none, "layer norm", [](auto& in) {
             Tensor mu = in[0].mean({1}, true);
             Tensor var = square(in[0] - mu).mean({1}, true);
             return (in[0] - mu) * rsqrt(var + 1e-5);
         }, {randn({3, 6})}},
    };
}

void run(const std::vector<Case>& cases) {
    for (const Case& c : cases) {
        BOOST_TEST_CONTEXT(c.label) {
            try {
                BOOST_TEST(gradcheck(c.fn, c.inputs, c.options));
            } catch (const Error& e) {
                BOOST_ERROR(e.what());
            }
        }
    }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(gradcheck_ops)

BOOST_AUTO_TEST_CASE(every_differentiable_op_has_a_case) {
    std::vector<Case> cases = pointwise_cases(), more = structural_cases();
    cases.insert(cases.end(), more.begin(), more.end());
    auto check = [&](OpId op) {
        const OpInfo& info = op_info(op);
        if (!info.backward || info.kind == OpKind::factory || info.kind == OpKind::random) return;
        // made by the inductor after autograd; its backward raises
        // (tests/codegen/test_fuse_conv.cpp)
        if (op == OpId::conv2d_fused) return;
        bool found = std::any_of(cases.begin(), cases.end(), [op](const Case& c) { return c.op == op; });
        BOOST_CHECK_MESSAGE(found, "op '" << info.name << "' has no gradcheck case: add one to structural_cases() in " << __FILE__);
    };
#define KILN_UNARY(name, ...) check(OpId::name);
#define KILN_BINARY(name, ...) check(OpId::name);
#define KILN_OP(name, ...) check(OpId::name);
#include "tensor/ops.def"
}

BOOST_AUTO_TEST_CASE(pointwise_ops_match_finite_differences) { run(pointwise_cases()); }
BOOST_AUTO_TEST_CASE(structural_ops_match_finite_differences) { run(structural_cases()); }
BOOST_AUTO_TEST_CASE(composites_match_finite_differences) { run(composite_cases()); }

BOOST_AUTO_TEST_SUITE_END()

namespace {
// d/dx sin(x) claimed to be +cos... but with the wrong sign.
struct WrongSin : autograd::Function<WrongSin> {
    static Tensor forward(const Tensor& x) { return sin(x); }
    static void setup_context(autograd::Ctx& ctx, const std::vector<Tensor>& inputs, const Tensor&) {
        ctx.save_for_backward(inputs[0]);
    }
    static std::vector<Tensor> backward(autograd::Ctx& ctx, const Tensor& grad) {
        return {-grad * cos(ctx.saved_tensors()[0])};
    }
};
}  // namespace

BOOST_AUTO_TEST_CASE(gradcheck_reports_a_wrong_derivative) {
    Fn f = [](const std::vector<Tensor>& in) { return WrongSin::apply(in[0]).sum(); };  // scalar: r = 1
    Tensor x = tensor({0.5, 1.0, -0.25});
    BOOST_TEST(!gradcheck(f, {x}, {.raise_exception = false}));
    try {
        gradcheck(f, {x});
        BOOST_ERROR("gradcheck did not throw");
    } catch (const Error& e) {
        std::string what = e.what();
        BOOST_CHECK_MESSAGE(what.find("input 0 (shape [3]), 3 of 3 elements") != std::string::npos, what);
        BOOST_CHECK_MESSAGE(what.find("element 1 (index [1]): analytic -0.540302 vs numeric 0.540302") != std::string::npos, what);
    }
}

BOOST_AUTO_TEST_CASE(gradcheck_leaves_inputs_alone_and_passes_ints_through) {
    Tensor x = randn({2, 3});
    Tensor before = x.clone();
    Tensor idx = tensor(std::vector<int64_t>{1, 0});
    Fn f = [](const std::vector<Tensor>& in) {
        BOOST_TEST(in[0].dtype() == float64);
        BOOST_TEST(in[1].dtype() == int64);
        return in[0] * in[1].unsqueeze(1).to(float64);
    };
    BOOST_TEST(gradcheck(f, {x, idx}));
    BOOST_TEST(allclose(x, before, 0, 0));
    BOOST_TEST(!x.requires_grad());
}
