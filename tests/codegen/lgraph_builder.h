// A tiny builder for hand-written LGraphs in tests: infers each node's shape the way eager
// would (broadcasting, reductions, views, matmul), with symbolic sizes carried through.
#pragma once
#include <algorithm>
#include <string>
#include <vector>

#include "codegen/lower_input.h"
#include "tensor/error.h"
#include "tensor/reductions.h"

namespace kiln::codegen::testing {

inline constexpr int64_t s0 = -1;  // symbol s0, as LGraph writes it
inline constexpr int64_t s1 = -2;

struct GraphBuilder {
    LGraph graph;
    int next_id = 0;

    const LValue& value(int id) const {
        for (const LValue& v : graph.inputs)
            if (v.id == id) return v;
        for (const LNode& n : graph.nodes)
            if (n.out.id == id) return n.out;
        fail("GraphBuilder: no value ", id);
    }

    int input(const Shape& shape, const std::string& name = "", DType dtype = DType::float32) {
        graph.inputs.push_back({next_id, shape, dtype, name});
        return next_id++;
    }
    void output(int id) { graph.outputs.push_back(id); }

    int node(OpId op, std::vector<int> inputs, const Attrs& attrs, const Shape& shape, DType dtype = DType::float32) {
        graph.nodes.push_back({op, attrs, std::move(inputs), {next_id, shape, dtype, ""}});
        return next_id++;
    }

    static Shape broadcast(const Shape& a, const Shape& b) {
        size_t rank = std::max(a.size(), b.size());
        Shape out(rank);
        for (size_t i = 0; i < rank; ++i) {
            int64_t x = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
            int64_t y = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
            KILN_CHECK(x == y || x == 1 || y == 1, "GraphBuilder: cannot broadcast ", a, " with ", b);
            out[i] = x == 1 ? y : x;
        }
        return out;
    }

    int unary(OpId op, int x) { return node(op, {x}, {}, value(x).shape); }
    int binary(OpId op, int x, int y) {
        return node(op, {x, y}, {}, broadcast(value(x).shape, value(y).shape),
                    promote(value(x).dtype, value(y).dtype));
    }
    // op(x, scalar) or op(scalar, x)
    int scalar(OpId op, int x, double s, ScalarPos pos = ScalarPos::right) {
        return node(op, {x}, {.scalar = s, .scalar_pos = pos}, value(x).shape);
    }

    int reduce(OpId op, int x, Shape dims, bool keepdim) {
        Shape in = value(x).shape, out;
        int64_t rank = int64_t(in.size());
        std::vector<bool> reduced(in.size(), dims.empty());
        for (int64_t d : dims) reduced[d < 0 ? d + rank : d] = true;
        for (size_t i = 0; i < in.size(); ++i)
            if (!reduced[i]) out.push_back(in[i]);
            else if (keepdim) out.push_back(1);
        DType dtype = reduction_dtype(op, value(x).dtype);  // eager's: a sum of bools is int64
        return node(op, {x}, {.dims = dims, .keepdim = keepdim}, out, dtype);
    }
    // mean over dims of concrete size, written as eager writes it: sum * (1 / count)
    int mean(int x, Shape dims, bool keepdim) {
        int64_t count = 1;
        const Shape& in = value(x).shape;
        for (int64_t d : dims) count *= in[d < 0 ? d + int64_t(in.size()) : d];
        return scalar(OpId::mul, reduce(OpId::sum, x, dims, keepdim), 1.0 / double(count));
    }

    // a [..., M, K] @ b [..., K, N]: batch dims broadcast (both operands at least 2-D)
    int matmul(int a, int b) {
        const Shape &sa = value(a).shape, &sb = value(b).shape;
        Shape out = broadcast(Shape(sa.begin(), sa.end() - 2), Shape(sb.begin(), sb.end() - 2));
        out.insert(out.end(), {sa[sa.size() - 2], sb.back()});
        return node(OpId::matmul, {a, b}, {}, out);
    }
    int permute(int x, const Shape& dims) {
        Shape out;
        for (int64_t d : dims) out.push_back(value(x).shape[d]);
        return node(OpId::permute, {x}, {.dims = dims}, out, value(x).dtype);
    }
    int reshape(int x, const Shape& shape) {
        return node(OpId::reshape, {x}, {.shape = shape}, shape, value(x).dtype);
    }
    int expand(int x, const Shape& shape) {
        return node(OpId::expand, {x}, {.shape = shape}, shape, value(x).dtype);
    }
    int slice(int x, int64_t dim, int64_t start, int64_t end, int64_t step = 1) {
        Shape out = value(x).shape;
        int64_t n = out[dim];
        end = std::min(end, n);
        out[dim] = (end - start + step - 1) / step;
        return node(OpId::slice, {x}, {.dim = dim, .start = start, .end = end, .step = step}, out,
                    value(x).dtype);
    }
};

}  // namespace kiln::codegen::testing
