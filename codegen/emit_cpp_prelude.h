// What every translation unit emit_cpp.cpp writes begins with: the includes, the types the
// kernels take their buffers in, and the small helpers (bool lanes, casts, folding a batch
// accumulator) that the emitted statements call.
#pragma once

namespace kiln::codegen {

inline constexpr const char* kPrelude = R"(#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

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

// body(c) for each chunk c of [0, chunks), the chunks spread over the thread pool (a row
// kernel's few long rows: emit_cpp.cpp, emit_split_rows).
template <class F>
inline void for_chunks(ParallelFn parallel, int64_t chunks, F&& body) {
    parallel(chunks, 1, &body, [](void* f, int64_t begin, int64_t end) {
        for (int64_t c = begin; c < end; ++c) (*static_cast<std::remove_reference_t<F>*>(f))(c);
    });
}

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

// Fold the lanes of a batch accumulator into a float one (NaN-propagating for max/min).
inline float fold_sum(B v, float acc) {
    alignas(64) float lanes[W];
    v.store_aligned(lanes);
    for (int64_t k = 0; k < W; ++k) acc += lanes[k];
    return acc;
}
inline float fold_max(B v, float acc) {
    alignas(64) float lanes[W];
    v.store_aligned(lanes);
    for (int64_t k = 0; k < W; ++k) acc = maximum(acc, lanes[k]);
    return acc;
}
inline float fold_min(B v, float acc) {
    alignas(64) float lanes[W];
    v.store_aligned(lanes);
    for (int64_t k = 0; k < W; ++k) acc = minimum(acc, lanes[k]);
    return acc;
}

)";

}  // namespace kiln::codegen
