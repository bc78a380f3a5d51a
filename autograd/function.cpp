// The runtime side of autograd::Function: the ctx, its tape node, and the saved-tensor report.
#include "autograd/function.h"

#include <cxxabi.h>

#include <cstdlib>
#include <iomanip>
#include <memory>
#include <unordered_set>

namespace kiln::autograd {
namespace {

// Whether a tensor of shape `from` broadcasts to `to` (NumPy rules).
bool expands_to(const Shape& from, const Shape& to) {
    if (from.size() > to.size()) return false;
    size_t lead = to.size() - from.size();
    for (size_t i = 0; i < from.size(); ++i)
        if (from[i] != 1 && from[i] != to[lead + i]) return false;
    return true;
}

}  // namespace

// --- Ctx
void Ctx::save_for_backward(const std::vector<Tensor>& tensors) {
    for (const Tensor& t : tensors) {
        KILN_CHECK(t.defined(), function_, ": save_for_backward got an undefined tensor");
        saved_.push_back(t.detach());
        if (recording_) notify_saved(t);
    }
}

const std::vector<Tensor>& Ctx::saved_tensors() const {
    KILN_CHECK(!released_, function_, ": trying to backward through the graph a second time; its saved tensors were freed. "
               "Pass retain_graph=true to the first backward.");
    return saved_;
}

double Ctx::scalar(const std::string& key) const {
    auto it = scalars_.find(key);
    if (it != scalars_.end()) return it->second;
    std::ostringstream known;
    for (const auto& [k, v] : scalars_) known << (known.tellp() ? ", " : "") << k;
    fail(function_, ": ctx has no scalar '", key, "' (set: ", known.str().empty() ? "none" : known.str(), ")");
}

void Ctx::check_arg(size_t index, const std::type_info& want) const {
    KILN_CHECK(index < args_.size(), function_, ": ctx.arg(", index, ") but apply got ", args_.size(), " arguments");
    const std::any& a = args_[index];
    KILN_CHECK(a.has_value(), function_, ": argument ", index, " is a Tensor; tensors reach backward through save_for_backward");
    KILN_CHECK(a.type() == want, function_, ": argument ", index, " has type ", short_type_name(a.type()),
               ", asked for ", short_type_name(want));
}

// --- FunctionNode
FunctionNode::FunctionNode(std::string function_name, BackwardFn backward)
    : function_name_(std::move(function_name)), backward_(std::move(backward)) {
    ctx.function_ = function_name_;
}

Tensor FunctionNode::attach(const std::shared_ptr<FunctionNode>& node, const std::vector<Tensor>& inputs, Tensor out,
                            bool recording) {
    KILN_CHECK(out.defined(), node->function_name_, ".forward returned an undefined tensor");
    if (!recording || !is_floating(out.dtype())) return out;
    // forward may hand back an input itself: give the output its own handle, or the
    // input would get this node as its grad_fn.
    for (const Tensor& t : inputs)
        if (out.same(t)) out = out.detach();
    SizesUnobserved quiet;  // kept for backward's shape check, not a number fn computes with
    for (const Tensor& t : inputs) {
        node->next.push_back(edge_to(t));
        node->input_shapes_.push_back(t.shape());
        node->input_dtypes_.push_back(t.dtype());
    }
    set_history(out, node);
    return out;
}

std::vector<Tensor> FunctionNode::apply(const Tensor& grad) {
    KILN_CHECK(!released, "backward: trying to backward through the graph a second time (node ", name(),
               "); its saved tensors were freed. Pass retain_graph=true to the first backward.");
    std::vector<Tensor> grads = backward_(ctx, grad);
    KILN_CHECK(grads.size() == next.size(), name(), ": backward returned ", grads.size(), " gradients, expected ",
               next.size(), " (one per tensor input of apply; an undefined Tensor where there is none)");
    for (size_t i = 0; i < grads.size(); ++i) {
        if (!grads[i].defined() || !next[i].defined()) continue;
        Tensor& g = grads[i];
        const Shape& want = input_shapes_[i];
        if (g.shape() != want) {
            // A gradient in a broadcast shape is summed back, as for the table's ops.
            KILN_CHECK(expands_to(want, g.shape()), name(), ": backward returned a gradient of shape ", g.shape(),
                       " for input ", i, " of shape ", want);
            g = sum_to(g, want);
        }
        if (g.dtype() != input_dtypes_[i]) g = g.to(input_dtypes_[i]);
    }
    return grads;
}

void FunctionNode::release_saved() {
    ctx.saved_.clear();
    ctx.released_ = true;
    released = true;
}

std::string short_type_name(const std::type_info& type) {
    int status = 0;
    std::unique_ptr<char, void (*)(void*)> full(abi::__cxa_demangle(type.name(), nullptr, nullptr, &status), std::free);
    std::string name = status == 0 && full ? full.get() : type.name();
    // Drop namespaces and enclosing functions: "f(std::string)::Cosine" -> "Cosine".
    int depth = 0;  // inside <...> or (...)
    for (size_t i = name.size(); i-- > 1;) {
        char c = name[i];
        if (c == '>' || c == ')') ++depth;
        if (c == '<' || c == '(') --depth;
        if (depth == 0 && c == ':' && name[i - 1] == ':') return name.substr(i + 1);
    }
    return name;
}

// --- the saved-tensor report
SavedReport saved_report(const Tensor& out) {
    SavedReport r;
    if (!out.defined() || !out.grad_fn()) return r;
    std::unordered_set<Node*> seen{out.grad_fn().get()};
    std::vector<Node*> queue{out.grad_fn().get()};
    for (size_t i = 0; i < queue.size(); ++i) {
        Node* n = queue[i];
        size_t count = n->saved_tensors().size(), bytes = n->saved_bytes();
        r.nodes.push_back({n->name(), count, bytes});
        r.total_tensors += count;
        r.total_bytes += bytes;
        for (const Edge& e : n->next)
            if (e.node && seen.insert(e.node.get()).second) queue.push_back(e.node.get());
    }
    return r;
}

std::ostream& operator<<(std::ostream& os, const SavedReport& r) {
    size_t width = 4;
    for (const auto& e : r.nodes) width = std::max(width, e.node.size());
    os << std::left << std::setw(int(width)) << "node" << "  saved  bytes\n";
    for (const auto& e : r.nodes)
        os << std::left << std::setw(int(width)) << e.node << "  " << std::right << std::setw(5) << e.tensors << "  "
           << e.bytes << "\n";
    return os << std::left << std::setw(int(width)) << "total" << "  " << std::right << std::setw(5) << r.total_tensors
              << "  " << r.total_bytes << "\n";
}

}  // namespace kiln::autograd
