// The C++ (SIMD) emitter. Each generated kernel is a loop body handed to the host's thread
// pool: a pointwise kernel runs over chunks of elements (or over rows when broadcasting
// needs index math), a row kernel over rows, making one pass along the row per group of
// reductions and a last pass for what it stores. Every pass has a SIMD body (the prelude's
// batch type B: kiln's own vector in the lean prelude, xsimd's in the full one,
// emit_cpp_prelude.h) and a scalar tail built from the very same statements, one per node,
// named after the node. The statements, passes and kernel deduplication come from the
// emitter core (emit_core.h); this dialect writes the loops, batches and the thread pool's
// entry points.
#include "codegen/emit_cpp.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "codegen/emit_core.h"
#include "codegen/emit_cpp_internal.h"
#include "codegen/emit_cpp_prelude.h"
#include "codegen/prelude.h"
#include "tensor/reductions.h"

namespace kiln::codegen {

namespace {

using namespace emit_detail;

// The C++ type of one element of a dtype in generated code.
const char* cpp_type(DType d) {
    switch (d) {
        case DType::float32:
            return "float";
        case DType::float64:
            return "double";
        case DType::int64:
            return "int64_t";
        case DType::boolean:
            return "bool";
    }
    return "?";
}

// Folds a batch accumulator's lanes into the scalar one (the table's fold_<reduction>
// helpers, emit_cpp_prelude.h).
std::string reduction_fold(OpId op) { return "fold_" + std::string(op_name(op)); }

// One step of an accumulator of dtype `dtype`: an int64 sum (or any reduction that
// accumulates) wraps on overflow, as eager's.
std::string reduction_update(OpId op, DType dtype, const std::string& acc, const std::string& v) {
    if (dtype == DType::int64 && !reduction_picks_a_value(op))
        return "int64_t(" +
               reduction_combine(op, "wrap_int64(" + acc + ")", "wrap_int64(" + v + ")") + ")";
    return reduction_combine(op, acc, v);
}

}  // namespace

namespace emit_detail {

void CppKernelEmitter::emit() {
    choose_loop();
    std::string name = s_.kernel_name(index_);
    os_ << "// " << name << ": " << describe() << "\n";
    os_ << "static void " << name << "_body(void* ctx, int64_t begin, int64_t end) {\n";
    os_ << "    const KernelArgs& args = *static_cast<const KernelArgs*>(ctx);\n";
    emit_arguments();
    if (flat_) {
        os_ << "    const int64_t vec_end = begin + " << (vector_ ? "(end - begin) / W * W" : "0")
            << ";\n";
        emit_row_body("    ", "begin", "end");
    } else if (tile_) {
        emit_tile_rows();
    } else {
        std::string run = run_from_ > outer_ ? "run_size" : "row_size";
        os_ << "    const int64_t row_size = " << product_cpp(k_.domain, outer_, rank_) << ";\n";
        if (run_from_ > outer_) {
            os_ << "    const int64_t mid_size = " << product_cpp(k_.domain, outer_, run_from_)
                << ";  // runs per row\n";
            os_ << "    const int64_t run_size = " << product_cpp(k_.domain, run_from_, rank_)
                << ";\n";
        }
        os_ << "    const int64_t vec_end = " << (vector_ ? run + " / W * W" : "0") << ";\n";
        plan_scratch_rows();
        for (int n : scratch_)
            os_ << "    alignas(64) float " << s_.value_name(node(n).out.id) << "_row["
                << to_cpp(row_size_expr()) << "];  // kept for a later pass\n";
        os_ << "    for (int64_t row = begin; row < end; ++row) {\n";
        emit_row_indices("        ");
        emit_row_body("        ", "0", run);
        os_ << "    }\n";
    }
    os_ << "}\n";
    split_ = split_fits();
    if (split_) emit_split_rows(name);
    os_ << "extern \"C\" void " << name
        << "(float* const* buffers, const int64_t* symbols, ParallelFn parallel) {\n";
    emit_symbols("    ", "symbols");
    os_ << "    KernelArgs args{buffers, symbols};\n";
    if (flat_) {
        os_ << "    parallel(" << product_cpp(k_.domain, 0, rank_) << ", 32768, &args, " << name
            << "_body);\n";
    } else {
        os_ << "    const int64_t row_size = " << product_cpp(k_.domain, outer_, rank_) << ";\n";
        if (split_)
            os_ << "    if (" << product_cpp(k_.domain, 0, outer_) << " < " << kSplitRows
                << " && row_size >= " << kSplitRowSize << ") return " << name
                << "_split(args, parallel);  // few long rows\n";
        os_ << "    parallel(" << product_cpp(k_.domain, 0, outer_) << ", std::max<int64_t>("
            << (tile_ ? kTileGrain : 1) << ", 32768 / std::max<int64_t>(row_size, 1)), &args, "
            << name << "_body);\n";
    }
    os_ << "}\n";
    if (k_.epilogue_of >= 0) emit_epilogue_rows(name);
    os_ << "\n";
}

// The loop's rows are the GEMM's rows (fuse_epilogues checked it): a flat loop covers
// rows [r0, r1) as elements [r0 * N, r1 * N), a loop over rows as rows [r0, r1).
void CppKernelEmitter::emit_epilogue_rows(const std::string& name) {
    os_ << "// the epilogue of " << s_.kernel_name(k_.epilogue_of)
        << ": rows [row_begin, row_end) of its output, on this thread\n";
    os_ << "extern \"C\" void " << name
        << "_rows(float* const* buffers, const int64_t* symbols, int64_t row_begin, int64_t "
           "row_end) {\n";
    emit_symbols("    ", "symbols");
    os_ << "    KernelArgs args{buffers, symbols};\n";
    std::string n = product_cpp(k_.domain, rank_ - 1, rank_);
    if (flat_)
        os_ << "    " << name << "_body(&args, row_begin * " << n << ", row_end * " << n << ");\n";
    else
        os_ << "    " << name << "_body(&args, row_begin, row_end);\n";
    os_ << "}\n";
}

std::string CppKernelEmitter::describe() const {
    std::string out = std::string(kernel_kind_name(k_.kind)) + " over ";
    out += flat_ ? product_cpp(k_.domain, 0, rank_) + " elements"
                 : product_cpp(k_.domain, 0, outer_) + " rows of " +
                       product_cpp(k_.domain, outer_, rank_);
    if (run_from_ > outer_)
        out += " walked as " + product_cpp(k_.domain, outer_, run_from_) + " runs of " +
               product_cpp(k_.domain, run_from_, rank_);
    if (tile_) out += " in tiles of " + std::to_string(kTile) + " rows (lanes across rows)";
    out += !float32_ ? " (scalar: float64, int64 or bool reductions)"
           : vector_ ? ""
                     : " (scalar: strided loads)";
    return out;
}

void CppKernelEmitter::emit_symbols(const char* indent, const char* from) {
    for (int k = 0; k < s_.num_symbols; ++k)
        os_ << indent << "[[maybe_unused]] const int64_t s" << k << " = " << from << "[" << k
            << "];\n";
}

void CppKernelEmitter::emit_row_indices(const std::string& indent) {
    os_ << indent << "int64_t rest = row;\n";
    if (outer_ > 0) emit_split(indent, "rest", 'i', outer_ - 1, 0);
}

void CppKernelEmitter::choose_loop() {
    float32_ = all_float32(/*per_row_any_dtype=*/true);
    auto all_contiguous = [&] {
        for (const LoadPlan& p : element_loads())
            if (p.kind == LoadKind::strided) return false;
        return true;
    };
    if (k_.kind == KernelKind::row) {
        outer_ = k_.outer_dims;
        choose_run();
        bool strided = !all_contiguous();
        vector_ = float32_ && !strided;
        tile_ = strided && tile_fits();
        return;
    }
    outer_ = run_from_ = 0, flat_ = true;  // best case: one flat loop over all elements
    if (all_contiguous()) return void(vector_ = float32_);
    flat_ = false, outer_ = run_from_ = std::max(rank_ - 1, 0);
    vector_ = float32_ && all_contiguous();
}

// ---- what the core asks of this dialect

const char* CppKernelEmitter::type(DType d) const { return cpp_type(d); }

const char* CppKernelEmitter::index_type() const { return "int64_t"; }

std::string CppKernelEmitter::special_literal(double value, DType d) const {
    std::string limits = std::string("std::numeric_limits<") + cpp_type(d) + ">::";
    if (std::isnan(value)) return limits + "quiet_NaN()";
    return value > 0 ? limits + "infinity()" : "(-" + limits + "infinity())";
}

std::string CppKernelEmitter::int64_literal(double value) const {  // as eager converts it
    int64_t v = kiln::cast_value<int64_t>(value);
    if (v == std::numeric_limits<int64_t>::min()) return "std::numeric_limits<int64_t>::min()";
    return "int64_t(" + std::to_string(v) + ")";
}

std::string CppKernelEmitter::reduction_identity(OpId op, DType d) const {
    return kiln::reduction_identity(op, d);
}

// In lanes, a per-row value is broadcast to a batch; in a tile, lane t's element of its array.
std::string CppKernelEmitter::operand(int v, bool lanes) const {
    if (tile_ && per_row(v))
        return lanes ? "B::load_unaligned(" + s_.value_name(v) + "_tile + t)"
                     : s_.value_name(v) + "_tile[t]";
    if (per_row(v) && lanes)
        return (dtype(v) == DType::boolean ? "BB(" : "B(") + s_.value_name(v) + ")";
    return s_.value_name(v);
}

std::string CppKernelEmitter::scalar_operand(const std::string& literal, bool lanes) const {
    return lanes ? "B(" + literal + ")" : literal;
}

std::string CppKernelEmitter::convert(const std::string& x, DType to) const {
    return std::string("convert<") + cpp_type(to) + ">(" + x + ")";
}

std::string CppKernelEmitter::select(const std::string& c, const std::string& a,
                                     const std::string& b) const {
    return "select(" + c + ", " + a + ", " + b + ")";
}

// int64 math runs on wrap_int64, as eager's does (overflow wraps around).
bool CppKernelEmitter::int_math(OpId op, DType compute) {
    return compute == DType::int64 && op_info(op).math && !is_compare(op);
}

void CppKernelEmitter::prepare_operands(std::vector<std::string>& xs, OpId op,
                                        DType compute) const {
    if (int_math(op, compute))
        for (std::string& x : xs) x = "wrap_int64(" + x + ")";
}

std::string CppKernelEmitter::result(const std::string& math, OpId op, DType compute) const {
    if (int_math(op, compute)) return "int64_t(wrap_int64(" + math + "))";
    if (compute == DType::float64 && !is_compare(op)) return "double(" + math + ")";
    return math;
}

std::string CppKernelEmitter::declare(int, bool per_row_value) const {
    return per_row_value ? "const auto " : "auto ";
}

// Value v at element j: one element, or a batch of W (a tile's lanes run across rows:
// contiguous along them, or one value).
std::string CppKernelEmitter::load_text(int v, const LoadPlan& p, bool vec) const {
    bool is_bool = dtype(v) == DType::boolean;
    if (is_constant(v))
        return vec ? (is_bool ? "BB(" : "B(") + constant_text(v) + ")" : constant_text(v);
    std::string index = index_text(p);
    if (!vec) return ptr(v) + "[" + index + "]";
    bool contiguous = tile_ ? p.last_row_stride == SizeExpr{1, {}} : p.kind == LoadKind::contiguous;
    if (contiguous)
        return (is_bool ? "load_bool(" : "B::load_unaligned(") + ptr(v) + " + " + index + ")";
    return (is_bool ? "BB(" : "B(") + ptr(v) + "[" + index + "])";
}

// One loop along the row: computes `reductions` and writes `stores` (element values).
void CppKernelEmitter::emit_pass(const std::string& ind, const std::vector<int>& reductions,
                                 const std::vector<int>& stores, const std::string& from,
                                 const std::string& to) {
    std::string names;
    std::vector<int> body = pass_body(reductions, stores, names);
    if (!scratch_.empty()) body = scratch_body(reductions, stores);
    os_ << ind
        << (flat_      ? "// loop computing"
            : chunked_ ? "// a chunk of the row computing"
                       : "// pass along the row computing")
        << names << "\n";
    for (int r : reductions) {
        std::string name = s_.value_name(node(r).out.id);
        std::string init = reduction_identity(node(r).op, node(r).out.dtype);
        if (vector_) {
            os_ << ind << "B " << name << "_vec[" << kAccumulators << "] = {";
            for (int u = 0; u < kAccumulators; ++u) os_ << (u ? ", " : "") << "B(" << init << ")";
            os_ << "};\n";
        }
        os_ << ind << cpp_type(node(r).out.dtype) << " " << name << " = " << init << ";\n";
    }
    std::string in = ind;
    if (run_from_ > outer_) {  // one run at a time: the mid dims' k_d once per run
        os_ << ind << "for (int64_t mid = 0; mid < mid_size; ++mid) {\n";
        in = ind + "    ";
        os_ << in << "int64_t rest_m = mid;\n";
        emit_split(in, "rest_m", 'k', run_from_ - 1, outer_);
    }
    if (vector_ && !reductions.empty()) {  // kAccumulators batches a step, one accumulator each
        os_ << in << "for (int64_t j_group = " << from
            << "; j_group < vec_end; j_group += " << kAccumulators << " * W) {\n";
        os_ << in << "#pragma GCC unroll " << kAccumulators << "\n";
        os_ << in << "    for (int u = 0; u < " << kAccumulators << "; ++u) {\n";
        os_ << in << "        const int64_t j = j_group + u * W;\n";
        os_ << in << "        if (j >= vec_end) break;\n";
        emit_scratch_loads(in + "        ", body, reductions, stores, true);
        emit_element(in + "        ", body, reductions, stores, true);
        emit_scratch_stores(in + "        ", body, true);
        os_ << in << "    }\n";
        os_ << in << "}\n";
    } else if (vector_) {
        os_ << in << "for (int64_t j = " << from << "; j < vec_end; j += W) {\n";
        emit_scratch_loads(in + "    ", body, reductions, stores, true);
        emit_element(in + "    ", body, reductions, stores, true);
        emit_scratch_stores(in + "    ", body, true);
        os_ << in << "}\n";
    }
    os_ << in << "for (int64_t j = " << (vector_ ? "vec_end" : from) << "; j < " << to
        << "; ++j) {\n";
    emit_scratch_loads(in + "    ", body, reductions, stores, false);
    emit_element(in + "    ", body, reductions, stores, false);
    emit_scratch_stores(in + "    ", body, false);
    os_ << in << "}\n";
    if (run_from_ > outer_) os_ << ind << "}\n";
    for (size_t k = 0; k < reductions.size(); ++k) {
        int r = reductions[k];
        std::string name = s_.value_name(node(r).out.id);
        if (vector_) {  // the accumulators in a fixed order, then their lanes
            auto acc = [&](int u) { return name + "_vec[" + std::to_string(u) + "]"; };
            os_ << ind << name << " = " << reduction_fold(node(r).op) << "("
                << reduction_combine(node(r).op,
                                     "(" + reduction_combine(node(r).op, acc(0), acc(1)) + ")",
                                     "(" + reduction_combine(node(r).op, acc(2), acc(3)) + ")")
                << ", " << name << ");\n";
        }
        if (chunked_)
            os_ << ind << "partials[chunk * " << split_partials() << " + " << k << "] = " << name
                << ";\n";
        else
            emit_row_store(ind, node(r).out.id);
    }
}

void CppKernelEmitter::emit_load(const std::string& ind, int v, const LoadPlan& p, bool vec) {
    os_ << ind << "auto " << s_.value_name(v) << " = " << load_text(v, p, vec) << ";\n";
}

// A tile's accumulators are arrays, one element a row.
void CppKernelEmitter::emit_reduction_update(const std::string& ind, int r, bool vec) {
    const LNode& n = node(r);
    std::string acc = s_.value_name(n.out.id) + (vec ? "_vec[u]" : "");
    std::string x = operand(n.inputs[0], vec);
    if (dtype(n.inputs[0]) != n.out.dtype)  // a sum of bools counts them in int64
        x = convert(x, n.out.dtype);
    std::string tile = s_.value_name(n.out.id) + "_tile";
    if (tile_ && vec)
        os_ << ind << "("
            << reduction_update(n.op, n.out.dtype, "B::load_unaligned(" + tile + " + t)", x)
            << ").store_unaligned(" << tile << " + t);\n";
    else if (tile_)
        os_ << ind << tile << "[t] = " << reduction_update(n.op, n.out.dtype, tile + "[t]", x)
            << ";\n";
    else
        os_ << ind << acc << " = " << reduction_update(n.op, n.out.dtype, acc, x) << ";\n";
}

void CppKernelEmitter::emit_store(const std::string& ind, int v, bool vec) {
    std::string at = index_text(plan_load(v, rank_, false));  // strided in a permuted row kernel
    std::string ptr = s_.value_name(v) + "_ptr";
    if (vec && dtype(v) == DType::boolean)
        os_ << ind << "store_bool(" << s_.value_name(v) << ", " << ptr << " + " << at << ");\n";
    else if (vec)
        os_ << ind << s_.value_name(v) << ".store_unaligned(" << ptr << " + " << at << ");\n";
    else
        os_ << ind << ptr << "[" << at << "] = " << s_.value_name(v) << ";\n";
}

// ---- tiles of rows (lanes across rows)

// Whether every load and store is contiguous along the last row dim, or one value along
// it (some contiguous), and every per-row value the element code reads is a float32 value
// of the kernel (kept in an array, one element a row). Any number of passes: batch norm's
// statistics over NHWC values (codegen/channels_last.h) are a column sum, a column sum of
// squares around the mean, and an element pass reading both.
bool CppKernelEmitter::tile_fits() const {
    if (outer_ < 1) return false;
    bool contiguous = false;
    auto ok = [&](const LoadPlan& p) {
        if (p.last_row_stride == SizeExpr{1, {}}) return contiguous = true;
        return p.last_row_stride.c == 0;
    };
    for (const LoadPlan& p : element_loads())
        if (!ok(p)) return false;
    std::vector<int> pass;
    for (int index : k_.nodes) {
        const LNode& n = node(index);
        if (is_reduction(index))
            pass.push_back(index);
        else if (per_row(n.out.id))
            for (int v : n.inputs)
                if (!in_kernel(v) && !ok(plan_load(v, n.out.shape.size(), true))) return false;
    }
    for (int v : k_.stores) {
        if (per_row(v) && !ok(plan_load(v, s_.value(v).shape.size(), true))) return false;
        if (!per_row(v)) pass.push_back(s_.producer.at(v));
    }
    std::vector<int> reads = element_closure(pass);
    reads.insert(reads.end(), pass.begin(), pass.end());
    for (int index : reads)
        for (int v : node(index).inputs)
            if (per_row(v) && dtype(v) != DType::float32) return false;
    return contiguous;
}

// A column sum walks each row (a column) with a large stride; a tile walks kTile columns
// side by side instead, so each step along the row reads consecutive memory, W lanes at a
// time, as eager's reduce_columns does. Each per-row value lives in an array of the tile's
// rows (operand(): lane t's element), filled by its pass or, for math on them, lane by lane.
void CppKernelEmitter::emit_tile_rows() {
    int o = outer_ - 1;
    std::string size_o = to_cpp(size_expr(k_.domain[o]));
    os_ << "    const int64_t row_size = " << product_cpp(k_.domain, outer_, rank_) << ";\n";
    for (int index : k_.nodes)
        if (per_row(node(index).out.id))
            os_ << "    " << cpp_type(node(index).out.dtype) << " "
                << s_.value_name(node(index).out.id) << "_tile[" << kTile << "];\n";
    os_ << "    for (int64_t row = begin; row < end;) {  // rows i" << o
        << " = first .. first + lanes - 1\n";
    os_ << "        [[maybe_unused]] int64_t rest = row;\n";
    os_ << "        const int64_t first = rest % " << size_o << "; rest /= " << size_o << ";\n";
    if (o > 0) emit_split("        ", "rest", 'i', o - 1, 0);
    os_ << "        const int64_t lanes = std::min<int64_t>({" << kTile << ", end - row, " << size_o
        << " - first});\n";
    for (const Step& step : row_steps()) {
        if (!step.pass) {  // math on per-row values, lane by lane
            os_ << "        for (int64_t t = 0; t < lanes; ++t) {\n";
            os_ << "            const int64_t i" << o << " = first + t;\n";
            row_scope_loads_.clear();
            emit_per_row_node("            ", step.node);
            std::string name = s_.value_name(node(step.node).out.id);
            os_ << "            " << name << "_tile[t] = " << name << ";\n";
            os_ << "        }\n";
            continue;
        }
        std::string names;
        std::vector<int> body = pass_body(step.reductions, step.stores, names);
        for (int r : step.reductions)
            os_ << "        for (int64_t t = 0; t < lanes; ++t) " << s_.value_name(node(r).out.id)
                << "_tile[t] = " << reduction_identity(node(r).op, node(r).out.dtype) << ";\n";
        os_ << "        // pass along the rows computing" << names << "\n";
        os_ << "        for (int64_t j = 0; j < row_size; ++j) {\n";
        os_ << "            int64_t t = 0;\n";
        if (float32_) {
            os_ << "            for (; t + W <= lanes; t += W) {\n";
            os_ << "                const int64_t i" << o << " = first + t;\n";
            emit_element("                ", body, step.reductions, step.stores, true);
            os_ << "            }\n";
        }
        os_ << "            for (; t < lanes; ++t) {\n";
        os_ << "                const int64_t i" << o << " = first + t;\n";
        emit_element("                ", body, step.reductions, step.stores, false);
        os_ << "            }\n";
        os_ << "        }\n";
        bool stored = false;
        for (int r : step.reductions)
            stored = stored || std::count(k_.stores.begin(), k_.stores.end(), node(r).out.id);
        if (!stored) continue;
        os_ << "        for (int64_t t = 0; t < lanes; ++t) {  // per-row values\n";
        os_ << "            const int64_t i" << o << " = first + t;\n";
        for (int r : step.reductions) {
            std::string name = s_.value_name(node(r).out.id);
            if (!std::count(k_.stores.begin(), k_.stores.end(), node(r).out.id)) continue;
            os_ << "            const " << cpp_type(node(r).out.dtype) << " " << name << " = "
                << name << "_tile[t];\n";
            emit_row_store("            ", node(r).out.id);
        }
        os_ << "        }\n";
    }
    os_ << "        row += lanes;\n";
    os_ << "    }\n";
}

// The kernel's symbols and one typed pointer per buffer, from `args` (its KernelArgs).
void CppKernelEmitter::emit_arguments() {
    emit_symbols("    ", "args.symbols");
    std::vector<int> args = k_.args();
    for (size_t i = 0; i < args.size(); ++i) {
        bool out = i >= k_.loads.size();
        std::string type = std::string(out ? "" : "const ") + cpp_type(dtype(args[i])) + "*";
        std::string buffer = "args.buffers[" + std::to_string(i) + "]";
        if (dtype(args[i]) != DType::float32)
            buffer = "reinterpret_cast<" + type + ">(" + buffer + ")";
        os_ << "    " << type << " " << s_.value_name(args[i]) << "_ptr = " << buffer << ";\n";
    }
}

// The row's steps in order (emit_core.h): passes along it and values once per row.
void CppKernelEmitter::emit_row_body(const std::string& ind, const std::string& from,
                                     const std::string& to) {
    row_scope_loads_.clear();
    scratch_ready_.clear();
    for (const Step& step : row_steps()) {
        if (!step.pass) {
            emit_per_row_node(ind, step.node);
            continue;
        }
        emit_pass(ind, step.reductions, step.stores, from, to);
        std::string names;  // what this pass computed is in its scratch rows now
        for (int n : pass_body(step.reductions, step.stores, names))
            if (scratch_.count(n)) scratch_ready_.insert(n);
    }
}

}  // namespace emit_detail

namespace {

using namespace emit_detail;

struct CppKernels : KernelWriter {
    void kernel(const Schedule& s, int k, std::ostream& os) const override {
        CppKernelEmitter(s, k, os).emit();
    }
    // Its entry points call the first one's.
    std::string repeat(const Schedule& s, int k, const std::string& first) const override {
        std::string name = s.kernel_name(k);
        std::string out =
            "// " + name + ": the same code as " + first + ", on its own buffers\n" +
            "extern \"C\" void " + name +
            "(float* const* buffers, const int64_t* symbols, ParallelFn parallel) {\n" + "    " +
            first + "(buffers, symbols, parallel);\n}\n";
        if (s.kernels[k].epilogue_of >=
            0)  // the first is an epilogue too: its text had the same entry
            out +=
                "extern \"C\" void " + name +
                "_rows(float* const* buffers, const int64_t* symbols, int64_t row_begin, int64_t "
                "row_end) {\n    " +
                first + "_rows(buffers, symbols, row_begin, row_end);\n}\n";
        return out + "\n";
    }
    std::string host(const Schedule& s, int k) const override {
        const Kernel& kernel = s.kernels[k];
        std::string head =
            "// " + s.kernel_name(k) + ": " + s.value_name(s.graph.nodes[kernel.nodes[0]].out.id);
        if (kernel.kind != KernelKind::blas)
            return head + " runs on the host (eager dispatcher): " + kernel.why + "\n\n";
        std::string blas = " runs on the host (cblas_sgemm)";
        if (s.has_epilogue(k))
            blas += " by blocks of rows, each followed by " + s.kernel_name(k + 1) + "_rows";
        return head + blas + "\n\n";
    }
};

}  // namespace

namespace {

// One translation unit: the prelude that `all_kernels` needs (codegen/prelude.h), the table's
// fold_<reduction> helpers, then `body` (all of the kernels or some of them).
std::string unit_text(const std::string& all_kernels, const std::string& body) {
    return "// Generated by kiln (codegen/emit_cpp.cpp). One function per kernel; see "
           "docs/codegen.md.\n" +
           cpu_prelude_for(all_kernels) + reduction_fold_helpers() + body +
           "}  // namespace kiln_math\n";
}

}  // namespace

std::string emit(const std::vector<const Schedule*>& schedules) {
    std::ostringstream body;
    emit_kernels(schedules, CppKernels(), body);
    return unit_text(body.str(), body.str());
}

std::vector<std::string> emit_units(const std::vector<const Schedule*>& schedules, size_t max_units,
                                    size_t min_unit_bytes) {
    std::vector<KernelText> pieces = kernel_texts(schedules, CppKernels());
    std::string all;
    std::vector<size_t> group_bytes(pieces.size(), 0);
    for (const KernelText& piece : pieces) {
        all += piece.text;
        group_bytes[piece.group] += piece.text.size();
    }
    size_t units = std::clamp<size_t>(all.size() / std::max<size_t>(min_unit_bytes, 1), 1,
                                      std::max<size_t>(max_units, 1));
    if (units == 1) return {unit_text(all, all)};
    // Largest group first, each to the unit with the fewest bytes so far (and the lowest
    // index on a tie), so that the compilers finish at about the same time.
    std::vector<size_t> order(pieces.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return group_bytes[a] > group_bytes[b]; });
    std::vector<size_t> unit_of_group(pieces.size(), 0), unit_bytes(units, 0);
    for (size_t g : order) {
        if (group_bytes[g] == 0) continue;  // not a group's first piece
        size_t u = size_t(std::min_element(unit_bytes.begin(), unit_bytes.end()) - unit_bytes.begin());
        unit_of_group[g] = u;
        unit_bytes[u] += group_bytes[g];
    }
    std::vector<std::string> bodies(units);
    for (const KernelText& piece : pieces) bodies[unit_of_group[piece.group]] += piece.text;
    std::vector<std::string> out;
    for (const std::string& body : bodies)
        if (!body.empty()) out.push_back(unit_text(all, body));
    return out;
}

std::string emit(const Schedule& schedule) { return emit(std::vector<const Schedule*>{&schedule}); }

}  // namespace kiln::codegen
