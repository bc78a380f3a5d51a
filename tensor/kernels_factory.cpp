// Factories: full, arange and the random ones. One global generator, seeded by manual_seed.
#include <cfloat>
#include <cmath>
#include <mutex>
#include <random>
#include <sstream>

#include "tensor/kernels.h"

namespace kiln {
namespace {

struct Generator {
    std::mutex mu;
    std::mt19937_64 engine{0x6b696c6e};  // "kiln"
};
Generator& generator() {
    static Generator g;
    return g;
}

template <class Fill>
Tensor random_fill(const Attrs& a, Fill fill) {
    Tensor out = empty(a.shape, a.dtype);
    std::lock_guard lock(generator().mu);
    visit_dtype(a.dtype, [&](auto tag) {
        using T = decltype(tag);
        T* p = ptr<T>(out);
        for (int64_t i = 0, n = out.numel(); i < n; ++i) p[i] = static_cast<T>(fill(generator().engine));
    });
    return out;
}

void check_shape(const Shape& s, const char* op) { checked_numel(s, op); }

void check_floating(DType t, const char* op) {
    KILN_CHECK(is_floating(t), op, ": dtype ", t, " is not supported (expected float32 or float64; use randint for integers)");
}

constexpr double kTwo63 = 9223372036854775808.0;  // 2^63: int64 holds [-2^63, 2^63)

// Fills a contiguous tensor with one value already checked by check_fits.
void fill_value(const Tensor& out, double v) {
    visit_dtype(out.dtype(), [&](auto tag) {
        using T = decltype(tag);
        std::fill(ptr<T>(out), ptr<T>(out) + out.numel(), cast_value<T>(v));
    });
}

}  // namespace

void manual_seed(uint64_t seed) {
    std::lock_guard lock(generator().mu);
    generator().engine.seed(seed);
}

RngState get_rng_state() {
    std::lock_guard lock(generator().mu);
    std::ostringstream os;
    os << generator().engine;
    return {os.str()};
}

void set_rng_state(const RngState& state) {
    std::lock_guard lock(generator().mu);
    std::istringstream is(state.engine);
    is >> generator().engine;
}

void check_fits(double v, DType t, const char* op) {
    if (t == DType::int64)
        KILN_CHECK(v >= -kTwo63 && v < kTwo63, op, ": value ", v, " cannot be converted to type int64 without overflow");
    if (t == DType::float32)
        KILN_CHECK(!std::isfinite(v) || std::abs(v) <= double(FLT_MAX), op, ": value ", v, " cannot be converted to type float32 without overflow");
}

Tensor forward_full(std::span<const Tensor>, const Attrs& a) {
    check_shape(a.shape, "full");
    check_fits(a.scalar, a.dtype, "full");
    Tensor out = empty(a.shape, a.dtype);
    fill_value(out, a.scalar);
    return out;
}
std::vector<Tensor> backward_full(const BackwardArgs&) { return {}; }

Tensor forward_arange(std::span<const Tensor>, const Attrs& a) {
    KILN_CHECK(std::isfinite(a.lo) && std::isfinite(a.hi) && std::isfinite(a.scalar), "arange: unsupported range ", a.lo, " -> ", a.hi, " with step ", a.scalar, " (all must be finite)");
    KILN_CHECK(a.scalar != 0, "arange: step must be nonzero");
    double n = std::ceil((a.hi - a.lo) / a.scalar);
    KILN_CHECK(n >= 0, "arange: range [", a.lo, ", ", a.hi, ") with step ", a.scalar, " is empty the wrong way");
    KILN_CHECK(n < kTwo63, "arange: range [", a.lo, ", ", a.hi, ") with step ", a.scalar, " has too many elements (", n, ")");
    int64_t count = int64_t(n);
    if (count > 0) {  // the first and last values must fit the dtype (int64: no UB casts)
        check_fits(a.lo, a.dtype, "arange");
        check_fits(a.lo + double(count - 1) * a.scalar, a.dtype, "arange");
    }
    Tensor out = empty({count}, a.dtype);
    visit_dtype(a.dtype, [&](auto tag) {
        using T = decltype(tag);
        T* p = ptr<T>(out);
        for (int64_t i = 0; i < count; ++i) p[i] = cast_value<T>(a.lo + double(i) * a.scalar);
    });
    return out;
}
std::vector<Tensor> backward_arange(const BackwardArgs&) { return {}; }

Tensor forward_rand(std::span<const Tensor>, const Attrs& a) {
    check_shape(a.shape, "rand");
    check_floating(a.dtype, "rand");
    KILN_CHECK(std::isfinite(a.lo) && std::isfinite(a.hi) && a.lo <= a.hi, "rand: expected a finite range low <= high, got [", a.lo, ", ", a.hi, ")");
    std::uniform_real_distribution<double> u(a.lo, a.hi);
    return random_fill(a, [&](auto& e) { return u(e); });
}
std::vector<Tensor> backward_rand(const BackwardArgs&) { return {}; }

Tensor forward_randn(std::span<const Tensor>, const Attrs& a) {
    check_shape(a.shape, "randn");
    check_floating(a.dtype, "randn");
    std::normal_distribution<double> n(0.0, 1.0);
    return random_fill(a, [&](auto& e) { return n(e); });
}
std::vector<Tensor> backward_randn(const BackwardArgs&) { return {}; }

Tensor forward_randint(std::span<const Tensor>, const Attrs& a) {
    check_shape(a.shape, "randint");
    KILN_CHECK(a.hi > a.lo, "randint: low (", a.lo, ") must be less than high (", a.hi, ")");
    check_fits(a.lo, DType::int64, "randint");
    // high is exclusive; int64's largest value arrives here rounded up to 2^63.
    int64_t last = a.hi >= kTwo63 ? std::numeric_limits<int64_t>::max() : int64_t(a.hi) - 1;
    std::uniform_int_distribution<int64_t> u(int64_t(a.lo), last);
    return random_fill(a, [&](auto& e) { return u(e); });
}
std::vector<Tensor> backward_randint(const BackwardArgs&) { return {}; }

}  // namespace kiln
