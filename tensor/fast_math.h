// Fast float32 sin, cos, tanh on xsimd batches, for the pointwise vocabulary in
// tensor/pointwise_math.h. xsimd 8.1's sin/cos/tanh cost ~1 ns/elem; these are Cephes/SLEEF-style:
// range reduction + minimax polynomial with FMA, branch-free. (xsimd's exp and log are as fast
// and as accurate as Cephes ports were here, so they stay.)
// Errors are measured against double-precision std:: by tests/tensor/test_fast_math.cpp.
#pragma once
#include <cstdint>
#include <limits>

#include <xsimd/xsimd.hpp>

namespace kiln_fast {

using Batch = xsimd::batch<float>;
using IBatch = xsimd::batch<int32_t>;

// Horner's rule with FMA: c[0] + c[1]*x + c[2]*x^2 + ...
template <size_t N>
inline Batch poly(Batch x, const float (&c)[N]) {
    Batch r(c[N - 1]);
    for (size_t i = N - 1; i-- > 0;) r = xsimd::fma(r, x, Batch(c[i]));
    return r;
}

inline Batch int_bits_as_float(IBatch i) { return xsimd::bitwise_cast<Batch>(i); }

// ---- sin, cos

// Beyond this |x| the float reduction below loses bits; such lanes go to xsimd's sin/cos.
inline constexpr float kTrigFastMax = 1e5f;

// sin(r) for |r| <= pi/2 (plus a hair): SLEEF's sinf minimax polynomial, r + r^3*P(r^2).
inline Batch sin_poly(Batch r) {
    static constexpr float c[] = {-0.166666597127914428710938f, 0.00833307858556509017944336f,
                                  -0.0001981069071916863322258f, 2.6083159809786593541503e-06f};
    const Batch z = r * r;
    return xsimd::fma(r * z, poly(z, c), r);
}

// Adding kRoundMagic (1.5 * 2^23) to a float of magnitude below 2^22 rounds it to an integer
// (to nearest, ties to even, as nearbyint) and leaves that integer in the low bits of the sum:
// bit 0 of the sum's bits is the integer's parity. One add instead of a round, a convert and a
// mask (sin + cos ~15% faster: docs/perf.md); |x| <= kTrigFastMax keeps x/pi far below 2^22.
inline constexpr float kRoundMagic = 0x1.8p23f;

// pi/2 and pi, each split in three floats (Cody-Waite), negated: x - k*c is fma(k, -c, x), so
// no negation of k. With FMA the first product is exact, so the result is good to ~1 ulp for
// |x| <= kTrigFastMax.
inline constexpr float kMinusHalfPi[3] = {-0x1.921fb6p+0f, 0x1.777a5cp-25f, 0x1.ee59dap-50f};
inline constexpr float kMinusPi[3] = {-0x1.921fb6p+1f, 0x1.777a5cp-24f, 0x1.ee59dap-49f};

// x - k*c for integral k, c the constant split in `minus_c`.
inline Batch minus_multiple(Batch x, Batch k, const float (&minus_c)[3]) {
    Batch r = xsimd::fma(k, Batch(minus_c[0]), x);
    r = xsimd::fma(k, Batch(minus_c[1]), r);
    return xsimd::fma(k, Batch(minus_c[2]), r);
}

// Flips the sign of v's lanes where the integer rounded into `sum` (an x + kRoundMagic) is odd.
inline Batch flip_sign_if_odd(Batch v, Batch sum) {
    return v ^ int_bits_as_float(xsimd::bitwise_cast<IBatch>(sum) << 31);
}

// sin(x) = (-1)^n * sin(x - n*pi), n = round(x/pi) (x/pi rounded once, by the FMA): one
// polynomial, no quadrant select.
inline Batch sin_reduced(Batch x) {
    const Batch sum = xsimd::fma(x, Batch(0x1.45f306p-2f), Batch(kRoundMagic));
    const Batch n = sum - Batch(kRoundMagic);
    return flip_sign_if_odd(sin_poly(minus_multiple(x, n, kMinusPi)), sum);
}

// cos(x) = (-1)^(n+1) * sin(x - k*pi/2), k = 2n+1 the odd multiple of pi/2 nearest x.
inline Batch cos_reduced(Batch x) {
    const Batch sum = xsimd::fms(x, Batch(0x1.45f306p-2f), Batch(0.5f)) + Batch(kRoundMagic);
    const Batch n = sum - Batch(kRoundMagic);
    const Batch k = xsimd::fma(n, Batch(2.f), Batch(1.f));
    return flip_sign_if_odd(sin_poly(minus_multiple(x, k, kMinusHalfPi)), sum + Batch(1.f));
}

// Max error 1.7 ulp for |x| <= kTrigFastMax (tests/tensor/test_fast_math.cpp). NaN -> NaN comes
// out of the arithmetic; only lanes with |x| > kTrigFastMax (+-inf included, -> NaN) pay for
// xsimd's path, which reduces such arguments exactly, lane by lane.
inline Batch sin(Batch x) {
    // sin is odd: reduce |x| and give back x's sign, which also keeps sin(-0) = -0.
    Batch fast = sin_reduced(xsimd::abs(x)) ^ (x & Batch(-0.f));
    auto huge = xsimd::abs(x) > Batch(kTrigFastMax);
    return xsimd::any(huge) ? xsimd::select(huge, xsimd::sin(x), fast) : fast;
}
inline Batch cos(Batch x) {
    Batch fast = cos_reduced(x);
    auto huge = xsimd::abs(x) > Batch(kTrigFastMax);
    return xsimd::any(huge) ? xsimd::select(huge, xsimd::cos(x), fast) : fast;
}

// ---- tanh

// |x| < 0.625: Cephes tanhf odd polynomial x + x^3*P(x^2); otherwise 1 - 2/(exp(2|x|) + 1),
// which saturates to 1 when exp overflows; computed on |x|, then x's sign put back (tanh(-0) = -0).
// Max error 1.3 ulp.
inline Batch tanh(Batch x) {
    const Batch ax = xsimd::abs(x);
    const Batch z = x * x;
    static constexpr float c[] = {-3.33332819422e-1f, 1.33314422036e-1f, -5.37397155531e-2f,
                                  2.06390887954e-2f, -5.70498872745e-3f};
    const Batch small = xsimd::fma(ax * z, poly(z, c), ax);
    const Batch large = Batch(1.f) - Batch(2.f) / (xsimd::exp(ax + ax) + Batch(1.f));
    return xsimd::select(ax < Batch(0.625f), small, large) ^ (x & Batch(-0.f));
}

}  // namespace kiln_fast
