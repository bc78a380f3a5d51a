// The CUDA emitter. It reads the scheduler's kernels exactly as the C++ emitter does (same
// homes, same accesses, same passes along a row) and writes CUDA C++: where the CPU code
// hands chunks of a loop to a thread pool and vectorizes with xsimd, the GPU code gives each
// thread a strided share of the loop, vectorizes contiguous loads with float4, and combines
// a row's partial reductions across the thread block with warp shuffles. It is the CUDA
// dialect of the emitter core (emit_core.h), which writes the statements, the order of a row's
// passes and the deduplication of repeated kernels; this file writes the float4 groups, split
// rows and register-cached rows. What it writes as the eager CUDA kernels (its first rung,
// emit_eager_cuda.cpp) write it — statements, grid-stride and row loops, block-wide
// combines — comes from cuda_dialect.h.
#include "codegen/emit_cuda.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <sstream>

#include "codegen/cuda_dialect.h"
#include "codegen/emit_core.h"
#include "codegen/register_row.h"
#include "tensor/error.h"
#include "tensor/kernels.h"
#include "tensor/reductions.h"

namespace kiln::codegen {

namespace {

// How the source names a kernel that repeats an earlier one's code (cuda_kernel_entry reads it).
constexpr const char* kSameCodeAs = ": the same code as ";
// Where the kernels begin and end, and how each begins after its comment line
// (split_cuda_source cuts there).
constexpr const char* kKernelsBegin = "// ---- kernels\n";
constexpr const char* kKernelsEnd = "}  // namespace kiln_math\n";
constexpr const char* kKernelHead = "extern \"C\" __global__ void ";

using namespace emit_detail;

std::string strip_zero(std::string index) {
    if (index.rfind("0 + ", 0) == 0) index = index.substr(4);
    return index;
}

class CudaKernelEmitter : KernelEmitterCore {
   public:
    CudaKernelEmitter(const Schedule& s, int index, std::ostream& os)
        : KernelEmitterCore(
              s, index, s.kernels[index].kind == KernelKind::row ? s.kernels[index].outer_dims : 0,
              os),
          row_(k_.kind == KernelKind::row) {}

    void emit() {
        bool all_contiguous = true;
        for (const LoadPlan& p : element_loads()) all_contiguous = all_contiguous && p.kind != LoadKind::strided;
        float_arrays_ = all_float32();  // float4 groups: every array float32
        for (int v : k_.args()) float_arrays_ = float_arrays_ && dtype(v) == DType::float32;
        vec4_ = !row_ && all_contiguous && rank_ > 0 && float_arrays_;
        std::string name = s_.kernel_name(index_);
        os_ << "// " << name << ": " << describe() << "\n";
        os_ << "extern \"C\" __global__ void " << name << "(";
        std::vector<int> args = k_.args();
        for (size_t i = 0; i < args.size(); ++i) {
            bool out = i >= k_.loads.size();
            os_ << (i ? ", " : "") << (out ? "" : "const ") << cuda_c_type(dtype(args[i])) << "* __restrict__ " << s_.value_name(args[i])
                << "_ptr";
        }
        for (int k = 0; k < s_.num_symbols; ++k) os_ << (args.empty() && k == 0 ? "" : ", ") << "long long s" << k;
        if (split_reductions()) os_ << ", float* __restrict__ partials, unsigned int* __restrict__ counters, long long splits";
        os_ << ") {\n";
        if (row_) emit_row_kernel();
        else emit_pointwise_kernel();
        os_ << "}\n\n";
    }

   private:
    bool row_ = false;
    bool vec4_ = false;  // pointwise, every array contiguous: a float4 path
    bool float_arrays_ = true;  // every value and array float32 (or bool values): float4 possible
    // Row kernels whose passes read a value more than once keep a thread's share of the row
    // in registers when it fits (codegen/register_row.h): one read from memory, one write.
    RegisterRow regs_;
    bool caching_ = false;  // emitting the register variant
    std::set<int> cached_;  // values in registers now: the fill's, and those kept so far

    std::string describe() const {
        if (row_)
            return std::string(split_reductions() ? "row, a row split over `splits` blocks" : "row, one block per row") + ": " +
                   product_cpp(k_.domain, 0, outer_) + " rows of " + product_cpp(k_.domain, outer_, rank_);
        return "pointwise over " + product_cpp(k_.domain, 0, rank_) + " elements" + (vec4_ ? " (float4 when aligned)" : float_arrays_ ? " (strided loads)" : " (not every array float32)");
    }

    // ---- what the core asks of this dialect

    const char* type(DType d) const override { return cuda_c_type(d); }
    const char* type(int v) const { return cuda_c_type(dtype(v)); }
    const char* index_type() const override { return "long long"; }
    std::string special_literal(double value, DType d) const override {
        if (d == DType::float64) {
            if (std::isnan(value)) return "__longlong_as_double(0x7ff8000000000000LL)";
            return value > 0 ? "infinity<double>()" : "(-infinity<double>())";
        }
        if (std::isnan(value)) return "__int_as_float(0x7fc00000)";
        return value > 0 ? "__int_as_float(0x7f800000)" : "__int_as_float(0xff800000)";
    }
    // As the eager CUDA kernel converts a scalar ((T)scalar).
    std::string int64_literal(double value) const override {
        if (!(value >= -9223372036854775808.0 && value < 9223372036854775808.0))
            return "(-9223372036854775807LL - 1)";
        return "(" + std::to_string(int64_t(value)) + "LL)";
    }
    std::string reduction_identity(OpId op, DType d) const override {
        return kiln::reduction_identity(op, d);
    }
    // Statements as the eager CUDA kernels spell them (cuda_dialect.h).
    std::string convert(const std::string& x, DType to) const override {
        return CudaSpelling().convert(x, to);
    }
    std::string select(const std::string& c, const std::string& a,
                       const std::string& b) const override {
        return CudaSpelling().select(c, a, b);
    }
    std::string result(const std::string& math, OpId op, DType compute) const override {
        return CudaSpelling().result(math, op, compute);
    }
    std::string declare(int v, bool) const override {
        return std::string("const ") + type(v) + " ";
    }
    const char* row_store_guard() const override { return "if (threadIdx.x == 0) "; }

    // One element j's load of v: lane c of a float4 group (`lane`: contiguous loads and stores
    // go through the group's arrays), from the row's registers, or from memory.
    void emit_load(const std::string& ind, int v, const LoadPlan& p, bool lane) override {
        std::string name = s_.value_name(v);
        std::string decl = std::string("const ") + type(v) + " " + name + " = ";
        if (is_constant(v))
            os_ << ind << decl << constant_text(v) << ";\n";
        else if (!caching_ && lane && p.kind == LoadKind::contiguous)
            os_ << ind << decl << name << "_v[c];\n";
        else if (cached_.count(v))
            os_ << ind << decl << name << "_c[g * 4 + c];\n";
        else if (caching_ && lane && group_array(v))
            os_ << ind << decl << name << "_v[c];\n";
        else
            os_ << ind << decl << ptr(v) << "[" << index_text(p) << "];\n";
    }

    void emit_reduction_update(const std::string& ind, int r, bool) override {
        const LNode& n = node(r);
        std::string acc = s_.value_name(n.out.id), x = s_.value_name(n.inputs[0]);
        if (dtype(n.inputs[0]) != n.out.dtype || n.out.dtype == DType::boolean)
            x = std::string("((") + block_combine(n.op, n.out.dtype).acc + ")" + x + ")";
        os_ << ind << acc << " = " << reduction_combine(n.op, acc, x) << ";\n";
    }

    void emit_store(const std::string& ind, int v, bool lane) override {
        if (lane && (!caching_ || group_array(v)))
            os_ << ind << s_.value_name(v) << "_v[c] = " << s_.value_name(v) << ";\n";
        else
            os_ << ind << s_.value_name(v) << "_ptr[" << index_text(plan_load(v, rank_, false))
                << "] = " << s_.value_name(v) << ";\n";
    }

    void emit_pointwise_kernel() {
        std::vector<int> stores = k_.stores;
        std::vector<int> store_nodes;
        for (int v : stores) store_nodes.push_back(s_.producer.at(v));
        std::vector<int> body = element_closure(store_nodes);
        os_ << "    const long long n = " << product_cpp(k_.domain, 0, rank_) << ";\n";
        os_ << grid_stride_head("    ");
        if (vec4_) {
            // Contiguous arrays: groups of four elements, when every array's start is 16-byte aligned.
            std::vector<std::pair<int, LoadPlan>> arrays;
            std::set<int> seen;
            for (int index : body)
                for (int v : node(index).inputs)
                    if (!in_kernel(v) && seen.insert(v).second) arrays.push_back({v, plan_load(v, rank_, false)});
            for (int v : stores) arrays.push_back({v, plan_load(v, rank_, false)});
            os_ << "    bool aligned = true;\n";
            for (const auto& [v, p] : arrays)
                if (p.kind == LoadKind::contiguous)
                    os_ << "    aligned = aligned && ((unsigned long long)(" << ptr(v) << " + " << p.base << ") % 16 == 0);\n";
            os_ << "    if (aligned) {\n";
            os_ << "        for (long long q = first; q < n / 4; q += step) {\n";
            os_ << "            const long long j0 = q * 4;\n";
            for (const auto& [v, p] : arrays) {
                bool is_store = std::find(stores.begin(), stores.end(), v) != stores.end();
                if (is_store) os_ << "            float " << s_.value_name(v) << "_v[4];\n";  // every store: written at the loop index
                else if (p.kind == LoadKind::contiguous)
                    os_ << "            const float4 " << s_.value_name(v) << "_q = *reinterpret_cast<const float4*>(" << ptr(v) << " + "
                        << strip_zero(p.base + " + j0") << ");\n"
                        << "            const float " << s_.value_name(v) << "_v[4] = {" << s_.value_name(v) << "_q.x, " << s_.value_name(v)
                        << "_q.y, " << s_.value_name(v) << "_q.z, " << s_.value_name(v) << "_q.w};\n";
            }
            os_ << "#pragma unroll\n";
            os_ << "            for (int c = 0; c < 4; ++c) {\n";
            os_ << "                [[maybe_unused]] const long long j = j0 + c;\n";
            emit_element("                ", body, {}, stores, true);
            os_ << "            }\n";
            for (int v : stores) {
                std::string name = s_.value_name(v);
                os_ << "            *reinterpret_cast<float4*>(" << name << "_ptr + " << strip_zero(plan_load(v, rank_, false).base + " + j0")
                    << ") = make_float4(" << name << "_v[0], " << name << "_v[1], " << name << "_v[2], " << name << "_v[3]);\n";
            }
            os_ << "        }\n";
            os_ << "        first += n / 4 * 4;  // the tail, one element at a time\n";
            os_ << "    }\n";
        }
        os_ << "    for (long long j = first; j < n; j += step) {\n";
        emit_element("        ", body, {}, stores, false);
        os_ << "    }\n";
    }

    // ---- row kernels

    // One loop along the row, each thread taking every blockDim.x-th element (or, in the
    // register variant, its groups of the row): folds `reductions` (then combined across the
    // block) and writes `stores`.
    void emit_pass(const std::string& ind, const std::vector<int>& reductions,
                   const std::vector<int>& stores, bool split = false) {
        std::string names;
        std::vector<int> body = pass_body(reductions, stores, names);
        os_ << ind << "// pass along the row computing" << names << "\n";
        for (int r : reductions)
            os_ << ind << block_combine(node(r).op, node(r).out.dtype).acc << " "
                << s_.value_name(node(r).out.id) << " = "
                << reduction_identity(node(r).op, node(r).out.dtype) << ";\n";
        if (caching_) {
            emit_register_pass(ind, reductions, stores);
        } else {
            os_ << row_pass_head(ind);
            emit_element(ind + "    ", body, reductions, stores, false);
            os_ << ind << "}\n";
        }
        for (int r : reductions) {
            std::string name = s_.value_name(node(r).out.id);
            BlockCombine block = block_combine(node(r).op, node(r).out.dtype);
            os_ << ind << name << " = " << block.combine << "(" << name << ", " << block.shared
                << ");\n";
            if (!split) emit_row_store(ind, node(r).out.id);
        }
    }

   public:
    // A kernel whose only pass comes first (then per-row values alone) can split each row
    // over several blocks: each folds its slice, and the last block of a row to finish
    // combines the slices' partials in a fixed order. The number of reductions, or 0.
    int split_reductions() const {
        if (k_.kind != KernelKind::row) return 0;
        std::vector<Step> steps = row_steps();
        size_t passes = 0, first = steps.size();
        for (size_t i = 0; i < steps.size(); ++i)
            if (steps[i].pass) passes += 1, first = std::min(first, i);
        if (passes != 1 || steps[first].reductions.empty()) return 0;
        for (int r : steps[first].reductions)  // the partials are float
            if (node(r).out.dtype != DType::float32) return 0;
        for (size_t i = 0; i < first; ++i)  // per-row values before it read only row constants: fine
            if (steps[i].pass) return 0;
        return int(steps[first].reductions.size());
    }

   private:
    void emit_row_kernel() {
        std::vector<Step> steps = row_steps();
        int split = split_reductions();
        os_ << "    " << shared_slots("shared");
        std::set<std::string> slots;  // 64-bit and int accumulators combine through their own slots
        for (int index : k_.nodes)
            if (is_reduction(index))
                slots.insert(block_combine(node(index).op, node(index).out.dtype).shared);
        for (const std::string& slot : slots)
            if (slot != "shared") os_ << "    " << shared_slots(slot.c_str());
        os_ << "    const long long rows = " << product_cpp(k_.domain, 0, outer_) << ";\n";
        os_ << "    const long long row_size = " << product_cpp(k_.domain, outer_, rank_) << ";\n";
        std::string ind = "        ";
        if (split) os_ << "    __shared__ bool last_slice;\n";
        os_ << row_loop_head("    ", split != 0);
        os_ << ind << "[[maybe_unused]] long long rest = row;\n";
        if (outer_ > 0) emit_split(ind, "rest", 'i', outer_ - 1, 0);
        regs_ = split ? RegisterRow{} : plan_register_row(s_, index_, steps);
        if (regs_.groups == 0) {
            emit_row_steps(ind, steps, split);
        } else {
            emit_register_variant(ind, steps);
            os_ << ind << "} else {  // a long row: each pass reads it again\n";
            emit_row_steps(ind + "    ", steps, split);
            os_ << ind << "}\n";
        }
        os_ << "    }\n";
    }

    void emit_row_steps(const std::string& ind, const std::vector<Step>& steps, int split) {
        row_scope_loads_.clear();
        for (const Step& st : steps) {
            if (!st.pass) {
                emit_per_row_node(ind, st.node);
                continue;
            }
            emit_pass(ind, st.reductions, st.stores, split != 0);
            if (split) emit_split_combine(ind, st.reductions);
        }
    }

    // ---- the register variant (codegen/register_row.h): thread t holds groups g of four
    // consecutive elements, j0 = 4 * (t + g * blockDim.x); a value's register c of group g
    // is name_c[g * 4 + c]. Loads and stores contiguous along the row move a group at a time
    // through name_v[4] (one float4 when every float32 array's row is 16-byte aligned and the
    // group is whole); strided ones go element by element.

    bool group_array(int v) const {
        return !is_constant(v) && plan_load(v, rank_, false).kind == LoadKind::contiguous;
    }
    bool float4_array(int v) const { return group_array(v) && dtype(v) == DType::float32; }

    // The arrays `nodes` read along the row and not from registers, each once, in order.
    std::vector<int> pass_loads(const std::vector<int>& nodes) const {
        std::vector<int> out;
        for (int index : nodes)
            for (int v : node(index).inputs)
                if (!in_kernel(v) && !cached_.count(v) && group_array(v) &&
                    std::find(out.begin(), out.end(), v) == out.end())
                    out.push_back(v);
        return out;
    }

    // Opens `if (the row fits) {` and writes its body; the caller writes the `else` branch.
    void emit_register_variant(const std::string& ind, const std::vector<Step>& steps) {
        std::string in = ind + "    ";
        int slots = 4 * regs_.groups;
        os_ << ind << "if (row_size <= " << slots
            << " * (long long)blockDim.x) {  // the row in registers: one read, one write\n";
        std::set<int> arrays;  // every float32 array that moves as float4
        for (int index : k_.nodes)
            for (int v : node(index).inputs)
                if (!in_kernel(v) && float4_array(v)) arrays.insert(v);
        for (int v : k_.stores)
            if (!per_row(v) && float4_array(v)) arrays.insert(v);
        os_ << in << "bool aligned = true;  // each float4 array's row starts on 16 bytes\n";
        for (int v : arrays) {
            std::string p = in_kernel(v) ? s_.value_name(v) + "_ptr" : ptr(v);
            os_ << in << "aligned = aligned && ((unsigned long long)(" << p << " + "
                << plan_load(v, rank_, false).base << ") % 16 == 0);\n";
        }
        std::set<int> held = regs_.cache;
        held.insert(regs_.kept.begin(), regs_.kept.end());
        for (int v : held)
            os_ << in << type(v) << " " << s_.value_name(v) << "_c[" << slots << "];\n";
        emit_row_fill(in);
        caching_ = true;
        cached_ = regs_.cache;
        emit_row_steps(in, steps, 0);
        caching_ = false;
        cached_.clear();
    }

    // The head of the loop over a thread's groups, opened; `vec4`: this group moves as float4.
    void open_groups(const std::string& ind, const char* comment) {
        os_ << ind << "#pragma unroll\n";
        os_ << ind << "for (int g = 0; g < " << regs_.groups << "; ++g) {" << comment << "\n";
        // 32-bit: the row fits the block's registers (int j saves 64-bit address math)
        os_ << ind << "    const int j0 = 4 * int(threadIdx.x + g * blockDim.x);\n";
        os_ << ind << "    if (j0 >= j_end) break;\n";
        os_ << ind << "    [[maybe_unused]] const bool vec4 = aligned && j0 + 4 <= j_end;\n";
    }

    // A group's loads of `arrays` into name_v[4] (past the row's end: zero).
    void emit_group_loads(const std::string& ind, const std::vector<int>& arrays) {
        for (int v : arrays) os_ << ind << type(v) << " " << s_.value_name(v) << "_v[4];\n";
        emit_group_moves(ind, arrays, /*store=*/false);
    }

    // A group's stores from name_v[4].
    void emit_group_stores(const std::string& ind, const std::vector<int>& stores) {
        std::vector<int> arrays;
        for (int v : stores)
            if (group_array(v)) arrays.push_back(v);
        emit_group_moves(ind, arrays, /*store=*/true);
    }

    // Moves a group's 4 elements of each array between memory and name_v[4]: float4 when the
    // array allows and the group is aligned and whole (`vec4`), else element by element.
    void emit_group_moves(const std::string& ind, const std::vector<int>& arrays, bool store) {
        std::vector<int> floats, others;
        for (int v : arrays) (float4_array(v) ? floats : others).push_back(v);
        auto at = [&](int v) { return index_text(plan_load(v, rank_, false)); };
        auto scalar_loop = [&](const std::string& in, const std::vector<int>& vs) {
            os_ << in << "#pragma unroll\n";
            os_ << in << "for (int c = 0; c < 4; ++c) {\n";
            os_ << in << "    const int j = j0 + c;\n";
            if (store) os_ << in << "    if (j >= j_end) break;\n";
            for (int v : vs) {
                std::string name = s_.value_name(v);
                if (store)
                    os_ << in << "    " << name << "_ptr[" << at(v) << "] = " << name << "_v[c];\n";
                else
                    os_ << in << "    " << name << "_v[c] = j < j_end ? " << ptr(v) << "[" << at(v)
                        << "] : (" << type(v) << ")0;\n";
            }
            os_ << in << "}\n";
        };
        if (!floats.empty()) {
            os_ << ind << "if (vec4) {\n";
            os_ << ind << "    const int j = j0;\n";
            for (int v : floats) {
                std::string name = s_.value_name(v);
                if (store)
                    os_ << ind << "    *reinterpret_cast<float4*>(&" << name << "_ptr[" << at(v)
                        << "]) = make_float4(" << name << "_v[0], " << name << "_v[1], " << name
                        << "_v[2], " << name << "_v[3]);\n";
                else
                    os_ << ind << "    const float4 " << name
                        << "_q = *reinterpret_cast<const float4*>(&" << ptr(v) << "[" << at(v)
                        << "]);\n"
                        << ind << "    " << name << "_v[0] = " << name << "_q.x, " << name
                        << "_v[1] = " << name << "_q.y, " << name << "_v[2] = " << name << "_q.z, "
                        << name << "_v[3] = " << name << "_q.w;\n";
            }
            os_ << ind << "} else {\n";
            scalar_loop(ind + "    ", floats);
            os_ << ind << "}\n";
        }
        if (!others.empty()) scalar_loop(ind, others);
    }

    // Element j of the group, when inside the row: the caller writes its body.
    void open_element(const std::string& ind) {
        os_ << ind << "#pragma unroll\n";
        os_ << ind << "for (int c = 0; c < 4; ++c) {\n";
        os_ << ind << "    const int j = j0 + c;\n";
        os_ << ind << "    if (j >= j_end) break;\n";
    }

    // Values in registers that `nodes` (or the stores) read and the pass does not compute.
    void emit_register_reads(const std::string& ind, const std::vector<int>& nodes,
                             const std::vector<int>& stores) {
        std::vector<int> wanted = stores;
        for (int index : nodes)
            for (int v : node(index).inputs) wanted.push_back(v);
        std::set<int> done;
        for (int v : wanted)
            if (in_kernel(v) && cached_.count(v) && done.insert(v).second)
                os_ << ind << "const " << type(v) << " " << s_.value_name(v) << " = "
                    << s_.value_name(v) << "_c[g * 4 + c];\n";
    }

    // The loads before any pass, with no use between them, so a thread's loads are all in
    // flight at once; then the prologue computed from them, into registers.
    void emit_row_fill(const std::string& ind) {
        std::vector<int> targets, loads;
        for (int v : regs_.cache)
            if (in_kernel(v))
                targets.push_back(s_.producer.at(v));
            else
                loads.push_back(v);
        std::vector<int> body = element_closure(targets);
        std::vector<int> arrays = pass_loads(body);
        for (int v : loads)
            if (group_array(v) && std::find(arrays.begin(), arrays.end(), v) == arrays.end())
                arrays.push_back(v);
        open_groups(ind, "  // the row's loads, all in flight");
        emit_group_loads(ind + "    ", arrays);
        open_element(ind + "    ");
        std::string in = ind + "        ";
        emit_element(in, body, {}, {}, true);
        std::set<int> loaded;
        for (int index : body)
            for (int v : node(index).inputs) loaded.insert(v);
        for (int v : loads)
            if (!loaded.count(v)) emit_load(in, v, plan_load(v, rank_, false), true);
        for (int v : regs_.cache)
            os_ << in << s_.value_name(v) << "_c[g * 4 + c] = " << s_.value_name(v) << ";\n";
        os_ << ind << "    }\n";
        os_ << ind << "}\n";
    }

    void emit_register_pass(const std::string& ind, const std::vector<int>& reductions,
                            const std::vector<int>& stores) {
        std::vector<int> targets = reductions;
        for (int v : stores) targets.push_back(s_.producer.at(v));
        std::vector<int> body = element_closure(targets, cached_);
        std::vector<int> nodes = body;
        nodes.insert(nodes.end(), reductions.begin(), reductions.end());
        open_groups(ind, "");
        emit_group_loads(ind + "    ", pass_loads(nodes));
        for (int v : stores)
            if (group_array(v))
                os_ << ind << "    " << type(v) << " " << s_.value_name(v) << "_v[4];\n";
        open_element(ind + "    ");
        std::string in = ind + "        ";
        emit_register_reads(in, nodes, stores);
        emit_element(in, body, reductions, stores, true);
        std::vector<int> kept;
        for (int index : body)
            if (regs_.kept.count(node(index).out.id)) kept.push_back(node(index).out.id);
        for (int v : kept)
            os_ << in << s_.value_name(v) << "_c[g * 4 + c] = " << s_.value_name(v)
                << ";  // kept for a later pass\n";
        os_ << ind << "    }\n";
        emit_group_stores(ind + "    ", stores);
        os_ << ind << "}\n";
        cached_.insert(kept.begin(), kept.end());
    }

    // After a split pass: slice partials to memory; the last block of the row combines them,
    // its threads striding over the partials, then one block-wide combine (a fixed order for
    // a given launch, so results repeat).
    void emit_split_combine(const std::string& ind, const std::vector<int>& reductions) {
        size_t r = reductions.size();
        os_ << ind << "if (splits > 1) {\n";
        os_ << ind << "    if (threadIdx.x == 0) {\n";
        for (size_t k = 0; k < r; ++k)
            os_ << ind << "        partials[task * " << r << " + " << k << "] = " << s_.value_name(node(reductions[k]).out.id) << ";\n";
        os_ << ind << "        __threadfence();  // the partials are visible before the count says so\n";
        os_ << ind << "        last_slice = atomicAdd(&counters[row], 1u) == (unsigned)(splits - 1);\n";
        os_ << ind << "    }\n";
        os_ << ind << "    __syncthreads();\n";
        os_ << ind << "    if (!last_slice) continue;\n";
        os_ << ind << "    __threadfence();\n";
        for (size_t k = 0; k < r; ++k) {
            int n = reductions[k];
            std::string name = s_.value_name(node(n).out.id);
            os_ << ind << "    " << name << " = " << reduction_identity(node(n).op, DType::float32)
                << ";\n";
            os_ << ind << "    for (long long p = threadIdx.x; p < splits; p += blockDim.x) "
                << name << " = "
                << reduction_combine(node(n).op, name,
                                     "__ldcg(&partials[(row * splits + p) * " + std::to_string(r) +
                                         " + " + std::to_string(k) + "])")
                << ";\n";
            os_ << ind << "    " << name << " = "
                << block_combine(node(n).op, DType::float32).combine << "(" << name
                << ", shared);\n";
        }
        os_ << ind << "    if (threadIdx.x == 0) counters[row] = 0;  // ready for the next launch\n";
        os_ << ind << "}\n";
        for (int n : reductions) emit_row_store(ind, node(n).out.id);
    }
};

// The runner launches the first kernel's function for a repeat (cuda_kernel_entry).
struct CudaKernels : KernelWriter {
    void kernel(const Schedule& s, int k, std::ostream& os) const override {
        CudaKernelEmitter(s, k, os).emit();
    }
    std::string repeat(const Schedule& s, int k, const std::string& first) const override {
        return "// " + s.kernel_name(k) + kSameCodeAs + first + ", on its own buffers\n\n";
    }
    std::string host(const Schedule& s, int k) const override {
        const Kernel& kernel = s.kernels[k];
        return "// " + s.kernel_name(k) + ": " +
               s.value_name(s.graph.nodes[kernel.nodes[0]].out.id) +
               (kernel.kind == KernelKind::blas
                    ? " runs through the eager matmul (cuBLAS)\n\n"
                    : " runs through the eager dispatcher: " + kernel.why + "\n\n");
    }
};

}  // namespace

std::string emit_cuda(const std::vector<const Schedule*>& schedules) {
    std::ostringstream os;
    os << "// Generated by kiln (codegen/emit_cuda.cpp) for NVRTC. One __global__ function per kernel; see docs/cuda.md.\n";
    os << cuda_math_prelude();
    os << "namespace kiln_math {\n" << cuda_block_helpers() << kKernelsBegin;
    emit_kernels(schedules, CudaKernels(), os);
    os << kKernelsEnd;
    return os.str();
}

std::string emit_cuda(const Schedule& schedule) { return emit_cuda(std::vector<const Schedule*>{&schedule}); }

std::string cuda_kernel_entry(const std::string& source, const std::string& kernel) {
    std::string line = "// " + kernel + kSameCodeAs;
    size_t at = source.find(line);
    if (at == std::string::npos) return kernel;
    size_t begin = at + line.size();
    return source.substr(begin, source.find(',', begin) - begin);
}

std::vector<CudaUnit> split_cuda_source(const std::string& source, int units) {
    size_t begin = source.find(kKernelsBegin), end = source.rfind(kKernelsEnd);
    KILN_CHECK(begin != std::string::npos && end != std::string::npos && begin < end,
               "split_cuda_source: not a translation unit of emit_cuda (no \"", kKernelsBegin,
               "\" before \"", kKernelsEnd, "\")");
    begin += std::strlen(kKernelsBegin);
    std::vector<size_t> cuts;  // where kernel i's text begins (its comment line); then `end`
    std::vector<std::string> names;
    for (size_t at = source.find(kKernelHead, begin); at < end;
         at = source.find(kKernelHead, at + 1)) {
        cuts.push_back(source.rfind('\n', at - 2) + 1);
        size_t name = at + std::strlen(kKernelHead);
        names.push_back(source.substr(name, source.find('(', name) - name));
    }
    if (names.empty()) return {};
    size_t count = std::clamp<size_t>(size_t(std::max(units, 1)), 1, names.size());
    if (count == 1) return {{source, names}};  // as emitted
    cuts.front() = begin;  // the first graph's heading goes with its first kernel
    cuts.push_back(end);
    // Contiguous runs of kernels of about equal bytes, at least one kernel each.
    std::vector<CudaUnit> out;
    const std::string prelude = source.substr(0, begin);
    const double bytes_per_unit = double(end - begin) / double(count);
    for (size_t u = 0, first = 0; u < count; ++u) {
        size_t last = first + 1, limit = names.size() - (count - u - 1);
        double target = double(begin) + bytes_per_unit * double(u + 1);
        while (last < limit && double(cuts[last] + cuts[last + 1]) / 2 < target) ++last;
        if (u + 1 == count) last = names.size();
        out.push_back(
            {prelude + source.substr(cuts[first], cuts[last] - cuts[first]) + kKernelsEnd,
             std::vector<std::string>(names.begin() + long(first), names.begin() + long(last))});
        first = last;
    }
    return out;
}

int cuda_split_reductions(const Schedule& schedule, int kernel) {
    std::ostringstream unused;
    return CudaKernelEmitter(schedule, kernel, unused).split_reductions();
}

int cuda_row_block(int64_t rows, int64_t row_size, int sms) {
    if (rows < sms) return 1024;  // few rows: wide blocks
    return emit_detail::cuda_row_block_for(row_size);  // the register variant's groups assume it
}

}  // namespace kiln::codegen
