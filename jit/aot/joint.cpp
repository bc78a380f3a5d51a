// build_joint(): record-while-executing, as the tracer does, but of derivative formulas.
#include "jit/aot/joint.h"

#include <unordered_map>

#include "autograd/node.h"
#include "jit/fake.h"
#include "jit/log.h"

namespace kiln::jit::aot {
namespace {

// Records every op the derivative formulas dispatch, naming values by their TensorImpl.
class JointRecorder final : public DispatchHook {
   public:
    // fake: outputs by the ops' shape rules (jit/fake.h), no kernel runs.
    JointRecorder(GraphBuilder& b, bool fake) : b_(b), fake_(fake) {}
    int add(const Tensor& t, int id) {
        ids_[t.impl()] = id;
        keep_.push_back(t);  // keeps the address unique while recording
        return id;
    }
    int id_of(const Tensor& t, const char* op) const {
        auto it = ids_.find(t.impl());
        KILN_CHECK(it != ids_.end(), "aot: a derivative formula of '", op,
                   "' used a tensor that no op of the joint graph produced (shape ", t.shape(), ")");
        return it->second;
    }
    Tensor call(OpId op, std::span<const Tensor> inputs, const Attrs& attrs) override {
        std::vector<int> args;
        for (const Tensor& t : inputs) args.push_back(id_of(t, op_info(op).name));
        Tensor out = fake_ ? fake_call(op, inputs, attrs) : dispatch_eager(op, inputs, attrs);
        if (!out.defined()) throw NoShapeRule{op};
        return add(out, b_.call(op, attrs, std::move(args), out, true)), out;
    }
    // A formula's detach() (Tensor::softmax detaches its row maximum): a detach node, as the
    // forward's. Only while formulas run: the forward part adds its detach nodes itself.
    void detached(const Tensor& src, const Tensor& out) override {
        if (in_formulas_) add(out, b_.detach(id_of(src, "detach"), out));
    }
    void begin_formulas() { in_formulas_ = true; }
    void assign(const Tensor& t, const Tensor&) override {
        fail("aot: a derivative formula wrote a tensor in place (shape ", t.shape(), "); formulas must be out of place");
    }
    void escape(const Tensor& t, Escape, const std::source_location&) override {
        fail("aot: a derivative formula read a tensor's value (shape ", t.shape(), "); formulas must stay in Tensor ops");
    }

    struct NoShapeRule {
        OpId op;
    };

   private:
    GraphBuilder& b_;
    bool fake_;
    bool in_formulas_ = false;
    std::unordered_map<TensorImpl*, int> ids_;
    std::vector<Tensor> keep_;
};

// Installs a hook for the current thread, restoring the previous one on exit.
struct HookScope {
    DispatchHook* prev;
    explicit HookScope(DispatchHook* h) : prev(dispatch_hook()) { set_dispatch_hook(h); }
    ~HookScope() { set_dispatch_hook(prev); }
};

void accumulate(Tensor& slot, const Tensor& g) { slot = slot.defined() ? slot + g : g; }

}  // namespace

namespace {
JointGraph build_joint_as(const Graph& fw, std::span<const Tensor> example_inputs, bool fake) {
    autograd::NoGradGuard no_grad;
    GraphBuilder b;
    JointRecorder rec(b, fake);
    HookScope hook(&rec);
    const auto& nodes = fw.nodes();
    std::vector<Tensor> vals(nodes.size());
    std::vector<bool> needs(nodes.size(), false);
    std::vector<int64_t> syms = fw.num_symbols() ? fw.bind_symbols(example_inputs) : std::vector<int64_t>{};
    JointGraph j;
    for (size_t i = 0; i < nodes.size(); ++i) {
        const Node& n = nodes[i];
        if (n.kind == NodeKind::placeholder) {
            const Tensor& ex = example_inputs[j.num_primals++];
            vals[i] = ex.detach();
            needs[i] = ex.requires_grad();
            rec.add(vals[i], b.placeholder(n.name, meta_of(vals[i]), "primal"));
        } else if (n.kind == NodeKind::detach) {
            vals[i] = vals[n.args[0]].detach();
            rec.add(vals[i], b.detach(rec.id_of(vals[n.args[0]], "detach"), vals[i]));
        } else if (n.kind == NodeKind::call) {
            Attrs scratch;
            std::vector<Tensor> in;
            for (int a : n.args) in.push_back(vals[a]);
            vals[i] = rec.call(n.op, in, fw.attrs(n, syms, scratch));
            for (int a : n.args) needs[i] = needs[i] || needs[a];
            needs[i] = needs[i] && n.grad_enabled && op_info(n.op).backward && is_floating(vals[i].dtype());
        }
    }
    // One tangent per differentiable forward output, then the formulas in reverse.
    std::vector<Tensor> grads(nodes.size());
    for (int o : fw.outputs()) {
        j.fw_outputs.push_back(rec.id_of(vals[o], "output"));
        j.tangent_of.push_back(-1);
        if (!needs[o]) continue;
        Tensor tangent;
        {
            HookScope plain(nullptr);  // an example value, not a recorded op
            tangent = fake ? fake_empty(vals[o].shape(), vals[o].dtype(), vals[o].device())
                           : ones_like(vals[o].detach());
        }
        j.tangent_of.back() = rec.add(tangent, b.placeholder("tangents_" + std::to_string(j.tangent_of.size()), meta_of(tangent), "tangent"));
        accumulate(grads[o], tangent);
    }
    rec.begin_formulas();
    for (int i = int(nodes.size()) - 1; i >= 0; --i) {
        const Node& n = nodes[i];
        if (n.kind != NodeKind::call || !needs[i] || !grads[i].defined()) continue;
        std::vector<Tensor> in;
        std::vector<Shape> shapes;
        std::vector<DType> dtypes;
        uint32_t mask = 0;
        for (size_t k = 0; k < n.args.size(); ++k) {
            in.push_back(vals[n.args[k]]);
            shapes.push_back(in.back().shape());
            dtypes.push_back(in.back().dtype());
            mask |= uint32_t(needs[n.args[k]]) << k;
        }
        Attrs scratch;
        BackwardArgs args{in, vals[i], grads[i], fw.attrs(n, syms, scratch), shapes, dtypes, mask};
        std::vector<Tensor> gin = op_info(n.op).backward(args);
        for (size_t k = 0; k < n.args.size() && k < gin.size(); ++k)
            if (gin[k].defined() && needs[n.args[k]]) accumulate(grads[n.args[k]], gin[k]);
    }
    std::vector<int> outputs = j.fw_outputs;
    for (int p = 0, i = 0; i < int(nodes.size()); ++i) {
        if (nodes[i].kind != NodeKind::placeholder) continue;
        j.input_grads.push_back(needs[i] && grads[i].defined() ? rec.id_of(grads[i], "grad") : -1);
        if (j.input_grads.back() >= 0) outputs.push_back(j.input_grads.back());
        ++p;
    }
    j.graph = b.build(outputs);
    // build() renumbers (placeholders first); map our builder ids through the output node.
    const std::vector<int>& out = j.graph->outputs();
    size_t k = 0;
    for (int& o : j.fw_outputs) o = out[k++];
    for (int& g : j.input_grads)
        if (g >= 0) g = out[k++];
    int tangents_seen = 0;
    for (int& t : j.tangent_of)
        if (t >= 0) t = j.num_primals + tangents_seen++;  // tangents follow primals
    return j;
}

}  // namespace

// Shape-only where every op has a shape rule (jit/fake.h); else, or with
// KILN_FAKE_TRACE=0, with the example inputs' values.
JointGraph build_joint(const Graph& fw, std::span<const Tensor> example_inputs) {
    if (fake_trace_for(example_inputs)) {  // CUDA examples too, unless KILN_FAKE_TRACE_CUDA=0
        try {
            return build_joint_as(fw, example_inputs, true);
        } catch (const JointRecorder::NoShapeRule& e) {
            log_event("compile", std::string("joint graph: ") + op_name(e.op) +
                                     " has no shape rule; built with real tensors instead");
        } catch (const FakeTensorRead& e) {
            log_event("compile", std::string("joint graph: a derivative formula read values (") +
                                     e.what() + "); built with real tensors instead");
        }
    }
    return build_joint_as(fw, example_inputs, false);
}

}  // namespace kiln::jit::aot
