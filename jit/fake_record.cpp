// Shape-only recording: while the tracer records a new entry, each op's output is a fake
// tensor made by its shape rule (jit/fake.h); no kernel runs. At a graph break or fn's
// return the graph runs on the real inputs and its outputs give the live fake tensors
// their values (jit/segments.cpp, adopt). Where the recording needs values before that —
// an op with no shape rule, fn going eager — materialize() gives them and the rest of the
// call records with real tensors, as KILN_FAKE_TRACE=0 would. docs/jit.md,
// "Shape-only tracing". Entry: Tracer::fake_op.
#include <algorithm>

#include "autograd/node.h"
#include "jit/backends.h"
#include "jit/fake.h"
#include "jit/log.h"
#include "jit/tracer_state.h"
#include "tensor/kernels.h"

namespace kiln::jit::tracing {

Tensor Tracer::fake_op(OpId op, std::span<const Tensor> inputs, const Attrs& attrs) {
    Tensor out;
    {
        in_eager_ = true;
        struct Reset {
            bool& f;
            ~Reset() { f = false; }
        } reset{in_eager_};
        out = fake_call(op, inputs, attrs);
    }
    if (out.defined()) return out;
    materialize(std::string(op_name(op)) + " has no shape rule");
    return eager(op, inputs, attrs);
}

namespace {

// The fake tensors of `made` still alive and fake, and the builder ids to compute them.
struct Pending {
    std::vector<Tensor> fakes;
    std::vector<size_t> out_of;  // per fake: its index in outs
    std::vector<int> outs;
};

Pending pending(const std::vector<std::pair<std::weak_ptr<TensorImpl>, int>>& made) {
    Pending p;
    std::vector<const TensorImpl*> seen;
    for (auto e = made.rbegin(); e != made.rend(); ++e) {  // a tensor's last value counts
        const auto& [w, id] = *e;
        Tensor t(w.lock());
        if (!is_fake(t) || std::find(seen.begin(), seen.end(), t.impl()) != seen.end()) continue;
        seen.push_back(t.impl());
        auto it = std::find(p.outs.begin(), p.outs.end(), id);
        p.out_of.push_back(size_t(it - p.outs.begin()));
        if (it == p.outs.end()) p.outs.push_back(id);
        p.fakes.push_back(t);
    }
    return p;
}

// The graph's outputs become the fake tensors' values (a second tensor of one value gets
// a copy: real tracing gave it storage of its own).
void give_values(const Pending& p, const std::vector<Tensor>& vals) {
    std::vector<bool> used(vals.size(), false);
    for (size_t j = 0; j < p.fakes.size(); ++j) {
        TensorImpl& dst = *p.fakes[j].impl();
        Tensor v = vals[p.out_of[j]];
        KILN_CHECK(v.impl()->shape == dst.shape && v.dtype() == dst.dtype &&
                       v.device() == p.fakes[j].device(),
                   "jit: internal error: the shape rule of a recorded op gave ", dst.dtype,
                   dst.shape, " on ", p.fakes[j].device(), ", its kernel ", v.dtype(), v.shape(),
                   " on ", v.device());
        if (used[p.out_of[j]]) {
            NoDispatchHook plain;
            Tensor c = empty(v.shape(), v.dtype(), v.device());
            strided_copy(c, v.detach());
            c.impl()->requires_grad = v.impl()->requires_grad;
            c.impl()->grad_fn = v.impl()->grad_fn;
            c.impl()->output_nr = v.impl()->output_nr;
            v = c;
        }
        used[p.out_of[j]] = true;
        const TensorImpl& src = *v.impl();
        dst.storage = src.storage;
        dst.strides = src.strides;
        dst.offset = src.offset;
        dst.requires_grad = src.requires_grad;
        dst.grad_fn = src.grad_fn;
        dst.output_nr = src.output_nr;
    }
}

// The open graph's values `outs`, interpreted on `inputs` as eager computed them (grad
// mode per node as recorded).
std::vector<Tensor> run_prefix(const GraphBuilder& b, const std::vector<int>& outs,
                               std::span<const Tensor> inputs) {
    std::shared_ptr<const Graph> g = b.build(outs);
    NoDispatchHook plain;  // the graph's own ops are not fn's
    autograd::EnableGradGuard grad;
    return interpret(*g, inputs);
}

Tensor copy_value(const Tensor& t) {
    NoDispatchHook plain;
    Tensor c = empty(t.shape(), t.dtype(), t.device());
    strided_copy(c, t.detach());
    return c;
}

}  // namespace

void Tracer::materialize(const std::string& why) {
    if (!fake_) return;
    fake_ = false;
    if (e_.fake_fallback.empty()) e_.fake_fallback = why;
    log_event("compile", cfg_.fn_name + " entry " + std::to_string(e_.id) +
                             ": shape-only tracing stops (" + why +
                             "); the rest of the call records with real tensors");
    if (!b_) return;
    Pending p = pending(fake_made_);
    size_t n_fake = p.outs.size();
    std::vector<int> outs = p.outs;
    for (const auto& w : fake_writes_) outs.push_back(w.second);
    if (outs.empty()) return;
    // draws what eager would have drawn by now; end_record rewinds for the compiled run
    std::vector<Tensor> vals = run_prefix(*b_, outs, in_examples_);
    give_values(p, std::vector<Tensor>(vals.begin(), vals.begin() + long(n_fake)));
    NoDispatchHook plain;
    for (size_t k = 0; k < fake_writes_.size(); ++k) {  // the writes real tracing did eagerly
        const Tensor& target = fake_writes_[k].first;
        for (Tensor& ex : in_examples_)  // the graph reads the value before the write
            if (ex.same(target)) ex = copy_value(target);
        write_values(target, vals[n_fake + k]);
    }
    fake_writes_.clear();
}

Tracer::Strays Tracer::strays_before(const std::vector<int>& outs) {
    Strays st;
    for (const auto& [w, id] : fake_made_) {
        std::shared_ptr<TensorImpl> t = w.lock();
        if (t && t->storage && t->storage->fake &&
            std::find(outs.begin(), outs.end(), id) == outs.end())
            st.any = true;
    }
    if (!st.any) return st;
    st.inputs = in_examples_;
    for (const auto& [target, id] : fake_writes_)
        for (Tensor& ex : st.inputs)
            if (ex.same(target)) ex = copy_value(target);
    st.rng = get_rng_state();
    return st;
}

void Tracer::fill_strays(const Strays& st) {
    if (!st.any) return;
    Pending p = pending(fake_made_);
    if (p.fakes.empty()) return;
    log_event("compile", cfg_.fn_name + " entry " + std::to_string(e_.id) + ": " +
                             std::to_string(p.fakes.size()) +
                             " shape-only tensor(s) outlive the graph without being its outputs; "
                             "their values come from interpreting it again");
    RngState after = get_rng_state();
    set_rng_state(st.rng);
    std::vector<Tensor> vals = run_prefix(*b_, p.outs, st.inputs);
    set_rng_state(after);
    give_values(p, vals);
}

}  // namespace kiln::jit::tracing
