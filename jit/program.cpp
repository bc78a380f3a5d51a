// Running a program tree on a cache hit: no host code, only guards + segments.
#include "jit/program.h"

#include <algorithm>
#include <array>
#include <optional>

#include "autograd/node.h"
#include "tensor/cuda.h"
#include "tensor/kernels.h"

namespace kiln::jit {

std::string escape_name(Escape kind) {
    switch (kind) {
        case Escape::bool_conversion: return "operator bool";
        case Escape::item: return "item()";
        case Escape::data_access: return "data access";
        case Escape::print: return "printing a tensor";
        case Escape::backward: return "backward()";
        case Escape::autograd_function: return "autograd Function apply()";
    }
    return "?";
}

Segment* Segment::child(int outcome) const {
    for (const Child& c : children)
        if (c.outcome == outcome) return c.seg.get();
    return nullptr;
}

bool Segment::is_writeback(int j) const {
    return std::find(writeback_outputs.begin(), writeback_outputs.end(), j) != writeback_outputs.end();
}

bool Entry::values_hold() const {
    for (const ValueGuard& g : value_guards)
        if (g.read() != g.value) return false;
    return true;
}

bool Entry::aliasing_ok(const Args& args) const {
    if (mutated_slots.empty()) return true;
    std::vector<const Storage*> storage;  // per slot (arguments, then lifted)
    for (const ArgValue& a : args)
        if (a.kind == ArgKind::tensor) storage.push_back(a.tensor.impl()->storage.get());
    for (size_t s = storage.size(); s < held.size(); ++s) storage.push_back(held[s].defined() ? held[s].impl()->storage.get() : nullptr);
    for (int m : mutated_slots)
        for (size_t s = 0; s < storage.size(); ++s)
            if (int(s) != m && storage[s] && storage[s] == storage[m]) return false;
    return true;
}

int Entry::add_slot(SlotKind kind, Tensor held_tensor) {
    slot_kinds.push_back(kind);
    held.push_back(std::move(held_tensor));
    slot_syms.emplace_back();
    slot_views.emplace_back();
    return int(slot_kinds.size()) - 1;
}

std::vector<const Segment*> Entry::segments() const {
    std::vector<const Segment*> out, stack;
    if (root) stack.push_back(root.get());
    while (!stack.empty()) {
        const Segment* s = stack.back();
        stack.pop_back();
        out.push_back(s);
        for (auto it = s->children.rbegin(); it != s->children.rend(); ++it) stack.push_back(it->seg.get());
    }
    return out;
}

std::vector<Tensor> segment_call(const Segment& seg, std::span<const Tensor> slots) {
    std::array<Tensor, 8> small;  // small graphs: no allocation for the inputs
    std::vector<Tensor> big(seg.input_slots.size() > small.size() ? seg.input_slots.size() : 0);
    std::span<Tensor> in = big.empty() ? std::span<Tensor>(small.data(), seg.input_slots.size()) : std::span<Tensor>(big);
    for (size_t i = 0; i < seg.input_slots.size(); ++i) in[i] = slots[seg.input_slots[i]];
    std::vector<Tensor> out = seg.run(in);
    KILN_CHECK(out.size() == seg.output_slots.size(), "compiled graph returned ", out.size(), " values, expected ",
               seg.output_slots.size());
    return out;
}

bool truth_value(const Tensor& t) {
    // A CUDA value is copied to the host first (raw, unrecorded: the branch only reads it).
    Tensor host = t.device().type == DeviceType::cuda ? cuda::to_device(t, cpu) : t;
    bool v = false;
    visit_dtype(host.dtype(), [&](auto tag) { v = *static_cast<const decltype(tag)*>(host.raw_data()) != decltype(tag)(0); });
    return v;
}

Tensor regenerate_view(const Entry& entry, int slot, std::span<const Tensor> slots, std::span<const int64_t> syms) {
    const SlotView& v = entry.slot_views[size_t(slot)];
    NoDispatchHook plain;
    Tensor cur = slots[size_t(v.base)];
    for (const SlotView::Step& st : v.chain) {
        const Node& n = st.graph->nodes()[size_t(st.node)];
        if (n.kind == NodeKind::detach) {
            cur = cur.detach();
            continue;
        }
        Attrs scratch;
        std::optional<autograd::NoGradGuard> no_grad;
        if (!n.grad_enabled) no_grad.emplace();
        Tensor in[1] = {cur};
        cur = dispatch_eager(n.op, in, st.graph->attrs(n, syms, scratch));
    }
    return cur;
}

bool program_run(const Entry& entry, const Args& args, std::span<const int64_t> syms, std::vector<Tensor>& results) {
    std::array<Tensor, 16> small;  // small programs: no allocation for the slots
    std::vector<Tensor> big(entry.held.size() > small.size() ? entry.held.size() : 0);
    std::span<Tensor> slots = big.empty() ? std::span<Tensor>(small.data(), entry.held.size()) : std::span<Tensor>(big);
    std::copy(entry.held.begin(), entry.held.end(), slots.begin());
    int next_arg = 0;
    for (const ArgValue& a : args)
        if (a.kind == ArgKind::tensor) slots[next_arg++] = a.tensor;
    const Segment* seg = entry.root.get();
    // Fast path for the common program, one graph whose outputs are fn's results in order:
    // the graph's result vector becomes `results` as is. The loop below does the same with a
    // copy through the slots and a second vector.
    if (seg->is_return && seg->graph && seg->return_slots == seg->output_slots && seg->writeback_outputs.empty() &&
        !entry.returns_views) {
        results = segment_call(*seg, slots);
        return true;
    }
    // Write-backs into the caller's tensors wait until the program has run to its end:
    // a branch outcome with no child yet must leave nothing visible (fn is replayed), and
    // that includes the generator: the replay draws the same numbers again.
    std::vector<std::pair<int, Tensor>> written;  // slot, the caller's tensor
    const RngState rng_at_start = get_rng_state();
    while (true) {
        if (seg->graph) {
            std::vector<Tensor> out = segment_call(*seg, slots);
            for (size_t j = 0; j < out.size(); ++j) {
                int s = seg->output_slots[j];
                if (seg->is_writeback(int(j)) &&
                    std::none_of(written.begin(), written.end(), [&](const auto& w) { return w.first == s; }))
                    written.emplace_back(s, slots[s]);
                slots[s] = std::move(out[j]);
            }
        }
        if (seg->is_return) break;
        seg = seg->child(truth_value(slots[seg->escape_slot]) ? 1 : 0);
        if (!seg) {
            set_rng_state(rng_at_start);
            return false;
        }
    }
    for (auto& [s, caller] : written) {
        write_values(caller, slots[s]);
        slots[s] = caller;  // fn returning a mutated argument returns that tensor itself
    }
    results.clear();
    for (int s : seg->return_slots)
        results.push_back(entry.slot_views[size_t(s)].base >= 0 ? regenerate_view(entry, s, slots, syms) : slots[s]);
    return true;
}

}  // namespace kiln::jit
