// What every translation unit emit_cpp.cpp writes begins with: the includes, the types the
// kernels take their buffers in, and the small helpers (bool lanes, casts, folding a batch
// accumulator) that the emitted statements call.
#pragma once
#include <string>

#include "codegen/emit_cpp.h"
#include "tensor/reductions.h"

namespace kiln::codegen {

inline constexpr const char* kPrelude = R"(#include <algorithm>
#include <cstdint>
#include <limits>

#include "tensor/dtype.h"
#include "tensor/pointwise_math.h"

// Inside kiln_math, exp/maximum/... resolve exactly as in the eager kernels.
namespace kiln_math {

using B = xsimd::batch<float>;
constexpr int64_t W = B::size;  // floats per batch
using ParallelFn = void (*)(int64_t n, int64_t grain, void* ctx, void (*body)(void*, int64_t, int64_t));
struct KernelArgs {
    float* const* buffers;   // the kernel's loads, then its stores
    const int64_t* symbols;  // s0, s1, ...
};

// A bool tensor holds one byte per element; in float lanes a bool value is a batch_bool.
using BB = B::batch_bool_type;
inline BB load_bool(const bool* p) {
    alignas(64) float lanes[W];
    for (int64_t k = 0; k < W; ++k) lanes[k] = p[k] ? 1.0f : 0.0f;
    return B::load_aligned(lanes) != B(0.0f);
}
inline void store_bool(BB v, bool* p) {
    alignas(64) float lanes[W];
    xsimd::select(v, B(1.0f), B(0.0f)).store_aligned(lanes);
    for (int64_t k = 0; k < W; ++k) p[k] = lanes[k] != 0.0f;
}
// Converts an element (or float lanes) to another dtype, as eager's casts do.
template <class To, class From>
inline auto convert(From v) {
    if constexpr (std::is_same_v<From, BB>) {
        if constexpr (std::is_same_v<To, bool>) return v;
        else return xsimd::select(v, B(1.0f), B(0.0f));
    } else if constexpr (std::is_same_v<From, B>) {
        if constexpr (std::is_same_v<To, bool>) return !(v == B(0.0f));  // NaN is true (batch != is ordered)
        else return v;
    } else {
        return kiln::cast_value<To>(v);
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
