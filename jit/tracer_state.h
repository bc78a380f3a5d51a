// The tracer's state while fn runs (jit/tracer.cpp records, jit/tracer_replay.cpp replays
// and checks a recorded program). Internal to jit/: include jit/tracer.h instead.
#pragma once
#include <algorithm>
#include <map>
#include <memory>
#include <sstream>
#include <unordered_map>

#include "autograd/node.h"
#include "jit/log.h"
#include "jit/sym_shapes.h"
#include "jit/trace_log.h"
#include "jit/tracer.h"
#include "tensor/kernels.h"

namespace kiln::jit::tracing {


struct Step {
    bool is_detach = false;
    std::vector<Tensor> aliases;  // other tensors that took this value (in-place targets)
    OpId op{};
    Attrs attrs;
    std::vector<AttrPatch> patches;  // size-derived attributes (dispatch_sized)
    std::vector<Tensor> size_sources;  // the tensors whose symbols the patches read
    std::vector<Tensor> inputs;
    Tensor out;
    bool grad = true;
};

class Tracer final : public DispatchHook {
   public:
    Tracer(Entry& e, const Args& args, const std::vector<int64_t>& syms, const TraceConfig& cfg, TraceStats& st)
        : e_(e), syms_(syms), cfg_(cfg), stats_(st) {
        int slot = 0;
        for (size_t i = 0; i < args.size(); ++i) {
            if (args[i].kind != ArgKind::tensor) continue;
            if (e_.root == nullptr && slot >= int(e_.slot_kinds.size())) e_.add_slot(SlotKind::argument);
            slot_arg_.push_back(&args[i]);
            slot_guard_.push_back(&e_.guards.args[i]);
            bind(args[i].tensor, RefKind::slot, slot++);
        }
        for (size_t s = 0; s < e_.held.size(); ++s)
            if (e_.held[s].defined()) bind(e_.held[s], RefKind::slot, int(s));
        if (e_.root) cands_ = {e_.root.get()};
        else start_record();
    }

    Tensor call(OpId op, std::span<const Tensor> inputs, const Attrs& attrs) override {
        return call_sized(op, inputs, attrs, {});
    }

    Tensor call_sized(OpId op, std::span<const Tensor> inputs, const Attrs& attrs, std::span<const SizeOrigin> origins) override {
        SizesUnobserved quiet;
        if (passthrough_) return dispatch_eager(op, inputs, attrs);
        if (op_info(op).kind == OpKind::random && !rng_saved_) {  // the compiled run re-draws from here
            rng_ = get_rng_state();
            rng_saved_ = true;
        }
        if (reads_written_storage(inputs)) {
            go_eager("a tensor that aliases an input written by an in-place op is read after the write");
            return dispatch_eager(op, inputs, attrs);
        }
        Step s{.op = op, .attrs = attrs, .inputs = {inputs.begin(), inputs.end()}, .grad = autograd::grad_enabled()};
        s.patches = patches_of(origins, attrs, s.size_sources);
        if (matching()) return match(std::move(s));
        std::vector<int> ids;
        for (const Tensor& t : inputs) ids.push_back(value_of(t));
        Tensor out = eager(op, inputs, attrs);
        bind(out, RefKind::op, record_node(record_call(s, ids, out), out));
        return out;
    }

    // fn's code read a size as a number: if it is a symbol, the entry now depends on its
    // value, so the value is pinned by a guard (docs/jit.md, "Sizes read as numbers").
    void size_read(const Tensor& t, int64_t dim, const std::source_location& loc) override {
        if (passthrough_ || in_eager_) return;
        std::vector<int> syms = sym_dims(t);
        for (size_t d = 0; d < syms.size(); ++d) {
            if (syms[d] < 0 || (dim >= 0 && int64_t(d) != dim)) continue;
            std::ostringstream why;
            why << (dim >= 0 ? "size(" + std::to_string(d) + ")" : std::string("the shape")) << " of a " << shape_str(t)
                << " tensor read at " << loc.file_name() << ":" << loc.line();
            pin(syms[d], why.str());
        }
    }

    void detached(const Tensor& src, const Tensor& out) override {
        SizesUnobserved quiet;
        if (passthrough_ || in_eager_ || !resolve(src)) return;  // autograd's own detaches; outside tensors lift as they are
        if (matching()) {
            match(Step{.is_detach = true, .inputs = {src}, .out = out});
            return;
        }
        bind(out, RefKind::op, record_node(record_detach(value_of(src), out), out));
    }

    void escape(const Tensor& t, Escape kind, const std::source_location& loc) override {
        SizesUnobserved quiet;
        if (passthrough_ || in_eager_) return;
        BreakInfo brk = describe_escape(kind, loc);
        if (cfg_.fullgraph)
            fail("compile(fullgraph=true): graph break in ", cfg_.fn_name, ": ", brk.reason, "\n  at ", brk.location, "\n  hint: ", brk.hint);
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

    bool custom_function(const Tensor& input, const std::source_location& loc) override {
        escape(input, Escape::autograd_function, loc);
        return true;
    }

    // An in-place op, functionalized: `value` (an op of the open graph) becomes the
    // target's value from here on; a mutated argument, captured tensor or earlier value
    // is written back after the graph. The eager write happens now, as eager would do it.
    void assign(const Tensor& target, const Tensor& value) override {
        SizesUnobserved quiet;
        if (passthrough_ || in_eager_) return assign_eager(target, value);
        same_symbols(target, value);
        if (std::string why = functionalize_blocker(target, value); !why.empty()) {
            go_eager(why);
            return assign_eager(target, value);
        }
        const Ref* vr = resolve(value);
        KILN_CHECK(vr && vr->kind == RefKind::op, "jit: internal error: an in-place value that is not a recorded op");
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
        if (slot >= 0 || !tr || tr->kind == RefKind::slot) snapshot_inputs(target, slot);
        assign_data(target, value);
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

    void host_effect(const std::string& what, const std::source_location& loc) override {
        SizesUnobserved quiet;
        if (passthrough_ || in_eager_) return;
        mark_rerun(what + " at " + loc.file_name() + ":" + std::to_string(loc.line()));
    }

    void guard_value(const std::string& what, std::function<int64_t()> read) override {
        SizesUnobserved quiet;
        if (passthrough_ || in_eager_) return;
        for (const ValueGuard& g : e_.value_guards)
            if (g.what == what) return;
        int64_t v = read();
        e_.value_guards.push_back({what, std::move(read), v});
        log_event("guards", "guard added to " + cfg_.fn_name + " entry " + std::to_string(e_.id) + ": " + what + " == " + std::to_string(v));
    }

    void finish(const std::vector<Tensor>& results) {
        SizesUnobserved quiet;
        if (passthrough_) return;
        Segment* seg = matching() ? end_match(true, Escape::item, results) : nullptr;
        if (!seg && !passthrough_) end_record(true, results, nullptr);
    }

   private:
    enum class RefKind { slot, op };  // op: a builder id when recording, a step index when replaying
    struct Ref {
        std::weak_ptr<TensorImpl> w;
        RefKind kind;
        int id;
    };

    bool matching() const { return b_ == nullptr; }

    // --- symbolic sizes (jit/sym_shapes.h)
    void pin(int k, const std::string& why) {
        if (k < 0 || e_.guards.is_pinned(k)) return;
        e_.guards.pin(k, syms_[size_t(k)], why);
        if (trace_log::on()) trace_log::symbol_pinned(&cfg_, e_.id, k, syms_[size_t(k)], why);
        log_event("guards", cfg_.fn_name + " entry " + std::to_string(e_.id) + ": s" + std::to_string(k) + " pinned to " +
                                std::to_string(syms_[size_t(k)]) + " (" + why + ")");
    }
    std::vector<int> masked(std::vector<int> sym, size_t rank) const {
        sym.resize(rank, -1);
        for (int& k : sym)
            if (k >= 0 && e_.guards.is_pinned(k)) k = -1;
        return sym;
    }
    // The symbols of t's dims as this recording knows them (-1: static or pinned).
    std::vector<int> sym_dims(const Tensor& t) {
        size_t rank = t.impl()->shape.size();
        const Ref* r = resolve(t);
        if (!r) return std::vector<int>(rank, -1);  // an outside tensor: lifted with its sizes
        if (r->kind == RefKind::slot) {
            if (e_.slot_kinds[r->id] == SlotKind::argument) return masked(slot_guard_[r->id]->sym, rank);
            return masked(e_.slot_syms[r->id], rank);
        }
        if (!matching()) return masked(b_->meta(r->id).sym, rank);
        if (cands_.empty() || !cands_[0]->graph) return std::vector<int>(rank, -1);
        const Graph& g = *cands_[0]->graph;
        return masked(g.nodes()[g.num_inputs() + r->id].meta.sym, rank);
    }
    // An in-place write needs target and value to have the same sizes on every call.
    void same_symbols(const Tensor& target, const Tensor& value) {
        std::vector<int> a = sym_dims(target), b = sym_dims(value);
        for (size_t d = 0; d < a.size() && d < b.size(); ++d)
            if (a[d] != b[d]) {
                pin(a[d], "an in-place write into a tensor whose sizes equal its value's only for these sizes");
                pin(b[d], "an in-place write into a tensor whose sizes equal its value's only for these sizes");
            }
    }
    // A composite's size-derived attributes (SizeOrigin) as expressions over the symbols.
    std::vector<AttrPatch> patches_of(std::span<const SizeOrigin> origins, const Attrs& attrs, std::vector<Tensor>& sources) {
        std::vector<AttrPatch> out;
        for (const SizeOrigin& o : origins) {
            SymExpr e{.reciprocal = o.reciprocal};
            for (const auto& [t, d] : o.dims) {
                int k = sym_dims(t)[size_t(d)];
                if (k < 0) {
                    e.coeff *= t.impl()->shape[size_t(d)];
                    continue;
                }
                e.syms.push_back(k);
                sources.push_back(t);
            }
            if (e.syms.empty()) continue;
            std::sort(e.syms.begin(), e.syms.end());
            double want = o.field == AttrField::shape ? double(attrs.shape[size_t(o.index)])
                          : o.field == AttrField::scalar ? attrs.scalar
                          : o.field == AttrField::end ? double(attrs.end) : attrs.hi;
            if (e.eval(syms_) != want) {  // the origin does not say this attribute: keep it constant, exact
                for (int k : e.syms) pin(k, "an attribute whose stated size origin does not match it");
                continue;
            }
            out.push_back({o.field, o.index, std::move(e)});
        }
        return out;
    }
    // Records an op with its output's symbols, pinning what the shape rule cannot say.
    int record_call(const Step& s, const std::vector<int>& ids, const Tensor& out) {
        for (const Tensor& t : s.size_sources) value_of(t);  // the graph reads those symbols off its inputs
        ValueMeta meta = meta_of(out);
        for (int round = 0; round < 4; ++round) {  // a pin can change the answer; it settles fast
            std::vector<ValueMeta> in;
            for (int id : ids) {
                ValueMeta m = b_->meta(id);
                m.sym = masked(m.sym, m.shape.size());
                in.push_back(std::move(m));
            }
            SymShape r = infer_sym_shape(s.op, s.attrs, s.patches, in, out.impl()->shape, syms_);
            bool pinned_new = false;
            for (int k : r.pin) {
                if (e_.guards.is_pinned(k)) continue;
                pin(k, std::string("a size of ") + op_info(s.op).name + "'s output that no one symbol can say (or an agreement of sizes that holds only for these)");
                pinned_new = true;
            }
            meta.sym = masked(r.sym, meta.shape.size());
            if (!pinned_new) break;
        }
        return b_->call(s.op, s.attrs, ids, std::move(meta), s.grad, s.patches);
    }
    int record_detach(int arg, const Tensor& out) {
        ValueMeta meta = meta_of(out);
        meta.sym = masked(b_->meta(arg).sym, meta.shape.size());
        return b_->detach(arg, std::move(meta));
    }

    // --- in-place ops and the eager fallback
    // Why `target <- value` can't be functionalized ("" when it can).
    std::string functionalize_blocker(const Tensor& target, const Tensor& value) {
        if (autograd::grad_enabled() && (target.requires_grad() || value.requires_grad()))
            return "an in-place op on a tensor of shape " + shape_str(target) + " while autograd records it (its history is rebased)";
        const Storage* st = target.impl()->storage.get();
        for (const auto& [impl, ref] : refs_) {
            if (impl == target.impl()) continue;
            std::shared_ptr<TensorImpl> live = ref.w.lock();
            if (live.get() == impl && live->storage.get() == st)
                return "an in-place op on a tensor of shape " + shape_str(target) + " that shares storage with another tensor fn uses (a view or its base)";
        }
        return {};
    }
    static std::string shape_str(const Tensor& t) {
        std::ostringstream os;
        kiln::operator<<(os, t.shape());
        return os.str();
    }

    // The rest of this call runs eagerly, and so does every later call of this entry.
    void go_eager(const std::string& why) {
        if (cfg_.fullgraph) fail("compile(fullgraph=true): ", cfg_.fn_name, " can't be captured whole: ", why);
        passthrough_ = true;
        e_.eager_reason = why;
        if (trace_log::on()) trace_log::runs_eagerly(&cfg_, e_.id, why);
        log_event("breaks", cfg_.fn_name + " entry " + std::to_string(e_.id) + " runs eagerly from now on: " + why);
    }

    // The eager run drew random numbers; the compiled run must draw the same ones, leaving
    // the generator where eager left it.
    void rewind_rng() {
        if (rng_saved_) set_rng_state(rng_);
        rng_saved_ = false;
    }

    void mark_rerun(const std::string& why) {
        e_.rerun = true;
        if (e_.rerun_reason.empty()) e_.rerun_reason = why;
    }

    // Reading a tensor that aliases a storage this segment writes back: the graph would
    // read it before the write-back, eager after. Not functionalized.
    bool reads_written_storage(std::span<const Tensor> inputs) const {
        if (written_slot_.empty()) return false;
        for (const Tensor& t : inputs)
            for (const auto& [impl, slot] : written_slot_)
                if (impl != t.impl() && impl->storage == t.impl()->storage) return true;
        return false;
    }

    static Tensor fresh_copy(const Tensor& t) {
        NoDispatchHook plain;  // the tracer's own copy is not part of fn
        Tensor c = empty(t.shape(), t.dtype(), t.device());  // on t's device: later ops read it with t's peers
        strided_copy(c, t.detach());
        return c;
    }

    // Ops recorded (or replayed) earlier read `target` before the write: keep its old value.
    void snapshot_inputs(const Tensor& target, int slot) {
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

    static void assign_data(const Tensor& target, const Tensor& value) {
        NoDispatchHook plain;
        write_values(target, value);
    }

    bool writes_back(int slot) const {
        return slot >= 0 && e_.slot_kinds[slot] != SlotKind::output;
    }

    void record_assign(const Tensor& target, int old_id, int slot, int value_id) {
        assigns_.push_back({b_->num_ops(), value_id, slot, old_id});
        if (writes_back(slot)) {
            mutations_[slot] = value_id;
            if (std::find(e_.mutated_slots.begin(), e_.mutated_slots.end(), slot) == e_.mutated_slots.end())
                e_.mutated_slots.push_back(slot);
        }
        if (old_id >= 0) node_out_[old_id].reset();  // the target no longer holds the old value
        node_out_[value_id] = target.impl_ptr();
    }

    bool match_assign(const Tensor& target, const Ref* tr, int slot, int value_id) {
        std::vector<Segment*> keep;
        for (Segment* c : cands_) {
            if (assigns_seen_ >= int(c->assigns.size()) || !c->graph) continue;
            const Segment::Assign& a = c->assigns[assigns_seen_];
            int ni = c->graph->num_inputs();
            if (a.ops_before != int(log_.size()) || a.value_node != ni + value_id) continue;
            bool ok = tr ? a.target_slot == slot && a.target_node == (tr->kind == RefKind::op ? ni + tr->id : -1)
                         : a.target_slot >= 0 && a.target_node == -1 && e_.slot_kinds[a.target_slot] == SlotKind::lifted;
            if (ok) keep.push_back(c);
        }
        if (keep.empty()) return false;
        cands_ = std::move(keep);
        int target_slot = cands_[0]->assigns[assigns_seen_].target_slot;
        ++assigns_seen_;
        if (!tr) slot_tensor_[target_slot] = target;
        alog_.push_back({int(log_.size()), target, tr && tr->kind == RefKind::op ? tr->id : -1, tr ? slot : target_slot, value_id});
        return true;
    }

    const Ref* resolve(const Tensor& t) {
        auto it = refs_.find(t.impl());
        if (it == refs_.end()) return nullptr;
        if (it->second.w.lock().get() != t.impl()) {  // a freed tensor's address, reused
            refs_.erase(it);
            return nullptr;
        }
        return &it->second;
    }
    void bind(const Tensor& t, RefKind k, int id) {
        refs_[t.impl()] = Ref{t.impl_ptr(), k, id};
        if (k == RefKind::slot) slot_tensor_[id] = t;
    }

    Tensor eager(OpId op, std::span<const Tensor> inputs, const Attrs& attrs) {
        in_eager_ = true;
        struct Reset { bool& f; ~Reset() { f = false; } } reset{in_eager_};
        return dispatch_eager(op, inputs, attrs);
    }

    // --- recording
    void start_record() {
        b_ = std::make_unique<GraphBuilder>(int(syms_.size()));
        if (trace_log::on()) trace_log::recording_started();
        in_slots_.clear();
        in_examples_.clear();
        slot_ph_.clear();
        node_out_.clear();
        assigns_.clear();
        mutations_.clear();
    }

    int record_node(int id, const Tensor& out) {
        node_out_.resize(id + 1);
        node_out_[id] = out.impl_ptr();
        if (trace_log::on()) trace_log::node_recorded(id);
        return id;
    }

    // The slot holding `t`, lifting an outside tensor (closure, parameter) into a new one.
    int slot_of(const Tensor& t) {
        const Ref* r = resolve(t);
        if (r && r->kind == RefKind::slot) return r->id;
        KILN_CHECK(!r, "jit: internal error: slot_of on a value of the open graph");
        int s = e_.add_slot(SlotKind::lifted, t);
        bind(t, RefKind::slot, s);
        return s;
    }

    int value_of(const Tensor& t) {
        const Ref* r = resolve(t);
        if (r && r->kind == RefKind::op) return r->id;
        int s = slot_of(t);
        if (auto it = slot_ph_.find(s); it != slot_ph_.end()) return it->second;
        ValueMeta meta = meta_of(t);
        std::string name, source;
        if (e_.slot_kinds[s] == SlotKind::argument) {
            meta.sym = slot_guard_[s]->sym;
            name = arg_name(*slot_arg_[s], cfg_.arg_names);
            source = "argument " + name;
        } else {
            meta.sym = e_.slot_syms[s];  // an earlier graph's output keeps its symbols; lifted tensors are static
            meta.sym.resize(meta.shape.size(), -1);
            name = e_.slot_kinds[s] == SlotKind::lifted ? "lifted" : "prev";
            source = e_.slot_kinds[s] == SlotKind::lifted ? "lifted outside tensor" : "output of an earlier graph";
        }
        int id = b_->placeholder(name, std::move(meta), source);
        node_out_.resize(id + 1);
        slot_ph_[s] = id;
        in_slots_.push_back(s);
        in_examples_.push_back(t);
        return id;
    }

    // Closes the open recording as a segment (graph breaks at an escape, or fn returned).
    Segment* end_record(bool is_return, const std::vector<Tensor>& ts, const BreakInfo* brk) {
        std::vector<int> outs;
        auto add_out = [&](int id) { if (std::find(outs.begin(), outs.end(), id) == outs.end()) outs.push_back(id); };
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
            adopt(*seg, in_examples_, live, input_views(*seg));
        }
        for (const Tensor& t : ts) {
            if (is_return) seg->return_slots.push_back(slot_of(t));
            else seg->escape_slot = slot_of(t);
        }
        for (int s : seg->return_slots) e_.returns_views = e_.returns_views || e_.slot_views[size_t(s)].base >= 0;
        if (brk) {
            seg->brk = *brk;
            e_.breaks.push_back(*brk);
            ++stats_.breaks;
            if (trace_log::on()) trace_log::graph_break(&cfg_, e_.id, *brk);
            if (brk->kind != Escape::bool_conversion) mark_rerun(escape_name(brk->kind) + " at " + brk->location);
            log_event("breaks", "graph break in " + cfg_.fn_name + " (entry " + std::to_string(e_.id) + "): " + brk->reason + " at " + brk->location);
        }
        b_.reset();
        written_slot_.clear();
        return graft(std::move(seg));
    }

    void compile_into(Segment& seg, const std::vector<int>& outs) {
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
                e_.slot_views[size_t(s)] = input_view(seg, int(j));
            }
            seg.output_slots.push_back(s);
            bind(Tensor(node_out_[id].lock()), RefKind::slot, s);
        }
        std::string title = cfg_.fn_name + " entry " + std::to_string(e_.id) + " graph " +
                            std::to_string(e_.num_segments + 1);
        if (trace_log::on())
            trace_log::graph_recorded(&cfg_, e_.id, e_.num_segments + 1, title, *seg.graph, *b_);
        seg.run = backend_compile(cfg_.backend, seg.graph, in_examples_, cfg_.backend_options);
        ++stats_.graphs_compiled;
        log_event("graphs", "compiled " + title + ":\n" + seg.graph->str());
        debug_dump(title + ".txt", seg.graph->str() + "\n" + seg.graph->tabular());
        debug_dump(title + ".dot", seg.graph->to_dot());
    }

    // Output j of `seg` as a view of an input: a chain of view ops (or detach) from an
    // argument or lifted slot, from a value an in-place op wrote into one, or from an
    // earlier output that is itself such a view. None (base -1) otherwise.
    SlotView input_view(const Segment& seg, int j) const {
        const Graph& g = *seg.graph;
        int node = g.outputs()[size_t(j)];
        auto is_view = [&](const Node& n) {
            return n.kind == NodeKind::detach || (n.kind == NodeKind::call && op_info(n.op).kind == OpKind::view);
        };
        std::vector<SlotView::Step> chain;
        for (; is_view(g.nodes()[size_t(node)]); node = g.nodes()[size_t(node)].args[0]) chain.push_back({seg.graph, node});
        if (chain.empty()) return {};
        std::reverse(chain.begin(), chain.end());
        SlotView v;
        if (node < g.num_inputs()) {
            int slot = seg.input_slots[size_t(node)];
            if (e_.slot_kinds[size_t(slot)] == SlotKind::output) v = e_.slot_views[size_t(slot)];  // a view of a view
            else v.base = slot;
        } else {
            for (const Segment::Assign& a : seg.assigns)
                if (a.value_node == node && a.target_slot >= 0 && e_.slot_kinds[size_t(a.target_slot)] != SlotKind::output)
                    v.base = a.target_slot;
        }
        if (v.base < 0) return {};
        v.chain.insert(v.chain.end(), chain.begin(), chain.end());
        return v;
    }
    // Per output of `seg`: whether it is a view of an input (the eager tensor stays as is).
    std::vector<bool> input_views(const Segment& seg) const {
        std::vector<bool> out;
        for (size_t j = 0; j < seg.output_slots.size(); ++j)
            out.push_back(!seg.is_writeback(int(j)) && e_.slot_views[size_t(seg.output_slots[j])].base >= 0);
        return out;
    }

    Segment* graft(std::unique_ptr<Segment> seg) {
        seg->id = ++e_.num_segments;
        Segment* raw = seg.get();
        if (!parent_) e_.root = std::move(seg);
        else parent_->children.push_back({outcome_, std::move(seg)});
        return raw;
    }

    // The segment's compiled code runs, and the tensors user code holds take on its
    // results (storage and autograd history): what the host sees is the compiled result.
    // A write-back output is copied into the mutated tensor's own storage instead.
    // An output that is a view of an input keeps the eager view user code holds (its values
    // are the input's, written by the eager in-place ops): `views`.
    static void adopt(const Segment& seg, std::span<const Tensor> inputs, const std::vector<Tensor>& live,
                      const std::vector<bool>& views) {
        std::vector<Tensor> outs;
        {
            NoDispatchHook plain;  // the compiled code's own ops are not recorded
            outs = seg.run(inputs);
        }
        KILN_CHECK(outs.size() == live.size(), "compile: backend returned ", outs.size(), " values, expected ", live.size());
        for (size_t j = 0; j < outs.size(); ++j) {
            TensorImpl& dst = *live[j].impl();
            const TensorImpl& src = *outs[j].impl();
            KILN_CHECK(src.shape == dst.shape && src.dtype == dst.dtype, "compile: backend output ", j, " is ", src.dtype,
                       src.shape, ", eager gave ", dst.dtype, dst.shape);
            if (seg.is_writeback(int(j))) {
                NoDispatchHook plain;
                write_values(live[j], outs[j]);
                continue;
            }
            if (views[j]) continue;
            dst.storage = src.storage;
            dst.strides = src.strides;
            dst.offset = src.offset;
            dst.requires_grad = src.requires_grad;
            dst.grad_fn = src.grad_fn;
            dst.output_nr = src.output_nr;
        }
    }

    // The inputs of a replayed candidate, read off the ops that used them.
    std::vector<Tensor> replay_inputs(const Segment& c) const;
    // --- replaying
    bool arg_matches(const Segment& c, int arg, const Tensor& t);
    bool step_matches(const Segment& c, const Step& s);
    Tensor match(Step s);
    // The slot a candidate assigns to `t` at its end, or -1 if it disagrees.
    bool end_matches(const Segment& c, const Tensor& t, int expected);
    Segment* choose(bool is_return, Escape kind, const std::vector<Tensor>& ts);
    // Ends a replayed segment: binds its outputs to their slots. Null when it diverged
    // (then recording has taken over).
    Segment* end_match(bool is_return, Escape kind, const std::vector<Tensor>& ts);
    // The replay went where no recording did. For a re-run entry that is a new variant
    // (host code decided on data): record it as a sibling. Otherwise fn is not deterministic.
    void diverge(const std::string& where);

    Entry& e_;
    std::vector<int64_t> syms_;
    const TraceConfig& cfg_;
    TraceStats& stats_;
    std::vector<const ArgValue*> slot_arg_;
    std::vector<const ArgGuard*> slot_guard_;
    std::unordered_map<const TensorImpl*, Ref> refs_;
    bool in_eager_ = false;
    Segment* parent_ = nullptr;  // where the next segment is grafted
    int outcome_ = -1;
    // recording (b_ set)
    std::unique_ptr<GraphBuilder> b_;
    std::vector<int> in_slots_;
    std::vector<Tensor> in_examples_;
    std::unordered_map<int, int> slot_ph_;
    std::vector<std::weak_ptr<TensorImpl>> node_out_;  // per builder id: liveness
    std::vector<Segment::Assign> assigns_;           // in-place ops of the open graph (builder ids)
    std::map<int, int> mutations_;                    // argument/lifted slot -> builder id of its new value
    // replaying (b_ null)
    std::vector<Segment*> cands_;
    std::vector<Step> log_;
    struct LoggedAssign {
        int ops_before;
        Tensor target;
        int old_step;  // step whose value the target held, or -1
        int slot;      // the target's slot, or -1
        int value_step;
    };
    std::vector<LoggedAssign> alog_;  // in-place ops matched in the open segment
    int assigns_seen_ = 0;
    // both
    bool rng_saved_ = false;    // rng_ holds the generator before the open segment's first random op
    RngState rng_;
    bool passthrough_ = false;  // fn runs eagerly from here on (entry.eager_reason says why)
    std::unordered_map<int, Tensor> slot_tensor_;                 // the tensor each bound slot holds
    std::unordered_map<const TensorImpl*, int> written_slot_;     // in-place targets -> the slot written back
};


}  // namespace kiln::jit::tracing
