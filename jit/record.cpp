// Recording: each op fn runs (call_sized, from dispatch) becomes a node of the open graph,
// its output made by its shape rule (a fake tensor) or by running it eagerly (fake_ off);
// the tensors it reads become the graph's placeholders (slots). Entry: Tracer::record_call.
// Where the entry already has segments, jit/tracer_replay.cpp checks the op against them
// instead.
#include "autograd/node.h"
#include "jit/ddp_split.h"
#include "jit/fake.h"
#include "jit/tracer_state.h"

namespace kiln::jit::tracing {

Tensor Tracer::call_sized(OpId op, std::span<const Tensor> inputs, const Attrs& attrs,
                          std::span<const SizeOrigin> origins) {
    SizesUnobserved quiet;
    if (passthrough_) return dispatch_eager(op, inputs, attrs);
    if (op_info(op).kind == OpKind::random && !rng_saved_) {  // the compiled run re-draws from here
        rng_ = get_rng_state();
        rng_saved_ = true;
    }
    if (reads_written_storage(inputs)) {
        go_eager(
            "a tensor that aliases an input written by an in-place op is read after the write");
        return dispatch_eager(op, inputs, attrs);
    }
    Step s{.op = op,
           .attrs = attrs,
           .inputs = {inputs.begin(), inputs.end()},
           .grad = autograd::grad_enabled()};
    s.patches = patches_of(origins, attrs, s.size_sources);
    if (matching()) return match(std::move(s));
    std::vector<int> ids;
    for (const Tensor& t : inputs) ids.push_back(value_of(t));
    Tensor out = fake_ ? fake_op(op, inputs, attrs) : eager(op, inputs, attrs);
    int id = record_node(record_call(s, ids, out), out);
    bind(out, RefKind::op, id);
    if (is_fake(out)) fake_made_.push_back({out.impl_ptr(), id});
    return out;
}

void Tracer::detached(const Tensor& src, const Tensor& out) {
    SizesUnobserved quiet;
    if (passthrough_ || in_eager_ || !resolve(src))
        return;  // autograd's own detaches; outside tensors lift as they are
    if (matching()) {
        match(Step{.is_detach = true, .inputs = {src}, .out = out});
        return;
    }
    int id = record_node(record_detach(value_of(src), out), out);
    bind(out, RefKind::op, id);
    if (is_fake(out)) fake_made_.push_back({out.impl_ptr(), id});
}

// Records an op with its output's symbols (jit/sym_record.cpp).
int Tracer::record_call(const Step& s, const std::vector<int>& ids, const Tensor& out) {
    if (const auto& ddp = active_ddp()) ddp_ = ddp;  // the graph is split at its buckets
    for (const Tensor& t : s.size_sources)
        value_of(t);  // the graph reads those symbols off its inputs
    return b_->call(s.op, s.attrs, ids, sym_meta(s, ids, out), s.grad, s.patches);
}

int Tracer::record_detach(int arg, const Tensor& out) {
    ValueMeta meta = meta_of(out);
    meta.sym = masked(b_->meta(arg).sym, meta.shape.size());
    return b_->detach(arg, std::move(meta));
}

void Tracer::start_record() {
    b_ = std::make_unique<GraphBuilder>(int(syms_.size()));
    if (trace_log::on()) trace_log::recording_started();
    in_slots_.clear();
    in_examples_.clear();
    fake_writes_.clear();
    fake_made_.clear();
    slot_ph_.clear();
    node_out_.clear();
    assigns_.clear();
    mutations_.clear();
    ddp_.reset();
}

int Tracer::record_node(int id, const Tensor& out) {
    node_out_.resize(id + 1);
    node_out_[id] = out.impl_ptr();
    if (trace_log::on()) trace_log::node_recorded(id);
    return id;
}

int Tracer::slot_of(const Tensor& t) {
    const Ref* r = resolve(t);
    if (r && r->kind == RefKind::slot) return r->id;
    KILN_CHECK(!r, "jit: internal error: slot_of on a value of the open graph");
    int s = e_.add_slot(SlotKind::lifted, t);
    bind(t, RefKind::slot, s);
    return s;
}

int Tracer::value_of(const Tensor& t) {
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
        meta.sym = e_.slot_syms[s];  // an earlier graph's output keeps its symbols; lifted tensors
                                     // are static
        meta.sym.resize(meta.shape.size(), -1);
        name = e_.slot_kinds[s] == SlotKind::lifted ? "lifted" : "prev";
        source = e_.slot_kinds[s] == SlotKind::lifted ? "lifted outside tensor"
                                                      : "output of an earlier graph";
    }
    int id = b_->placeholder(name, std::move(meta), source);
    node_out_.resize(id + 1);
    slot_ph_[s] = id;
    in_slots_.push_back(s);
    in_examples_.push_back(t);
    return id;
}

}  // namespace kiln::jit::tracing
