// Recording ops into nodes, and the backward engine that runs them in reverse.
#include "autograd/node.h"

#include <algorithm>
#include <cctype>
#include <string_view>
#include <unordered_map>

#include "autograd/hooks.h"

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
    if (t.grad_fn()) return {t.grad_fn(), nullptr, t.impl()->output_nr};
    return {nullptr, t.impl_ptr()};
}

void set_history(const Tensor& out, std::shared_ptr<Node> node, int output_nr) {
    // As in PyTorch, an int64 or bool tensor never requires grad, so it has no history.
    if (!is_floating(out.dtype())) return;
    out.impl()->grad_fn = std::move(node);
    out.impl()->output_nr = output_nr;
    out.impl()->requires_grad = true;
}

// --- OpNode
// PyTorch's grad_fn names: CamelCase of the op name, then "Backward0" (relu -> ReluBackward0).
std::string OpNode::name() const {
    std::string out;
    bool upper = true;
    for (const char* c = op_info(op).name; *c; ++c) {
        if (*c == '_') {
            upper = true;
            continue;
        }
        out += upper ? char(std::toupper(static_cast<unsigned char>(*c))) : *c;
        upper = false;
    }
    return out + "Backward0";
}

std::vector<Tensor> OpNode::apply(const Tensor& grad) {
    KILN_CHECK(!released, "backward: trying to backward through the graph a second time (node ", name(),
               "); its saved tensors were freed. Pass retain_graph=true to the first backward.");
    size_t k = 0;
    for (const Tensor* t : saved_list())
        if (t->defined())
            KILN_CHECK(t->impl()->storage->version == saved_versions.at(k++), "backward: one of the variables needed for "
                       "gradient computation has been modified by an inplace operation: ", name(), " saved a tensor of shape ",
                       t->shape(), " that was written after it was saved. Hint: clone() it before the in-place op.");
    uint32_t mask = 0;
    for (size_t i = 0; i < next.size(); ++i) mask |= uint32_t(next[i].defined()) << i;
    BackwardArgs args{saved_inputs, saved_out, grad, attrs, input_shapes, input_dtypes, mask};
    return op_info(op).backward(args);
}

std::vector<const Tensor*> OpNode::saved_list() const {
    std::vector<const Tensor*> out;
    for (const Tensor& t : saved_inputs) out.push_back(&t);
    out.push_back(&saved_out);
    return out;
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

// With a scalar operand only one derivative runs (dx for x op s, dy for s op y); it saves
// just what that formula reads, as PyTorch's x * 2 saves nothing.
bool scalar_form_reads(OpId op, bool scalar_left, std::string_view name) {
    std::string_view text = op_info(op).derivative ? op_info(op).derivative : "";
    size_t split = text.find(" ; ");
    if (split != std::string_view::npos) text = scalar_left ? text.substr(split + 3) : text.substr(0, split);
    auto ident = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
    for (size_t at = text.find(name); at != std::string_view::npos; at = text.find(name, at + 1)) {
        bool starts = at == 0 || !ident(text[at - 1]);
        bool ends = at + name.size() == text.size() || !ident(text[at + name.size()]);
        if (starts && ends) return true;
    }
    return false;
}

void record_op(OpId op, std::span<const Tensor> inputs, const Attrs& attrs, const Tensor& out) {
    const OpInfo& info = op_info(op);
    if (!grad_enabled() || !info.backward || !is_floating(out.dtype())) return;
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
        bool keep = (is_x && info.saves_x) || (is_y && info.saves_y);
        if (attrs.scalar_pos != ScalarPos::none) keep = scalar_form_reads(op, scalar_left, is_x ? "x" : "y");
        if (op == OpId::where) keep = i == 0;
        if (op == OpId::attention) keep = true;  // q, k and v: its gradient recomputes the weights
        node->saved_inputs.push_back(keep ? t.detach() : Tensor());
        if (keep) notify_saved(t);
    }
    bool save_out = info.saves_out && (attrs.scalar_pos == ScalarPos::none || scalar_form_reads(op, scalar_left, "out"));
    if (save_out) {
        node->saved_out = out.detach();
        notify_saved(out);
    }
    for (const Tensor* t : node->saved_list())
        if (t->defined()) node->saved_versions.push_back(t->impl()->storage->version);
    set_history(out, node);
}

// --- the engine
namespace {

// Whether `grad` can become a leaf's .grad as it is: nothing else holds its TensorImpl or its
// storage (not saved state, not a compiled graph's buffer, not user data), and it is a plain
// contiguous tensor. A compiled backward returns every parameter's gradient at once; taking
// them instead of cloning keeps one copy of the gradients alive, not two (as PyTorch's
// AccumulateGrad does).
bool can_take(const Tensor& grad) {
    const TensorImpl* impl = grad.impl();
    return impl->storage && impl->storage->owned && impl->storage.use_count() == 1 && !impl->grad_fn &&
           !impl->requires_grad && impl->offset == 0 && grad.is_contiguous() &&
           impl->storage->bytes == size_t(shape_numel(impl->shape)) * dtype_bytes(impl->dtype);
}

void accumulate(TensorImpl& leaf, Tensor g) {
    Tensor grad = g.dtype() == leaf.dtype ? std::move(g) : g.to(leaf.dtype);
    if (!leaf.grad) {
        // A fresh buffer unless nothing else holds this one: the incoming gradient may alias
        // saved state or user data.
        leaf.grad = grad.impl_ptr().use_count() == 1 && can_take(grad) ? grad.impl_ptr() : grad.clone().impl_ptr();
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
        run_post_accumulate_hooks(root.impl());
        return;
    }
    // Gradients waiting for each node, one slot per node output.
    std::unordered_map<Node*, std::vector<Tensor>> pending;
    std::shared_ptr<Node> keep_root = root.grad_fn();
    auto slots = [&](Node* n) -> std::vector<Tensor>& {
        auto& v = pending[n];
        if (v.empty()) v.resize(n->num_outputs());
        return v;
    };
    slots(keep_root.get())[root.impl()->output_nr] = grad;
    std::vector<Node*> order = topological_order(keep_root.get());
    LeafHookCounter leaf_hooks(order);  // post-accumulate-grad hooks (autograd/hooks.h)
    for (Node* node : order) {
        std::vector<Tensor> g = std::move(slots(node));
        pending.erase(node);
        if (std::none_of(g.begin(), g.end(), [](const Tensor& t) { return t.defined(); })) {
            leaf_hooks.node_skipped(*node);
            continue;
        }
        node->releases_after_apply = !retain_graph;
        std::vector<Tensor> grads = node->apply_all(g);
        if (!retain_graph) node->release_saved();
        for (size_t i = 0; i < node->next.size(); ++i) {
            const Edge& e = node->next[i];
            bool has_grad = i < grads.size() && grads[i].defined();
            if (e.leaf && !has_grad) leaf_hooks.edge_done(e.leaf.get(), false);
            if (!e.defined() || !has_grad) continue;
            if (e.leaf) {
                accumulate(*e.leaf, std::move(grads[i]));
                leaf_hooks.edge_done(e.leaf.get(), true);
            } else {
                Tensor& slot = slots(e.node.get())[e.output_nr];
                slot = slot.defined() ? slot + grads[i] : grads[i];
            }
        }
    }
}

}  // namespace kiln::autograd
