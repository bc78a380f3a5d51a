// The C++ dialect's row kernels beyond one plain pass per group of reductions: few long
// rows, each pass split into chunks over the threads, and scratch rows that keep an
// element value a later pass would compute again (codegen/emit_cpp_internal.h).
#include <algorithm>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "codegen/emit_cpp_internal.h"

namespace kiln::codegen::emit_detail {

// ---- few long rows (a full reduction: one row of all elements)

// Whether the kernel gets a split variant: float lanes along contiguous rows, and rows that
// may be few and long (sizes known at compile time decide it here).
bool CppKernelEmitter::split_fits() const {
    if (k_.kind != KernelKind::row || flat_ || tile_ || !vector_ || run_from_ != outer_)
        return false;
    SizeExpr rows{1, {}}, row_size{1, {}};
    for (int d = 0; d < outer_; ++d) rows = rows * size_expr(k_.domain[d]);
    for (int d = outer_; d < rank_; ++d) row_size = row_size * size_expr(k_.domain[d]);
    bool few = !rows.syms.empty() || rows.c < kSplitRows;
    bool long_rows = !row_size.syms.empty() || row_size.c >= kSplitRowSize;
    return few && long_rows;
}

// Partials a chunk writes: the most reductions any pass folds.
size_t CppKernelEmitter::split_partials() const {
    size_t most = 1;
    for (const Step& step : row_steps()) most = std::max(most, step.reductions.size());
    return most;
}

// Row by row; each pass along the row runs over chunks of kSplitChunk elements on the
// thread pool, each chunk folding its own partials, which are then combined in chunk
// order: the result does not depend on the thread count, and repeats run for run. The
// chunk that computes an element value stores it.
void CppKernelEmitter::emit_split_rows(const std::string& name) {
    scratch_.clear(), scratch_ready_.clear();  // long rows: recomputed, not kept
    os_ << "// " << name
        << " over few long rows: each pass along a row in chunks of kSplitChunk "
           "elements over the threads, the chunks' partials combined in chunk order\n";
    os_ << "static void " << name << "_split(const KernelArgs& args, ParallelFn parallel) {\n";
    emit_arguments();
    os_ << "    const int64_t row_size = " << product_cpp(k_.domain, outer_, rank_) << ";\n";
    os_ << "    constexpr int64_t kSplitChunk = " << kSplitChunk << ";  // elements\n";
    os_ << "    const int64_t chunks = (row_size + kSplitChunk - 1) / kSplitChunk;\n";
    // new[]: the lean prelude includes no <vector> (codegen/prelude.h)
    os_ << "    float* partials = new float[chunks * " << split_partials() << "];\n";
    os_ << "    for (int64_t row = 0; row < " << product_cpp(k_.domain, 0, outer_)
        << "; ++row) {\n";
    emit_row_indices("        ");
    row_scope_loads_.clear();
    for (const Step& step : row_steps()) {
        if (!step.pass) {
            emit_per_row_node("        ", step.node);
            continue;
        }
        os_ << "        for_chunks(parallel, chunks, [&](int64_t chunk) {\n";
        os_ << "            const int64_t j_begin = chunk * kSplitChunk, j_end = "
               "std::min(row_size, j_begin + kSplitChunk);\n";
        os_ << "            const int64_t vec_end = j_begin + (j_end - j_begin) / W * W;\n";
        chunked_ = true;
        emit_pass("            ", step.reductions, step.stores, "j_begin", "j_end");
        chunked_ = false;
        os_ << "        });\n";
        for (size_t k = 0; k < step.reductions.size(); ++k) {
            const LNode& n = node(step.reductions[k]);
            std::string value = s_.value_name(n.out.id);
            os_ << "        float " << value << " = " << reduction_identity(n.op, n.out.dtype)
                << ";\n";
            os_ << "        for (int64_t c = 0; c < chunks; ++c) " << value << " = "
                << reduction_combine(n.op, value,
                                     "partials[c * " + std::to_string(split_partials()) + " + " +
                                         std::to_string(k) + "]")
                << ";\n";
            emit_row_store("        ", n.out.id);
        }
    }
    os_ << "    }\n";
    os_ << "    delete[] partials;\n";
    os_ << "}\n";
}

// ---- scratch rows: an element value a later pass would compute again

// A row of at most kScratchRow elements (known at compile time) whose passes compute the
// same element value twice, and that value's math calls a function (exp, tanh, ...: not
// an operator): the first pass keeps it in a row of the thread's stack (L1) and the later
// one reads it back, so softmax's store pass reads exp(x - max) instead of evaluating it.
SizeExpr CppKernelEmitter::row_size_expr() const {
    SizeExpr e{1, {}};
    for (int d = outer_; d < rank_; ++d) e = e * size_expr(k_.domain[d]);
    return e;
}

// Element nodes the targets need, not looking past `stop` (values that come from scratch).
std::vector<int> CppKernelEmitter::closure_until(const std::vector<int>& targets,
                                                 const std::set<int>& stop) const {
    std::set<int> seen;
    std::function<void(int)> visit = [&](int index) {
        for (int v : node(index).inputs) {
            if (!in_kernel(v) || per_row(v)) continue;
            int p = s_.producer.at(v);
            if (!stop.count(p) && seen.insert(p).second) visit(p);
        }
    };
    for (int t : targets) {
        if (!is_reduction(t) && !stop.count(t)) seen.insert(t);
        visit(t);
    }
    return std::vector<int>(seen.begin(), seen.end());
}

void CppKernelEmitter::plan_scratch_rows() {
    scratch_.clear(), scratch_ready_.clear();
    SizeExpr row = row_size_expr();
    if (!vector_ || run_from_ != outer_ || !row.syms.empty() || row.c > kScratchRow) return;
    std::set<int> earlier;  // element nodes some earlier pass computes
    for (const Step& step : row_steps()) {
        if (!step.pass) continue;
        std::string names;
        std::vector<int> body = pass_body(step.reductions, step.stores, names);
        std::set<int> shared;
        for (int n : body)
            if (earlier.count(n)) shared.insert(n);
        // The shared values this pass reads beyond the shared part: keep those.
        std::vector<int> readers(body.begin(), body.end());
        readers.insert(readers.end(), step.reductions.begin(), step.reductions.end());
        std::set<int> keep;
        for (int r : readers)
            for (int v : node(r).inputs)
                if (in_kernel(v) && !per_row(v) && shared.count(s_.producer.at(v)) &&
                    !shared.count(r))
                    keep.insert(s_.producer.at(v));
        bool worth = false;  // recomputing them would call a function
        for (int n : closure_until(std::vector<int>(keep.begin(), keep.end()), {}))
            worth = worth || (shared.count(n) && op_info(node(n).op).math &&
                              std::string(op_info(node(n).op).math).find('(') != std::string::npos);
        for (int n : keep)
            if (worth && node(n).out.dtype == DType::float32) scratch_.insert(n);
        earlier.insert(body.begin(), body.end());
    }
}

// A pass's body once the values in scratch rows are read back instead of computed.
std::vector<int> CppKernelEmitter::scratch_body(const std::vector<int>& reductions,
                                                const std::vector<int>& stores) const {
    std::vector<int> targets = reductions;
    for (int v : stores) targets.push_back(s_.producer.at(v));
    return closure_until(targets, scratch_ready_);
}

// The scratch values this pass reads (an earlier pass stored them).
void CppKernelEmitter::emit_scratch_loads(const std::string& ind, const std::vector<int>& body,
                                          const std::vector<int>& reductions,
                                          const std::vector<int>& stores, bool vec) {
    std::set<int> reads;
    std::vector<int> all = body;
    all.insert(all.end(), reductions.begin(), reductions.end());
    for (int v : stores) all.push_back(s_.producer.at(v));
    for (int index : all) {
        if (scratch_ready_.count(index)) reads.insert(index);
        for (int v : node(index).inputs)
            if (in_kernel(v) && scratch_ready_.count(s_.producer.at(v)))
                reads.insert(s_.producer.at(v));
    }
    for (int n : reads) {
        std::string name = s_.value_name(node(n).out.id);
        os_ << ind << "auto " << name << " = "
            << (vec ? "B::load_aligned(" + name + "_row + j)" : name + "_row[j]") << ";\n";
    }
}

// The values of this pass's body that a later pass reads from scratch rows.
void CppKernelEmitter::emit_scratch_stores(const std::string& ind, const std::vector<int>& body,
                                           bool vec) {
    for (int n : body) {
        if (!scratch_.count(n) || scratch_ready_.count(n)) continue;
        std::string name = s_.value_name(node(n).out.id);
        os_ << ind
            << (vec ? name + ".store_aligned(" + name + "_row + j);"
                    : name + "_row[j] = " + name + ";")
            << "\n";
    }
}

}  // namespace kiln::codegen::emit_detail
