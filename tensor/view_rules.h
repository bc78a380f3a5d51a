// The view rules: how each view op's output dims come from its input's dims. Stated once
// here and read by the JIT's shape rules (jit/sym_shapes.cpp: which symbol each dim is)
// and by codegen's strided access (codegen/schedule.cpp: which stride each dim steps by).
#pragma once
#include <optional>
#include <cstddef>
#include <vector>

#include "tensor/ops.h"

namespace kiln {

struct ViewRule {
    enum class Kind {
        none,     // not a view op
        dims,     // each output dim reads one input dim: permute, expand, slice, contiguous
        regroup,  // reshape: the elements keep their order; dims split and merge
    };
    Kind kind = Kind::none;
    // kind dims: per output dim, the input dim it reads; -1 for a new dim (expand's leading
    // dims, which read the input at stride 0).
    std::vector<int> from;
    int sliced = -1;      // slice: the dim whose start and step change, and with them its size
    bool copies = false;  // contiguous: the values are copied into a new buffer, not aliased

    // Whether output dim i reads at stride 0: a new dim, or a size-1 dim that expand
    // broadcast (read with another size, and not the sliced dim).
    bool broadcasts(const Shape& in, const Shape& out, size_t i) const {
        int j = from[i];
        return j < 0 || (int(i) != sliced && in[size_t(j)] != out[i]);
    }
};

// The rule of `op` (with attributes `a`) for an input of `in_rank` dims and an output of
// `out_rank`.
ViewRule view_rule(OpId op, const Attrs& a, size_t in_rank, size_t out_rank);

// Strides that show a tensor of shape `have` and `strides` in shape `want` without copying, if
// any (PyTorch's computeStride, the rule of Tensor.view): `want` may split or merge only dims
// that are contiguous with each other, as squeeze/unsqueeze/select of a transposed or sliced
// tensor do. Eager reshape (tensor/kernels_shape.cpp) and the scheduler's views of generated
// kernels (codegen/schedule.cpp) both use it.
std::optional<Shape> view_strides(const Shape& have, const Shape& strides, const Shape& want);

}  // namespace kiln
