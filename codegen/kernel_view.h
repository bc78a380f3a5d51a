// Internal to codegen/: how the emitter core (emit_core.h) and its dialects (emit_cpp.cpp,
// emit_cuda.cpp) read one kernel of a Schedule: which values it computes, which it computes
// once per row, how each value it loads is indexed (constant over the row, contiguous along
// it, or strided), and which element nodes a target needs.
#pragma once
#include <algorithm>
#include <cmath>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "codegen/schedule.h"
#include "tensor/kernels.h"

namespace kiln::codegen::emit_detail {

inline std::string product_cpp(const Shape& shape, size_t begin, size_t end) {
    SizeExpr e{1, {}};
    for (size_t d = begin; d < end; ++d) e = e * size_expr(shape[d]);
    return to_cpp(e);
}

// How a loop reads one value: fixed for the whole row, contiguous along it, or strided.
enum class LoadKind { constant, contiguous, strided };
struct LoadPlan {
    LoadKind kind = LoadKind::constant;
    std::string base;                             // offset + outer index terms
    std::vector<std::pair<int, SizeExpr>> inner;  // (domain dim, stride) along the run
    std::vector<std::pair<int, SizeExpr>> mid;    // (domain dim, stride) over the runs of a row
    SizeExpr last_row_stride{0, {}};              // stride along the last row-indexing dim
};

// A row's loop dims [outer, run_from) are walked one index at a time (the "mid" dims, k_d
// computed once per run) and [run_from, rank) as one run j: batch norm's statistics over
// [C] x [N, H, W] walk N runs of H * W contiguous elements, vectorized.
inline std::string mid_terms(const LoadPlan& p) {
    std::string out;
    for (const auto& [dim, stride] : p.mid)
        out += " + k" + std::to_string(dim) + " * " + to_cpp(stride);
    return out;
}

// The dtype a node's math runs in, as eager decides it (tensor/kernels_pointwise.cpp):
// operands are converted to it first. Math ops, casts, where and reductions: the output's
// dtype. Comparisons: their operands' promoted dtype, by eager's own rule (never bool).
inline DType compute_dtype(const LNode& n, const std::vector<DType>& in) {
    if (!is_compare(n.op)) return n.out.dtype;
    if (n.attrs.scalar_pos != ScalarPos::none)
        return scalar_result_dtype(in[0], n.attrs.scalar, true);
    return binary_result_dtype(in[0], in[1], true);
}

class KernelView {
   protected:
    KernelView(const Schedule& s, int index, int outer)
        : s_(s),
          k_(s.kernels[index]),
          index_(index),
          rank_(int(k_.domain.size())),
          outer_(outer),
          run_from_(outer) {
        loop_of_.resize(k_.perm.size());
        for (size_t i = 0; i < k_.perm.size(); ++i) loop_of_[k_.perm[i]] = int(i);
    }

    // The loop dim indexing dim d of a value of rank value_rank read by a node of
    // consumer_rank dims (aligned right, NumPy-style). A row kernel's element nodes and its
    // keepdim per-row values have the element shape, whose dims the loop permutes; its
    // per-row values without keepdim have the rows' shape, the loop's leading dims.
    int loop_dim(size_t consumer_rank, size_t value_rank, size_t d) const {
        int dim = int(consumer_rank - value_rank + d);
        return !k_.perm.empty() && int(consumer_rank) == rank_ ? loop_of_[dim] : dim;
    }

    // The longest run of trailing row dims along which every element load and store is
    // contiguous (or constant); the dims before it become mid dims. None: the whole row,
    // strided.
    void choose_run() {
        for (run_from_ = outer_; run_from_ < rank_; ++run_from_) {
            bool strided = false;
            for (const LoadPlan& p : element_loads())
                strided = strided || p.kind == LoadKind::strided;
            if (!strided) return;
        }
        run_from_ = outer_;
    }

    bool in_kernel(int v) const {
        const ValueInfo& info = s_.values.at(v);
        return info.kernel == index_ && info.home != Home::view && s_.producer.count(v) &&
               std::find(k_.nodes.begin(), k_.nodes.end(), s_.producer.at(v)) != k_.nodes.end();
    }
    bool per_row(int v) const { return in_kernel(v) && s_.values.at(v).per_row; }
    bool is_constant(int v) const { return s_.values.at(v).home == Home::constant; }
    const LNode& node(int index) const { return s_.graph.nodes[index]; }
    bool is_reduction(int index) const { return op_info(node(index).op).kind == OpKind::reduction; }

    // Value v read by a node whose shape has `consumer_rank` dims (aligned right, NumPy-style).
    LoadPlan plan_load(int v, size_t consumer_rank, bool row_context) const {
        if (is_constant(v)) return {LoadKind::constant, "0", {}};  // a literal: no memory
        const Access& a = s_.values.at(v).access;
        const Shape& shape = s_.value(v).shape;
        LoadPlan p;
        std::vector<SizeExpr> base = a.offset;
        std::string outer_terms;
        for (size_t d = 0; d < shape.size(); ++d) {
            if (shape[d] == 1) continue;  // broadcast (or a dim of one): index 0
            int dim = loop_dim(consumer_rank, shape.size(), d);
            std::string stride = a.strides[d] == SizeExpr{1, {}} ? "" : " * " + to_cpp(a.strides[d]);
            if (dim == outer_ - 1) p.last_row_stride = a.strides[d];
            if (dim < outer_) outer_terms += " + i" + std::to_string(dim) + stride;
            else if (row_context)
                continue;
            else if (dim < run_from_)
                p.mid.push_back({dim, a.strides[d]});
            else
                p.inner.push_back({dim, a.strides[d]});
        }
        p.base = to_cpp(base) + outer_terms;
        if (p.base.rfind("0 + ", 0) == 0) p.base = p.base.substr(4);
        if (p.inner.empty()) return p;
        std::vector<SizeExpr> want =
            contiguous_stride_exprs(Shape(k_.domain.begin() + run_from_, k_.domain.end()));
        size_t matched = 0;
        for (int d = run_from_; d < rank_; ++d) {
            if (k_.domain[d] == 1) continue;
            auto it = std::find_if(p.inner.begin(), p.inner.end(), [&](const auto& t) { return t.first == d; });
            if (it == p.inner.end() || !(it->second == want[d - run_from_]))
                return p.kind = LoadKind::strided, p;
            ++matched;
        }
        p.kind = matched == p.inner.size() ? LoadKind::contiguous : LoadKind::strided;
        return p;
    }

    // Element loads of every node that runs along the row.
    std::vector<LoadPlan> element_loads() const {
        std::vector<LoadPlan> plans;
        for (int index : k_.nodes) {
            if (!is_reduction(index) && per_row(node(index).out.id)) continue;
            for (int v : node(index).inputs)
                if (!in_kernel(v)) plans.push_back(plan_load(v, k_.domain.size(), false));
            for (int v : k_.stores)
                if (v == node(index).out.id && !per_row(v)) plans.push_back(plan_load(v, k_.domain.size(), false));
        }
        return plans;
    }

    // Element nodes of this kernel that `targets` need, in execution order; values in
    // `have` (already in registers) are not computed again, nor what only they need.
    std::vector<int> element_closure(const std::vector<int>& targets,
                                     const std::set<int>& have = {}) const {
        std::set<int> seen;
        std::function<void(int)> visit = [&](int index) {
            for (int v : node(index).inputs)
                if (in_kernel(v) && !per_row(v) && !have.count(v) &&
                    seen.insert(s_.producer.at(v)).second)
                    visit(s_.producer.at(v));
        };
        for (int t : targets) {
            if (have.count(node(t).out.id)) continue;
            if (!is_reduction(t)) seen.insert(t);
            visit(t);
        }
        return std::vector<int>(seen.begin(), seen.end());  // node indices are execution order
    }

    DType dtype(int v) const { return s_.value(v).dtype; }
    DType compute_dtype(const LNode& n) const {
        std::vector<DType> in;
        for (int v : n.inputs) in.push_back(dtype(v));
        return emit_detail::compute_dtype(n, in);
    }
    // Every value the kernel reads or computes along its rows or elements is float32 (or bool),
    // and so is all its math. A row kernel's per-row values (not its reductions) are scalar
    // code between the passes whatever their dtype: cross-entropy's int64 target checks beside
    // log_softmax's passes left GPT's [1024, 1024] logits kernel scalar, calling expf per element.
    // The C++ emitter passes per_row_any_dtype; the CUDA emitter's float4 groups keep the
    // older rule (every array float32).
    bool all_float32(bool per_row_any_dtype = false) const {
        for (int index : k_.nodes) {
            const LNode& n = node(index);
            if (per_row_any_dtype && k_.kind == KernelKind::row && per_row(n.out.id) &&
                !is_reduction(index))
                continue;
            auto ok = [](DType d) { return d == DType::float32 || d == DType::boolean; };
            if (!ok(n.out.dtype) || !ok(compute_dtype(n))) return false;
            if (n.op == OpId::where && n.out.dtype != DType::float32) return false;
            if (is_reduction(index) &&
                (n.out.dtype != DType::float32 || dtype(n.inputs[0]) != DType::float32))
                return false;  // int64 and bool reductions accumulate in scalar loops
            for (int v : n.inputs)
                if (!ok(dtype(v))) return false;
        }
        return true;
    }

    const Schedule& s_;
    const Kernel& k_;
    int index_;
    int rank_;
    int outer_;                 // leading domain dims indexed by `row`
    int run_from_;              // row dims from here on are one run j; those before it are mid dims
    std::vector<int> loop_of_;  // row kernels: the loop dim of each element dim (empty: the same)
};

}  // namespace kiln::codegen::emit_detail
