// Factories: full, arange and the random ones. One global generator, seeded by manual_seed.
#include <cmath>
#include <mutex>
#include <random>

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

void check_shape(const Shape& s, const char* op) {
    for (int64_t d : s) KILN_CHECK(d >= 0, op, ": negative size in shape ", s);
}

}  // namespace

void manual_seed(uint64_t seed) {
    std::lock_guard lock(generator().mu);
    generator().engine.seed(seed);
}

Tensor forward_full(std::span<const Tensor>, const Attrs& a) {
    check_shape(a.shape, "full");
    Tensor out = empty(a.shape, a.dtype);
    out.fill_(a.scalar);
    return out;
}
std::vector<Tensor> backward_full(const BackwardArgs&) { return {}; }

Tensor forward_arange(std::span<const Tensor>, const Attrs& a) {
    KILN_CHECK(a.scalar != 0, "arange: step must be nonzero");
    double n = std::ceil((a.hi - a.lo) / a.scalar);
    KILN_CHECK(n >= 0, "arange: range [", a.lo, ", ", a.hi, ") with step ", a.scalar, " is empty the wrong way");
    Tensor out = empty({int64_t(n)}, a.dtype);
    visit_dtype(a.dtype, [&](auto tag) {
        using T = decltype(tag);
        T* p = ptr<T>(out);
        for (int64_t i = 0; i < int64_t(n); ++i) p[i] = static_cast<T>(a.lo + double(i) * a.scalar);
    });
    return out;
}
std::vector<Tensor> backward_arange(const BackwardArgs&) { return {}; }

Tensor forward_rand(std::span<const Tensor>, const Attrs& a) {
    check_shape(a.shape, "rand");
    std::uniform_real_distribution<double> u(a.lo, a.hi);
    return random_fill(a, [&](auto& e) { return u(e); });
}
std::vector<Tensor> backward_rand(const BackwardArgs&) { return {}; }

Tensor forward_randn(std::span<const Tensor>, const Attrs& a) {
    check_shape(a.shape, "randn");
    std::normal_distribution<double> n(0.0, 1.0);
    return random_fill(a, [&](auto& e) { return n(e); });
}
std::vector<Tensor> backward_randn(const BackwardArgs&) { return {}; }

Tensor forward_randint(std::span<const Tensor>, const Attrs& a) {
    check_shape(a.shape, "randint");
    KILN_CHECK(a.hi > a.lo, "randint: low (", a.lo, ") must be less than high (", a.hi, ")");
    std::uniform_int_distribution<int64_t> u(int64_t(a.lo), int64_t(a.hi) - 1);
    return random_fill(a, [&](auto& e) { return u(e); });
}
std::vector<Tensor> backward_randint(const BackwardArgs&) { return {}; }

}  // namespace kiln
