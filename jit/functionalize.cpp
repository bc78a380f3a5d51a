// Functionalization: fn's in-place ops (add_, copy_, a write through a view) are recorded
// as functional ops; the graph's value becomes the target's value from there on, and a
// mutated argument or captured tensor gets its new value copied back after the graph
// (a write-back output). Entry: Tracer::assign. docs/jit.md, "Functionalization".
#include <algorithm>

#include "autograd/node.h"
#include "jit/fake.h"
#include "jit/tracer_state.h"
#include "tensor/kernels.h"

namespace kiln::jit::tracing {

namespace {

Tensor fresh_copy(const Tensor& t) {
    NoDispatchHook plain;  // the tracer's own copy is not part of fn
    Tensor c =
        empty(t.shape(), t.dtype(), t.device());  // on t's device: later ops read it with t's peers
    strided_copy(c, t.detach());
    return c;
}

void assign_data(const Tensor& target, const Tensor& value) {
    NoDispatchHook plain;
    write_values(target, value);
}

}  // namespace

// An in-place op, functionalized: `value` (an op of the open graph) becomes the
// target's value from here on; a mutated argument, captured tensor or earlier value
// is written back after the graph. The eager write happens now, as eager would do it.
void Tracer::assign(const Tensor& target, const Tensor& value) {
    SizesUnobserved quiet;
    if (passthrough_ || in_eager_) return assign_eager(target, value);
    same_symbols(target, value);
    if (std::string why = functionalize_blocker(target, value); !why.empty()) {
        go_eager(why);
        return assign_eager(target, value);
    }
    const Ref* vr = resolve(value);
    KILN_CHECK(vr && vr->kind == RefKind::op,
               "jit: internal error: an in-place value that is not a recorded op");
    int value_id = vr->id;
    const Ref* tr = resolve(target);
    int slot = tr && tr->kind == RefKind::slot ? tr->id : -1;
    if (auto w = written_slot_.find(target.impl()); w != written_slot_.end()) slot = w->second;
    bool matched = matching() && match_assign(target, tr, slot, value_id);
    if (matching() && !matched) {
        diverge("an in-place op");  // now recording; the value op is in the new graph
        if (passthrough_) return assign_eager(target, value);
        value_id = resolve(value)->id;
        tr = resolve(target);
    }
    // Shape-only: the write waits for the graph's run (write-back) or materialize().
    if (fake_) {
        if (is_fake(target))  // it holds the value from here on (jit/fake_record.cpp)
            fake_made_.push_back({target.impl_ptr(), value_id});
        else
            fake_writes_.push_back({target, value_id});
    } else {
        if (slot >= 0 || !tr || tr->kind == RefKind::slot) snapshot_inputs(target, slot);
        assign_data(target, value);
    }
    if (matched) {
        slot = alog_.back().slot;
        log_[value_id].aliases.push_back(target);
    } else {
        if (!tr) slot = slot_of(target);  // first touch of an outside tensor: lift it
        record_assign(target, tr && tr->kind == RefKind::op ? tr->id : -1, slot, value_id);
    }
    if (writes_back(slot)) written_slot_[target.impl()] = slot;
    bind(target, RefKind::op, value_id);
}

std::string Tracer::functionalize_blocker(const Tensor& target, const Tensor& value) {
    if (autograd::grad_enabled() && (target.requires_grad() || value.requires_grad()))
        return "an in-place op on a tensor of shape " + shape_str(target) +
               " while autograd records it (its history is rebased)";
    const Storage* st = target.impl()->storage.get();
    for (const auto& [impl, ref] : refs_) {
        if (impl == target.impl()) continue;
        std::shared_ptr<TensorImpl> live = ref.w.lock();
        if (live.get() == impl && live->storage.get() == st)
            return "an in-place op on a tensor of shape " + shape_str(target) +
                   " that shares storage with another tensor fn uses (a view or its base)";
    }
    return {};
}

// Reading a tensor that aliases a storage this segment writes back: the graph would
// read it before the write-back, eager after. Not functionalized.
bool Tracer::reads_written_storage(std::span<const Tensor> inputs) const {
    if (written_slot_.empty()) return false;
    for (const Tensor& t : inputs)
        for (const auto& [impl, slot] : written_slot_)
            if (impl != t.impl() && impl->storage == t.impl()->storage) return true;
    return false;
}

void Tracer::snapshot_inputs(const Tensor& target, int slot) {
    Tensor before;
    auto old_value = [&]() -> const Tensor& {
        if (!before.defined()) before = fresh_copy(target);
        return before;
    };
    if (matching()) {
        for (Step& st : log_)
            for (Tensor& t : st.inputs)
                if (t.same(target)) t = old_value();
        return;
    }
    if (slot < 0) return;
    for (size_t k = 0; k < in_slots_.size(); ++k)
        if (in_slots_[k] == slot && in_examples_[k].same(target)) in_examples_[k] = old_value();
}

bool Tracer::writes_back(int slot) const {
    return slot >= 0 && e_.slot_kinds[slot] != SlotKind::output;
}

void Tracer::record_assign(const Tensor& target, int old_id, int slot, int value_id) {
    assigns_.push_back({b_->num_ops(), value_id, slot, old_id});
    if (writes_back(slot)) {
        mutations_[slot] = value_id;
        if (std::find(e_.mutated_slots.begin(), e_.mutated_slots.end(), slot) ==
            e_.mutated_slots.end())
            e_.mutated_slots.push_back(slot);
    }
    if (old_id >= 0) node_out_[old_id].reset();  // the target no longer holds the old value
    node_out_[value_id] = target.impl_ptr();
}

bool Tracer::match_assign(const Tensor& target, const Ref* tr, int slot, int value_id) {
    std::vector<Segment*> keep;
    for (Segment* c : cands_) {
        if (assigns_seen_ >= int(c->assigns.size()) || !c->graph) continue;
        const Segment::Assign& a = c->assigns[assigns_seen_];
        int ni = c->graph->num_inputs();
        if (a.ops_before != int(log_.size()) || a.value_node != ni + value_id) continue;
        bool ok = tr ? a.target_slot == slot &&
                           a.target_node == (tr->kind == RefKind::op ? ni + tr->id : -1)
                     : a.target_slot >= 0 && a.target_node == -1 &&
                           e_.slot_kinds[a.target_slot] == SlotKind::lifted;
        if (ok) keep.push_back(c);
    }
    if (keep.empty()) return false;
    cands_ = std::move(keep);
    int target_slot = cands_[0]->assigns[assigns_seen_].target_slot;
    ++assigns_seen_;
    if (!tr) slot_tensor_[target_slot] = target;
    alog_.push_back({int(log_.size()), target, tr && tr->kind == RefKind::op ? tr->id : -1,
                     tr ? slot : target_slot, value_id});
    return true;
}

}  // namespace kiln::jit::tracing
