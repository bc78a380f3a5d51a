// The vocabulary that pointwise math in tensor/ops.def is written in. Each helper works on
// scalars (float, double, int64) and on xsimd batches, so one expression serves the eager
// kernel's scalar tail, its SIMD body, and (as text) the generated kernels, which include
// this same header. float32 batches get kiln's own exp/log/tanh/erf/sin/cos of
// tensor/fast_math.h (the lean prelude of generated kernels runs the same source); scalars
// (the eager scalar tail, float64) keep std::, so a tail element may differ from a vector lane
// by a couple of ulp.
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include <xsimd/xsimd.hpp>

#include "tensor/fast_math.h"

// What tensor/fast_math.h's functions need of a batch, for xsimd's float batches.
template <>
struct kiln_fast::Lanes<xsimd::batch<float>> {
    using V = xsimd::batch<float>;
    using Int = xsimd::batch<int32_t>;
    static Int bits(V x) { return xsimd::bitwise_cast<Int>(x); }
    static V from_bits(Int i) { return xsimd::bitwise_cast<V>(i); }
    // xsimd 8.1's fma on AVX-512 is x * y + z, fused or not as GCC's contraction decides;
    // this one is fused wherever the target has FMA, as the lean prelude's (same text).
    static V fma(V a, V b, V c) {
#ifdef __FMA__
        typename V::register_type x = a, y = b, r = c;  // a GCC vector of floats
        for (int k = 0; k < int(V::size); ++k) r[k] = __builtin_fmaf(x[k], y[k], r[k]);
        return V(r);
#else
        return xsimd::fma(a, b, c);
#endif
    }
#ifdef __AVX512F__
    static_assert(V::size == 16, "xsimd's float batch is AVX-512's where the target has it");
    static V scalef(V x, V k) { return _mm512_scalef_ps(x, k); }
#endif
    static V select(V::batch_bool_type m, V a, V b) { return xsimd::select(m, a, b); }
    static bool any_greater(V a, V b) { return xsimd::any(a > b); }
    static V each_lane(V x, float (*f)(float)) {
        alignas(64) float lanes[V::size];
        x.store_aligned(lanes);
        for (float& lane : lanes) lane = f(lane);
        return V::load_aligned(lanes);
    }
};

namespace kiln_math {

// The math functions of tensor/math_functions.def: std:: for scalars, xsimd:: for batches
// (`cpu` column std_xsimd), std:: alone where a batch overload below fixes xsimd's (std),
// tensor/fast_math.h for float batches (fast: a non-template, so it wins over xsimd's
// templates, which double batches still take).
#define KILN_MATH_CPU_std_xsimd(f) \
    using std::f;                  \
    using xsimd::f;
#define KILN_MATH_CPU_std(f) using std::f;
#define KILN_MATH_CPU_kiln(f)
#define KILN_MATH_CPU_fast(f)                                                        \
    KILN_MATH_CPU_std_xsimd(f) inline xsimd::batch<float> f(xsimd::batch<float> x) { \
        return kiln_fast::f(x);                                                      \
    }
#define KILN_MATH(name, arity, cpu, cuda_float, cuda_double, ints) KILN_MATH_CPU_##cpu(name)
#include "tensor/math_functions.def"
#undef KILN_MATH_CPU_std_xsimd
#undef KILN_MATH_CPU_std
#undef KILN_MATH_CPU_kiln
#undef KILN_MATH_CPU_fast

template <class T>
inline constexpr bool is_batch = xsimd::is_batch<T>::value;

template <class T>
inline T zero(T) { return T(0); }
// For the identities of tensor/reductions.def, spelled alike in generated C++ and CUDA.
template <class T>
constexpr T infinity() {
    return std::numeric_limits<T>::infinity();
}

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
// Rounding keeps an integer as it is: math functions whose `ints` column is identity.
#define KILN_MATH_INT_identity(f) \
    constexpr wrap_int64 f(wrap_int64 a) { return a; }
#define KILN_MATH_INT_none(f)
#define KILN_MATH_INT_own(f)
#define KILN_MATH(name, arity, cpu, cuda_float, cuda_double, ints) KILN_MATH_INT_##ints(name)
#include "tensor/math_functions.def"
#undef KILN_MATH_INT_identity
#undef KILN_MATH_INT_none
#undef KILN_MATH_INT_own

// Where an xsimd batch function breaks IEEE 754 / C99 Annex F on special values, the lanes
// it gets wrong are recomputed with std:: (what the scalar tail runs), so the vector body
// and the scalar tail agree on every special value (tests/tensor/test_ops.cpp,
// special_values_agree_*). `bad` marks those lanes; most batches have none.
template <class T, class A, class F>
inline xsimd::batch<T, A> std_lanes(xsimd::batch<T, A> z, xsimd::batch_bool<T, A> bad, F std_fn,
                                    xsimd::batch<T, A> x, xsimd::batch<T, A> y = {}) {
    if (!xsimd::any(bad)) return z;
    using Bt = xsimd::batch<T, A>;
    alignas(64) T xs[Bt::size], ys[Bt::size], zs[Bt::size];
    alignas(64) bool redo[Bt::size];
    x.store_aligned(xs), y.store_aligned(ys), z.store_aligned(zs), bad.store_aligned(redo);
    for (size_t k = 0; k < Bt::size; ++k)
        if (redo[k]) zs[k] = std_fn(xs[k], ys[k]);
    return Bt::load_aligned(zs);
}

// pow: xsimd's is exp(y * log|x|) with a sign fix-up, right for normal x and finite y with
// a normal result, wrong elsewhere (0^0 = 0, inf^0 = NaN, 1^nan = NaN, 0 for subnormal x,
// a flipped sign for huge even y, early overflow).
template <class T, class A>
inline xsimd::batch<T, A> pow_batch(xsimd::batch<T, A> x, xsimd::batch<T, A> y) {
    using Bt = xsimd::batch<T, A>;
    const Bt min(std::numeric_limits<T>::min()), inf(std::numeric_limits<T>::infinity());
    Bt z = xsimd::pow(x, y), ax = xsimd::abs(x), az = xsimd::abs(z);
    // xsimd's sign rule (is_odd) holds for integral y below 2^24.
    auto small_int_y = xsimd::is_flint(y) && xsimd::abs(y) < Bt(T(1 << 24));
    auto safe = ax >= min && ax < inf && (x > Bt(0) || small_int_y) && xsimd::abs(y) < inf &&
                az >= min && az < inf;
    return std_lanes(z, !safe, [](T a, T b) { return std::pow(a, b); }, x, y);
}
// atan2: xsimd's gives NaN where both operands are zeros or both infinities.
template <class T, class A>
inline xsimd::batch<T, A> atan2_batch(xsimd::batch<T, A> x, xsimd::batch<T, A> y) {
    using Bt = xsimd::batch<T, A>;
    auto bad = (x == Bt(0) && y == Bt(0)) || (xsimd::isinf(x) && xsimd::isinf(y));
    return std_lanes(xsimd::atan2(x, y), bad, [](T a, T b) { return std::atan2(a, b); }, x, y);
}
// log1p and expm1 of -0 are -0 (xsimd's give +0): a zero lane returns itself.
template <class Bt>
inline Bt keep_zero(Bt x, Bt z) { return xsimd::select(x == Bt(0), x, z); }

// fmod (C's: the sign of x, |result| < |y|) and remainder (PyTorch's, as ATen's CPU kernel:
// the sign of y), exact. xsimd's batch fmod is x - trunc(x / y) * y, which loses the low
// bits for large x / y and gives NaN for y = inf, and its remainder is IEEE's (round to
// nearest): batches take std::fmod lane by lane. Named apart from fmod/remainder so that
// xsimd's templates, found by argument-dependent lookup, never win over them.
template <class T>
inline T fmod_exact(T x, T y) {
    if constexpr (is_batch<T>) {
        using V = typename T::value_type;
        auto every_lane = typename T::batch_bool_type(true);
        return std_lanes(x, every_lane, [](V a, V b) { return std::fmod(a, b); }, x, y);
    } else {
        return std::fmod(x, y);
    }
}
template <class T>
inline T remainder_exact(T x, T y) {
    T m = fmod_exact(x, y);
    // m and y of opposite signs (m nonzero, not NaN): step once toward y's sign.
    auto flip = (m < T(0) && y > T(0)) || (m > T(0) && y < T(0));
    if constexpr (is_batch<T>) return xsimd::select(flip, m + y, m);
    else return flip ? m + y : m;
}
template <class T>
inline T fmod(T x, T y) { return fmod_exact(x, y); }
template <class T>
inline T remainder(T x, T y) { return remainder_exact(x, y); }

// Non-templates, so they win over the xsimd templates found by argument-dependent lookup.
#define KILN_BATCH_OVERLOADS(B)                                                         \
    inline B pow(B x, B y) { return pow_batch(x, y); }                                  \
    inline B atan2(B x, B y) { return atan2_batch(x, y); }                              \
    inline B log1p(B x) { return keep_zero(x, xsimd::log1p(x)); }                       \
    inline B expm1(B x) { return keep_zero(x, xsimd::expm1(x)); }                       \
    inline B fmod(B x, B y) { return fmod_exact(x, y); }                                \
    inline B remainder(B x, B y) { return remainder_exact(x, y); }                      \
    inline B neg(B x) { return x ^ B(-0.0); } /* xsimd's AVX-512 -x is 0 - x: neg(0) = +0 */
KILN_BATCH_OVERLOADS(xsimd::batch<float>)
KILN_BATCH_OVERLOADS(xsimd::batch<double>)
#undef KILN_BATCH_OVERLOADS
// -x with IEEE's signed zero (neg(0) = -0, as PyTorch); batches above flip the sign bit.
template <class T>
inline T neg(T x) {
    return -x;
}

template <class C, class T>
inline T select(C cond, T a, T b) {
    if constexpr (is_batch<T>) return xsimd::select(cond, a, b);
    else return cond ? a : b;
}

}  // namespace kiln_math
