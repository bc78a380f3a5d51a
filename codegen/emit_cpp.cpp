// The C++/xsimd emitter. Each generated kernel is a loop body handed to the host's thread
// pool: a pointwise kernel runs over chunks of elements (or over rows when broadcasting
// needs index math), a row kernel over rows, making one pass along the row per group of
// reductions and a last pass for what it stores. Every pass has an xsimd body and a scalar
// tail built from the very same statements, one per node, named after the node.
#include "codegen/emit_cpp.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "codegen/emit_cpp_prelude.h"
#include "codegen/kernel_view.h"
#include "codegen/same_code.h"
#include "tensor/error.h"
#include "tensor/reductions.h"

namespace kiln::codegen {

std::string finite_double_literal(double value) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.17g", value);
    std::string text = buf;
    if (text.find_first_of(".en") == std::string::npos) text += ".0";
    return value < 0 ? "(" + text + ")" : text;
}

std::string math_text(const std::string& math, const std::string& x, const std::string& y) {
    std::string out;
    size_t i = 0;
    auto word_char = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
    while (i < math.size()) {
        char c = math[i];
        size_t j = i + 1;
        if (std::isdigit(static_cast<unsigned char>(c))) {  // a literal such as 1.f: copy whole
            while (j < math.size() && (word_char(math[j]) || math[j] == '.')) ++j;
            out += math.substr(i, j - i);
        } else if (word_char(c)) {
            while (j < math.size() && word_char(math[j])) ++j;
            std::string word = math.substr(i, j - i);
            out += word == "x" ? x : word == "y" ? y : word;
        } else {
            out += c;
        }
        i = j;
    }
    return out;
}

namespace {

using namespace emit_detail;

std::string float_literal(double value) {
    float f = float(value);
    if (std::isnan(f)) return "std::numeric_limits<float>::quiet_NaN()";
    if (std::isinf(f)) return f > 0 ? "std::numeric_limits<float>::infinity()" : "(-std::numeric_limits<float>::infinity())";
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.9g", double(f));
    std::string text = buf;
    if (text.find_first_of(".en") == std::string::npos) text += ".0";
    text += "f";
    return f < 0 ? "(" + text + ")" : text;
}

std::string double_literal(double value) {
    if (std::isnan(value)) return "std::numeric_limits<double>::quiet_NaN()";
    if (std::isinf(value))
        return value > 0 ? "std::numeric_limits<double>::infinity()"
                         : "(-std::numeric_limits<double>::infinity())";
    return finite_double_literal(value);
}

// A scalar operand in the dtype the node computes in, converted as eager converts it.
std::string scalar_literal(double value, DType dtype) {
    if (dtype == DType::float64) return double_literal(value);
    if (dtype != DType::int64) return float_literal(value);
    int64_t v = kiln::cast_value<int64_t>(value);
    if (v == std::numeric_limits<int64_t>::min()) return "std::numeric_limits<int64_t>::min()";
    return "int64_t(" + std::to_string(v) + ")";
}

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

struct Reduction {
    std::string init;  // identity element
    std::string fold;  // folds a batch into a float accumulator (emit_cpp_prelude.h)
    OpId op;
    DType dtype;  // the accumulator's: the reduction's output dtype
    std::string update(const std::string& acc, const std::string& v) const {
        if (dtype == DType::int64)  // on wrap_int64: a sum wraps on overflow, as eager's
            return "int64_t(" +
                   math_text(reduction_combine(op), "wrap_int64(" + acc + ")",
                             "wrap_int64(" + v + ")") +
                   ")";
        return math_text(reduction_combine(op), acc, v);
    }
};
Reduction reduction_of(OpId op, DType dtype) {
    return {reduction_identity(op, dtype), "fold_" + std::string(op_name(op)), op, dtype};
}

class KernelEmitter : KernelView {
   public:
    KernelEmitter(const Schedule& s, int index, std::ostream& os) : KernelView(s, index, 0), os_(os) {}

    void emit() {
        choose_loop();
        std::string name = s_.kernel_name(index_);
        os_ << "// " << name << ": " << describe() << "\n";
        os_ << "static void " << name << "_body(void* ctx, int64_t begin, int64_t end) {\n";
        os_ << "    const KernelArgs& args = *static_cast<const KernelArgs*>(ctx);\n";
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
        if (flat_) {
            os_ << "    const int64_t vec_end = begin + " << (vector_ ? "(end - begin) / W * W" : "0") << ";\n";
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
            os_ << "    for (int64_t row = begin; row < end; ++row) {\n";
            emit_row_indices("        ");
            emit_row_body("        ", "0", run);
            os_ << "    }\n";
        }
        os_ << "}\n";
        os_ << "extern \"C\" void " << name << "(float* const* buffers, const int64_t* symbols, ParallelFn parallel) {\n";
        emit_symbols("    ", "symbols");
        os_ << "    KernelArgs args{buffers, symbols};\n";
        if (flat_) {
            os_ << "    parallel(" << product_cpp(k_.domain, 0, rank_) << ", 32768, &args, " << name << "_body);\n";
        } else {
            os_ << "    const int64_t row_size = " << product_cpp(k_.domain, outer_, rank_) << ";\n";
            os_ << "    parallel(" << product_cpp(k_.domain, 0, outer_) << ", std::max<int64_t>("
                << (tile_ ? kTile : 1) << ", 32768 / std::max<int64_t>(row_size, 1)), &args, "
                << name << "_body);\n";
        }
        os_ << "}\n";
        if (k_.epilogue_of >= 0) emit_epilogue_rows(name);
        os_ << "\n";
    }

    // The loop's rows are the GEMM's rows (fuse_epilogues checked it): a flat loop covers
    // rows [r0, r1) as elements [r0 * N, r1 * N), a loop over rows as rows [r0, r1).
    void emit_epilogue_rows(const std::string& name) {
        os_ << "// the epilogue of " << s_.kernel_name(k_.epilogue_of)
            << ": rows [row_begin, row_end) of its output, on this thread\n";
        os_ << "extern \"C\" void " << name
            << "_rows(float* const* buffers, const int64_t* symbols, int64_t row_begin, int64_t "
               "row_end) {\n";
        emit_symbols("    ", "symbols");
        os_ << "    KernelArgs args{buffers, symbols};\n";
        std::string n = product_cpp(k_.domain, rank_ - 1, rank_);
        if (flat_)
            os_ << "    " << name << "_body(&args, row_begin * " << n << ", row_end * " << n
                << ");\n";
        else
            os_ << "    " << name << "_body(&args, row_begin, row_end);\n";
        os_ << "}\n";
    }

   private:
    std::ostream& os_;
    bool flat_ = false;     // no rows: [begin, end) are element indices
    bool vector_ = true;    // float lanes: every element load constant or contiguous, every value
                            // float32 or bool
    bool float32_ = true;   // every value float32 or bool (else the loops are scalar)
    bool strided_ = false;  // some element load is strided: the loop computes the k_d
    // Strided rows whose last row dim is contiguous (a column sum, a bias gradient): tiles of
    // up to kTile consecutive rows at once, lanes across rows, accumulators in arrays.
    bool tile_ = false;
    static constexpr int kTile = 128;
    std::set<int> row_scope_loads_;


    std::string describe() const {
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

    void emit_symbols(const char* indent, const char* from) {
        for (int k = 0; k < s_.num_symbols; ++k)
            os_ << indent << "[[maybe_unused]] const int64_t s" << k << " = " << from << "[" << k << "];\n";
    }

    void emit_row_indices(const std::string& indent) {
        os_ << indent << "int64_t rest = row;\n";
        for (int d = outer_ - 1; d > 0; --d)
            os_ << indent << "const int64_t i" << d << " = rest % " << to_cpp(size_expr(k_.domain[d])) << "; rest /= "
                << to_cpp(size_expr(k_.domain[d])) << ";\n";
        if (outer_ > 0) os_ << indent << "const int64_t i0 = rest;\n";
    }


    void choose_loop() {
        float32_ = all_float32();
        auto all_contiguous = [&] {
            for (const LoadPlan& p : element_loads())
                if (p.kind == LoadKind::strided) return false;
            return true;
        };
        if (k_.kind == KernelKind::row) {
            outer_ = k_.outer_dims;
            choose_run();
            strided_ = !all_contiguous();
            vector_ = float32_ && !strided_;
            tile_ = strided_ && tile_fits();
            return;
        }
        outer_ = run_from_ = 0, flat_ = true;  // best case: one flat loop over all elements
        if (all_contiguous()) return void(vector_ = float32_);
        flat_ = false, outer_ = run_from_ = std::max(rank_ - 1, 0);
        strided_ = !all_contiguous();
        vector_ = float32_ && !strided_;
    }

    // ---- statements

    std::string operand(int v, bool vec, bool along_row) const {
        if (per_row(v) && vec && along_row)
            return (dtype(v) == DType::boolean ? "BB(" : "B(") + s_.value_name(v) + ")";
        return s_.value_name(v);
    }

    // Operands are converted to the dtype the node computes in; int64 math runs on
    // wrap_int64, as eager's does (overflow wraps around).
    std::string expression(const LNode& n, bool vec, bool along_row) const {
        const OpInfo& op = op_info(n.op);
        DType compute = compute_dtype(n);
        bool ints = compute == DType::int64 && op.math && !is_compare(n.op);
        std::string scalar = scalar_literal(n.attrs.scalar, compute);
        if (vec) scalar = "B(" + scalar + ")";
        std::vector<std::string> xs;
        if (n.attrs.scalar_pos == ScalarPos::left) xs.push_back(scalar);
        for (size_t i = 0; i < n.inputs.size(); ++i) {
            std::string x = operand(n.inputs[i], vec, along_row);
            DType want = operand_dtype(n, i, compute);
            if (dtype(n.inputs[i]) != want)
                x = std::string("convert<") + cpp_type(want) + ">(" + x + ")";
            xs.push_back(x);
        }
        if (n.attrs.scalar_pos == ScalarPos::right) xs.push_back(scalar);
        if (ints)
            for (std::string& x : xs) x = "wrap_int64(" + x + ")";
        if (n.op == OpId::where) return "select(" + xs[0] + ", " + xs[1] + ", " + xs[2] + ")";
        if (!op.math) return xs[0];  // contiguous / cast: the (converted) value itself
        std::string math = math_text(op.math, xs[0], xs.size() > 1 ? xs[1] : "");
        if (ints) return "int64_t(wrap_int64(" + math + "))";
        if (compute == DType::float64 && !is_compare(n.op)) return "double(" + math + ")";
        return math;
    }

    // Element j of the run (k_d for strided loads) of value v's buffer.
    static std::string index_text(const LoadPlan& p) {
        std::string index = p.base + mid_terms(p);
        if (p.kind == LoadKind::contiguous) index += " + j";
        if (p.kind == LoadKind::strided)
            for (const auto& [dim, stride] : p.inner)
                index += " + k" + std::to_string(dim) + " * " + to_cpp(stride);
        if (index.rfind("0 + ", 0) == 0) index = index.substr(4);
        return index;
    }

    std::string load_text(int v, const LoadPlan& p, bool vec) const {
        if (tile_ && vec &&
            !is_constant(v)) {  // lanes across rows: contiguous along them, or one value
            std::string ptr = s_.value_name(s_.values.at(v).access.buffer) + "_ptr",
                        index = index_text(p);
            bool is_bool = dtype(v) == DType::boolean;
            if (p.last_row_stride == SizeExpr{1, {}})
                return (is_bool ? "load_bool(" : "B::load_unaligned(") + ptr + " + " + index + ")";
            return (is_bool ? "BB(" : "B(") + ptr + "[" + index + "])";
        }
        if (is_constant(v)) {
            const LNode& n = node(s_.producer.at(v));
            std::string value = n.out.dtype == DType::boolean ? (n.attrs.scalar != 0 ? "true" : "false")
                                                              : scalar_literal(n.attrs.scalar, n.out.dtype);
            return vec ? (n.out.dtype == DType::boolean ? "BB(" : "B(") + value + ")" : value;
        }
        std::string ptr = s_.value_name(s_.values.at(v).access.buffer) + "_ptr";
        std::string index = index_text(p);
        if (!vec) return ptr + "[" + index + "]";
        bool is_bool = dtype(v) == DType::boolean;
        if (p.kind == LoadKind::contiguous)
            return (is_bool ? "load_bool(" : "B::load_unaligned(") + ptr + " + " + index + ")";
        return (is_bool ? "BB(" : "B(") + ptr + "[" + index + "])";
    }


    // One loop along the row: computes `reductions` and writes `stores` (element values).
    void emit_pass(const std::string& ind, const std::vector<int>& reductions, const std::vector<int>& stores,
                   const std::string& from, const std::string& to) {
        std::vector<int> targets = reductions;
        for (int v : stores) targets.push_back(s_.producer.at(v));
        std::vector<int> body = element_closure(targets);
        std::string names;
        for (int t : targets) names += " " + s_.value_name(node(t).out.id);
        os_ << ind << (flat_ ? "// loop computing" : "// pass along the row computing") << names << "\n";
        for (int r : reductions) {
            std::string name = s_.value_name(node(r).out.id);
            std::string init = reduction_of(node(r).op, node(r).out.dtype).init;
            if (vector_) os_ << ind << "B " << name << "_vec(" << init << ");\n";
            os_ << ind << cpp_type(node(r).out.dtype) << " " << name << " = " << init << ";\n";
        }
        std::string in = ind;
        if (run_from_ > outer_) {  // one run at a time: the mid dims' k_d once per run
            os_ << ind << "for (int64_t mid = 0; mid < mid_size; ++mid) {\n";
            in = ind + "    ";
            os_ << in << "int64_t rest_m = mid;\n";
            for (int d = run_from_ - 1; d > outer_; --d)
                os_ << in << "const int64_t k" << d << " = rest_m % "
                    << to_cpp(size_expr(k_.domain[d]))
                    << "; rest_m /= " << to_cpp(size_expr(k_.domain[d])) << ";\n";
            os_ << in << "const int64_t k" << outer_ << " = rest_m;\n";
        }
        if (vector_) {
            os_ << in << "for (int64_t j = " << from << "; j < vec_end; j += W) {\n";
            emit_loop_body(in + "    ", body, reductions, stores, true);
            os_ << in << "}\n";
        }
        os_ << in << "for (int64_t j = " << (vector_ ? "vec_end" : from) << "; j < " << to
            << "; ++j) {\n";
        emit_loop_body(in + "    ", body, reductions, stores, false);
        os_ << in << "}\n";
        if (run_from_ > outer_) os_ << ind << "}\n";
        for (int r : reductions) {
            std::string name = s_.value_name(node(r).out.id);
            if (vector_)
                os_ << ind << name << " = " << reduction_of(node(r).op, node(r).out.dtype).fold
                    << "(" << name << "_vec, " << name << ");\n";
            emit_row_store(ind, node(r).out.id);
        }
    }

    void emit_loop_body(const std::string& ind, const std::vector<int>& body,
                        const std::vector<int>& reductions, const std::vector<int>& stores,
                        bool vec) {
        if (strided_ && rank_ - outer_ > 1) {  // strided loads need the index within the row
            os_ << ind << "int64_t rest_j = j;\n";
            for (int d = rank_ - 1; d > outer_; --d)
                os_ << ind << "const int64_t k" << d << " = rest_j % " << to_cpp(size_expr(k_.domain[d])) << "; rest_j /= "
                    << to_cpp(size_expr(k_.domain[d])) << ";\n";
            os_ << ind << "const int64_t k" << outer_ << " = rest_j;\n";
        } else if (strided_ && rank_ > outer_) {
            os_ << ind << "const int64_t k" << outer_ << " = j;\n";
        }
        std::set<int> loaded;
        auto load = [&](int v) {
            if (in_kernel(v) || !loaded.insert(v).second) return;
            os_ << ind << "auto " << s_.value_name(v) << " = " << load_text(v, plan_load(v, rank_, false), vec) << ";\n";
        };
        std::vector<int> all = body;
        all.insert(all.end(), reductions.begin(), reductions.end());
        for (int index : all)
            for (int v : node(index).inputs) load(v);
        for (int index : body)
            os_ << ind << "auto " << s_.value_name(node(index).out.id) << " = " << expression(node(index), vec, true) << ";\n";
        for (int r : reductions) {
            std::string acc = s_.value_name(node(r).out.id) + (vec ? "_vec" : "");
            std::string x = operand(node(r).inputs[0], vec, true);
            if (dtype(node(r).inputs[0]) !=
                node(r).out.dtype)  // a sum of bools counts them in int64
                x = std::string("convert<") + cpp_type(node(r).out.dtype) + ">(" + x + ")";
            Reduction red = reduction_of(node(r).op, node(r).out.dtype);
            std::string tile = s_.value_name(node(r).out.id) + "_tile";
            if (tile_ && vec)
                os_ << ind << "(" << red.update("B::load_unaligned(" + tile + " + t)", x)
                    << ").store_unaligned(" << tile << " + t);\n";
            else if (tile_)
                os_ << ind << tile << "[t] = " << red.update(tile + "[t]", x) << ";\n";
            else
                os_ << ind << acc << " = " << red.update(acc, x) << ";\n";
        }
        for (int v : stores) {
            std::string at =
                index_text(plan_load(v, rank_, false));  // strided in a permuted row kernel
            std::string ptr = s_.value_name(v) + "_ptr";
            if (vec && dtype(v) == DType::boolean)
                os_ << ind << "store_bool(" << s_.value_name(v) << ", " << ptr << " + " << at
                    << ");\n";
            else if (vec)
                os_ << ind << s_.value_name(v) << ".store_unaligned(" << ptr << " + " << at
                    << ");\n";
            else
                os_ << ind << ptr << "[" << at << "] = " << s_.value_name(v) << ";\n";
        }
    }

    void emit_row_store(const std::string& ind, int v) {
        if (std::find(k_.stores.begin(), k_.stores.end(), v) == k_.stores.end()) return;
        LoadPlan p = plan_load(v, s_.value(v).shape.size(), true);
        os_ << ind << s_.value_name(v) << "_ptr[" << p.base << "] = " << s_.value_name(v) << ";\n";
    }

    // A value computed once per row (a reduction's result, or math on such results).
    void emit_per_row_node(const std::string& ind, int index) {
        const LNode& n = node(index);
        for (int v : n.inputs) {
            if (in_kernel(v) || !row_scope_loads_.insert(v).second) continue;
            LoadPlan p = plan_load(v, n.out.shape.size(), true);
            os_ << ind << "const " << cpp_type(dtype(v)) << " " << s_.value_name(v) << " = "
                << load_text(v, p, false) << ";\n";
        }
        os_ << ind << "const auto " << s_.value_name(n.out.id) << " = " << expression(n, false, false) << ";\n";
        emit_row_store(ind, n.out.id);
    }

    // ---- tiles of rows (lanes across rows)

    // Whether every load and store is contiguous along the last row dim, or one value along
    // it (some contiguous), and the kernel is one pass (its reductions and element stores read
    // no per-row value) followed by per-row values.
    bool tile_fits() const {
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
                if (per_row(v)) return false;
        return contiguous;
    }

    // A column sum walks each row (a column) with a large stride; a tile walks kTile columns
    // side by side instead, so each step along the row reads consecutive memory, W lanes at a
    // time, as eager's reduce_columns does.
    void emit_tile_rows() {
        int o = outer_ - 1;
        std::string size_o = to_cpp(size_expr(k_.domain[o]));
        std::vector<int> reductions, stores;
        for (int index : k_.nodes)
            if (is_reduction(index)) reductions.push_back(index);
        for (int v : k_.stores)
            if (!per_row(v)) stores.push_back(v);
        std::vector<int> targets = reductions;
        for (int v : stores) targets.push_back(s_.producer.at(v));
        std::vector<int> body = element_closure(targets);
        os_ << "    const int64_t row_size = " << product_cpp(k_.domain, outer_, rank_) << ";\n";
        for (int r : reductions)
            os_ << "    " << cpp_type(node(r).out.dtype) << " " << s_.value_name(node(r).out.id)
                << "_tile[" << kTile << "];\n";
        os_ << "    for (int64_t row = begin; row < end;) {  // rows i" << o
            << " = first .. first + lanes - 1\n";
        os_ << "        [[maybe_unused]] int64_t rest = row;\n";
        os_ << "        const int64_t first = rest % " << size_o << "; rest /= " << size_o << ";\n";
        for (int d = o - 1; d > 0; --d)
            os_ << "        const int64_t i" << d << " = rest % " << to_cpp(size_expr(k_.domain[d]))
                << "; rest /= " << to_cpp(size_expr(k_.domain[d])) << ";\n";
        if (o > 0) os_ << "        const int64_t i0 = rest;\n";
        os_ << "        const int64_t lanes = std::min<int64_t>({" << kTile << ", end - row, "
            << size_o << " - first});\n";
        for (int r : reductions)
            os_ << "        for (int64_t t = 0; t < lanes; ++t) " << s_.value_name(node(r).out.id)
                << "_tile[t] = " << reduction_of(node(r).op, node(r).out.dtype).init << ";\n";
        os_ << "        // pass along the rows\n";
        os_ << "        for (int64_t j = 0; j < row_size; ++j) {\n";
        os_ << "            int64_t t = 0;\n";
        if (float32_) {
            os_ << "            for (; t + W <= lanes; t += W) {\n";
            os_ << "                const int64_t i" << o << " = first + t;\n";
            emit_loop_body("                ", body, reductions, stores, true);
            os_ << "            }\n";
        }
        os_ << "            for (; t < lanes; ++t) {\n";
        os_ << "                const int64_t i" << o << " = first + t;\n";
        emit_loop_body("                ", body, reductions, stores, false);
        os_ << "            }\n";
        os_ << "        }\n";
        os_ << "        for (int64_t t = 0; t < lanes; ++t) {  // per-row values\n";
        os_ << "            const int64_t i" << o << " = first + t;\n";
        row_scope_loads_.clear();
        for (int r : reductions) {
            std::string name = s_.value_name(node(r).out.id);
            os_ << "            const " << cpp_type(node(r).out.dtype) << " " << name << " = "
                << name << "_tile[t];\n";
            emit_row_store("            ", node(r).out.id);
        }
        for (int index : k_.nodes)
            if (!is_reduction(index) && per_row(node(index).out.id))
                emit_per_row_node("            ", index);
        os_ << "        }\n";
        os_ << "        row += lanes;\n";
        os_ << "    }\n";
    }

    // Reductions are grouped into one pass while none needs another's result.
    void emit_row_body(const std::string& ind, const std::string& from, const std::string& to) {
        row_scope_loads_.clear();
        std::vector<int> pending;
        std::set<int> pending_values;
        auto flush = [&] {
            if (!pending.empty()) emit_pass(ind, pending, {}, from, to);
            pending.clear(), pending_values.clear();
        };
        for (int index : k_.nodes) {
            int out = node(index).out.id;
            if (is_reduction(index)) {
                std::vector<int> needs = element_closure({index});
                needs.push_back(index);
                if (reads_any(needs, pending_values)) flush();
                pending.push_back(index), pending_values.insert(out);
            } else if (per_row(out)) {
                if (reads_any({index}, pending_values)) flush();
                emit_per_row_node(ind, index);
            }
        }
        std::vector<int> stores;
        for (int v : k_.stores)
            if (!per_row(v)) stores.push_back(v);
        std::vector<int> store_nodes;
        for (int v : stores) store_nodes.push_back(s_.producer.at(v));
        if (!stores.empty() && !reads_any(element_closure(store_nodes), pending_values)) {
            emit_pass(ind, pending, stores, from, to);
            return;
        }
        flush();
        if (!stores.empty()) emit_pass(ind, {}, stores, from, to);
    }
};

void emit_schedule(const Schedule& s, std::ostream& os, SeenKernels& seen) {
    os << "// ---- graph" << (s.prefix.empty() ? "" : " " + s.prefix) << ": " << s.graph.nodes.size() << " nodes, "
       << s.kernels.size() << " kernels\n";
    SameCode same_code(s);
    for (size_t k = 0; k < s.kernels.size(); ++k) {
        const Kernel& kernel = s.kernels[k];
        if (kernel.kind == KernelKind::pointwise || kernel.kind == KernelKind::row) {
            std::ostringstream text;
            KernelEmitter(s, int(k), text).emit();
            std::string name = s.kernel_name(int(k));
            auto [first, fresh] = seen.try_emplace(same_code.canonical(int(k), text.str()), name);
            if (fresh) {
                os << text.str();
            } else {
                os << "// " << name << ": the same code as " << first->second << ", on its own buffers\n"
                   << "extern \"C\" void " << name << "(float* const* buffers, const int64_t* symbols, ParallelFn parallel) {\n"
                   << "    " << first->second << "(buffers, symbols, parallel);\n}\n";
                if (kernel.epilogue_of >= 0)  // the first is an epilogue too: its text had the same entry
                    os << "extern \"C\" void " << name
                       << "_rows(float* const* buffers, const int64_t* symbols, int64_t row_begin, int64_t row_end) {\n"
                       << "    " << first->second << "_rows(buffers, symbols, row_begin, row_end);\n}\n";
                os << "\n";
            }
        } else {
            std::string blas = " runs on the host (cblas_sgemm)";
            if (s.has_epilogue(int(k)))
                blas +=
                    " by blocks of rows, each followed by " + s.kernel_name(int(k) + 1) + "_rows";
            os << "// " << s.kernel_name(int(k)) << ": "
               << s.value_name(s.graph.nodes[kernel.nodes[0]].out.id)
               << (kernel.kind == KernelKind::blas
                       ? blas + "\n\n"
                       : " runs on the host (eager dispatcher): " + kernel.why + "\n\n");
        }
    }
}

}  // namespace

std::string emit(const std::vector<const Schedule*>& schedules) {
    std::ostringstream os;
    os << "// Generated by kiln (codegen/emit_cpp.cpp). One function per kernel; see docs/codegen.md.\n";
    os << kPrelude << reduction_fold_helpers();
    SeenKernels seen;
    for (const Schedule* s : schedules) emit_schedule(*s, os, seen);
    os << "}  // namespace kiln_math\n";
    return os.str();
}

std::string emit(const Schedule& schedule) { return emit(std::vector<const Schedule*>{&schedule}); }

}  // namespace kiln::codegen
