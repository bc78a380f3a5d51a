// aot_compile(): the compiled segment as one node of the eager tape. The forward half
// runs without autograd and returns outputs + saved tensors; an AotNode holds the saved
// tensors and runs the backward half when loss.backward() reaches it.
#include <map>
#include <mutex>
#include <sstream>

#include "autograd/node.h"
#include "jit/aot/aot.h"

namespace kiln::jit::aot {
namespace {

// One plan and its compiled halves, per set of input shapes/dtypes/requires_grad.
struct Compiled {
    AotPlan plan;
    GraphCompiler inner;  // compiles both halves; the backward one lazily
    CompiledFn forward;
    std::once_flag backward_once;
    CompiledFn backward;  // compiled at the first backward
};

struct State {
    std::shared_ptr<const Graph> graph;
    GraphCompiler inner;
    bool backward_with_forward = false;
    std::once_flag plain_once;
    CompiledFn plain;  // no input needs grad: the graph as is
    std::mutex mu;
    std::map<std::string, std::shared_ptr<Compiled>> compiled;
};

std::string plan_key(std::span<const Tensor> inputs) {
    using kiln::operator<<;
    std::ostringstream os;
    for (const Tensor& t : inputs) os << t.shape() << dtype_name(t.dtype()) << (t.requires_grad() ? "g" : "") << ";";
    return os.str();
}

class AotNode final : public autograd::Node {
   public:
    AotNode(std::shared_ptr<Compiled> c, std::vector<Tensor> saved, std::vector<Tensor> outputs)
        : c_(std::move(c)), saved_(std::move(saved)) {
        for (const Tensor& o : outputs) out_meta_.push_back({o.shape(), o.dtype(), o.device()});
    }
    std::string name() const override { return "CompiledFunctionBackward"; }
    int num_outputs() const override { return int(out_meta_.size()); }
    std::vector<Tensor> apply(const Tensor& grad) override { return apply_all({grad}); }
    std::vector<Tensor> apply_all(const std::vector<Tensor>& grads) override {
        KILN_CHECK(!released, "backward: trying to backward through a compiled segment a second time; its saved "
                              "tensors were freed. Pass retain_graph=true to the first backward.");
        std::call_once(c_->backward_once, [&] { c_->backward = c_->forward ? compile_backward() : CompiledFn(); });
        // Without retain_graph the engine releases the saved tensors after this call: hand
        // them to the backward now, which frees each after its last reader.
        std::vector<Tensor> in = releases_after_apply ? std::move(saved_) : saved_;
        for (int k : c_->plan.tangent_outputs) {
            const Tensor& g = k < int(grads.size()) ? grads[k] : Tensor();
            // An output no gradient reached: zeros on the output's own device.
            const OutMeta& m = out_meta_[k];
            in.push_back(g.defined() ? g.contiguous() : zeros(m.shape, {.dtype = m.dtype, .device = m.device}));
        }
        std::vector<Tensor> res;
        if (releases_after_apply) {
            saved_.clear(), released = true;  // a throw from here on leaves nothing to run twice
            InputHandOver hand_over(in);
            res = c_->backward(in);
        } else {
            res = c_->backward(in);
        }
        std::vector<Tensor> out;
        for (size_t i = 0; i < c_->plan.input_grad_slot.size(); ++i) {
            int slot = c_->plan.input_grad_slot[i];
            bool reached = false;  // an output this input feeds received a gradient
            for (int k : c_->plan.outputs_of_input[i]) reached = reached || (k < int(grads.size()) && grads[k].defined());
            out.push_back(slot >= 0 && reached ? res[slot] : Tensor());
        }
        return out;
    }
    std::vector<Tensor> saved_tensors() const override { return saved_; }
    void release_saved() override {
        saved_.clear();
        released = true;
    }

   private:
    CompiledFn compile_backward() { return c_->inner(c_->plan.backward, {}); }
    std::shared_ptr<Compiled> c_;
    std::vector<Tensor> saved_;
    struct OutMeta {
        Shape shape;
        DType dtype;
        Device device;
    };
    std::vector<OutMeta> out_meta_;
};

std::shared_ptr<Compiled> compiled_for(State& s, std::span<const Tensor> inputs) {
    std::string key = plan_key(inputs);
    std::lock_guard lock(s.mu);
    auto& c = s.compiled[key];
    if (!c) {
        // Planning runs the forward's ops on the inputs to trace the derivative formulas:
        // its random ops must not draw, the compiled forward draws what eager drew.
        struct KeepRng {
            RngState at = get_rng_state();
            ~KeepRng() { set_rng_state(at); }
        } keep_rng;
        c = std::make_shared<Compiled>();
        c->plan = plan(*s.graph, inputs);
        c->inner = s.inner;
        c->forward = s.inner(c->plan.forward, inputs);
        if (s.backward_with_forward) std::call_once(c->backward_once, [&] { c->backward = c->inner(c->plan.backward, {}); });
    }
    return c;
}

}  // namespace

CompiledFn aot_compile(std::shared_ptr<const Graph> graph, std::span<const Tensor>, GraphCompiler inner, bool backward_with_forward) {
    auto s = std::make_shared<State>();
    s->graph = std::move(graph);
    s->inner = std::move(inner);
    s->backward_with_forward = backward_with_forward;
    return [s](std::span<const Tensor> inputs) -> std::vector<Tensor> {
        bool wants_grad = autograd::grad_enabled() &&
                          std::any_of(inputs.begin(), inputs.end(), [](const Tensor& t) { return t.requires_grad(); });
        if (!wants_grad) {
            std::call_once(s->plain_once, [&] { s->plain = s->inner(s->graph, inputs); });
            return s->plain(inputs);
        }
        std::shared_ptr<Compiled> c = compiled_for(*s, inputs);
        std::vector<Tensor> res;
        {
            autograd::NoGradGuard no_grad;
            res = c->forward(inputs);
        }
        int n = c->plan.num_outputs;
        std::vector<Tensor> outs(res.begin(), res.begin() + n);
        auto node = std::make_shared<AotNode>(c, std::vector<Tensor>(res.begin() + n, res.end()), outs);
        for (const Tensor& t : inputs) node->next.push_back(autograd::edge_to(t));
        for (int k = 0; k < n; ++k) {
            outs[k] = outs[k].detach();  // a fresh handle: never rewrite an input's history
            if (c->plan.joint.tangent_of[k] >= 0) autograd::set_history(outs[k], node, k);
        }
        return outs;
    };
}

}  // namespace kiln::jit::aot
