// The reduction table (tensor/reductions.def) as C++: each reduction's combine step, identity
// and kind, for eager CPU and CUDA, autograd, the JIT and both code generators.
#pragma once
#include <limits>
#include <string>
#include <vector>

#include "tensor/ops.h"

namespace kiln {

enum class ReductionIdentity : uint8_t { zero, one, lowest, highest };
// How the gradient flows (tensor/reductions.def): additive (sum), extremum (amax), product.
enum class ReductionKind : uint8_t { additive, extremum, product };

struct ReductionInfo {
    OpId op;
    const char* combine;  // expression text over the accumulator x and a value y
    ReductionIdentity identity;
    ReductionKind kind;
};

// The table row of `op`; a kiln::Error naming the op when it is not a reduction.
const ReductionInfo& reduction_info(OpId op);
bool is_reduction(OpId op);
// The table's reductions, in its order (tests iterate them).
std::vector<OpId> reduction_ops();

// An extremum picks one of its values: it keeps the dtype and refuses an empty tensor. The
// other kinds accumulate: int64 and bool inputs give int64, an empty tensor the identity.
inline bool reduction_picks_a_value(OpId op) {
    return reduction_info(op).kind == ReductionKind::extremum;
}
// The result's dtype for an input of `dtype`, on every backend.
inline DType reduction_dtype(OpId op, DType dtype) {
    return reduction_picks_a_value(op) || is_floating(dtype) ? dtype : DType::int64;
}

// The combine step's text, x the accumulator and y the value: "maximum(x, y)" for amax.
inline const char* reduction_combine(OpId op) { return reduction_info(op).combine; }

// The identity as source text for an accumulator of `dtype`, valid in generated C++ and
// CUDA alike (both define kiln_math::infinity<T>()): "(-infinity<float>())" for amax on float32.
std::string reduction_identity(OpId op, DType dtype);

// The identity as a value, for eager kernels (T: float, double, int64_t).
template <class T>
T reduction_identity_value(OpId op) {
    switch (reduction_info(op).identity) {
        case ReductionIdentity::zero:
            return T(0);
        case ReductionIdentity::one:
            return T(1);
        case ReductionIdentity::lowest:
            if constexpr (std::numeric_limits<T>::has_infinity)
                return -std::numeric_limits<T>::infinity();
            else
                return std::numeric_limits<T>::lowest();
        case ReductionIdentity::highest:
            if constexpr (std::numeric_limits<T>::has_infinity)
                return std::numeric_limits<T>::infinity();
            else
                return std::numeric_limits<T>::max();
    }
    return T(0);
}

}  // namespace kiln
