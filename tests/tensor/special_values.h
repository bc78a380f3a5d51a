// IEEE special values for the pointwise ops of tensor/ops.def, and the rule a float32 result
// must meet against a reference: the tests that run every table op on them on eager CPU
// (vector body and scalar tail, against float64), generated CPU kernels and CUDA share both.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace kiln_test {

// +-0, +-1, small and odd integers (pow's sign rules), +-inf, NaN, subnormals, the smallest
// normal, values near float's largest, and arguments large enough for the trig functions'
// slow path. Every value is a float, so float32 tensors hold it exactly.
inline std::vector<float> special_values() {
    const float inf = std::numeric_limits<float>::infinity();
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const float tiny = std::numeric_limits<float>::min();  // the smallest normal float
    std::vector<float> v = {0.0f, -0.0f, 1.0f, -1.0f, 0.5f, -0.5f, 2.0f, 3.0f, -3.0f, 1e-40f};
    v.insert(v.end(), {-1e-40f, tiny, 3e38f, -3e38f, inf, -inf, nan, 80.0f, 1e6f, -1e6f});
    return v;
}

// Every (x, y) pair of special values, x major.
inline std::pair<std::vector<float>, std::vector<float>> special_pairs() {
    std::vector<float> xs, ys, v = special_values();
    for (float x : v)
        for (float y : v) xs.push_back(x), ys.push_back(y);
    return {xs, ys};
}

// Whether a float32 result `got` agrees with `want` (a float64 reference, or another kernel's
// float32 result): NaN with NaN, an infinity with the same infinity, a zero with a zero of the
// same sign, anything else within a few float ulps (relative), or as an absolute amount
// at the bottom of the subnormal range.
inline bool agrees(double got, double want, double rtol = 2e-5) {
    want = double(float(want));  // the reference rounded as a float32 result is
    if (std::isnan(want) || std::isnan(got)) return std::isnan(want) && std::isnan(got);
    if (std::isinf(want) || std::isinf(got)) return got == want;
    if (want == 0 || got == 0) return got == want && std::signbit(got) == std::signbit(want);
    return std::abs(got - want) <= rtol * std::abs(want) + 1e-44;
}

inline std::string show(double v) {
    std::ostringstream os;
    os.precision(9);
    os << v;
    return os.str();
}

// Every `step`-th float by its bits: both signs, subnormals, every binade up to the largest
// float, infinities and NaNs (a prime step reaches all of them).
inline std::vector<float> every_nth_float(uint64_t step) {
    std::vector<float> xs;
    for (uint64_t bits = 0; bits < (uint64_t(1) << 32); bits += step) {
        uint32_t b = uint32_t(bits);
        float x;
        std::memcpy(&x, &b, sizeof x);
        xs.push_back(x);
    }
    return xs;
}

}  // namespace kiln_test
