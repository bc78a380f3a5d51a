// Reduction programs for differential tests (CPU: tests/codegen/test_reductions.cpp, CUDA:
// tests/cuda/test_cuda_codegen_dtypes.cpp): a reduction over a set of dims of a value read
// through a layout (contiguous, permuted, sliced, expanded), maybe with a fused producer
// and consumer, and the example inputs eager and generated code both get.
#pragma once
#include <vector>

#include "kiln.h"
#include "lgraph_builder.h"
#include "tensor/reductions.h"

namespace kiln_test {
using namespace kiln;
using kiln::codegen::testing::GraphBuilder;

enum class Layout { contiguous, permuted, sliced, expanded };
inline const char* layout_name(Layout l) {
    static const char* names[] = {"contiguous", "permuted", "sliced", "expanded"};
    return names[int(l)];
}

// An input tensor of `dtype`: small integers (ties for amax/amin), bools, or randn * 2.
inline Tensor example(const Shape& shape, DType dtype) {
    if (dtype == DType::boolean) return randn(shape) > 0.3;
    if (dtype == DType::int64) return randint(-5, 6, shape);
    return (randn(shape) * 2.0).to(dtype);
}

// A value of `shape` read through `layout`: an input of another shape and a view of it
// inside the graph (a view made inside the graph is strided index math, never copied).
inline int viewed_input(GraphBuilder& b, std::vector<Tensor>& inputs, const Shape& shape,
                        DType dtype, Layout layout) {
    size_t rank = shape.size();
    switch (layout) {
        case Layout::contiguous:
            inputs.push_back(example(shape, dtype));
            return b.input(shape, "x", dtype);
        case Layout::permuted: {  // reversed dims, permuted back
            Shape reversed(shape.rbegin(), shape.rend()), dims;
            for (size_t d = rank; d-- > 0;) dims.push_back(int64_t(d));
            inputs.push_back(example(reversed, dtype));
            return b.permute(b.input(reversed, "x", dtype), dims);
        }
        case Layout::sliced: {  // every other element of a longer dim 0, from 1
            Shape longer = shape;
            longer[0] = 2 * shape[0] + 1;
            inputs.push_back(example(longer, dtype));
            return b.slice(b.input(longer, "x", dtype), 0, 1, longer[0], 2);
        }
        case Layout::expanded: {  // dim 0 broadcast from 1
            Shape one = shape;
            one[0] = 1;
            inputs.push_back(example(one, dtype));
            return b.expand(b.input(one, "x", dtype), shape);
        }
    }
    return -1;
}

// One program: maybe a producer, the reduction, maybe a consumer; its outputs are added.
inline void add_program(GraphBuilder& b, std::vector<Tensor>& inputs, const Shape& shape,
                        const Shape& dims, bool keepdim, DType dtype, OpId op, Layout layout,
                        bool fuse) {
    int x;
    if (dtype == DType::boolean && fuse) {  // a fused compare produces the bools
        x = viewed_input(b, inputs, shape, DType::int64, layout);
        x = b.node(OpId::gt, {x}, {.scalar = 1.0, .scalar_pos = ScalarPos::right}, shape,
                   DType::boolean);
    } else {
        x = viewed_input(b, inputs, shape, dtype, layout);
        if (fuse && dtype != DType::boolean)
            x = b.node(OpId::mul, {x}, {.scalar = 2.0, .scalar_pos = ScalarPos::right}, shape,
                       dtype);
    }
    int r = b.reduce(op, x, dims, keepdim);
    b.output(r);
    DType out = b.value(r).dtype;
    if (!fuse || out == DType::boolean) return;
    if (keepdim)
        b.output(b.binary(OpId::sub, x, r));  // consumed per element, as x - mean
    else
        b.output(b.node(OpId::add, {r}, {.scalar = 1.0, .scalar_pos = ScalarPos::right},
                        b.value(r).shape, out));
}

inline std::vector<Shape> subsets(size_t rank) {
    std::vector<Shape> out;
    for (unsigned mask = 1; mask < (1u << rank); ++mask) {
        Shape dims;
        for (size_t d = 0; d < rank; ++d)
            if (mask & (1u << d)) dims.push_back(int64_t(d));
        out.push_back(dims);
    }
    out.push_back({});  // empty: every dim
    return out;
}

// Every set of dims of 1-D to 4-D values, keepdim both ways, all four dtypes, in two graphs
// (floats, then int64 and bool); the op, the layout and whether a producer and consumer fuse
// rotate through the cases. Returns how many reductions.
inline int add_every_reduction(std::vector<GraphBuilder>& builders,
                               std::vector<std::vector<Tensor>>& inputs) {
    const std::vector<std::vector<Shape>> shapes = {{{1000}, {2, 1000}, {3, 1, 17}, {2, 3, 5, 17}},
                                                    {{1}, {17, 3}, {17, 3, 1}, {3, 17, 1, 5}}};
    const DType dtypes[] = {DType::float32, DType::float64, DType::int64, DType::boolean};
    const std::vector<OpId> ops = reduction_ops();  // tensor/reductions.def
    builders.resize(2), inputs.resize(2);
    int n = 0;
    for (int keepdim = 0; keepdim < 2; ++keepdim)
        for (size_t rank = 1; rank <= 4; ++rank)
            for (const Shape& dims : subsets(rank))
                for (DType dtype : dtypes) {
                    int g = int(dtype == DType::int64 || dtype == DType::boolean);
                    const Shape& shape = shapes[(n / 4) % 2][rank - 1];
                    Layout layout = Layout((n / 3) % 4);
                    if (layout == Layout::expanded && shape[0] == 1) layout = Layout::sliced;
                    add_program(builders[g], inputs[g], shape, dims, keepdim, dtype,
                                ops[n % ops.size()], layout, n % 5 < 3);
                    ++n;
                }
    return n;
}

}  // namespace kiln_test
