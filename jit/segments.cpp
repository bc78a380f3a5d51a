// Segments: fn's graph breaks cut its ops into segments, kept as a tree per entry
// (jit/program.h). At a break (escape) or at fn's return the open graph is closed, compiled
// by the backend, run, and grafted under the branch the call took. Entry:
// Tracer::end_record. Replay's side (a recorded segment matched again) is
// jit/tracer_replay.cpp.
#include "jit/segments.h"

#include <algorithm>

#include "jit/ddp_split.h"
#include "jit/fake.h"
#include "jit/log.h"
#include "jit/tracer_state.h"

namespace kiln::jit::tracing {

namespace {

// Output j of `seg` as a view of an input: a chain of view ops (or detach) from an
// argument or lifted slot, from a value an in-place op wrote into one, or from an
// earlier output that is itself such a view. None (base -1) otherwise.
SlotView input_view(const Entry& e, const Segment& seg, int j) {
    const Graph& g = *seg.graph;
    int node = g.outputs()[size_t(j)];
    auto is_view = [&](const Node& n) {
        return n.kind == NodeKind::detach ||
               (n.kind == NodeKind::call && op_info(n.op).kind == OpKind::view);
    };
    std::vector<SlotView::Step> chain;
    for (; is_view(g.nodes()[size_t(node)]); node = g.nodes()[size_t(node)].args[0])
        chain.push_back({seg.graph, node});
    if (chain.empty()) return {};
    std::reverse(chain.begin(), chain.end());
    SlotView v;
    if (node < g.num_inputs()) {
        int slot = seg.input_slots[size_t(node)];
        if (e.slot_kinds[size_t(slot)] == SlotKind::output)
            v = e.slot_views[size_t(slot)];  // a view of a view
        else
            v.base = slot;
    } else {
        for (const Segment::Assign& a : seg.assigns)
            if (a.value_node == node && a.target_slot >= 0 &&
                e.slot_kinds[size_t(a.target_slot)] != SlotKind::output)
                v.base = a.target_slot;
    }
    if (v.base < 0) return {};
    v.chain.insert(v.chain.end(), chain.begin(), chain.end());
    return v;
}

}  // namespace

std::vector<bool> input_views(const Entry& e, const Segment& seg) {
    std::vector<bool> out;
    for (size_t j = 0; j < seg.output_slots.size(); ++j)
        out.push_back(!seg.is_writeback(int(j)) &&
                      e.slot_views[size_t(seg.output_slots[j])].base >= 0);
    return out;
}

void adopt(const Segment& seg, std::span<const Tensor> inputs, const std::vector<Tensor>& live,
           const std::vector<bool>& views) {
    std::vector<Tensor> outs;
    {
        NoDispatchHook plain;  // the compiled code's own ops are not recorded
        outs = seg.run(inputs);
    }
    KILN_CHECK(outs.size() == live.size(), "compile: backend returned ", outs.size(),
               " values, expected ", live.size());
    for (size_t j = 0; j < outs.size(); ++j) {
        TensorImpl& dst = *live[j].impl();
        const TensorImpl& src = *outs[j].impl();
        KILN_CHECK(src.shape == dst.shape && src.dtype == dst.dtype, "compile: backend output ", j,
                   " is ", src.dtype, src.shape, ", eager gave ", dst.dtype, dst.shape);
        KILN_CHECK(!is_fake(live[j]) || outs[j].device() == live[j].device(),
                   "jit: internal error: the shape rule of a recorded op put output ", j, " on ",
                   live[j].device(), ", the compiled graph on ", outs[j].device());
        if (seg.is_writeback(int(j))) {
            NoDispatchHook plain;
            write_values(live[j], outs[j]);
            continue;
        }
        if (views[j] && !is_fake(live[j])) continue;  // a fake view has no values of its own
        dst.storage = src.storage;
        dst.strides = src.strides;
        dst.offset = src.offset;
        dst.requires_grad = src.requires_grad;
        dst.grad_fn = src.grad_fn;
        dst.output_nr = src.output_nr;
    }
}

// Closes the open recording as a segment (graph breaks at an escape, or fn returned).
Segment* Tracer::end_record(bool is_return, const std::vector<Tensor>& ts, const BreakInfo* brk) {
    std::vector<int> outs;
    auto add_out = [&](int id) {
        if (std::find(outs.begin(), outs.end(), id) == outs.end()) outs.push_back(id);
    };
    if (!is_return)  // live intermediates: user code still holds them
        for (int id = 0; id < b_->size(); ++id)
            if (!b_->is_placeholder(id) && !node_out_[id].expired()) add_out(id);
    for (const Tensor& t : ts)
        if (const Ref* r = resolve(t); r && r->kind == RefKind::op) add_out(r->id);
    for (const auto& [slot, id] : mutations_) add_out(id);  // write-backs of mutated inputs
    auto seg = std::make_unique<Segment>();
    seg->is_return = is_return;
    if (b_->num_ops() > 0) {
        std::vector<Tensor> live;
        for (int id : outs) live.push_back(Tensor(node_out_[id].lock()));
        compile_into(*seg, outs);
        rewind_rng();
        Strays strays = strays_before(outs);
        adopt(*seg, in_examples_, live, input_views(e_, *seg));
        fill_strays(strays);
    }
    for (const Tensor& t : ts) {
        if (is_return)
            seg->return_slots.push_back(slot_of(t));
        else
            seg->escape_slot = slot_of(t);
    }
    for (int s : seg->return_slots)
        e_.returns_views = e_.returns_views || e_.slot_views[size_t(s)].base >= 0;
    if (brk) {
        seg->brk = *brk;
        e_.breaks.push_back(*brk);
        ++stats_.breaks;
        if (trace_log::on()) trace_log::graph_break(&cfg_, e_.id, *brk);
        if (brk->kind != Escape::bool_conversion)
            mark_rerun(escape_name(brk->kind) + " at " + brk->location);
        log_event("breaks", "graph break in " + cfg_.fn_name + " (entry " + std::to_string(e_.id) +
                                "): " + brk->reason + " at " + brk->location);
    }
    b_.reset();
    written_slot_.clear();
    fake_writes_.clear();  // done by the write-backs
    return graft(std::move(seg));
}

void Tracer::escape(const Tensor& t, Escape kind, const std::source_location& loc) {
    SizesUnobserved quiet;
    if (passthrough_ || in_eager_) return;
    BreakInfo brk = describe_escape(kind, loc);
    if (cfg_.fullgraph)
        fail("compile(fullgraph=true): graph break in ", cfg_.fn_name, ": ", brk.reason, "\n  at ",
             brk.location, "\n  hint: ", brk.hint);
    Segment* seg = matching() ? end_match(false, kind, {t}) : nullptr;
    if (passthrough_) return;
    if (!seg) seg = end_record(false, {t}, &brk);
    parent_ = seg;
    outcome_ = kind == Escape::bool_conversion ? int(truth_value(t)) : -1;
    cands_.clear();
    assigns_seen_ = 0;
    for (const auto& c : seg->children)
        if (c.outcome == outcome_) cands_.push_back(c.seg.get());
    if (cands_.empty()) start_record();
}

bool Tracer::custom_function(const Tensor& input, const std::source_location& loc) {
    escape(input, Escape::autograd_function, loc);
    return true;
}

void Tracer::finish(const std::vector<Tensor>& results) {
    SizesUnobserved quiet;
    if (passthrough_) return;
    Segment* seg = matching() ? end_match(true, Escape::item, results) : nullptr;
    if (!seg && !passthrough_) end_record(true, results, nullptr);
}

void Tracer::compile_into(Segment& seg, const std::vector<int>& outs) {
    seg.graph = b_->build(outs);
    seg.input_slots = in_slots_;
    for (const auto& a : assigns_)
        seg.assigns.push_back({a.ops_before, b_->final_index(a.value_node), a.target_slot,
                               a.target_node >= 0 ? b_->final_index(a.target_node) : -1});
    for (size_t j = 0; j < outs.size(); ++j) {
        int id = outs[j];
        int s = -1;
        for (const auto& [slot, value] : mutations_)
            if (value == id) s = slot;
        if (s >= 0) {
            seg.writeback_outputs.push_back(int(j));
        } else {
            s = e_.add_slot(SlotKind::output);
            e_.slot_syms[s] = seg.graph->nodes()[seg.graph->outputs()[j]].meta.sym;
            e_.slot_views[size_t(s)] = input_view(e_, seg, int(j));
        }
        seg.output_slots.push_back(s);
        bind(Tensor(node_out_[id].lock()), RefKind::slot, s);
    }
    std::string title = cfg_.fn_name + " entry " + std::to_string(e_.id) + " graph " +
                        std::to_string(e_.num_segments + 1);
    if (trace_log::on()) trace_log::graph_recorded(&cfg_, e_.id, e_.num_segments + 1, title, *seg.graph, *b_);
    seg.run =
        ddp_ ? ddp_split_compile(cfg_.backend, seg.graph, in_examples_, cfg_.backend_options, *ddp_)
             : backend_compile(cfg_.backend, seg.graph, in_examples_, cfg_.backend_options);
    ++stats_.graphs_compiled;
    log_event("graphs", "compiled " + title + ":\n" + seg.graph->str());
    debug_dump(title + ".txt", seg.graph->str() + "\n" + seg.graph->tabular());
    debug_dump(title + ".dot", seg.graph->to_dot());
}

Segment* Tracer::graft(std::unique_ptr<Segment> seg) {
    seg->id = ++e_.num_segments;
    Segment* raw = seg.get();
    if (!parent_)
        e_.root = std::move(seg);
    else
        parent_->children.push_back({outcome_, std::move(seg)});
    return raw;
}

void Tracer::rewind_rng() {
    if (rng_saved_) set_rng_state(rng_);
    rng_saved_ = false;
}

}  // namespace kiln::jit::tracing
