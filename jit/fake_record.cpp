// Shape-only recording: while the tracer records a new entry, each op's output is a fake
// tensor made by its shape rule (jit/fake.h); no kernel runs. At a graph break or fn's
// return the graph runs on the real inputs and its outputs give the live fake tensors
// their values (jit/segments.cpp, adopt). Where the recording needs values before that —
// an op with no shape rule, fn going eager — materialize() gives them and the rest of the
// call records with real tensors, as KILN_FAKE_TRACE=0 would. docs/jit.md,
// "Shape-only tracing". Entry: Tracer::fake_op.
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

void Tracer::materialize(const std::string& why) {
    if (!fake_) return;
    fake_ = false;
    if (e_.fake_fallback.empty()) e_.fake_fallback = why;
    log_event("compile", cfg_.fn_name + " entry " + std::to_string(e_.id) +
                             ": shape-only tracing stops (" + why +
                             "); the rest of the call records with real tensors");
    if (!b_) return;
    std::vector<int> outs;
    std::vector<Tensor> fakes;
    for (int id = 0; id < b_->size(); ++id) {
        if (b_->is_placeholder(id) || size_t(id) >= node_out_.size()) continue;
        Tensor t(node_out_[id].lock());
        if (!is_fake(t)) continue;
        outs.push_back(id);
        fakes.push_back(t);
    }
    size_t n_fake = outs.size();
    for (const auto& w : fake_writes_) outs.push_back(w.second);
    if (outs.empty()) return;
    std::shared_ptr<const Graph> g = b_->build(outs);
    std::vector<Tensor> vals;
    {
        NoDispatchHook plain;  // the graph's own ops are not fn's
        vals = interpret(*g, in_examples_);  // draws what eager would have drawn by now
    }
    for (size_t j = 0; j < n_fake; ++j) {
        TensorImpl& dst = *fakes[j].impl();
        const TensorImpl& src = *vals[j].impl();
        KILN_CHECK(src.shape == dst.shape && src.dtype == dst.dtype,
                   "jit: internal error: shape rule of a recorded op gave ", dst.dtype, dst.shape,
                   ", its kernel ", src.dtype, src.shape);
        dst.storage = src.storage;
        dst.strides = src.strides;
        dst.offset = src.offset;
        dst.requires_grad = src.requires_grad;
        dst.grad_fn = src.grad_fn;
        dst.output_nr = src.output_nr;
    }
    NoDispatchHook plain;
    for (size_t k = 0; k < fake_writes_.size(); ++k) {  // the writes real tracing did eagerly
        const Tensor& target = fake_writes_[k].first;
        for (Tensor& ex : in_examples_)  // the graph reads the value before the write
            if (ex.same(target)) {
                Tensor c = empty(target.shape(), target.dtype(), target.device());
                strided_copy(c, target.detach());
                ex = c;
            }
        write_values(target, vals[n_fake + k]);
    }
    fake_writes_.clear();
}

}  // namespace kiln::jit::tracing
