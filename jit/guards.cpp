// Building, checking and printing guards.
#include "jit/guards.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <sstream>

#include "autograd/node.h"

namespace kiln::jit {

std::string arg_name(const ArgValue& a, const std::vector<std::string>& names) {
    std::string base = a.position < int(names.size()) ? names[a.position] : "arg" + std::to_string(a.position);
    if (a.key) base += "[\"" + *a.key + "\"]";
    if (a.index == kLengthLeaf) return "len(" + base + ")";
    if (a.index >= 0) base += "[" + std::to_string(a.index) + "]";
    return base;
}

namespace {

int find_alias(const Args& args, size_t i) {
    for (size_t j = 0; j < i; ++j)
        if (args[j].kind == ArgKind::tensor && args[j].tensor.same(args[i].tensor)) return int(j);
    return -1;
}

bool same_key(const ArgGuard& g, const ArgValue& a) {
    return g.index == a.index && g.key.has_value() == (a.key != nullptr) && (!a.key || *g.key == *a.key);
}

// Bit-exact, except that every NaN matches every NaN: eager gives the same result for both.
bool same_scalar(double a, double b) {
    return std::bit_cast<uint64_t>(a) == std::bit_cast<uint64_t>(b) || (std::isnan(a) && std::isnan(b));
}

// Everything but sizes: kind, position, key, dtype, device, rank, requires_grad, aliasing.
bool structure_holds(const ArgGuard& g, const ArgValue& a, const Args& args, size_t i) {
    if (g.kind != a.kind || g.position != a.position || !same_key(g, a)) return false;
    switch (g.kind) {
        case ArgKind::scalar: return same_scalar(g.scalar, a.scalar);
        case ArgKind::integer: return g.integer == a.integer;
        case ArgKind::string: return g.text == a.text;
        case ArgKind::object: return g.object == a.object;
        case ArgKind::tensor: break;
    }
    const TensorImpl* t = a.tensor.impl();
    if (!t || t->dtype != g.dtype || t->requires_grad != g.requires_grad || t->shape.size() != g.sizes.size()) return false;
    if (a.tensor.device() != g.device) return false;
    return find_alias(args, i) == g.alias_of;
}

}  // namespace

bool GuardSet::check(const Args& args, std::vector<int64_t>& syms) const {
    if (args.size() != this->args.size() || autograd::grad_enabled() != grad_mode) return false;
    syms.assign(sym_values.size(), 0);
    for (size_t i = 0; i < args.size(); ++i) {
        const ArgGuard& g = this->args[i];
        if (!structure_holds(g, args[i], args, i)) return false;
        if (g.kind != ArgKind::tensor) continue;
        const Shape& s = args[i].tensor.impl()->shape;
        for (size_t d = 0; d < s.size(); ++d) {
            int k = g.sym[d];
            if (k < 0) {
                if (s[d] != g.sizes[d]) return false;
            } else if (syms[k] == 0) {
                if (s[d] < 2) return false;  // 0 and 1 are specialized
                syms[k] = s[d];
            } else if (syms[k] != s[d]) {
                return false;
            }
        }
    }
    for (size_t k = 0; k < pinned.size(); ++k)
        if (pinned[k] && syms[k] != pinned[k]) return false;
    return true;
}

void GuardSet::pin(int k, int64_t value, const std::string& why) {
    if (is_pinned(k)) return;
    pinned.resize(sym_values.size(), 0);
    pin_reasons.resize(sym_values.size());
    pinned[k] = value;
    pin_reasons[k] = why;
}

std::string GuardSet::failure(const Args& args, const std::vector<std::string>& names) const {
    std::ostringstream os;
    if (autograd::grad_enabled() != grad_mode) return std::string("grad mode changed (recorded with grad ") + (grad_mode ? "enabled" : "disabled") + ")";
    if (args.size() != this->args.size()) {
        os << "argument structure changed (" << this->args.size() << " flattened values recorded, " << args.size() << " now)";
        return os.str();
    }
    std::vector<int64_t> syms(sym_values.size(), 0);
    for (size_t i = 0; i < args.size(); ++i) {
        const ArgGuard& g = this->args[i];
        std::string name = arg_name(args[i], names);
        if (!structure_holds(g, args[i], args, i)) {
            if (g.kind == ArgKind::scalar && args[i].kind == ArgKind::scalar)
                os << name << " == " << g.scalar << " failed (got " << args[i].scalar << ")";
            else if (g.kind == ArgKind::integer && args[i].kind == ArgKind::integer)
                os << name << " == " << g.integer << " failed (got " << args[i].integer << ")";
            else if (g.kind == ArgKind::string && args[i].kind == ArgKind::string)
                os << name << " == '" << g.text << "' failed (got '" << args[i].text << "')";
            else if (g.kind == ArgKind::object) os << name << " is a different object";
            else os << name << ": dtype, device, rank, requires_grad or aliasing changed";
            return os.str();
        }
        if (g.kind != ArgKind::tensor) continue;
        const Shape& s = args[i].tensor.shape();
        for (size_t d = 0; d < s.size(); ++d) {
            int k = g.sym[d];
            if (k < 0 && s[d] != g.sizes[d]) os << "size mismatch at " << name << ".size(" << d << "): expected " << g.sizes[d] << ", got " << s[d];
            else if (k >= 0 && s[d] < 2) os << name << ".size(" << d << ") is " << s[d] << ": sizes 0 and 1 are specialized";
            else if (k >= 0 && syms[k] && syms[k] != s[d]) os << "s" << k << " == " << name << ".size(" << d << ") failed (" << syms[k] << " vs " << s[d] << ")";
            else if (k >= 0) syms[k] = s[d];
            if (!os.str().empty()) return os.str();
        }
    }
    for (size_t k = 0; k < pinned.size(); ++k)
        if (pinned[k] && syms[k] != pinned[k])
            return "s" + std::to_string(k) + " == " + std::to_string(pinned[k]) + " failed (got " + std::to_string(syms[k]) +
                   "; pinned: " + pin_reasons[k] + ")";
    return "";
}

std::optional<std::vector<ArgDim>> GuardSet::size_only_mismatch(const Args& args) const {
    if (args.size() != this->args.size() || autograd::grad_enabled() != grad_mode) return std::nullopt;
    std::vector<ArgDim> changed;
    for (size_t i = 0; i < args.size(); ++i) {
        if (!structure_holds(this->args[i], args[i], args, i)) return std::nullopt;
        if (this->args[i].kind != ArgKind::tensor) continue;
        const Shape& s = args[i].tensor.shape();
        for (size_t d = 0; d < s.size(); ++d)
            if (s[d] != this->args[i].sizes[d]) changed.push_back({int(i), int(d)});
    }
    return changed;
}

std::set<ArgDim> GuardSet::symbolic_dims() const {
    std::set<ArgDim> out;
    for (size_t i = 0; i < args.size(); ++i)
        for (size_t d = 0; d < args[i].sym.size(); ++d)
            if (args[i].sym[d] >= 0) out.insert({int(i), int(d)});
    return out;
}

GuardSet make_guards(const Args& args, const std::set<ArgDim>& symbolic) {
    GuardSet gs;
    gs.grad_mode = autograd::grad_enabled();
    for (size_t i = 0; i < args.size(); ++i) {
        const ArgValue& a = args[i];
        ArgGuard g{.kind = a.kind, .position = a.position, .scalar = a.scalar, .integer = a.integer, .object = a.object,
                   .index = a.index, .text = std::string(a.text)};
        if (a.key) g.key = *a.key;
        if (a.kind == ArgKind::tensor) {
            g.dtype = a.tensor.dtype();
            g.device = a.tensor.device();
            g.requires_grad = a.tensor.requires_grad();
            g.sizes = a.tensor.shape();
            g.alias_of = find_alias(args, i);
            g.sym.assign(g.sizes.size(), -1);
            for (size_t d = 0; d < g.sizes.size(); ++d) {
                if (!symbolic.count({int(i), int(d)}) || g.sizes[d] < 2) continue;
                auto it = std::find(gs.sym_values.begin(), gs.sym_values.end(), g.sizes[d]);
                g.sym[d] = int(it - gs.sym_values.begin());
                if (it == gs.sym_values.end()) gs.sym_values.push_back(g.sizes[d]);
            }
        }
        gs.args.push_back(std::move(g));
    }
    return gs;
}

std::set<ArgDim> all_dims(const Args& args) {
    std::set<ArgDim> out;
    for (size_t i = 0; i < args.size(); ++i)
        if (args[i].kind == ArgKind::tensor)
            for (int d = 0; d < int(args[i].tensor.dim()); ++d) out.insert({int(i), d});
    return out;
}

std::vector<std::string> GuardSet::lines(const std::vector<std::string>& names) const {
    std::vector<std::string> out, relations;
    std::vector<bool> seen(sym_values.size(), false);
    for (const ArgGuard& g : args) {
        ArgValue probe{.kind = g.kind, .position = g.position, .key = g.key ? &*g.key : nullptr, .index = g.index};
        std::string name = arg_name(probe, names);
        std::ostringstream os;
        if (g.kind == ArgKind::scalar) os << name << " == " << g.scalar;
        if (g.kind == ArgKind::integer) os << name << " == " << g.integer;
        if (g.kind == ArgKind::string) os << name << " == '" << g.text << "'";
        if (g.kind == ArgKind::object) os << name << " is object@" << g.object << " (identity)";
        if (g.kind == ArgKind::tensor) {
            os << name << ": " << g.dtype << "[";
            for (size_t d = 0; d < g.sizes.size(); ++d) {
                os << (d ? ", " : "");
                if (g.sym[d] < 0) os << g.sizes[d];
                else os << "s" << g.sym[d];
                if (g.sym[d] >= 0 && seen[g.sym[d]]) relations.push_back("s" + std::to_string(g.sym[d]) + " == size(" + name + "," + std::to_string(d) + ")");
                if (g.sym[d] >= 0) seen[g.sym[d]] = true;
            }
            os << "] " << g.device << (g.requires_grad ? " requires_grad" : "");
            if (g.alias_of >= 0) os << " (same tensor as argument #" << g.alias_of << ")";
        }
        out.push_back(os.str());
    }
    for (size_t k = 0; k < sym_values.size(); ++k) {
        if (is_pinned(int(k))) out.push_back("s" + std::to_string(k) + " == " + std::to_string(pinned[k]) + "  (pinned: " + pin_reasons[k] + ")");
        else out.push_back("2 <= s" + std::to_string(k));
    }
    out.insert(out.end(), relations.begin(), relations.end());
    out.push_back(std::string("grad_mode: ") + (grad_mode ? "enabled" : "disabled"));
    return out;
}

}  // namespace kiln::jit
