// The vocabulary that pointwise math in tensor/ops.def is written in. Each helper works on
// scalars (float, double, int64) and on xsimd batches, so one expression serves the eager
// kernel's scalar tail, its SIMD body, and (as text) the generated kernels, which include
// this same header. float32 batches get the faster sin/cos/tanh of tensor/fast_math.h;
// scalars (the eager scalar tail, float64) keep std::, so a tail element may differ from a
// vector lane by a couple of ulp.
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include <xsimd/xsimd.hpp>

#include "tensor/fast_math.h"

namespace kiln_math {

using std::abs;
using std::cos;
using std::erf;
using std::exp;
using std::log;
using std::pow;
using std::sin;
using std::sqrt;
using std::tanh;
using xsimd::abs;
using xsimd::cos;
using xsimd::erf;
using xsimd::exp;
using xsimd::log;
using xsimd::sin;
using xsimd::sqrt;
using xsimd::tanh;
// Non-templates, so they win over xsimd's templates for xsimd::batch<float>.
using kiln_fast::cos;
using kiln_fast::sin;
using kiln_fast::tanh;

template <class T>
inline constexpr bool is_batch = xsimd::is_batch<T>::value;

template <class T>
inline T zero(T) { return T(0); }

// NaN-propagating max/min, like torch.maximum / torch.minimum.
template <class T>
inline T maximum(T a, T b) {
    if constexpr (is_batch<T>) {
        auto m = xsimd::max(a, b);
        return xsimd::select(xsimd::isnan(a) || xsimd::isnan(b), a + b, m);
    } else if constexpr (std::is_floating_point_v<T>) {
        return (a != a || b != b) ? a + b : (a > b ? a : b);
    } else {
        return a > b ? a : b;
    }
}
template <class T>
inline T minimum(T a, T b) {
    if constexpr (is_batch<T>) {
        auto m = xsimd::min(a, b);
        return xsimd::select(xsimd::isnan(a) || xsimd::isnan(b), a + b, m);
    } else if constexpr (std::is_floating_point_v<T>) {
        return (a != a || b != b) ? a + b : (a < b ? a : b);
    } else {
        return a < b ? a : b;
    }
}
// 1, -1, or 0 (+0 for either zero, as PyTorch); NaN stays NaN.
template <class T>
inline T sign(T x) {
    if constexpr (is_batch<T>) {
        return xsimd::select(x > T(0), T(1),
                             xsimd::select(x < T(0), T(-1), xsimd::select(x == x, T(0), x)));
    } else {
        return x > T(0) ? T(1) : x < T(0) ? T(-1) : x == x ? T(0) : x;
    }
}
// int64 whose + - * and negation wrap around (two's complement), as PyTorch's integer
// kernels do. Signed overflow is undefined behaviour in C++, so the eager kernel runs the
// int64 instantiation of every ops.def expression on this type; the arithmetic goes through
// uint64, whose overflow is defined, and back (a modular conversion since C++20).
struct wrap_int64 {
    int64_t v = 0;
    wrap_int64() = default;
    constexpr wrap_int64(int64_t x) : v(x) {}
    explicit constexpr operator int64_t() const { return v; }
};
constexpr wrap_int64 operator+(wrap_int64 a, wrap_int64 b) { return int64_t(uint64_t(a.v) + uint64_t(b.v)); }
constexpr wrap_int64 operator-(wrap_int64 a, wrap_int64 b) { return int64_t(uint64_t(a.v) - uint64_t(b.v)); }
constexpr wrap_int64 operator*(wrap_int64 a, wrap_int64 b) { return int64_t(uint64_t(a.v) * uint64_t(b.v)); }
constexpr wrap_int64 operator-(wrap_int64 a) { return int64_t(0 - uint64_t(a.v)); }
constexpr bool operator<(wrap_int64 a, wrap_int64 b) { return a.v < b.v; }
constexpr bool operator>(wrap_int64 a, wrap_int64 b) { return a.v > b.v; }
constexpr bool operator<=(wrap_int64 a, wrap_int64 b) { return a.v <= b.v; }
constexpr bool operator>=(wrap_int64 a, wrap_int64 b) { return a.v >= b.v; }
constexpr bool operator==(wrap_int64 a, wrap_int64 b) { return a.v == b.v; }
constexpr wrap_int64 abs(wrap_int64 a) { return a.v < 0 ? -a : a; }  // abs(INT64_MIN) == INT64_MIN, as torch

// pow with the special values of IEEE 754 / C99 Annex F, as std::pow (the scalar tail),
// CUDA's powf and PyTorch give them. xsimd's batch pow is exp(y * log|x|) with a sign fix-up:
// right for positive normal x and finite y, wrong elsewhere (0^0 = 0, inf^0 = NaN,
// 1^nan = NaN, subnormal x gives 0, a huge odd-looking y flips the sign, results near
// float's range end overflow early). Lanes outside its safe range take std::pow, so the
// vector body and the scalar tail agree on every special value.
template <class T, class A>
inline xsimd::batch<T, A> pow_batch(const xsimd::batch<T, A>& x, const xsimd::batch<T, A>& y) {
    using Bt = xsimd::batch<T, A>;
    constexpr T kMin = std::numeric_limits<T>::min(), kInf = std::numeric_limits<T>::infinity();
    Bt z = xsimd::pow(x, y);
    Bt ax = xsimd::abs(x), az = xsimd::abs(z);
    // xsimd's sign rule (is_odd) holds for integral y below 2^24.
    auto small_int_y = xsimd::is_flint(y) && xsimd::abs(y) < Bt(T(1 << 24));
    auto safe = ax >= Bt(kMin) && ax < Bt(kInf) && (x > Bt(0) || small_int_y) &&
                xsimd::abs(y) < Bt(kInf) && az >= Bt(kMin) && az < Bt(kInf);
    if (xsimd::all(safe)) return z;
    alignas(64) T xs[Bt::size], ys[Bt::size], zs[Bt::size];
    alignas(64) bool ok[Bt::size];
    x.store_aligned(xs), y.store_aligned(ys), z.store_aligned(zs), safe.store_aligned(ok);
    for (size_t k = 0; k < Bt::size; ++k)
        if (!ok[k]) zs[k] = std::pow(xs[k], ys[k]);
    return Bt::load_aligned(zs);
}
// Non-templates, so they win over xsimd::pow (found by argument-dependent lookup).
inline xsimd::batch<float> pow(xsimd::batch<float> x, xsimd::batch<float> y) {
    return pow_batch(x, y);
}
inline xsimd::batch<double> pow(xsimd::batch<double> x, xsimd::batch<double> y) {
    return pow_batch(x, y);
}

// -x with IEEE's signed zero: neg(0) = -0, as PyTorch. xsimd 8.1's batch negation on
// AVX-512 is 0 - x, which gives +0; flipping the sign bit does not.
template <class T>
inline T neg(T x) {
    return -x;
}
inline xsimd::batch<float> neg(xsimd::batch<float> x) { return x ^ xsimd::batch<float>(-0.0f); }
inline xsimd::batch<double> neg(xsimd::batch<double> x) { return x ^ xsimd::batch<double>(-0.0); }

template <class C, class T>
inline T select(C cond, T a, T b) {
    if constexpr (is_batch<T>) return xsimd::select(cond, a, b);
    else return cond ? a : b;
}

}  // namespace kiln_math
