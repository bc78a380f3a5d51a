// Internal to codegen/: the emitter core both dialects share (docs/codegen.md, "One emitter
// core, two dialects"). It reads one kernel of a Schedule through its KernelView and writes
// what every target writes the same way: the statement of each node (operands converted to
// the dtype it computes in, then the op table's math), each element's loads, statements,
// reduction updates and stores, the order of a row kernel's passes and per-row values, the
// index math, and the loop over a translation unit's kernels that emits code repeated under
// other names once (codegen/same_code.h). A dialect (emit_cpp.cpp: xsimd batches, threads,
// scalar tails; emit_cuda.cpp: grid-stride loops, thread blocks, warp shuffles, float4)
// writes the loops and spells what the core asks of it: types, literals, loads and stores.
#pragma once
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "codegen/emit_expr.h"
#include "codegen/kernel_view.h"
#include "codegen/schedule.h"

namespace kiln::codegen {
namespace emit_detail {

// The steps of a row kernel, in order: passes along the row (reductions folded, element
// values stored) and values computed once per row. Reductions share a pass while none needs
// another's result; element stores that need no per-row value of a later pass join the first
// pass they can, so a reduction and the values it reads are one read of the row. A pointwise
// kernel is one pass that stores.
struct Step {
    bool pass = true;
    std::vector<int> reductions, stores;  // a pass: nodes it folds, values it stores
    int node = -1;                        // a per-row value: the node computing it
};

// The dialect's spelling of one op's statement (convert, select, prepare_operands, result)
// is its Spelling (emit_expr.h), which the eager CUDA kernels share.
class KernelEmitterCore : protected KernelView, protected Spelling {
   protected:
    KernelEmitterCore(const Schedule& s, int index, int outer, std::ostream& os)
        : KernelView(s, index, outer), os_(os) {}
    virtual ~KernelEmitterCore() = default;

    // ---- what a dialect spells its own way

    virtual const char* type(DType d) const = 0;  // one element's type ("float", "long long")
    virtual const char* index_type() const = 0;   // the loops' integer type
    // NaN or an infinity of a float dtype.
    virtual std::string special_literal(double value, DType d) const = 0;
    // A scalar operand converted to int64 as that target's eager kernels convert it.
    virtual std::string int64_literal(double value) const = 0;
    // The identity a reduction's accumulator starts from, for its output dtype.
    virtual std::string reduction_identity(OpId op, DType d) const = 0;
    // Value v as an operand (`lanes`: in a group of lanes; a per-row value is broadcast).
    virtual std::string operand(int v, bool lanes) const { return (void)lanes, s_.value_name(v); }
    // A scalar operand, already a literal of the compute dtype.
    virtual std::string scalar_operand(const std::string& literal, bool lanes) const {
        return (void)lanes, literal;
    }
    // How a computed value is declared ("auto ", "const float "): per-row values and element
    // values of a pass.
    virtual std::string declare(int v, bool per_row_value) const = 0;
    // One element's load of v (into a variable named after it), reduction update and store.
    virtual void emit_load(const std::string& ind, int v, const LoadPlan& p, bool lanes) = 0;
    virtual void emit_reduction_update(const std::string& ind, int r, bool lanes) = 0;
    virtual void emit_store(const std::string& ind, int v, bool lanes) = 0;
    // Prefix of a per-row store (CUDA: one thread of the block writes it).
    virtual const char* row_store_guard() const { return ""; }

    // ---- what every dialect writes the same way

    // A scalar operand in the dtype the node computes in, converted as eager converts it.
    std::string scalar_literal(double value, DType d) const;
    // A constant's value (a `full` no kernel stores), as a literal of its dtype.
    std::string constant_text(int v) const;
    // The statement of node n: operands converted to the dtype it computes in, then the op
    // table's math.
    std::string expression(const LNode& n, bool lanes) const;
    // The element of value v's buffer a load plan reads: run index j (or the k_d of a strided
    // load) added to the row's base.
    static std::string index_text(const LoadPlan& p);
    std::string ptr(int v) const { return s_.value_name(s_.values.at(v).access.buffer) + "_ptr"; }

    // `rest` split into the indices letter+hi down to letter+lo of the domain, the last
    // taking what is left: "const int64_t i1 = rest % 8; rest /= 8; const int64_t i0 = rest;".
    void emit_split(const std::string& ind, const std::string& rest, char letter, int hi, int lo);
    // The k_d of element j along the row, when some element load is strided along it.
    void emit_run_indices(const std::string& ind);

    std::vector<Step> row_steps() const;
    // The element nodes a pass computes (their closure) and a comment naming its targets.
    std::vector<int> pass_body(const std::vector<int>& reductions, const std::vector<int>& stores,
                               std::string& names) const;
    // Loads, statements, reduction updates and stores of one element (or group of lanes).
    void emit_element(const std::string& ind, const std::vector<int>& body,
                      const std::vector<int>& reductions, const std::vector<int>& stores,
                      bool lanes);
    // A value computed once per row (a reduction's result, or math on such results).
    void emit_per_row_node(const std::string& ind, int index);
    void emit_row_store(const std::string& ind, int v);

    std::ostream& os_;
    std::set<int> row_scope_loads_;  // values a row's per-row statements have loaded
};

// Writes the kernels of one target: the text of one generated kernel, a kernel that repeats
// an earlier one's code, and a kernel that runs on the host.
struct KernelWriter {
    virtual ~KernelWriter() = default;
    virtual void kernel(const Schedule& s, int k, std::ostream& os) const = 0;
    virtual std::string repeat(const Schedule& s, int k, const std::string& first) const = 0;
    virtual std::string host(const Schedule& s, int k) const = 0;
};

// Every kernel of `schedules`, graph by graph, a generated kernel whose code repeats an
// earlier one's (codegen/same_code.h) as writer.repeat.
void emit_kernels(const std::vector<const Schedule*>& schedules, const KernelWriter& writer,
                  std::ostream& os);

// The same text as emit_kernels, one piece per kernel (and per graph heading), in order. A
// piece's `group` is the index of the piece it must share a translation unit with: a repeat's
// entry calls its first kernel's; every other piece is its own group.
struct KernelText {
    std::string text;
    size_t group = 0;
};
std::vector<KernelText> kernel_texts(const std::vector<const Schedule*>& schedules,
                                     const KernelWriter& writer);

}  // namespace emit_detail
}  // namespace kiln::codegen
