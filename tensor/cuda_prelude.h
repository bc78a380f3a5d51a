// The CUDA prelude: ops.def's math vocabulary (tensor/pointwise_math.h's counterpart) for
// float, double and long long under NVRTC. Eager CUDA kernels (codegen/emit_eager_cuda.cpp) and
// generated ones (codegen/emit_cuda.cpp) begin with it. The math functions come from
// tensor/math_functions.def; the helpers below them (maximum, sign, ...) are written here.
#pragma once

namespace kiln::cuda_prelude {

// The macros the generated lines call: a math function for float and double, and its
// int64 form per the .def's `ints` column.
constexpr const char kHead[] = R"(
namespace kiln_math {
#define KILN_F1(name, f, d) \
    __device__ inline float name(float x) { return f(x); } \
    __device__ inline double name(double x) { return d(x); }
#define KILN_F2(name, f, d) \
    __device__ inline float name(float x, float y) { return f(x, y); } \
    __device__ inline double name(double x, double y) { return d(x, y); }
#define KILN_INT_identity(name) __device__ inline long long name(long long x) { return x; }
#define KILN_INT_none(name)
#define KILN_INT_own(name)
)";

// One line per math function of tensor/math_functions.def (internal linkage: a test build
// that adds entries through KILN_MATH_EXTRA gets its own list).
constexpr const char kMathFunctions[] =
#define KILN_MATH(name, arity, cpu, cuda_float, cuda_double, ints)                              \
    "KILN_F" #arity "(" #name ", " #cuda_float ", " #cuda_double ")\nKILN_INT_" #ints "(" #name \
    ")\n"
#include "tensor/math_functions.def"
    ;

constexpr const char kTail[] =
    R"(__device__ inline long long abs(long long x) { return x < 0 ? -x : x; }
template <class T> __device__ inline T remainder(T x, T y) {
    T m = fmod(x, y);
    return (m != T(0) && ((y < T(0)) != (m < T(0)))) ? m + y : m;
}
template <class T> __device__ inline T zero(T) { return T(0); }
template <class T> __device__ inline bool is_nan(T v) { return v != v; }
template <class T> __device__ inline T maximum(T a, T b) { return (is_nan(a) || is_nan(b)) ? a + b : (a > b ? a : b); }
template <class T> __device__ inline T minimum(T a, T b) { return (is_nan(a) || is_nan(b)) ? a + b : (a < b ? a : b); }
template <class T> __device__ inline T sign(T x) { return x > T(0) ? T(1) : x < T(0) ? T(-1) : x == x ? T(0) : x; }
template <class T> __device__ inline T neg(T x) { return -x; }
template <class T> __device__ inline T infinity();
template <> __device__ inline float infinity<float>() { return __int_as_float(0x7f800000); }
template <> __device__ inline double infinity<double>() { return __longlong_as_double(0x7ff0000000000000LL); }
}  // namespace kiln_math
)";

}  // namespace kiln::cuda_prelude
