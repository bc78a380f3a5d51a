// What a CUDA row kernel keeps in registers (codegen/register_row.h).
#include "codegen/register_row.h"

#include <algorithm>
#include <map>

namespace kiln::codegen::emit_detail {

namespace {

// Registers a thread may spend on the row's values (4-byte slots), so that blocks of up to
// 1024 threads still launch (64K registers a block) with the kernel's other values.
constexpr int kMaxRowSlots = 48;
// Float4 groups a thread may hold for a value: rows up to 4 * 4 * 1024 elements.
constexpr int kMaxGroups = 4;

class Planner : KernelView {
   public:
    Planner(const Schedule& s, int index) : KernelView(s, index, s.kernels[index].outer_dims) {
        for (int index : k_.nodes) {  // nodes are in execution order
            int out = node(index).out.id;
            bool needs_row = per_row(out) || is_reduction(index);
            for (int v : node(index).inputs) needs_row = needs_row || needs_row_.count(v);
            if (needs_row) needs_row_.insert(out);
        }
    }

    RegisterRow plan(const std::vector<Step>& steps) {
        RegisterRow out;
        out.groups = groups();
        std::vector<const Step*> passes;
        for (const Step& st : steps)
            if (st.pass) passes.push_back(&st);
        if (out.groups == 0 || passes.size() < 2) return {};
        // The prologue's results that two passes read, then loads two passes still read.
        std::map<int, int> reading;
        for (const Step* st : passes)
            for (int v : frontier(*st, {}, [&](int v) { return along_row(v); })) ++reading[v];
        for (const auto& [v, n] : reading)
            if (n > 1) out.cache.insert(v);
        reading.clear();
        for (const Step* st : passes)
            for (int v : loads(*st, out.cache)) ++reading[v];
        for (const auto& [v, n] : reading)
            if (n > 1) out.cache.insert(v);
        int slots = int(out.cache.size()) * 4 * out.groups;
        if (out.cache.empty() || slots > kMaxRowSlots) return {};
        // Values a later pass would compute again from what an earlier one computed.
        std::set<int> computed;
        for (const Step* st : passes) {
            std::set<int> have = out.cache;
            have.insert(out.kept.begin(), out.kept.end());
            for (int v : frontier(*st, have, [&](int v) { return computed.count(v) > 0; }))
                if (slots + 4 * out.groups <= kMaxRowSlots && out.kept.insert(v).second)
                    slots += 4 * out.groups;
            for (int index : body(*st, have)) computed.insert(node(index).out.id);
        }
        return out;
    }

   private:
    std::set<int> needs_row_;  // in-kernel values that depend on a per-row result

    // 4 * groups elements of the row a thread: enough for the static row with the block the
    // runner picks for many rows (cuda_row_block); 2 groups for a symbolic row.
    int groups() const {
        int64_t row_size = 1;
        for (int d = outer_; d < rank_; ++d) {
            if (k_.domain[d] < 0) return 2;
            row_size *= k_.domain[d];
        }
        int64_t per_block = 4 * int64_t(cuda_row_block_for(row_size));
        int64_t g = std::max<int64_t>(1, (row_size + per_block - 1) / per_block);
        return g > kMaxGroups ? 0 : int(g);
    }

    // A load that changes along the row, or an element value of the prologue (computed from
    // loads alone, no per-row result).
    bool along_row(int v) const {
        if (is_constant(v)) return false;
        if (!in_kernel(v)) return plan_load(v, rank_, false).kind != LoadKind::constant;
        return !per_row(v) && !needs_row_.count(v);
    }

    std::vector<int> targets(const Step& st) const {
        std::vector<int> out = st.reductions;
        for (int v : st.stores) out.push_back(s_.producer.at(v));
        return out;
    }
    std::vector<int> body(const Step& st, const std::set<int>& have) const {
        return element_closure(targets(st), have);
    }

    // The values of the pass's inputs that `is_input` accepts and that a node of the pass not
    // accepted reads (a reduction, a node after a per-row value), or that the pass stores.
    template <class Accept>
    std::set<int> frontier(const Step& st, const std::set<int>& have, Accept is_input) const {
        std::vector<int> nodes = body(st, have);
        nodes.insert(nodes.end(), st.reductions.begin(), st.reductions.end());
        std::set<int> out;
        for (int index : nodes) {
            if (!is_reduction(index) && is_input(node(index).out.id)) continue;
            for (int v : node(index).inputs)
                if (!have.count(v) && is_input(v)) out.insert(v);
        }
        for (int v : st.stores)
            if (!have.count(v) && is_input(v)) out.insert(v);
        return out;
    }

    // The loads along the row that the pass reads from memory, given `have` in registers.
    std::set<int> loads(const Step& st, const std::set<int>& have) const {
        std::vector<int> nodes = body(st, have);
        nodes.insert(nodes.end(), st.reductions.begin(), st.reductions.end());
        std::set<int> out;
        for (int index : nodes)
            for (int v : node(index).inputs)
                if (!in_kernel(v) && !have.count(v) && along_row(v)) out.insert(v);
        return out;
    }
};

}  // namespace

int cuda_row_block_for(int64_t row_size) {
    int block = 32;
    while (block < 1024 && int64_t(block) * kRowValues < row_size) block *= 2;
    return block;
}

RegisterRow plan_register_row(const Schedule& s, int kernel, const std::vector<Step>& steps) {
    return Planner(s, kernel).plan(steps);
}

}  // namespace kiln::codegen::emit_detail
