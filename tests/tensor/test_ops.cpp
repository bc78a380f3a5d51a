// The pointwise ops of tensor/ops.def, every one, against float64 references: the tests
// iterate the table with its X-macros, so a new KILN_UNARY/KILN_BINARY/KILN_COMPARE entry is
// tested here without editing this file (its `domain` column says where inputs are sampled).
#include <boost/test/unit_test.hpp>
#include <limits>
#include <map>
#include <set>

#include "reference.h"
#include "special_values.h"
#include "tensor/cuda.h"

using namespace kiln_test;
using kiln::DType;

namespace ref_math {
// The table's vocabulary on doubles, so each op's own expression can be evaluated in float64
// for ops that have no hand-written reference below: std::name for every math function of
// tensor/math_functions.def, not tensor/pointwise_math.h's, so a bug there shows up.
#define KILN_MATH(name, ...) using std::name;
#include "tensor/math_functions.def"
inline double remainder(double x, double y) {  // Python's %, not std::remainder
    double m = std::fmod(x, y);
    return m != 0 && ((y < 0) != (m < 0)) ? m + y : m;
}
inline double zero(double) { return 0; }
inline double maximum(double a, double b) { return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b); }
inline double minimum(double a, double b) { return std::isnan(a) || std::isnan(b) ? NAN : std::min(a, b); }
inline double sign(double x) { return x > 0 ? 1.0 : x < 0 ? -1.0 : x == x ? 0.0 : x; }
inline double neg(double x) { return -x; }

struct UnaryOp {
    const char* name;
    Tensor (*run)(const Tensor&);
    double (*expr)(double);  // the table's math, evaluated on doubles
    bool ints;
};
struct BinaryOp {
    const char* name;
    Tensor (*run)(const Tensor&, const Tensor&);
    Tensor (*run_scalar_right)(const Tensor&, double);
    Tensor (*run_scalar_left)(double, const Tensor&);
    double (*expr)(double, double);
    bool ints;
};
struct CompareOp {
    const char* name;
    Tensor (*run)(const Tensor&, const Tensor&);
    Tensor (*run_scalar_right)(const Tensor&, double);
    bool (*expr)(double, double);
};

const UnaryOp kUnary[] = {
#define KILN_UNARY(name, math, dx, saves, ints, ...)                                              \
    {#name, [](const Tensor& t) { return kiln::name(t); }, [](double x) { return double(math); }, \
     ints},
#include "tensor/ops.def"
};
const BinaryOp kBinary[] = {
#define KILN_BINARY(name, math, dx, dy, saves, ints, ...)               \
    {#name,                                                             \
     [](const Tensor& a, const Tensor& b) { return kiln::name(a, b); }, \
     [](const Tensor& a, double s) { return kiln::name(a, s); },        \
     [](double s, const Tensor& b) { return kiln::name(s, b); },        \
     [](double x, double y) { return double(math); },                   \
     ints},
#include "tensor/ops.def"
};
const CompareOp kCompare[] = {
#define KILN_COMPARE(name, math)                                                \
    {#name, [](const Tensor& a, const Tensor& b) { return kiln::name(a, b); },  \
     [](const Tensor& a, double s) { return kiln::name(a, s); },                \
     [](double x, double y) { return bool(math); }},
#include "tensor/ops.def"
};

}  // namespace ref_math

namespace {

using ref_math::kBinary;
using ref_math::kCompare;
using ref_math::kUnary;

// Hand-written references, independent of the table's text. An op missing here is checked
// against its own expression (see ref_math) and the test says so.
const std::map<std::string, double (*)(double)> kUnaryReference = {
    {"neg", [](double x) { return -x; }},
    {"exp", [](double x) { return std::exp(x); }},
    {"log", [](double x) { return std::log(x); }},
    {"sin", [](double x) { return std::sin(x); }},
    {"cos", [](double x) { return std::cos(x); }},
    {"tanh", [](double x) { return std::tanh(x); }},
    {"sigmoid", [](double x) { return 1.0 / (1.0 + std::exp(-x)); }},
    {"relu", [](double x) { return std::isnan(x) ? x : x > 0 ? x : 0.0; }},
    {"abs", [](double x) { return std::fabs(x); }},
    {"sign", [](double x) { return std::isnan(x) ? x : double((x > 0) - (x < 0)); }},
    {"sqrt", [](double x) { return std::sqrt(x); }},
    {"rsqrt", [](double x) { return 1.0 / std::sqrt(x); }},
    {"reciprocal", [](double x) { return 1.0 / x; }},
    {"floor", [](double x) { return std::floor(x); }},
    {"ceil", [](double x) { return std::ceil(x); }},
    {"round", [](double x) { return std::nearbyint(x); }},  // half to even, as torch.round
    {"trunc", [](double x) { return std::trunc(x); }},
    {"frac", [](double x) { return x - std::trunc(x); }},
    {"log1p", [](double x) { return std::log1p(x); }},
    {"expm1", [](double x) { return std::expm1(x); }},
    {"exp2", [](double x) { return std::exp2(x); }},
    {"log2", [](double x) { return std::log2(x); }},
    {"log10", [](double x) { return std::log10(x); }},
    {"sinh", [](double x) { return std::sinh(x); }},
    {"cosh", [](double x) { return std::cosh(x); }},
    {"tan", [](double x) { return std::tan(x); }},
    {"asin", [](double x) { return std::asin(x); }},
    {"acos", [](double x) { return std::acos(x); }},
    {"atan", [](double x) { return std::atan(x); }},
};
const std::map<std::string, double (*)(double, double)> kBinaryReference = {
    {"add", [](double x, double y) { return x + y; }},
    {"sub", [](double x, double y) { return x - y; }},
    {"mul", [](double x, double y) { return x * y; }},
    {"div", [](double x, double y) { return x / y; }},
    {"pow", [](double x, double y) { return std::pow(x, y); }},
    {"atan2", [](double x, double y) { return std::atan2(x, y); }},
    // PyTorch's rule (ATen's CPU kernel): fmod, then one step of y where the signs differ;
    // = x - y * floor(x / y) for finite operands, also right for y = +-inf.
    {"remainder", [](double x, double y) { double m = std::fmod(x, y); return m != 0 && ((y < 0) != (m < 0)) ? m + y : m; }},
    {"fmod", [](double x, double y) { return std::fmod(x, y); }},
    {"maximum", [](double x, double y) { return std::isnan(x) || std::isnan(y) ? NAN : x > y ? x : y; }},
    {"minimum", [](double x, double y) { return std::isnan(x) || std::isnan(y) ? NAN : x < y ? x : y; }},
};

const std::map<std::string, bool (*)(double, double)> kCompareReference = {
    {"lt", [](double x, double y) { return x < y; }},
    {"le", [](double x, double y) { return x <= y; }},
    {"gt", [](double x, double y) { return x > y; }},
    {"ge", [](double x, double y) { return x >= y; }},
    {"eq", [](double x, double y) { return x == y; }},
    {"ne", [](double x, double y) { return x != y; }},
};

std::function<double(double)> unary_reference(const ref_math::UnaryOp& op) {
    auto it = kUnaryReference.find(op.name);
    if (it != kUnaryReference.end()) return it->second;
    BOOST_TEST_MESSAGE("unary op '" << op.name << "' has no hand-written reference in test_ops.cpp; using its table expression");
    return op.expr;
}
std::function<double(double, double)> binary_reference(const ref_math::BinaryOp& op) {
    auto it = kBinaryReference.find(op.name);
    if (it != kBinaryReference.end()) return it->second;
    BOOST_TEST_MESSAGE("binary op '" << op.name << "' has no hand-written reference in test_ops.cpp; using its table expression");
    return op.expr;
}

std::function<double(double, double)> compare_reference(const ref_math::CompareOp& op) {
    auto it = kCompareReference.find(op.name);
    auto f = it != kCompareReference.end() ? it->second : op.expr;
    if (it == kCompareReference.end())
        BOOST_TEST_MESSAGE("comparison '" << op.name << "' has no hand-written reference in test_ops.cpp; using its table expression");
    return [f](double x, double y) { return double(f(x, y)); };
}

// Where each argument of an op is sampled: inside its `domain` column in tensor/ops.def.
// `away_from_zero`: |v| in [lo, hi], either sign.
struct Domain {
    double lo = -3, hi = 3;
    bool away_from_zero = false;
};
Domain domain(const std::string& op, int arg) {
    switch (kiln::op_info(kiln::op_by_name(op)).domain[arg]) {
        case kiln::Domain::any:
            return {};
        case kiln::Domain::positive:
            return {0.05, 4};
        case kiln::Domain::above_minus_one:
            return {-0.9, 3};
        case kiln::Domain::inside_unit:
            return {-0.95, 0.95};
        case kiln::Domain::inside_half_pi:
            return {-1.4, 1.4};
        case kiln::Domain::nonzero:
            return {0.25, 3, true};
    }
    return {};
}
Ref sample(const std::string& op, int arg, const Shape& shape) {
    Domain d = domain(op, arg);
    Ref r = random_ref(shape, d.lo, d.hi);
    if (d.away_from_zero)
        for (size_t i = 0; i < r.v.size(); i += 2) r.v[i] = -r.v[i];
    return r;
}
Ref sample_ints(const std::string& op, int arg, const Shape& shape) {
    Domain d = domain(op, arg);
    Ref r = random_ints(shape, d.lo > 0 || d.away_from_zero ? 1 : -5, 5);
    if (d.away_from_zero)
        for (size_t i = 0; i < r.v.size(); i += 2) r.v[i] = -r.v[i];
    return r;
}

// float32 result vs float64 reference: a few ulps of the result.
constexpr double kRtol = 1e-5, kAtol = 1e-6;

const Layout kLayouts[] = {Layout::contiguous, Layout::transposed, Layout::strided, Layout::offset};

}  // namespace

BOOST_AUTO_TEST_SUITE(pointwise_ops)

BOOST_AUTO_TEST_CASE(table_expressions_match_hand_written_references) {
    // The table writes some constants as float (1.f), so agreement is to float precision.
    auto close = [](double a, double b) { return std::abs(a - b) <= 1e-6 * (1 + std::abs(b)); };
    for (const auto& op : kUnary) {
        auto it = kUnaryReference.find(op.name);
        if (it == kUnaryReference.end()) continue;
        Ref x = sample(op.name, 0, {50});
        for (double v : x.v) BOOST_TEST(close(op.expr(v), it->second(v)), op.name << "(" << v << ")");
    }
    for (const auto& op : kBinary) {
        auto it = kBinaryReference.find(op.name);
        if (it == kBinaryReference.end()) continue;
        Ref x = sample(op.name, 0, {50}), y = sample(op.name, 1, {50});
        for (size_t i = 0; i < x.v.size(); ++i)
            BOOST_TEST(close(op.expr(x.v[i], y.v[i]), it->second(x.v[i], y.v[i])), op.name << "(" << x.v[i] << ", " << y.v[i] << ")");
    }
}

BOOST_AUTO_TEST_CASE(unary_ops_match_reference_in_every_layout) {
    for (const auto& op : kUnary) {
        auto ref = unary_reference(op);
        // 37: SIMD body plus scalar tail; 70001: split over the thread pool.
        for (Shape shape : {Shape{37}, Shape{70001}, Shape{6, 7}, Shape{3, 5, 8}}) {
            Ref x = sample(op.name, 0, shape);
            for (Layout l : kLayouts) {
                Tensor in = make(x, l);
                Tensor out = op.run(in);
                BOOST_TEST((out.dtype() == kiln::float32), op.name);
                check_close(out, map(x, ref), kRtol, kAtol, std::string(op.name) + " " + layout_name(l) + " " + str(shape));
            }
        }
        Ref s = sample(op.name, 0, {});
        check_close(op.run(make(s)), map(s, ref), kRtol, kAtol, std::string(op.name) + " 0-d");
        check_close(op.run(make(Ref{{0}, {}})), Ref{{0}, {}}, 0, 0, std::string(op.name) + " empty");
        Ref row = sample(op.name, 0, {1, 9});
        Ref expanded{{4, 9}, {}};
        for (int i = 0; i < 4; ++i) expanded.v.insert(expanded.v.end(), row.v.begin(), row.v.end());
        check_close(op.run(make(row).expand({4, 9})), map(expanded, ref), kRtol, kAtol, std::string(op.name) + " expanded");
    }
}

BOOST_AUTO_TEST_CASE(unary_ops_in_float64_and_int64) {
    for (const auto& op : kUnary) {
        auto ref = unary_reference(op);
        Ref x = sample(op.name, 0, {5, 7});
        Tensor out = op.run(make(x, Layout::transposed, kiln::float64));
        BOOST_TEST((out.dtype() == kiln::float64), op.name);
        check_close(out, map(x, ref), 1e-12, 1e-14, std::string(op.name) + " float64");

        // Integer inputs keep int64 where the table says `ints`, else promote to float32.
        Ref n = sample_ints(op.name, 0, {11});
        Tensor iout = op.run(make(n, kiln::int64));
        BOOST_TEST((iout.dtype() == (op.ints ? kiln::int64 : kiln::float32)), op.name << " on int64 gives " << iout.dtype());
        check_close(iout, map(n, ref), op.ints ? 0 : kRtol, op.ints ? 0 : kAtol, std::string(op.name) + " int64");
    }
}

BOOST_AUTO_TEST_CASE(binary_ops_match_reference_with_broadcast_scalars_and_layouts) {
    for (const auto& op : kBinary) {
        auto ref = binary_reference(op);
        std::string name = op.name;
        auto check = [&](const Tensor& out, const Ref& want, const std::string& what) {
            BOOST_TEST((out.dtype() == kiln::float32), name << " " << what);
            check_close(out, want, kRtol, kAtol, name + " " + what);
        };
        Ref x = sample(name, 0, {4, 6}), y = sample(name, 1, {4, 6});
        for (Layout lx : kLayouts)
            for (Layout ly : {Layout::contiguous, Layout::strided, Layout::transposed})
                check(op.run(make(x, lx), make(y, ly)), zip(x, y, ref), std::string(layout_name(lx)) + " with " + layout_name(ly));

        Ref a = sample(name, 0, {3, 1, 4}), b = sample(name, 1, {5, 4});
        check(op.run(make(a), make(b)), zip(a, b, ref), "broadcast [3,1,4] with [5,4]");
        check(op.run(make(b, Layout::transposed), make(a)), zip(b, a, ref), "broadcast [5,4] (transposed) with [3,1,4]");

        Ref row = sample(name, 0, {1, 6});
        check(op.run(make(row).expand({4, 6}), make(y, Layout::offset)), zip(row, y, ref), "expanded with offset");
        Ref s = sample(name, 0, {});
        check(op.run(make(s), make(y)), zip(s, y, ref), "0-d with [4,6]");

        // Tensor-scalar, both orders; the scalar comes from the other argument's domain.
        double right = sample(name, 1, {1}).v[0], left = sample(name, 0, {1}).v[0];
        check(op.run_scalar_right(make(x, Layout::strided), right), zip(x, Ref{{}, {right}}, ref), "tensor-scalar");
        check(op.run_scalar_left(left, make(y, Layout::transposed)), zip(Ref{{}, {left}}, y, ref), "scalar-tensor");

        Ref big_x = sample(name, 0, {70001}), big_y = sample(name, 1, {70001});
        check(op.run(make(big_x), make(big_y)), zip(big_x, big_y, ref), "70001 elements");
        check(op.run_scalar_right(make(big_x), right), zip(big_x, Ref{{}, {right}}, ref), "70001 elements, scalar");
    }
}

BOOST_AUTO_TEST_CASE(binary_ops_dtypes) {
    for (const auto& op : kBinary) {
        auto ref = binary_reference(op);
        Ref x = sample_ints(op.name, 0, {3, 4}), y = sample_ints(op.name, 1, {4});
        Tensor out = op.run(make(x, kiln::int64), make(y, kiln::int64));
        BOOST_TEST((out.dtype() == (op.ints ? kiln::int64 : kiln::float32)), op.name << " int64 gives " << out.dtype());
        check_close(out, zip(x, y, ref), op.ints ? 0 : kRtol, op.ints ? 0 : kAtol, std::string(op.name) + " int64");

        // An integral scalar keeps int64 for `ints` ops; a fractional one promotes to float32.
        Tensor si = op.run_scalar_right(make(x, kiln::int64), 2.0);
        BOOST_TEST((si.dtype() == (op.ints ? kiln::int64 : kiln::float32)), op.name);
        check_close(si, zip(x, Ref{{}, {2.0}}, ref), kRtol, kAtol, std::string(op.name) + " int64 * 2");
        Tensor sf = op.run_scalar_right(make(x, kiln::int64), 0.5);
        BOOST_TEST((sf.dtype() == kiln::float32), op.name);
        check_close(sf, zip(x, Ref{{}, {0.5}}, ref), kRtol, kAtol, std::string(op.name) + " int64 * 0.5");

        // Mixed dtypes promote: int64 with float32 is float32, anything with float64 is float64.
        Ref f = sample(op.name, 1, {4});
        Tensor mixed = op.run(make(x, kiln::int64), make(f));
        BOOST_TEST((mixed.dtype() == kiln::float32), op.name);
        check_close(mixed, zip(x, f, ref), kRtol, kAtol, std::string(op.name) + " int64 with float32");
        Ref d = sample(op.name, 0, {3, 4});
        Tensor wide = op.run(make(d, kiln::float64), make(f));
        BOOST_TEST((wide.dtype() == kiln::float64), op.name);
        check_close(wide, zip(d, f, ref), kRtol, kAtol, std::string(op.name) + " float64 with float32");
    }
}

BOOST_AUTO_TEST_CASE(comparisons_return_bool) {
    for (const auto& op : kCompare) {
        // Values on a coarse grid, so that equal pairs occur.
        Ref x = map(random_ints({4, 6}, -4, 4), [](double v) { return v / 2; });
        Ref y = map(random_ints({4, 6}, -4, 4), [](double v) { return v / 2; });
        auto ref = compare_reference(op);
        for (Layout l : kLayouts) {
            Tensor out = op.run(make(x, l), make(y, Layout::strided));
            BOOST_TEST((out.dtype() == kiln::boolean), op.name);
            check_equal(out, zip(x, y, ref), std::string(op.name) + " " + layout_name(l));
        }
        Ref a = random_ints({3, 1, 4}, -2, 2), b = random_ints({5, 4}, -2, 2);
        check_equal(op.run(make(a, kiln::int64), make(b)), zip(a, b, ref), std::string(op.name) + " broadcast, int64 with float32");
        check_equal(op.run_scalar_right(make(x), 0.5), zip(x, Ref{{}, {0.5}}, ref), std::string(op.name) + " tensor-scalar");
        check_equal(op.run_scalar_right(make(b, kiln::int64), 1.0), zip(b, Ref{{}, {1.0}}, ref), std::string(op.name) + " int64-scalar");
        Ref nan{{2}, {NAN, 1.0}};
        check_equal(op.run(make(nan), make(Ref{{2}, {NAN, NAN}})), zip(nan, Ref{{2}, {NAN, NAN}}, ref), std::string(op.name) + " NaN");
    }
}

BOOST_AUTO_TEST_CASE(operators_are_the_table_ops) {
    Ref x = sample("div", 1, {3, 4});
    Tensor t = make(x);
    check_close(1.0 / t, map(x, [](double v) { return 1.0 / v; }), kRtol, kAtol, "1.0 / x");
    check_close(t * 2, map(x, [](double v) { return v * 2; }), kRtol, kAtol, "x * 2");
    check_close(2 - t, map(x, [](double v) { return 2 - v; }), kRtol, kAtol, "2 - x");
    check_close(t + t, map(x, [](double v) { return v + v; }), kRtol, kAtol, "x + x");
    check_close(-t, map(x, [](double v) { return -v; }), 0, 0, "-x");
    check_equal(1.0 < t, map(x, [](double v) { return double(1.0 < v); }), "1.0 < x");
    check_equal(t >= 0.5, map(x, [](double v) { return double(v >= 0.5); }), "x >= 0.5");
    check_equal(t != t, map(x, [](double) { return 0.0; }), "x != x");
}

BOOST_AUTO_TEST_CASE(int64_add_mul_keep_int64_and_exp_promotes) {
    Tensor a = kiln::tensor(std::vector<int64_t>{1, -2, 3, int64_t(1) << 40});
    Tensor b = kiln::tensor(std::vector<int64_t>{5, 6, -7, 3});
    Tensor sum = a + b, prod = a * b;
    BOOST_TEST((sum.dtype() == kiln::int64));
    BOOST_TEST((prod.dtype() == kiln::int64));
    BOOST_TEST(sum.to_vector<int64_t>() == (std::vector<int64_t>{6, 4, -4, (int64_t(1) << 40) + 3}), boost::test_tools::per_element());
    BOOST_TEST(prod.to_vector<int64_t>() == (std::vector<int64_t>{5, -12, -21, int64_t(3) << 40}), boost::test_tools::per_element());
    BOOST_TEST(((a * 2).dtype() == kiln::int64));
    Tensor e = kiln::exp(kiln::tensor(std::vector<int64_t>{0, 1}));
    BOOST_TEST((e.dtype() == kiln::float32));
    check_close(e, Ref{{2}, {1.0, std::exp(1.0)}}, kRtol, kAtol, "exp of int64");
}

BOOST_AUTO_TEST_CASE(nan_and_inf_propagate_through_maximum_minimum_relu_amax) {
    const double inf = std::numeric_limits<double>::infinity();
    // 40 elements: the NaNs sit both in the SIMD body and in the scalar tail.
    Ref x = random_ref({40}, -1, 1), y = random_ref({40}, -1, 1);
    for (int i : {3, 37}) x.v[i] = NAN;
    for (int i : {5, 38}) y.v[i] = NAN;
    x.v[10] = inf, y.v[11] = -inf;
    auto mx = kBinaryReference.at("maximum"), mn = kBinaryReference.at("minimum");
    check_close(kiln::maximum(make(x), make(y)), zip(x, y, mx), 0, 0, "maximum(x, y)");
    check_close(kiln::maximum(make(y), make(x)), zip(y, x, mx), 0, 0, "maximum(y, x)");
    check_close(kiln::minimum(make(x), make(y)), zip(x, y, mn), 0, 0, "minimum(x, y)");
    check_close(kiln::maximum(make(x), 0.0), zip(x, Ref{{}, {0.0}}, mx), 0, 0, "maximum(x, 0)");
    check_close(kiln::relu(make(x)), map(x, kUnaryReference.at("relu")), 0, 0, "relu");
    check_close(kiln::relu(make(Ref{{3}, {inf, -inf, NAN}})), Ref{{3}, {inf, 0, NAN}}, 0, 0, "relu of inf, -inf, NaN");

    for (int at : {0, 17, 99}) {  // in the first SIMD batch, a later one, the tail
        Ref r = random_ref({100}, -1, 1);
        r.v[at] = NAN;
        BOOST_TEST(std::isnan(make(r).amax().item<float>()), "amax with NaN at " << at);
        BOOST_TEST(std::isnan(make(r).amin().item<float>()), "amin with NaN at " << at);
        r.v[at] = inf;
        BOOST_TEST(make(r).amax().item<float>() == float(inf));
    }
    BOOST_TEST(std::isnan(make(Ref{{2, 2}, {1, NAN, 2, 3}}).amax({1}).to_vector<float>()[0]));
}

// pow's special values as PyTorch gives them (issue 30 item 12, issue 32 item 5), written
// out by hand, each on every element of a 37-element tensor: vector body and scalar tail.
BOOST_AUTO_TEST_CASE(pow_special_values_follow_pytorch_in_body_and_tail) {
    const float inf = INFINITY, nan = NAN;
    struct Case {
        float x, y, want;
    };
    const Case cases[] = {
        {0, 0, 1},         {0, -1, inf},      {-0.0f, -1, -inf}, {-0.0f, -2, inf}, {0, 2, 0},
        {-0.0f, 3, -0.0f}, {inf, 0, 1},       {nan, 0, 1},       {1, nan, 1},      {-1, inf, 1},
        {-1, -inf, 1},     {0, nan, nan},     {nan, 1, nan},     {-inf, 3, -inf},  {-inf, 2, inf},
        {-inf, 0.5f, inf}, {-inf, -3, -0.0f}, {-inf, -0.5f, 0},  {-2, 0.5f, nan},  {-2, 3, -8},
        {0.5f, inf, 0},    {0.5f, -inf, inf}, {2, -inf, 0},      {inf, -1, 0},     {1e-40f, 0, 1}};
    for (const Case& c : cases) {
        for (float v : kiln::pow(kiln::full({37}, c.x), kiln::full({37}, c.y)).to_vector<float>())
            BOOST_TEST(agrees(v, c.want), "pow(" << show(c.x) << ", " << show(c.y)
                                                 << ") = " << show(v) << ", want " << show(c.want));
        float scalar_right = kiln::pow(kiln::full({37}, c.x), double(c.y)).to_vector<float>()[5];
        BOOST_TEST(agrees(scalar_right, c.want), "pow(tensor " << show(c.x) << ", scalar "
                                                               << show(c.y)
                                                               << ") = " << show(scalar_right));
    }
}

// Every pointwise op of the table on IEEE special values (+-0, +-inf, NaN, subnormals, huge;
// for binary ops every pair of them), in the vector body (each value on 16 lanes of a long
// tensor) and in the scalar tail (one-element tensors), each against the float64 reference.
// The two paths run the same ops.def expression on xsimd batches and on scalars, so a
// helper whose batch form breaks IEEE rules (pow(0, 0) was 0 in the body, 1 in the tail)
// shows up here; the generated kernels get the same check in tests/codegen/test_emit.cpp.
BOOST_AUTO_TEST_CASE(special_values_agree_in_vector_body_scalar_tail_and_float64) {
    constexpr int64_t kLanes = 16;  // a multiple of every batch width (4, 8, 16 floats)
    auto body_tensor = [](const std::vector<float>& v) {
        std::vector<float> lanes;
        for (float x : v) lanes.insert(lanes.end(), kLanes, x);
        return kiln::tensor(lanes, {int64_t(lanes.size())});
    };
    auto one = [](float v) { return kiln::tensor(std::vector<float>{v}, {1}); };
    int failures = 0, checked = 0;
    auto check = [&](const std::string& call, double body, double tail, double want) {
        ++checked;
        if (agrees(body, want) && agrees(tail, want)) return;
        if (++failures <= 40)
            BOOST_ERROR(call << ": vector body " << show(body) << ", scalar tail " << show(tail)
                             << ", float64 reference " << show(double(float(want))));
    };
    std::vector<float> v = special_values();
    auto [xs, ys] = special_pairs();
    for (const auto& op : kUnary) {
        auto ref = unary_reference(op);
        std::vector<float> body = op.run(body_tensor(v)).to_vector<float>();
        for (size_t i = 0; i < v.size(); ++i)
            check(std::string(op.name) + "(" + show(v[i]) + ")", body[i * kLanes],
                  op.run(one(v[i])).item<float>(), ref(v[i]));
    }
    for (const auto& op : kBinary) {
        auto ref = binary_reference(op);
        std::vector<float> body = op.run(body_tensor(xs), body_tensor(ys)).to_vector<float>();
        for (size_t i = 0; i < xs.size(); ++i)
            check(std::string(op.name) + "(" + show(xs[i]) + ", " + show(ys[i]) + ")",
                  body[i * kLanes], op.run(one(xs[i]), one(ys[i])).item<float>(),
                  ref(xs[i], ys[i]));
    }
    for (const auto& op : kCompare) {
        auto ref = compare_reference(op);
        std::vector<bool> body = op.run(body_tensor(xs), body_tensor(ys)).to_vector<bool>();
        for (size_t i = 0; i < xs.size(); ++i)
            check(std::string(op.name) + "(" + show(xs[i]) + ", " + show(ys[i]) + ")",
                  body[i * kLanes], op.run(one(xs[i]), one(ys[i])).item<bool>(), ref(xs[i], ys[i]));
    }
    BOOST_TEST(failures == 0,
               failures << " of " << checked << " results disagree (the first 40 are listed)");
    BOOST_TEST(checked > 400 * 10);
}

// to_device is the op behind Tensor::to(Device): a move to the device a tensor is on is
// no op at all (to() returns it); dispatched directly it copies. Without a GPU a move raises,
// naming the call and what is missing (moves to a GPU: tests/cuda/test_cuda_codegen.cpp).
BOOST_AUTO_TEST_CASE(to_device_copies_and_a_move_without_a_gpu_raises) {
    using namespace kiln;
    const Device gpu{DeviceType::cuda, 0};
    Tensor x = randn({2, 3});
    BOOST_TEST(x.to(cpu).impl() == x.impl());
    Tensor t = x.t();
    Attrs to_cpu{.device = cpu, .from = cpu}, to_gpu{.device = gpu}, full_gpu{.shape = {2}, .device = gpu};
    Tensor copy = dispatch(OpId::to_device, {t}, to_cpu);
    BOOST_TEST(copy.is_contiguous());
    BOOST_TEST(copy.impl()->storage != x.impl()->storage);
    BOOST_TEST(allclose(copy, t));
    BOOST_TEST(attrs_print(OpId::to_device, to_gpu) == "device=cuda:0");
    BOOST_TEST(attrs_print(OpId::full, full_gpu).find("device=cuda:0") != std::string::npos);
    if (cuda::is_available()) return;
    try {
        (void)x.to(gpu);
        BOOST_ERROR("a move to cuda:0 without a GPU did not raise");
    } catch (const Error& e) {
        BOOST_TEST(std::string(e.what()).find("to(cuda)") != std::string::npos, e.what());
    }
    TensorOptions on_gpu{.device = gpu};
    BOOST_CHECK_THROW(ones({2}, on_gpu), Error);
}

BOOST_AUTO_TEST_SUITE_END()

// Every op of the table must be exercised somewhere in tests/tensor. Pointwise entries are
// covered by the loops above; the KILN_OP entries are listed with the test that covers them.
BOOST_AUTO_TEST_CASE(every_table_op_has_a_test) {
    const std::map<std::string, std::string> covered = {
        {"where", "test_shape.cpp where_*"},
        {"cast", "test_shape.cpp cast_*"},
        {"sum", "test_reduce.cpp reductions_*"},
        {"amax", "test_reduce.cpp reductions_*"},
        {"amin", "test_reduce.cpp reductions_*"},
        {"matmul", "test_reduce.cpp matmul_*"},
        {"reshape", "test_shape.cpp reshape_*"},
        {"permute", "test_shape.cpp permute_*"},
        {"expand", "test_shape.cpp expand_*"},
        {"slice", "test_shape.cpp slice_*"},
        {"slice_backward", "test_shape.cpp slice_backward_*"},
        {"contiguous", "test_shape.cpp contiguous_*"},
        {"to_device", "test_ops.cpp to_device_* (moves to a GPU: tests/cuda test_cuda_codegen.cpp)"},
        {"unfold2d", "test_conv.cpp (conv2d, pooling)"},
        {"fold2d", "test_conv.cpp fold2d_*"},
        {"max_pool2d_index", "test_conv.cpp max_pool2d_* (loops, ties, NaN, indices)"},
        {"conv2d", "test_conv.cpp conv2d_and_both_gradients_* (on oneDNN and the im2col reference)"},
        {"conv2d_input_grad", "test_conv.cpp conv2d_and_both_gradients_*"},
        {"conv2d_weight_grad", "test_conv.cpp conv2d_and_both_gradients_*"},
        {"conv2d_fused", "tests/codegen/test_fuse_conv.cpp (vs conv2d and its ops)"},
        {"attention", "tests/nn/test_norm_attention.cpp the_attention_op_* (loops in double, gradcheck); "
                      "on a GPU tests/cuda/test_cuda_models.cpp the_attention_kernel_*"},
        {"gather", "test_index.cpp"},
        {"scatter_add", "test_index.cpp"},
        {"cat", "test_shape.cpp cat_*"},
        {"full", "test_factory.cpp full_*"},
        {"arange", "test_factory.cpp arange_*"},
        {"rand", "test_factory.cpp rand_*"},
        {"randn", "test_factory.cpp randn_*"},
        {"randint", "test_factory.cpp randint_*"},
    };
#define KILN_OP(name, ...) \
    BOOST_TEST(covered.count(#name) == 1u, "op '" #name "' of tensor/ops.def has no test: add one and list it here");
#include "tensor/ops.def"
}
