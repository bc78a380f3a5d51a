// The emitter core (codegen/emit_core.h): what the C++ and CUDA dialects write the
// same way.
#include "codegen/emit_core.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

#include "codegen/same_code.h"

namespace kiln::codegen {

namespace emit_detail {

// ---- statements

std::string KernelEmitterCore::scalar_literal(double value, DType d) const {
    if (d == DType::int64) return int64_literal(value);
    if (d == DType::float64)
        return std::isfinite(value) ? finite_double_literal(value) : special_literal(value, d);
    float f = float(value);
    if (!std::isfinite(f)) return special_literal(f, DType::float32);
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.9g", double(f));
    std::string text = buf;
    if (text.find_first_of(".en") == std::string::npos) text += ".0";
    text += "f";
    return f < 0 ? "(" + text + ")" : text;
}

std::string KernelEmitterCore::constant_text(int v) const {
    const LNode& n = node(s_.producer.at(v));
    if (n.out.dtype == DType::boolean) return n.attrs.scalar != 0 ? "true" : "false";
    return scalar_literal(n.attrs.scalar, n.out.dtype);
}

std::string KernelEmitterCore::expression(const LNode& n, bool lanes) const {
    DType compute = compute_dtype(n);
    std::string scalar = scalar_operand(scalar_literal(n.attrs.scalar, compute), lanes);
    std::vector<Operand> xs;
    if (n.attrs.scalar_pos == ScalarPos::left) xs.push_back({scalar, compute});
    for (int v : n.inputs) xs.push_back({operand(v, lanes), dtype(v)});
    if (n.attrs.scalar_pos == ScalarPos::right) xs.push_back({scalar, compute});
    return op_expression(*this, n.op, xs, compute);
}

std::string KernelEmitterCore::index_text(const LoadPlan& p) {
    std::string index = p.base + mid_terms(p);
    if (p.kind == LoadKind::contiguous) index += " + j";
    if (p.kind == LoadKind::strided)
        for (const auto& [dim, stride] : p.inner)
            index += " + k" + std::to_string(dim) + " * " + to_cpp(stride);
    if (index.rfind("0 + ", 0) == 0) index = index.substr(4);
    return index;
}

// ---- index math

void KernelEmitterCore::emit_split(const std::string& ind, const std::string& rest, char letter,
                                   int hi, int lo) {
    for (int d = hi; d > lo; --d) {
        std::string size = to_cpp(size_expr(k_.domain[d]));
        os_ << ind << "const " << index_type() << " " << letter << d << " = " << rest << " % "
            << size << "; " << rest << " /= " << size << ";\n";
    }
    os_ << ind << "const " << index_type() << " " << letter << lo << " = " << rest << ";\n";
}

void KernelEmitterCore::emit_run_indices(const std::string& ind) {
    bool strided = false;
    for (const LoadPlan& p : element_loads()) strided = strided || p.kind == LoadKind::strided;
    if (!strided || rank_ == outer_) return;
    if (rank_ - outer_ == 1) {
        os_ << ind << "const " << index_type() << " k" << outer_ << " = j;\n";
        return;
    }
    os_ << ind << index_type() << " rest_j = j;\n";
    emit_split(ind, "rest_j", 'k', rank_ - 1, outer_);
}

// ---- passes

std::vector<Step> KernelEmitterCore::row_steps() const {
    // Levels: a reduction folds in pass L, one more than the last per-row value its elements
    // read; a per-row value is ready after the pass of its latest input (-1: before any
    // pass); element stores go in the first pass after the per-row values they read.
    std::map<int, int> ready;  // per-row value id -> level after which it is known
    auto after = [&](const std::vector<int>& nodes) {
        int level = -1;
        for (int index : nodes)
            for (int v : node(index).inputs)
                if (per_row(v)) level = std::max(level, ready.at(v));
        return level;
    };
    std::map<int, Step> passes;
    std::vector<std::pair<int, int>> row_nodes;  // (level, node)
    for (int index : k_.nodes) {
        int out = node(index).out.id;
        if (is_reduction(index)) {
            std::vector<int> needs = element_closure({index});
            needs.push_back(index);
            int level = after(needs) + 1;
            passes[level].reductions.push_back(index);
            ready[out] = level;
        } else if (per_row(out)) {
            int level = after({index});
            row_nodes.push_back({level, index});
            ready[out] = level;
        }
    }
    std::vector<int> stores, store_nodes;
    for (int v : k_.stores)
        if (!per_row(v)) stores.push_back(v), store_nodes.push_back(s_.producer.at(v));
    if (!stores.empty()) passes[after(element_closure(store_nodes)) + 1].stores = stores;
    std::vector<Step> steps;
    auto add_row_nodes = [&](int level) {
        for (const auto& [l, index] : row_nodes)
            if (l == level) steps.push_back({false, {}, {}, index});
    };
    add_row_nodes(-1);
    int last = passes.empty() ? -1 : passes.rbegin()->first;
    for (int level = 0; level <= last; ++level) {
        if (passes.count(level)) steps.push_back(passes[level]);
        add_row_nodes(level);
    }
    return steps;
}

std::vector<int> KernelEmitterCore::pass_body(const std::vector<int>& reductions,
                                              const std::vector<int>& stores,
                                              std::string& names) const {
    std::vector<int> targets = reductions;
    for (int v : stores) targets.push_back(s_.producer.at(v));
    for (int t : targets) names += " " + s_.value_name(node(t).out.id);
    return element_closure(targets);
}

void KernelEmitterCore::emit_element(const std::string& ind, const std::vector<int>& body,
                                     const std::vector<int>& reductions,
                                     const std::vector<int>& stores, bool lanes) {
    emit_run_indices(ind);
    std::set<int> loaded;
    std::vector<int> all = body;
    all.insert(all.end(), reductions.begin(), reductions.end());
    for (int index : all)
        for (int v : node(index).inputs)
            if (!in_kernel(v) && loaded.insert(v).second)
                emit_load(ind, v, plan_load(v, rank_, false), lanes);
    for (int index : body) {
        int v = node(index).out.id;
        os_ << ind << declare(v, false) << s_.value_name(v) << " = "
            << expression(node(index), lanes) << ";\n";
    }
    for (int r : reductions) emit_reduction_update(ind, r, lanes);
    for (int v : stores) emit_store(ind, v, lanes);
}

void KernelEmitterCore::emit_per_row_node(const std::string& ind, int index) {
    const LNode& n = node(index);
    for (int v : n.inputs) {
        if (in_kernel(v) || !row_scope_loads_.insert(v).second) continue;
        LoadPlan p = plan_load(v, n.out.shape.size(), true);
        std::string value = is_constant(v) ? constant_text(v) : ptr(v) + "[" + index_text(p) + "]";
        os_ << ind << "const " << type(dtype(v)) << " " << s_.value_name(v) << " = " << value
            << ";\n";
    }
    os_ << ind << declare(n.out.id, true) << s_.value_name(n.out.id) << " = "
        << expression(n, false) << ";\n";
    emit_row_store(ind, n.out.id);
}

void KernelEmitterCore::emit_row_store(const std::string& ind, int v) {
    if (std::find(k_.stores.begin(), k_.stores.end(), v) == k_.stores.end()) return;
    LoadPlan p = plan_load(v, s_.value(v).shape.size(), true);
    os_ << ind << row_store_guard() << s_.value_name(v) << "_ptr[" << p.base
        << "] = " << s_.value_name(v) << ";\n";
}

// ---- the translation unit

std::vector<KernelText> kernel_texts(const std::vector<const Schedule*>& schedules,
                                     const KernelWriter& writer) {
    std::vector<KernelText> out;
    SeenKernels seen;                              // first kernel name by canonical text, over every graph
    std::map<std::string, size_t> piece_of_first;  // first kernel name -> its piece
    auto add = [&](std::string text, size_t group) { out.push_back({std::move(text), group}); };
    for (const Schedule* sp : schedules) {
        const Schedule& s = *sp;
        add("// ---- graph" + (s.prefix.empty() ? "" : " " + s.prefix) + ": " +
                std::to_string(s.graph.nodes.size()) + " nodes, " +
                std::to_string(s.kernels.size()) + " kernels\n",
            out.size());
        SameCode same_code(s);
        for (size_t k = 0; k < s.kernels.size(); ++k) {
            KernelKind kind = s.kernels[k].kind;
            if (kind != KernelKind::pointwise && kind != KernelKind::row) {
                add(writer.host(s, int(k)), out.size());
                continue;
            }
            std::ostringstream text;
            writer.kernel(s, int(k), text);
            auto [first, fresh] =
                seen.try_emplace(same_code.canonical(int(k), text.str()), s.kernel_name(int(k)));
            if (fresh) {
                piece_of_first[first->second] = out.size();
                add(text.str(), out.size());
            } else {
                add(writer.repeat(s, int(k), first->second), piece_of_first.at(first->second));
            }
        }
    }
    return out;
}

void emit_kernels(const std::vector<const Schedule*>& schedules, const KernelWriter& writer,
                  std::ostream& os) {
    for (const KernelText& piece : kernel_texts(schedules, writer)) os << piece.text;
}

}  // namespace emit_detail
}  // namespace kiln::codegen
