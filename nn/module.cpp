// nn::Module: parameter registration, traversal, train/eval, printing.
#include "nn/module.h"

#include <algorithm>
#include <sstream>
#include <unordered_set>

#include "autograd/function.h"
#include "tensor/cuda.h"

namespace kiln::nn {

Tensor Module::register_parameter(const std::string& name, Tensor value) {
    KILN_CHECK(value.defined(), type_name(), ": register_parameter('", name, "') got an undefined tensor");
    KILN_CHECK(name.find('.') == std::string::npos && !name.empty(), type_name(), ": parameter name '", name,
               "' must be non-empty and contain no '.'");
    for (const auto& [n, p] : params_) KILN_CHECK(n != name, type_name(), ": parameter '", name, "' registered twice");
    Tensor leaf = value.is_leaf() ? value : value.detach();
    leaf.requires_grad_(true);
    params_.emplace_back(name, leaf);
    state_changed();
    return leaf;
}

Tensor Module::register_buffer(const std::string& name, Tensor value) {
    KILN_CHECK(value.defined(), type_name(), ": register_buffer('", name, "') got an undefined tensor");
    KILN_CHECK(name.find('.') == std::string::npos && !name.empty(), type_name(), ": buffer name '", name,
               "' must be non-empty and contain no '.'");
    for (const auto& [n, b] : buffers_) KILN_CHECK(n != name, type_name(), ": buffer '", name, "' registered twice");
    buffers_.emplace_back(name, value);
    state_changed();
    return value;
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> module) {
    KILN_CHECK(module != nullptr, type_name(), ": register_module('", name, "') got a null module");
    KILN_CHECK(module.get() != this, type_name(), ": a module cannot contain itself");
    for (const auto& [n, m] : children_) KILN_CHECK(n != name, type_name(), ": module '", name, "' registered twice");
    children_.emplace_back(name, std::move(module));
    state_changed();
}

bool Module::unregister(const std::string& name) {
    auto named = [&](const auto& entry) { return entry.first == name; };
    size_t before = params_.size() + buffers_.size() + children_.size();
    std::erase_if(params_, named);
    std::erase_if(buffers_, named);
    std::erase_if(children_, named);
    if (params_.size() + buffers_.size() + children_.size() == before) return false;
    state_changed();
    return true;
}
bool Module::has_parameter(const std::string& name) const {
    return std::any_of(params_.begin(), params_.end(),
                       [&](const auto& p) { return p.first == name; });
}
bool Module::has_child(const std::string& name) const {
    return std::any_of(children_.begin(), children_.end(),
                       [&](const auto& c) { return c.first == name; });
}

void Module::collect(const std::string& prefix, std::vector<std::pair<std::string, Tensor>>& out) const {
    for (const auto& [name, p] : params_) out.emplace_back(prefix + name, p);
    for (const auto& [name, child] : children_) child->collect(prefix + name + ".", out);
}

std::vector<std::pair<std::string, Tensor>> Module::named_parameters() const {
    std::vector<std::pair<std::string, Tensor>> all, unique;
    collect("", all);
    std::unordered_set<TensorImpl*> seen;  // a tensor shared by two modules is one parameter
    for (auto& entry : all)
        if (seen.insert(entry.second.impl()).second) unique.push_back(std::move(entry));
    return unique;
}

void Module::collect_state(const std::string& prefix, StateDict& out) const {
    for (const auto& [name, p] : params_) out.emplace_back(prefix + name, p);
    for (const auto& [name, b] : buffers_) out.emplace_back(prefix + name, b);
    for (const auto& [name, child] : children_) child->collect_state(prefix + name + ".", out);
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers() const {
    StateDict all, buffers;
    collect_state("", all);
    std::unordered_set<TensorImpl*> params, seen;
    for (const Tensor& p : parameters()) params.insert(p.impl());
    for (auto& entry : all)
        if (!params.count(entry.second.impl()) && seen.insert(entry.second.impl()).second) buffers.push_back(std::move(entry));
    return buffers;
}

std::vector<Tensor> Module::parameters() const {
    std::vector<Tensor> out;
    for (auto& [name, p] : named_parameters()) out.push_back(p);
    return out;
}

void Module::train(bool on) {
    if (training_ != on) state_changed();
    training_ = on;
    for (auto& [name, child] : children_) child->train(on);
}

bool Module::is_training() const {
    report_guard_state();
    return training_;
}

void Module::report_guard_state() const {
    if (!dispatch_hook()) return;
    std::ostringstream what;
    what << type_name() << "@" << static_cast<const void*>(this) << " state (training flag, registered modules and parameters)";
    report_guard_value(what.str(), [this] { return int64_t(state_version_); });
}

void Module::to(Device device) {
    // A move of the data in place, not an op to differentiate or record: a compiled function
    // that calls it re-runs its host code on every call.
    report_host_effect(type_name() + ".to(device)");
    std::vector<Tensor> state = parameters();
    for (auto& [name, b] : named_buffers()) state.push_back(b);
    for (const Tensor& p : state) {
        if (p.device() == device) continue;
        Tensor moved = cuda::to_device(p, device);
        TensorImpl& impl = *p.impl();
        impl.storage = moved.impl()->storage;
        impl.strides = moved.impl()->strides;
        impl.offset = moved.impl()->offset;
        if (impl.grad) impl.grad = cuda::to_device(Tensor(impl.grad), device).impl_ptr();
    }
    state_changed();
}

void Module::zero_grad() {
    for (Tensor& p : parameters()) p.zero_grad();
}

std::string Module::type_name() const { return autograd::short_type_name(typeid(*this)); }

std::ostream& operator<<(std::ostream& os, const Module& m) {
    os << m.type_name() << "(" << m.extra_repr();
    if (m.children().empty()) return os << ")";
    os << "\n";
    for (const auto& [name, child] : m.children()) {
        std::ostringstream inner;
        inner << *child;
        std::string text = inner.str(), indented;
        for (char c : text) indented += c == '\n' ? std::string("\n  ") : std::string(1, c);
        os << "  (" << name << "): " << indented << "\n";
    }
    return os << ")";
}

}  // namespace kiln::nn
