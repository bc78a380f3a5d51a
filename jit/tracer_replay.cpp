// The tracer's replay: each op of a later call is checked against the recorded segments
// (candidates), a matching segment's compiled code runs at its end, and a call that goes
// where no recording did is recorded from there (diverge).
#include <sstream>

#include "jit/log.h"
#include "jit/segments.h"
#include "jit/tracer_state.h"

namespace kiln::jit::tracing {

std::vector<Tensor> Tracer::replay_inputs(const Segment& c) const {
    std::vector<Tensor> in(c.graph->num_inputs());
    for (size_t k = 0; k < log_.size(); ++k) {
        const Node& n = c.graph->nodes()[c.graph->num_inputs() + k];
        for (size_t i = 0; i < n.args.size(); ++i)
            if (n.args[i] < c.graph->num_inputs()) in[n.args[i]] = log_[k].inputs[i];
    }
    for (size_t i = 0; i < in.size(); ++i)  // an input only read for its sizes (SizeOrigin)
        if (auto t = slot_tensor_.find(c.input_slots[i]); !in[i].defined() && t != slot_tensor_.end()) in[i] = t->second;
    return in;
}

bool Tracer::arg_matches(const Segment& c, int arg, const Tensor& t) {
    int ni = c.graph->num_inputs();
    const Ref* r = resolve(t);
    if (r && r->kind == RefKind::op) return arg == ni + r->id;
    if (arg >= ni) return false;
    int slot = c.input_slots[arg];
    return r ? r->id == slot : e_.slot_kinds[slot] == SlotKind::lifted;
}

bool Tracer::step_matches(const Segment& c, const Step& s) {
    int k = int(log_.size());
    if (k >= c.num_ops()) return false;
    const Node& n = c.graph->nodes()[c.graph->num_inputs() + k];
    if ((n.kind == NodeKind::detach) != s.is_detach || n.args.size() != s.inputs.size()) return false;
    Attrs scratch;
    // Attributes compare by value at this call's sizes: a patch recorded before its symbol
    // was pinned and the constant the replay sees once it is are the same attribute.
    if (!s.is_detach && (n.op != s.op || n.grad_enabled != s.grad || !(c.graph->attrs(n, syms_, scratch) == s.attrs)))
        return false;
    for (size_t i = 0; i < s.inputs.size(); ++i)
        if (!arg_matches(c, n.args[i], s.inputs[i])) return false;
    return true;
}

Tensor Tracer::match(Step s) {
    std::vector<Segment*> keep;
    for (Segment* c : cands_)
        if (step_matches(*c, s)) keep.push_back(c);
    if (keep.empty()) {
        diverge("op #" + std::to_string(log_.size() + 1) + " (" + (s.is_detach ? "detach" : op_info(s.op).name) + ")");
        if (passthrough_) return s.is_detach ? s.out : dispatch_eager(s.op, s.inputs, s.attrs);
        if (s.is_detach) {
            bind(s.out, RefKind::op, record_node(record_detach(value_of(s.inputs[0]), s.out), s.out));
            return s.out;
        }
        std::vector<int> ids;
        for (const Tensor& t : s.inputs) ids.push_back(value_of(t));
        s.out = eager(s.op, s.inputs, s.attrs);
        bind(s.out, RefKind::op, record_node(record_call(s, ids, s.out), s.out));
        return s.out;
    }
    cands_ = std::move(keep);
    if (!s.is_detach) s.out = eager(s.op, s.inputs, s.attrs);
    bind(s.out, RefKind::op, int(log_.size()));
    log_.push_back(std::move(s));
    return log_.back().out;
}

bool Tracer::end_matches(const Segment& c, const Tensor& t, int expected) {
    const Ref* r = resolve(t);
    if (!r) return e_.slot_kinds[expected] == SlotKind::lifted;
    if (r->kind == RefKind::slot) return r->id == expected;
    const auto& outs = c.graph->outputs();
    for (size_t j = 0; j < outs.size(); ++j)
        if (outs[j] == c.graph->num_inputs() + r->id) return c.output_slots[j] == expected;
    return false;
}

Segment* Tracer::choose(bool is_return, Escape kind, const std::vector<Tensor>& ts) {
    for (Segment* c : cands_) {
        if (c->is_return != is_return || c->num_ops() != int(log_.size())) continue;
        if (!is_return && c->brk.kind != kind) continue;
        if (is_return && c->return_slots.size() != ts.size()) continue;
        bool ok = true;
        for (size_t i = 0; i < ts.size() && ok; ++i) ok = end_matches(*c, ts[i], is_return ? c->return_slots[i] : c->escape_slot);
        if (ok) return c;
    }
    return nullptr;
}

Segment* Tracer::end_match(bool is_return, Escape kind, const std::vector<Tensor>& ts) {
    Segment* c = choose(is_return, kind, ts);
    if (!c) {
        diverge(is_return ? "the return" : "the graph break (" + escape_name(kind) + ")");
        return nullptr;
    }
    if (c->graph) {
        const auto& outs = c->graph->outputs();
        std::vector<Tensor> live;
        for (size_t j = 0; j < outs.size(); ++j) {
            int s = c->output_slots[j];
            const Step& st = log_[outs[j] - c->graph->num_inputs()];
            live.push_back(c->is_writeback(int(j)) ? slot_tensor_.at(s) : st.out);
            bind(live.back(), RefKind::slot, s);
            if (!c->is_writeback(int(j)))
                for (const Tensor& a : st.aliases) bind(a, RefKind::slot, s);
        }
        rewind_rng();
        adopt(*c, replay_inputs(*c), live, input_views(e_, *c));
    }
    for (size_t i = 0; i < ts.size(); ++i)
        if (!resolve(ts[i])) bind(ts[i], RefKind::slot, is_return ? c->return_slots[i] : c->escape_slot);
    log_.clear();
    alog_.clear();
    written_slot_.clear();
    return c;
}

void Tracer::diverge(const std::string& where) {
    if (e_.rerun && !parent_) {  // host code decided on a value before any break: no branch point to graft on
        go_eager("fn's host code issued different ops on a re-run (" + where + "), deciding on a value it read");
        log_.clear();
        alog_.clear();
        cands_.clear();
        return;
    }
    if (!e_.rerun || !parent_) {
        std::ostringstream os;
        os << "compile: " << cfg_.fn_name << " is not deterministic: replaying it to record a new branch, "
           << where << " differs from the recording";
        if (!cands_.empty() && cands_[0]->graph) os << " of graph " << cands_[0]->id << ":\n" << cands_[0]->graph->str();
        os << "\nhint: fn must issue the same ops for the same inputs (no global state, no randomness outside kiln ops)";
        fail(os.str());
    }
    start_record();
    std::vector<Step> steps = std::move(log_);
    std::vector<LoggedAssign> assigns = std::move(alog_);
    log_.clear();
    alog_.clear();
    cands_.clear();
    std::vector<int> step_id;
    size_t next_assign = 0;
    auto replay_assigns = [&](int ops_done) {
        for (; next_assign < assigns.size() && assigns[next_assign].ops_before == ops_done; ++next_assign) {
            const LoggedAssign& a = assigns[next_assign];
            int old_id = a.old_step >= 0 ? step_id[a.old_step] : -1;
            int slot = a.slot;
            if (old_id < 0 && slot >= 0 && !resolve(a.target)) bind(a.target, RefKind::slot, slot);
            record_assign(a.target, old_id, slot, step_id[a.value_step]);
            bind(a.target, RefKind::op, step_id[a.value_step]);
        }
    };
    for (Step& s : steps) {
        replay_assigns(int(step_id.size()));
        std::vector<int> ids;
        for (const Tensor& t : s.inputs) ids.push_back(value_of(t));
        int id = s.is_detach ? record_detach(ids[0], s.out) : record_call(s, ids, s.out);
        bind(s.out, RefKind::op, record_node(id, s.out));
        step_id.push_back(id);
    }
    replay_assigns(int(step_id.size()));
}

}  // namespace kiln::jit::tracing
