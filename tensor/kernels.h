// Internal to tensor/: kernel entry points named by the op table, and helpers they share.
#pragma once
#include "tensor/ops.h"

namespace kiln {

// forward_<name> / backward_<name> for every KILN_OP entry (defined in kernels_*.cpp).
#define KILN_OP(name, ...)                                                \
    Tensor forward_##name(std::span<const Tensor> in, const Attrs& attrs); \
    std::vector<Tensor> backward_##name(const BackwardArgs& b);
#include "tensor/ops.def"

// Visits `fn` with a value of the C++ type matching `dtype` (float, double, int64_t, bool).
template <class Fn>
decltype(auto) visit_dtype(DType dtype, Fn&& fn) {
    switch (dtype) {
        case DType::float32: return fn(float{});
        case DType::float64: return fn(double{});
        case DType::int64: return fn(int64_t{});
        case DType::boolean: return fn(bool{});
    }
    fail("visit_dtype: bad dtype");
}

// Copies any strided (or broadcast, stride-0) view into a new contiguous tensor.
Tensor materialize(const Tensor& x);
// Strided copy from `src` into `dst` (same shape; any strides, dtypes may differ).
void strided_copy(const Tensor& dst, const Tensor& src);
// `x` as a contiguous tensor of `dtype` (no copy when already so).
Tensor contiguous_as(const Tensor& x, DType dtype);

template <class T>
T* ptr(const Tensor& t) {
    return static_cast<T*>(t.raw_data());
}

}  // namespace kiln
