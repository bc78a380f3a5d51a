// What every translation unit emit_cpp.cpp writes begins with: the includes, the types the
// kernels take their buffers in, and the small helpers (bool lanes, casts, folding a batch
// accumulator) that the emitted statements call.
//
// Two preludes, chosen per translation unit by cpu_prelude_for (codegen/prelude.cpp):
//  - full: xsimd and tensor/pointwise_math.h, for kernels that call a function of the
//    math table that only xsimd has in SIMD form (pow, floor, log1p, atan2, ...).
//    Parsing those headers costs ~0.8 s of CPU here, so they come from a precompiled header
//    (codegen/toolchain.cpp), and loading that 96 MB header still costs ~0.2 s per compile.
//  - lean: no standard header beyond <cstdint>, <initializer_list>, <limits> and
//    <type_traits>, plus tensor/fast_math.h; the batch type is a GCC/Clang vector
//    (__attribute__((vector_size))) as wide as xsimd's default batch, with what the remaining
//    ops need (+ - * /, comparisons, select, abs, sqrt, maximum, minimum, sign, neg, fmod,
//    remainder, casts, and the table's `fast` functions exp, log, tanh, erf, sin, cos, from
//    the same source as the eager kernels'). Every lane gives the same bits as the full
//    prelude's (tests/codegen/test_prelude.cpp), and the kernels compile without the
//    precompiled header (kLeanKernelMarker, codegen/toolchain.h).
#pragma once
#include <string>

#include "codegen/emit_cpp.h"
#include "tensor/reductions.h"

namespace kiln::codegen {

inline constexpr const char* kPreludeFull = R"(#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "tensor/dtype.h"
#include "tensor/pointwise_math.h"

// Inside kiln_math, exp/maximum/... resolve exactly as in the eager kernels.
namespace kiln_math {

using B = xsimd::batch<float>;
using BB = B::batch_bool_type;
using kiln::cast_value;
inline B select_lanes(BB m, B a, B b) { return xsimd::select(m, a, b); }
)";

// The first line is kLeanKernelMarker (codegen/toolchain.h).
inline constexpr const char* kPreludeLean = R"(// kiln: lean kernel (no precompiled header)
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <type_traits>

#include "tensor/fast_math.h"

namespace kiln_lean_std {  // std::max/min for the launch code, without <algorithm>
template <class T>
constexpr const T& max(const T& a, const T& b) { return a < b ? b : a; }
template <class T>
constexpr const T& min(const T& a, const T& b) { return b < a ? b : a; }
template <class T>
constexpr T max(std::initializer_list<T> list) {
    T best = *list.begin();
    for (const T& x : list) best = best < x ? x : best;
    return best;
}
template <class T>
constexpr T min(std::initializer_list<T> list) {
    T best = *list.begin();
    for (const T& x : list) best = x < best ? x : best;
    return best;
}
}  // namespace kiln_lean_std

namespace kiln_math {

namespace std {  // kiln_math::std: what the emitted text spells std:: (a shadow, not ::std)
using ::std::int64_t;
using ::std::is_floating_point_v;
using ::std::is_same_v;
using ::std::numeric_limits;
using kiln_lean_std::max;
using kiln_lean_std::min;
}  // namespace std

// As wide as xsimd's default float batch for the same -march, so reductions fold the same
// lanes in the same order as under the full prelude.
#if defined(__AVX512F__)
inline constexpr int kLeanBytes = 64;
#elif defined(__AVX__)
inline constexpr int kLeanBytes = 32;
#else
inline constexpr int kLeanBytes = 16;
#endif
typedef float LeanF __attribute__((vector_size(kLeanBytes)));
typedef int32_t LeanI __attribute__((vector_size(kLeanBytes)));

struct BB {  // a mask: all bits set in a true lane
    LeanI m;
    BB() = default;
    BB(bool b) : m(LeanI{} + (b ? -1 : 0)) {}
    explicit BB(LeanI x) : m(x) {}
};
struct B {
    using value_type = float;
    using batch_bool_type = BB;
    static constexpr int64_t size = kLeanBytes / 4;
    LeanF v;
    B() = default;
    // Every lane x, bit for bit: x - (+0) is x for -0 too (0 + x would give +0), and GCC
    // folds it to one broadcast. A loop storing lane by lane was also one broadcast alone,
    // but inlined into a kernel's loop GCC rebuilt it lane by lane on every step.
    B(float x) : v(x - LeanF{}) {}
    explicit B(LeanF x) : v(x) {}
    static B load_unaligned(const float* p) {
        LeanF x;
        __builtin_memcpy(&x, p, sizeof x);
        return B(x);
    }
    static B load_aligned(const float* p) { return B(*reinterpret_cast<const LeanF*>(p)); }
    void store_unaligned(float* p) const { __builtin_memcpy(p, &v, sizeof v); }
    void store_aligned(float* p) const { *reinterpret_cast<LeanF*>(p) = v; }
};
inline LeanI bits(B x) { return reinterpret_cast<LeanI>(x.v); }
inline B from_bits(LeanI x) { return B(reinterpret_cast<LeanF>(x)); }

inline B operator+(B a, B b) { return B(a.v + b.v); }
inline B operator-(B a, B b) { return B(a.v - b.v); }
inline B operator*(B a, B b) { return B(a.v * b.v); }
inline B operator/(B a, B b) { return B(a.v / b.v); }
#if defined(__AVX512F__)
inline B operator-(B a) { return B(0.0f) - a; }  // as xsimd's AVX-512 batch: -(+0) is +0
#else
inline B operator-(B a) { return from_bits(bits(a) ^ int32_t(0x80000000u)); }  // as xsimd's SSE/AVX
#endif
inline B operator&(B a, B b) { return from_bits(bits(a) & bits(b)); }
inline B operator|(B a, B b) { return from_bits(bits(a) | bits(b)); }
inline B operator^(B a, B b) { return from_bits(bits(a) ^ bits(b)); }
inline B& operator+=(B& a, B b) { return a = a + b; }
inline B& operator-=(B& a, B b) { return a = a - b; }
inline B& operator*=(B& a, B b) { return a = a * b; }
inline B& operator/=(B& a, B b) { return a = a / b; }
inline BB operator<(B a, B b) { return BB(LeanI(a.v < b.v)); }
inline BB operator<=(B a, B b) { return BB(LeanI(a.v <= b.v)); }
inline BB operator>(B a, B b) { return BB(LeanI(a.v > b.v)); }
inline BB operator>=(B a, B b) { return BB(LeanI(a.v >= b.v)); }
inline BB operator==(B a, B b) { return BB(LeanI(a.v == b.v)); }
inline BB operator!=(B a, B b) { return BB(LeanI(a.v != b.v)); }
inline BB operator&(BB a, BB b) { return BB(a.m & b.m); }
inline BB operator|(BB a, BB b) { return BB(a.m | b.m); }
inline BB operator^(BB a, BB b) { return BB(a.m ^ b.m); }
inline BB operator&&(BB a, BB b) { return a & b; }
inline BB operator||(BB a, BB b) { return a | b; }
inline BB operator!(BB a) { return BB(~a.m); }
inline BB operator~(BB a) { return BB(~a.m); }
inline BB operator==(BB a, BB b) { return BB(~(a.m ^ b.m)); }
inline BB operator!=(BB a, BB b) { return a ^ b; }
inline B select_lanes(BB m, B a, B b) { return from_bits((m.m & bits(a)) | (~m.m & bits(b))); }
inline BB select_lanes(BB m, BB a, BB b) { return BB((m.m & a.m) | (~m.m & b.m)); }
inline BB isnan(B x) { return !(x == x); }

template <class T>
inline constexpr bool is_batch = std::is_same_v<T, B> || std::is_same_v<T, BB>;

// Lane by lane with a scalar function (sqrt compiles to one instruction: the lean kernels
// get -fno-math-errno, codegen/toolchain.cpp).
template <class F>
inline B each_lane(B x, F f) {
    alignas(64) float xs[B::size];
    x.store_aligned(xs);
    for (int64_t k = 0; k < B::size; ++k) xs[k] = f(xs[k]);
    return B::load_aligned(xs);
}
template <class F>
inline B each_lane(B x, B y, F f) {
    alignas(64) float xs[B::size], ys[B::size];
    x.store_aligned(xs), y.store_aligned(ys);
    for (int64_t k = 0; k < B::size; ++k) xs[k] = f(xs[k], ys[k]);
    return B::load_aligned(xs);
}

// Scalars: what <cmath>'s std:: overloads call, without parsing <cmath>.
inline float sqrt(float x) { return __builtin_sqrtf(x); }
inline double sqrt(double x) { return __builtin_sqrt(x); }
inline float abs(float x) { return __builtin_fabsf(x); }
inline double abs(double x) { return __builtin_fabs(x); }
inline B sqrt(B x) { return each_lane(x, [](float a) { return __builtin_sqrtf(a); }); }
inline B abs(B x) { return from_bits(bits(x) & 0x7fffffff); }

// kiln::cast_value (tensor/dtype.h), spelled again here because dtype.h pulls in <ostream>;
// tests/codegen/test_prelude.cpp holds the two to the same results.
template <class To, class From>
inline To cast_value(From v) {
    if constexpr (std::is_same_v<To, int64_t> && std::is_floating_point_v<From>) {
        constexpr From limit = From(9223372036854775808.0);  // 2^63: exact in float and double
        return v >= -limit && v < limit ? static_cast<int64_t>(v) : std::numeric_limits<int64_t>::min();
    } else {
        return static_cast<To>(v);
    }
}

// The helpers of tensor/pointwise_math.h that lean kernels call, for B and for scalars
// (the same expressions; test_prelude compares them lane by lane on special values).
template <class T>
inline T zero(T) { return T(0); }
template <class T>
constexpr T infinity() { return std::numeric_limits<T>::infinity(); }  // reductions' identities
template <class T>
inline T maximum(T a, T b) {
    if constexpr (is_batch<T>) {
        B m = select_lanes(a > b, a, b);  // xsimd::max: the second operand unless a > b
        return select_lanes(isnan(a) || isnan(b), a + b, m);
    } else if constexpr (std::is_floating_point_v<T>) {
        return (a != a || b != b) ? a + b : (a > b ? a : b);
    } else {
        return a > b ? a : b;
    }
}
template <class T>
inline T minimum(T a, T b) {
    if constexpr (is_batch<T>) {
        B m = select_lanes(a < b, a, b);
        return select_lanes(isnan(a) || isnan(b), a + b, m);
    } else if constexpr (std::is_floating_point_v<T>) {
        return (a != a || b != b) ? a + b : (a < b ? a : b);
    } else {
        return a < b ? a : b;
    }
}
// Batches: what the full prelude runs, which is xsimd::sign (argument-dependent lookup
// prefers it to the template below): 1 - 1 arithmetic, and an all-ones NaN for NaN lanes.
inline B sign(B x) {
    B r = select_lanes(x > B(0.0f), B(1.0f), B(0.0f)) - select_lanes(x < B(0.0f), B(1.0f), B(0.0f));
    return select_lanes(isnan(x), from_bits(LeanI{} - 1), r);
}
template <class T>
inline T sign(T x) {
    if constexpr (is_batch<T>) {
        return select_lanes(x > T(0), T(1), select_lanes(x < T(0), T(-1), select_lanes(x == x, T(0), x)));
    } else {
        return x > T(0) ? T(1) : x < T(0) ? T(-1) : x == x ? T(0) : x;
    }
}
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
constexpr wrap_int64 abs(wrap_int64 a) { return a.v < 0 ? -a : a; }
inline float fmod_exact(float x, float y) { return __builtin_fmodf(x, y); }
inline double fmod_exact(double x, double y) { return __builtin_fmod(x, y); }
inline B fmod_exact(B x, B y) { return each_lane(x, y, [](float a, float b) { return __builtin_fmodf(a, b); }); }
template <class T>
inline T remainder_exact(T x, T y) {
    T m = fmod_exact(x, y);
    auto flip = (m < T(0) && y > T(0)) || (m > T(0) && y < T(0));
    if constexpr (is_batch<T>) return select_lanes(flip, m + y, m);
    else return flip ? m + y : m;
}
template <class T>
inline T fmod(T x, T y) { return fmod_exact(x, y); }
template <class T>
inline T remainder(T x, T y) { return remainder_exact(x, y); }
inline B neg(B x) { return x ^ B(-0.0f); }
template <class T>
inline T neg(T x) { return -x; }
template <class C, class T>
inline T select(C cond, T a, T b) {
    if constexpr (is_batch<T>) return select_lanes(cond, a, b);
    else return cond ? a : b;
}

}  // namespace kiln_math

// What tensor/fast_math.h needs of a batch, for B: the same operations as xsimd's in
// tensor/pointwise_math.h, so exp, log, tanh, erf, sin, cos give the eager kernels' bits.
template <>
struct kiln_fast::Lanes<kiln_math::B> {
    using V = kiln_math::B;
    using Int = kiln_math::LeanI;
    static Int bits(V x) { return kiln_math::bits(x); }
    static V from_bits(Int i) { return kiln_math::from_bits(i); }
    static V fma(V a, V b, V c) {
#ifdef __FMA__  // fused, as xsimd::fma where the target has FMA; GCC makes this one instruction
        kiln_math::LeanF r = c.v;
        for (int k = 0; k < int(V::size); ++k) r[k] = __builtin_fmaf(a.v[k], b.v[k], r[k]);
        return V(r);
#else
        return a * b + c;
#endif
    }
#ifdef __AVX512F__  // vscalefps, as xsimd's batch in tensor/pointwise_math.h (4: current rounding)
    static V scalef(V x, V k) {
        return V(__builtin_ia32_scalefps512_mask(x.v, k.v, x.v, 0xffff, 4));
    }
#endif
    static V select(kiln_math::BB m, V a, V b) { return kiln_math::select_lanes(m, a, b); }
    static bool any_greater(V a, V b) {
#ifdef __AVX512F__  // a compare into a mask register, as xsimd::any(a > b) (14: _CMP_GT_OS)
        return __builtin_ia32_cmpps512_mask(a.v, b.v, 14, 0xffff, 4) != 0;
#else
        // The mask's 16-byte quarters OR-ed, then its two words (a lane-by-lane OR compiled
        // to a chain of extracts)
        kiln_math::BB m = a > b;
        typedef int64_t Words __attribute__((vector_size(16)));
        Words all{};
        for (int k = 0; k < kiln_math::kLeanBytes / 16; ++k) {
            Words part;
            __builtin_memcpy(&part, reinterpret_cast<const char*>(&m.m) + 16 * k, sizeof part);
            all |= part;
        }
        return (all[0] | all[1]) != 0;
#endif
    }
    static V each_lane(V x, float (*f)(float)) { return kiln_math::each_lane(x, f); }
};

namespace kiln_math {

// The math table's functions with kiln's own batch form (`cpu` column fast): the C library's
// for scalars, as <cmath>'s std:: overloads call it, and tensor/fast_math.h's for B.
#define KILN_MATH_LEAN_fast(name)                                  \
    inline float name(float x) { return __builtin_##name##f(x); }  \
    inline double name(double x) { return __builtin_##name(x); }   \
    inline B name(B x) { return kiln_fast::name(x); }
#define KILN_MATH_LEAN_std_xsimd(f)
#define KILN_MATH_LEAN_std(f)
#define KILN_MATH_LEAN_kiln(f)
#define KILN_MATH(name, arity, cpu, cuda_float, cuda_double, ints) KILN_MATH_LEAN_##cpu(name)
#include "tensor/math_functions.def"
#undef KILN_MATH_LEAN_fast
#undef KILN_MATH_LEAN_std_xsimd
#undef KILN_MATH_LEAN_std
#undef KILN_MATH_LEAN_kiln
)";

// After either of the above; still inside namespace kiln_math, which emit() closes.
inline constexpr const char* kPreludeCommon = R"(
constexpr int64_t W = B::size;  // floats per batch
using ParallelFn = void (*)(int64_t n, int64_t grain, void* ctx, void (*body)(void*, int64_t, int64_t));
struct KernelArgs {
    float* const* buffers;   // the kernel's loads, then its stores
    const int64_t* symbols;  // s0, s1, ...
};

// body(c) for each chunk c of [0, chunks), the chunks spread over the thread pool (a row
// kernel's few long rows: emit_cpp.cpp, emit_split_rows).
template <class F>
inline void for_chunks(ParallelFn parallel, int64_t chunks, F&& body) {
    parallel(chunks, 1, &body, [](void* f, int64_t begin, int64_t end) {
        for (int64_t c = begin; c < end; ++c) (*static_cast<::std::remove_reference_t<F>*>(f))(c);
    });
}

// A bool tensor holds one byte per element; in float lanes a bool value is a batch_bool. The
// W bytes widen to int32 lanes in one instruction (vpmovzxbd) and those to floats in one
// more: GCC 12 compiles both a byte-by-byte loop and __builtin_convertvector from bytes to a
// scalar conversion per lane, which was 40% of GPT's causal softmax row kernel
// (docs/perf-models.md, "GPT at 2 threads"). clang's __builtin_convertvector is the
// vector instruction already.
// The W bytes enter the 16-byte register as one integer of W bytes (vmovq): copying them into
// a zeroed 16-byte vector in memory made a load that spans two stores, which the core cannot
// forward, a stall per batch that made the AVX2 causal softmax 3.6x slower (5.6 against 1.6
// ns per element; docs/perf-models.md, "Bool masks on AVX2, and OpenBLAS's spinning
// threads"). With AVX-512, W is 16.
typedef char BoolBytes16 __attribute__((vector_size(16)));
typedef long long BoolWords16 __attribute__((vector_size(16)));
typedef int BoolHalves16 __attribute__((vector_size(16)));
typedef unsigned char BoolBytes __attribute__((vector_size(W)));
typedef int32_t BoolInts __attribute__((vector_size(4 * W)));
typedef float BoolFloats __attribute__((vector_size(4 * W)));
inline BB load_bool(const bool* p) {
#if !defined(__clang__) && (defined(__AVX512F__) || defined(__AVX2__) || defined(__SSE4_1__))
    BoolBytes16 bytes;
    if constexpr (W == 16) {
        __builtin_memcpy(&bytes, p, 16);
    } else if constexpr (W == 8) {
        long long word;
        __builtin_memcpy(&word, p, 8);
        bytes = reinterpret_cast<BoolBytes16>(BoolWords16{word, 0});
    } else {
        int word;
        __builtin_memcpy(&word, p, 4);
        bytes = reinterpret_cast<BoolBytes16>(BoolHalves16{word, 0, 0, 0});
    }
#if defined(__AVX512F__)
    const BoolInts ints = __builtin_ia32_pmovzxbd512_mask(bytes, BoolInts{}, static_cast<unsigned short>(-1));
#elif defined(__AVX2__)
    const BoolInts ints = __builtin_ia32_pmovzxbd256(bytes);
#else
    const BoolInts ints = __builtin_ia32_pmovzxbd128(bytes);
#endif
#else
    BoolBytes bytes;
    __builtin_memcpy(&bytes, p, sizeof bytes);
    const BoolInts ints = __builtin_convertvector(bytes, BoolInts);
#endif
    const BoolFloats wide = __builtin_convertvector(ints, BoolFloats);
    alignas(64) float lanes[W];
    __builtin_memcpy(lanes, &wide, sizeof wide);
    return B::load_aligned(lanes) != B(0.0f);
}
inline void store_bool(BB v, bool* p) {  // 1.0f or 0.0f lanes narrowed to bytes (vpmovdb)
    alignas(64) float lanes[W];
    select_lanes(v, B(1.0f), B(0.0f)).store_aligned(lanes);
    BoolFloats wide;
    __builtin_memcpy(&wide, lanes, sizeof wide);
    const BoolBytes bytes = __builtin_convertvector(__builtin_convertvector(wide, BoolInts), BoolBytes);
    __builtin_memcpy(p, &bytes, sizeof bytes);
}
// Converts an element (or float lanes) to another dtype, as eager's casts do.
template <class To, class From>
inline auto convert(From v) {
    if constexpr (std::is_same_v<From, BB>) {
        if constexpr (std::is_same_v<To, bool>) return v;
        else return select_lanes(v, B(1.0f), B(0.0f));
    } else if constexpr (std::is_same_v<From, B>) {
        if constexpr (std::is_same_v<To, bool>) return !(v == B(0.0f));  // NaN is true (batch != is ordered)
        else return v;
    } else {
        return cast_value<To>(v);
    }
}

)";

// fold_<reduction>(v, acc): the lanes of a batch accumulator folded into a float one, with
// the combine step of tensor/reductions.def; one per line of the table, after kPrelude.
inline std::string reduction_fold_helpers() {
    std::string out;
    for (OpId op : reduction_ops())
        out += std::string("inline float fold_") + op_name(op) + "(B v, float acc) {\n" +
               "    alignas(64) float lanes[W];\n    v.store_aligned(lanes);\n" +
               "    for (int64_t k = 0; k < W; ++k) acc = " +
               math_text(reduction_combine(op), "acc", "lanes[k]") + ";\n    return acc;\n}\n";
    return out + "\n";
}

}  // namespace kiln::codegen
