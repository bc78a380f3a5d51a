// Recording ops into nodes, and the backward engine that runs them in reverse.
#include "autograd/node.h"

#include <algorithm>
#include <unordered_map>

namespace kiln::autograd {
namespace {

thread_local bool t_grad_enabled = true;
thread_local SavedTensorHook t_pack_hook;

}  // namespace

bool grad_enabled() { return t_grad_enabled; }
void set_grad_enabled(bool on) { t_grad_enabled = on; }

SavedTensorsHooks::SavedTensorsHooks(SavedTensorHook pack) : prev(std::move(t_pack_hook)) { t_pack_hook = std::move(pack); }
SavedTensorsHooks::~SavedTensorsHooks() { t_pack_hook = std::move(prev); }
void notify_saved(const Tensor& t) {
    if (t_pack_hook && t.defined()) t_pack_hook(t);
}

size_t Node::saved_bytes() const {
    size_t n = 0;
    for (const Tensor& t : saved_tensors()) n += t.defined() ? t.nbytes() : 0;
    return n;
}

Edge edge_to(const Tensor& t) {
    if (!t.defined() || !t.requires_grad()) return {};
    if (t.grad_fn()) return {t.grad_fn(), nullptr};
    return {nullptr, t.impl_ptr()};
}

void set_history(const Tensor& out, std::shared_ptr<Node> node) {
    out.impl()->grad_fn = std::move(node);
    out.impl()->requires_grad = true;
}

// --- OpNode
std::string OpNode::name() const { return std::string(op_info(op).name) + "_backward"; }

std::vector<Tensor> OpNode::apply(const Tensor& grad) {
    KILN_CHECK(!released, "backward: trying to backward through the graph a second time (node ", name(),
               "); its saved tensors were freed. Pass retain_graph=true to the first backward.");
    uint32_t mask = 0;
    for (size_t i = 0; i < next.size(); ++i) mask |= uint32_t(next[i].defined()) << i;
    BackwardArgs args{saved_inputs, saved_out, grad, attrs, input_shapes, input_dtypes, mask};
    return op_info(op).backward(args);
}

std::vector<Tensor> OpNode::saved_tensors() const {
    std::vector<Tensor> out;
    for (const Tensor& t : saved_inputs) if (t.defined()) out.push_back(t);
    if (saved_out.defined()) out.push_back(saved_out);
    return out;
}

void OpNode::release_saved() {
    saved_inputs.clear();
    saved_out = Tensor();
    released = true;
}

void record_op(OpId op, std::span<const Tensor> inputs, const Attrs& attrs, const Tensor& out) {
    const OpInfo& info = op_info(op);
    if (!grad_enabled() || !info.backward) return;
    bool any = std::any_of(inputs.begin(), inputs.end(), [](const Tensor& t) { return t.requires_grad(); });
    if (!any) return;
    auto node = std::make_shared<OpNode>();
    node->op = op;
    node->attrs = attrs;
    bool scalar_left = attrs.scalar_pos == ScalarPos::left;
    for (size_t i = 0; i < inputs.size(); ++i) {
        const Tensor& t = inputs[i];
        node->next.push_back(edge_to(t));
        node->input_shapes.push_back(t.shape());
        node->input_dtypes.push_back(t.dtype());
        // Input i plays the role of x (i == 0) or y (i == 1), or y when the scalar sits left.
        bool is_x = i == 0 && !scalar_left, is_y = i == 1 || (i == 0 && scalar_left);
        bool keep = (is_x && info.saves_x) || (is_y && info.saves_y) || (i >= 2);
        if (op == OpId::where) keep = i == 0;
        node->saved_inputs.push_back(keep ? t.detach() : Tensor());
        if (keep) notify_saved(t);
    }
    if (info.saves_out) {
        node->saved_out = out.detach();
        notify_saved(out);
    }
    set_history(out, node);
}

// --- the engine
namespace {

void accumulate(TensorImpl& leaf, const Tensor& g) {
    Tensor grad = g.dtype() == leaf.dtype ? g : g.to(leaf.dtype);
    if (!leaf.grad) {
        // A fresh buffer: the incoming gradient may alias saved state or user data.
        leaf.grad = grad.clone().impl_ptr();
    } else {
        Tensor(leaf.grad).add_(grad);
    }
}

// Nodes reachable from root, each after every node that feeds it gradient.
std::vector<Node*> topological_order(Node* root) {
    std::unordered_map<Node*, int> dependencies;
    std::vector<Node*> stack{root};
    dependencies[root] = 0;
    while (!stack.empty()) {
        Node* n = stack.back();
        stack.pop_back();
        for (const Edge& e : n->next) {
            if (!e.node) continue;
            auto [it, fresh] = dependencies.try_emplace(e.node.get(), 0);
            ++it->second;
            if (fresh) stack.push_back(e.node.get());
        }
    }
    std::vector<Node*> order, ready{root};
    while (!ready.empty()) {
        Node* n = ready.back();
        ready.pop_back();
        order.push_back(n);
        for (const Edge& e : n->next)
            if (e.node && --dependencies[e.node.get()] == 0) ready.push_back(e.node.get());
    }
    return order;
}

}  // namespace

void run_backward(const Tensor& root, const Tensor& grad_in, bool retain_graph) {
    KILN_CHECK(root.requires_grad(), "backward: tensor does not require grad and has no grad_fn (shape ", root.shape(), ")");
    Tensor grad = grad_in;
    if (!grad.defined()) {
        KILN_CHECK(root.numel() == 1, "backward: grad can be implicitly created only for scalar outputs, got shape ", root.shape());
        grad = ones_like(root.detach());
    }
    KILN_CHECK(grad.shape() == root.shape(), "backward: grad shape ", grad.shape(), " does not match output shape ", root.shape());
    NoGradGuard no_grad;  // backward formulas are not themselves recorded
    if (!root.grad_fn()) {
        accumulate(*root.impl(), grad);
        return;
    }
    std::unordered_map<Node*, Tensor> pending;
    std::shared_ptr<Node> keep_root = root.grad_fn();
    pending[keep_root.get()] = grad;
    for (Node* node : topological_order(keep_root.get())) {
        Tensor g = std::move(pending[node]);
        pending.erase(node);
        if (!g.defined()) continue;
        std::vector<Tensor> grads = node->apply(g);
        if (!retain_graph) node->release_saved();
        for (size_t i = 0; i < node->next.size() && i < grads.size(); ++i) {
            const Edge& e = node->next[i];
            if (!e.defined() || !grads[i].defined()) continue;
            if (e.leaf) {
                accumulate(*e.leaf, grads[i]);
            } else {
                Tensor& slot = pending[e.node.get()];
                slot = slot.defined() ? slot + grads[i] : grads[i];
            }
        }
    }
}

}  // namespace kiln::autograd
