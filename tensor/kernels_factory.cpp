// Factories: full, arange and the random ones. One global generator, seeded by manual_seed:
// Philox (tensor/philox.h), so a random op's element i is a function of (seed, offset + i)
// and the CPU and CUDA kernels draw the same numbers for a seed.
#include <cfloat>
#include <cmath>
#include <mutex>

#include "tensor/kernels.h"
#include "tensor/parallel.h"
#include "tensor/philox.h"

namespace kiln {
namespace {

struct Generator {
    std::mutex mu;
    RngState state{.seed = kDefaultSeed, .offset = 0};
};
Generator& generator() {
    static Generator g;
    return g;
}

// Fills a new contiguous tensor with draw(seed, first + i) for element i.
template <class Draw>
Tensor random_fill(const Attrs& a, Draw draw) {
    Tensor out = empty(a.shape, a.dtype);
    RngState at = reserve_random(uint64_t(out.numel()));
    visit_dtype(a.dtype, [&](auto tag) {
        using T = decltype(tag);
        T* p = ptr<T>(out);
        parallel_for(out.numel(), kParallelGrain, [&](int64_t begin, int64_t end) {
            for (int64_t i = begin; i < end; ++i) p[i] = static_cast<T>(draw(at.seed, at.offset + uint64_t(i)));
        });
    });
    return out;
}

// A uniform draw rounded to T, kept below hi as PyTorch's rand is.
template <class T>
T uniform_below(double v, double lo, double hi) {
    T r = static_cast<T>(v);
    return (double(r) >= hi && hi > lo) ? std::nextafter(static_cast<T>(hi), static_cast<T>(lo)) : r;
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
        T* o = ptr<T>(out);
        parallel_for(out.numel(), kParallelGrain,
                     [&](int64_t b, int64_t e) { std::fill(o + b, o + e, cast_value<T>(v)); });
    });
}

}  // namespace

void manual_seed(uint64_t seed) {
    std::lock_guard lock(generator().mu);
    generator().state = {.seed = seed, .offset = 0};
}

RngState get_rng_state() {
    std::lock_guard lock(generator().mu);
    return generator().state;
}

void set_rng_state(const RngState& state) {
    std::lock_guard lock(generator().mu);
    generator().state = state;
}

RngState reserve_random(uint64_t count) {
    std::lock_guard lock(generator().mu);
    RngState at = generator().state;
    generator().state.offset += count;
    return at;
}

uint64_t randint_range(const Attrs& a) {
    // high is exclusive; int64's largest value arrives here rounded up to 2^63.
    int64_t last = a.hi >= kTwo63 ? std::numeric_limits<int64_t>::max() : int64_t(a.hi) - 1;
    return uint64_t(last) - uint64_t(int64_t(a.lo)) + 1;  // 0: all 2^64 values
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

int64_t arange_count(const Attrs& a) {
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
    return count;
}

Tensor forward_arange(std::span<const Tensor>, const Attrs& a) {
    int64_t count = arange_count(a);
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
    if (a.dtype == DType::float32)
        return random_fill(a, [&](uint64_t seed, uint64_t i) { return uniform_below<float>(kiln_random::draw_uniform(seed, i, a.lo, a.hi), a.lo, a.hi); });
    return random_fill(a, [&](uint64_t seed, uint64_t i) { return uniform_below<double>(kiln_random::draw_uniform(seed, i, a.lo, a.hi), a.lo, a.hi); });
}
std::vector<Tensor> backward_rand(const BackwardArgs&) { return {}; }

Tensor forward_randn(std::span<const Tensor>, const Attrs& a) {
    check_shape(a.shape, "randn");
    check_floating(a.dtype, "randn");
    return random_fill(a, [](uint64_t seed, uint64_t i) { return kiln_random::draw_normal(seed, i); });
}
std::vector<Tensor> backward_randn(const BackwardArgs&) { return {}; }

Tensor forward_randint(std::span<const Tensor>, const Attrs& a) {
    check_shape(a.shape, "randint");
    KILN_CHECK(a.hi > a.lo, "randint: low (", a.lo, ") must be less than high (", a.hi, ")");
    check_fits(a.lo, DType::int64, "randint");
    uint64_t range = randint_range(a);
    return random_fill(a, [&](uint64_t seed, uint64_t i) { return kiln_random::draw_int(seed, i, int64_t(a.lo), range); });
}
std::vector<Tensor> backward_randint(const BackwardArgs&) { return {}; }

}  // namespace kiln
