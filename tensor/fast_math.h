// kiln's float32 SIMD exp, log, tanh, erf, sin, cos, written once for any batch type: the
// eager kernels run them on xsimd::batch<float> (tensor/pointwise_math.h) and lean generated
// kernels on the lean prelude's vector type (codegen/emit_cpp_prelude.h), so the two give the
// same bits and a kernel calling exp needs no xsimd. Range reduction + minimax polynomial
// with FMA, branch-free (SLEEF, Cephes and FreeBSD's msun are the sources of each algorithm).
// Errors are measured against double-precision std:: by tests/tensor/test_fast_math.cpp.
// No standard header: lean kernels parse this file on every compile.
#pragma once

namespace kiln_fast {

// What a batch type V gives the functions below, as static members of Lanes<V>:
//   using Int = ...;            int32 lanes, as many as V's (+ - & | << >> with an int)
//   Int bits(V) / V from_bits(Int)   the lanes' bits, reinterpreted
//   V fma(V a, V b, V c)        a * b + c, fused where the target has FMA (as xsimd::fma)
//   V select(mask, V a, V b)    a where the mask is true
//   bool any_greater(V a, V b)  whether a > b in any lane
//   V each_lane(V x, float (*f)(float))   a scalar function lane by lane (rare lanes only)
//   V scalef(V x, V k)          optional: x * 2^k in one instruction (AVX-512's vscalefps)
// V itself has + - * / with V, comparisons giving a mask, & | ^ on the bits, and V(float).
template <class V>
struct Lanes;

inline constexpr float kInf = __builtin_inff();

// Horner's rule with FMA: c[I] + c[I+1]*x + c[I+2]*x^2 + ..., unrolled by the template (GCC
// left a loop over the coefficients around Lanes' lane-by-lane fma as a loop: seen in the
// machine code of sin and erf).
template <int I = 0, class V, int N>
inline V poly(V x, const float (&c)[N]) {
    if constexpr (I == N - 1)
        return V(c[I]);
    else
        return Lanes<V>::fma(poly<I + 1>(x, c), x, V(c[I]));
}

// Adding kRoundMagic (1.5 * 2^23) to a float of magnitude below 2^22 rounds it to an integer
// (to nearest, ties to even, as nearbyint) and leaves that integer in the low bits of the sum:
// bits(sum) - bits(kRoundMagic) is the integer, and bit 0 of the sum's bits is its parity.
// One add instead of a round and a convert (sin + cos ~15% faster: docs/perf.md).
inline constexpr float kRoundMagic = 0x1.8p23f;

// x * 2^k for integral k in [-150, 150], k as a float and in the int lanes of `k_bits`
// (Lanes<V>::Int): AVX-512's vscalefps where the batch type has it (Lanes<V>::scalef, one
// instruction: exp 0.34 -> 0.24 ns/element, docs/perf.md), else two scalings by 2^(k/2),
// since 2^k alone is not a float at either end; either rounds once, into subnormals or inf.
template <class V>
inline V scale_by_power_of_2(V x, V k, typename Lanes<V>::Int k_bits) {
    using L = Lanes<V>;
    if constexpr (requires { L::scalef(x, k); }) {
        return L::scalef(x, k);
    } else {
        auto half = k_bits >> 1;
        V first = L::from_bits((half + 127) << 23),
          second = L::from_bits((k_bits - half + 127) << 23);
        return x * first * second;
    }
}

// ---- exp

// exp(x) = 2^k * exp(r), k = round(x / ln 2), r = x - k ln 2 (ln 2 in two parts, Cody-Waite),
// exp(r) = 1 + r + r^2 * P(r): SLEEF's expf (u10) polynomial. x is clamped to [-104, 104]
// first: exp(-104) rounds to 0 and exp(104) to inf, and k stays small. NaN passes through
// the clamp (its compares are false) and the arithmetic. Max error 1.0 ulp.
// Below -104 the result is +0 by a select, and those lanes compute exp(0): scaling into the
// underflow costs a microcode assist per lane on Intel cores (no flush-to-zero), and a causal
// softmax has -inf in half its lanes (GPT's row kernel ran 2.5x slower: docs/perf-models.md,
// "GPT at 2 threads").
template <class V>
inline V exp(V x) {
    using L = Lanes<V>;
    const auto zero = x < V(-104.f);
    x = L::select(x > V(104.f), V(104.f), x);
    x = L::select(zero, V(0.f), x);
    const V sum = L::fma(x, V(0x1.715476p+0f), V(kRoundMagic));  // x / ln 2 + 1.5 * 2^23
    const V k = sum - V(kRoundMagic);
    V r = L::fma(k, V(-0x1.62e4p-1f), x);  // ln 2's high part has few bits: k * it is exact
    r = L::fma(k, V(-0x1.7f7d1cp-20f), r);
    static constexpr float c[] = {0.5f,
                                  0.166666671633720397949219f,
                                  0.0416664853692054748535156f,
                                  0.00833336077630519866943359f,
                                  0.00139304355252534151077271f,
                                  0.000198527617612853646278381f};
    const V e = L::fma(r * r, poly(r, c), r) + V(1.f);
    return L::select(zero, V(0.f),
                     scale_by_power_of_2(e, k, L::bits(sum) - L::bits(V(kRoundMagic))));
}

// ---- log

// log(x) = k ln 2 + log(1 + f), x = 2^k * m with m in [sqrt(1/2), sqrt(2)), f = m - 1:
// Cephes' logf, f - f^2/2 + f^3 P(f), ln 2 in two parts. No division (FreeBSD's s = f / (2 + f)
// form was 10% slower than xsimd's log). Subnormal x is scaled by 2^23 first. Max error 0.9 ulp.
template <class V>
inline V log(V x) {
    using L = Lanes<V>;
    const auto subnormal = x < V(0x1p-126f);
    const V scaled = L::select(subnormal, x * V(0x1p23f), x);
    // |x|'s bits (negative x ends as NaN below), less sqrt(1/2)'s: k in the top 9 bits, as
    // musl's logf; no lane's int arithmetic overflows.
    const auto ix = L::bits(scaled) & 0x7fffffff;
    const auto tmp = ix - 0x3f3504f3;
    const V f = L::from_bits(ix - (tmp & int32_t(0xff800000))) - V(1.f);
    // k as a float: 1.5 * 2^23 + k's bits, less 1.5 * 2^23 (and 23 for subnormal x).
    const V k = L::from_bits((tmp >> 23) + 0x4b400000) -
                L::select(subnormal, V(0x1.8p23f + 23.f), V(0x1.8p23f));
    static constexpr float c[] = {3.3333331174e-1f,  -2.4999993993e-1f, 2.0000714765e-1f,
                                  -1.6668057665e-1f, 1.4249322787e-1f,  -1.2420140846e-1f,
                                  1.1676998740e-1f,  -1.1514610310e-1f, 7.0376836292e-2f};
    const V z = f * f;
    V y = L::fma(k, V(-2.12194440e-4f), f * z * poly(f, c));  // + k * ln 2's low part
    y = L::fma(z, V(-0.5f), y) + f;
    y = L::fma(k, V(0.693359375f), y);  // + k * ln 2's high part (exact)
    // x < 0 and NaN -> NaN, +-0 -> -inf, inf -> inf
    y = L::select(x >= V(0.f), y, V(__builtin_nanf("")));
    y = L::select(x == V(0.f), V(-kInf), y);
    return L::select(x == V(kInf), x, y);
}

// ---- tanh

// |x| < 0.625: Cephes tanhf odd polynomial x + x^3*P(x^2); otherwise 1 - 2/(exp(2|x|) + 1),
// which saturates to 1 when exp overflows; computed on |x|, then x's sign put back (tanh(-0) = -0).
// Max error 1.3 ulp.
template <class V>
inline V tanh(V x) {
    using L = Lanes<V>;
    const V sign = x & V(-0.f), ax = x ^ sign;
    const V z = x * x;
    static constexpr float c[] = {-3.33332819422e-1f, 1.33314422036e-1f, -5.37397155531e-2f,
                                  2.06390887954e-2f, -5.70498872745e-3f};
    const V small = L::fma(ax * z, poly(z, c), ax);
    const V large = V(1.f) - V(2.f) / (kiln_fast::exp(ax + ax) + V(1.f));
    return L::select(ax < V(0.625f), small, large) ^ sign;
}

// ---- erf

// |x| < 2/3: x + x P(x^2); otherwise Boost.SIMD's float erf (as xsimd 8.1 has it) on this file's
// exp: 1 - exp(-x^2) Q(|x| / (1 + |x|) - 0.4), x's sign put back. Max error 1.5 ulp.
template <class V>
inline V erf(V x) {
    using L = Lanes<V>;
    const V sign = x & V(-0.f), ax = x ^ sign;
    // 2/sqrt(pi) - 1 as a float, then a fit of (erf(x)/x - 1 - that) / x^2 on |x| < 2/3
    // (Lawson-weighted least squares in float64, rounded to float): 0.03 ulp from the fit.
    static constexpr float p[] = {1.283791661e-01f,  -3.761262596e-01f, 1.128349230e-01f,
                                  -2.684127539e-02f, 5.129679106e-03f,  -6.870951620e-04f};
    static constexpr float q[] = {
        5.392844046572836e-01f,  -1.137035586823118e+00f, 1.603704761054187e-01f,
        3.843569094305250e-01f,  1.420508523645926e-01f,  1.562764709849380e-01f,
        -1.364514006347145e+00f, 3.260765682222576e+00f,  -6.409487379234005e+00f,
        6.702908785399893e+00f,  -2.628299919293280e+00f};
    const V z = x * x;
    // x + x (...), not x * (1 + ...): 2/sqrt(pi) alone in a float would be 0.9 ulp off at
    // the top of a binade, and an fma(x, hi, x * lo) split lets GCC fuse the other product.
    const V small = L::fma(x, poly(z, p), x);
    // inf / inf would be NaN: |x| beyond 10 gives 1 anyway (erfc(10) ~ 2e-45); NaN stays NaN
    const V big = L::select(ax > V(10.f), V(10.f), ax);
    const V t = big / (V(1.f) + big) - V(0.4f);
    const V large = (V(1.f) - kiln_fast::exp(V(0.f) - big * big) * poly(t, q)) ^ sign;
    return L::select(ax < V(2.f / 3.f), small, large);
}

// ---- sin, cos

// Beyond this |x| the float reduction below loses bits; such lanes take the C library's
// sinf/cosf lane by lane (as the eager scalar tail does).
inline constexpr float kTrigFastMax = 1e5f;

// sin(r) for |r| <= pi/2 (plus a hair): SLEEF's sinf minimax polynomial, r + r^3*P(r^2).
template <class V>
inline V sin_poly(V r) {
    static constexpr float c[] = {-0.166666597127914428710938f, 0.00833307858556509017944336f,
                                  -0.0001981069071916863322258f, 2.6083159809786593541503e-06f};
    const V z = r * r;
    return Lanes<V>::fma(r * z, poly(z, c), r);
}

// pi/2 and pi, each split in three floats (Cody-Waite), negated: x - k*c is fma(k, -c, x), so
// no negation of k. With FMA the first product is exact, so the result is good to ~1 ulp for
// |x| <= kTrigFastMax.
inline constexpr float kMinusHalfPi[3] = {-0x1.921fb6p+0f, 0x1.777a5cp-25f, 0x1.ee59dap-50f};
inline constexpr float kMinusPi[3] = {-0x1.921fb6p+1f, 0x1.777a5cp-24f, 0x1.ee59dap-49f};

// x - k*c for integral k, c the constant split in `minus_c`.
template <class V>
inline V minus_multiple(V x, V k, const float (&minus_c)[3]) {
    using L = Lanes<V>;
    V r = L::fma(k, V(minus_c[0]), x);
    r = L::fma(k, V(minus_c[1]), r);
    return L::fma(k, V(minus_c[2]), r);
}

// Flips the sign of v's lanes where the integer rounded into `sum` (an x + kRoundMagic) is odd.
template <class V>
inline V flip_sign_if_odd(V v, V sum) {
    return v ^ Lanes<V>::from_bits(Lanes<V>::bits(sum) << 31);
}

// sin(x) = (-1)^n * sin(x - n*pi), n = round(x/pi) (x/pi rounded once, by the FMA): one
// polynomial, no quadrant select.
template <class V>
inline V sin_reduced(V x) {
    const V sum = Lanes<V>::fma(x, V(0x1.45f306p-2f), V(kRoundMagic));
    const V n = sum - V(kRoundMagic);
    return flip_sign_if_odd(sin_poly(minus_multiple(x, n, kMinusPi)), sum);
}

// cos(x) = (-1)^(n+1) * sin(x - k*pi/2), k = 2n+1 the odd multiple of pi/2 nearest x.
template <class V>
inline V cos_reduced(V x) {
    using L = Lanes<V>;
    const V sum = L::fma(x, V(0x1.45f306p-2f), V(-0.5f)) + V(kRoundMagic);
    const V n = sum - V(kRoundMagic);
    const V k = L::fma(n, V(2.f), V(1.f));
    return flip_sign_if_odd(sin_poly(minus_multiple(x, k, kMinusHalfPi)), sum + V(1.f));
}

// The rare lanes beyond kTrigFastMax, out of line: inlined, their library calls (one per
// lane) doubled the compiler's time for a kernel calling sin and cos.
template <class V>
[[gnu::noinline, gnu::cold]] V sin_lanes(V x) {
    return Lanes<V>::each_lane(x, [](float a) { return __builtin_sinf(a); });
}
template <class V>
[[gnu::noinline, gnu::cold]] V cos_lanes(V x) {
    return Lanes<V>::each_lane(x, [](float a) { return __builtin_cosf(a); });
}

// Max error 1.7 ulp for |x| <= kTrigFastMax (tests/tensor/test_fast_math.cpp). NaN -> NaN comes
// out of the arithmetic; only lanes with |x| > kTrigFastMax (+-inf included, -> NaN) pay for
// the C library's sinf/cosf, which reduce such arguments exactly.
template <class V>
inline V sin(V x) {
    using L = Lanes<V>;
    // sin is odd: reduce |x| and give back x's sign, which also keeps sin(-0) = -0.
    const V sign = x & V(-0.f), ax = x ^ sign;
    V fast = sin_reduced(ax) ^ sign;
    if (!L::any_greater(ax, V(kTrigFastMax))) return fast;
    return L::select(ax > V(kTrigFastMax), sin_lanes(x), fast);
}
template <class V>
inline V cos(V x) {
    using L = Lanes<V>;
    V fast = cos_reduced(x);
    const V ax = x ^ (x & V(-0.f));
    if (!L::any_greater(ax, V(kTrigFastMax))) return fast;
    return L::select(ax > V(kTrigFastMax), cos_lanes(x), fast);
}

}  // namespace kiln_fast
