// Graph: building (with symbolic sizes), printing (text, FX tabular, DOT).
#include "jit/graph.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <cmath>
#include <iomanip>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

namespace kiln::jit {

uint64_t Graph::Uid::next() {
    static std::atomic<uint64_t> counter{0};
    return ++counter;
}

double SymExpr::eval(std::span<const int64_t> values) const {
    double p = double(coeff);
    for (int s : syms) p *= double(values[s]);
    return reciprocal ? 1.0 / p : p;
}

std::string SymExpr::str() const {
    std::string s = reciprocal ? "1/" : "";
    if (coeff != 1) s += std::to_string(coeff) + "*";
    for (size_t i = 0; i < syms.size(); ++i) s += (i ? "*s" : "s") + std::to_string(syms[i]);
    return s;
}

std::string ValueMeta::str() const {
    std::ostringstream os;
    os << dtype << "[";
    for (size_t i = 0; i < shape.size(); ++i) {
        os << (i ? ", " : "");
        if (i < sym.size() && sym[i] >= 0) os << "s" << sym[i];
        else os << shape[i];
    }
    os << "]";
    if (device != cpu) os << " " << device;
    return os.str();
}

ValueMeta meta_of(const Tensor& t) {
    return {t.shape(), std::vector<int>(t.shape().size(), -1), t.dtype(), t.requires_grad(), t.device()};
}

std::vector<std::string> Graph::op_names() const {
    std::vector<std::string> out;
    for (const Node& n : nodes_)
        if (n.kind == NodeKind::call) out.push_back(op_info(n.op).name);
        else if (n.kind == NodeKind::detach) out.push_back("detach");
    return out;
}

std::vector<int64_t> Graph::bind_symbols(std::span<const Tensor> inputs) const {
    std::vector<int64_t> values(num_symbols_, 0);
    for (const SymSource& s : sym_sources_) values[s.sym] = inputs[s.input].shape()[s.dim];
    return values;
}

const Attrs& Graph::attrs(const Node& n, std::span<const int64_t> syms, Attrs& scratch) const {
    if (n.patches.empty()) return n.attrs;
    scratch = n.attrs;
    for (const AttrPatch& p : n.patches) {
        double v = p.expr.eval(syms);
        switch (p.field) {
            case AttrField::shape: scratch.shape[p.index] = int64_t(v); break;
            case AttrField::scalar: scratch.scalar = v; break;
            case AttrField::end: scratch.end = int64_t(v); break;
            case AttrField::hi: scratch.hi = v; break;
        }
    }
    return scratch;
}

// --- building

namespace {

std::string sanitize(const std::string& s) {
    std::string out;
    for (char c : s) {
        bool ok = std::isalnum(static_cast<unsigned char>(c)) || c == '_';
        if (ok) out += c;
        else if (!out.empty() && out.back() != '_') out += '_';
    }
    while (!out.empty() && out.back() == '_') out.pop_back();
    return out.empty() ? "v" : out;
}

}  // namespace

std::string GraphBuilder::unique_name(std::string base) {
    base = sanitize(base);
    if (names_.insert(base).second) return base;
    int& i = next_suffix_.try_emplace(base, 1).first->second;
    std::string name = base + "_" + std::to_string(i);
    while (!names_.insert(name).second) name = base + "_" + std::to_string(++i);
    ++i;
    return name;
}

int GraphBuilder::final_index(int id) const {
    int placeholders_before = 0, ops_before = 0, placeholders = 0;
    for (int i = 0; i < int(nodes_.size()); ++i) {
        bool ph = nodes_[i].kind == NodeKind::placeholder;
        placeholders += ph;
        if (i < id) (ph ? placeholders_before : ops_before)++;
    }
    return is_placeholder(id) ? placeholders_before : placeholders + ops_before;
}

int GraphBuilder::placeholder(const std::string& name, ValueMeta meta, std::string source) {
    Node n{.kind = NodeKind::placeholder, .name = unique_name(name), .meta = std::move(meta), .source = std::move(source)};
    nodes_.push_back(std::move(n));
    return int(nodes_.size()) - 1;
}

int GraphBuilder::call(OpId op, const Attrs& attrs, std::vector<int> args, const Tensor& out, bool grad_enabled) {
    return call(op, attrs, std::move(args), meta_of(out), grad_enabled);
}

int GraphBuilder::call(OpId op, const Attrs& attrs, std::vector<int> args, ValueMeta meta, bool grad_enabled,
                       std::vector<AttrPatch> patches) {
    Node n{.kind = NodeKind::call, .name = unique_name(op_info(op).name), .op = op, .attrs = attrs,
           .patches = std::move(patches), .args = std::move(args), .meta = std::move(meta), .grad_enabled = grad_enabled};
    nodes_.push_back(std::move(n));
    ++num_ops_;
    return int(nodes_.size()) - 1;
}

int GraphBuilder::detach(int arg, const Tensor& out) { return detach(arg, meta_of(out)); }

int GraphBuilder::detach(int arg, ValueMeta meta) {
    nodes_.push_back({.kind = NodeKind::detach, .name = unique_name("detach"), .args = {arg}, .meta = std::move(meta)});
    ++num_ops_;
    return int(nodes_.size()) - 1;
}

std::shared_ptr<const Graph> GraphBuilder::build(const std::vector<int>& outputs) const {
    auto g = std::make_shared<Graph>();
    std::vector<int> order, renumber(nodes_.size());
    for (int pass = 0; pass < 2; ++pass)
        for (int i = 0; i < int(nodes_.size()); ++i)
            if ((nodes_[i].kind == NodeKind::placeholder) == (pass == 0)) order.push_back(i);
    for (int i : order) {
        renumber[i] = int(g->nodes_.size());
        Node n = nodes_[i];
        for (int& a : n.args) a = renumber[a];
        n.meta.sym.resize(n.meta.shape.size(), -1);
        if (n.kind == NodeKind::placeholder) {
            for (size_t d = 0; d < n.meta.sym.size(); ++d)
                if (n.meta.sym[d] >= 0) g->sym_sources_.push_back({g->num_inputs_, int(d), n.meta.sym[d]});
            ++g->num_inputs_;
        }
        g->nodes_.push_back(std::move(n));
    }
    Node out{.kind = NodeKind::output, .name = "output"};
    for (int o : outputs) out.args.push_back(renumber[o]);
    g->nodes_.push_back(std::move(out));
    g->num_symbols_ = num_symbols_;
    return g;
}

// --- printing

namespace {

std::string scalar_str(double v) {
    std::ostringstream os;
    os << v;
    return os.str();
}

std::string args_str(const Graph& g, const Node& n) {
    std::string s = "(";
    auto add = [&](const std::string& a) { s += (s.size() > 1 ? ", " : "") + a; };
    if (n.kind == NodeKind::call && n.attrs.scalar_pos == ScalarPos::left) add(scalar_str(n.attrs.scalar));
    for (int a : n.args) add(g.nodes()[a].name);
    if (n.kind == NodeKind::call && n.attrs.scalar_pos == ScalarPos::right) add(scalar_str(n.attrs.scalar));
    if (n.args.size() + (n.attrs.scalar_pos != ScalarPos::none) == 1 && n.kind != NodeKind::output) s += ",";
    return s + ")";
}

std::string kwargs_str(const Node& n) {
    if (n.kind != NodeKind::call) return "{}";
    Attrs a = n.attrs;
    a.scalar_pos = ScalarPos::none;
    std::string s = attrs_print(n.op, a);
    for (const AttrPatch& p : n.patches) s += (s.empty() ? "" : ", ") + std::string("sym=") + p.expr.str();
    return "{" + s + "}";
}

const char* opcode_str(NodeKind k) {
    switch (k) {
        case NodeKind::placeholder: return "placeholder";
        case NodeKind::call: return "call_function";
        case NodeKind::detach: return "call_method";
        case NodeKind::output: return "output";
    }
    return "?";
}

std::string target_str(const Node& n) {
    switch (n.kind) {
        case NodeKind::placeholder: return n.name;
        case NodeKind::call: return op_info(n.op).name;
        case NodeKind::detach: return "detach";
        case NodeKind::output: return "output";
    }
    return "?";
}

}  // namespace

std::string Graph::str() const {
    std::ostringstream os;
    os << "graph(";
    for (int i = 0; i < num_inputs_; ++i) os << (i ? ", " : "") << nodes_[i].name << ": " << nodes_[i].meta.str();
    os << "):\n";
    for (const Node& n : nodes_) {
        if (n.kind == NodeKind::placeholder) continue;
        if (n.kind == NodeKind::output) {
            os << "    return " << args_str(*this, n) << "\n";
            continue;
        }
        os << "    " << n.name << ": " << n.meta.str() << " = " << target_str(n) << args_str(*this, n);
        std::string kw = kwargs_str(n);
        if (kw != "{}") os << " " << kw;
        if (!n.grad_enabled) os << "  # no_grad";
        os << "\n";
    }
    return os.str();
}

std::string Graph::tabular() const {
    std::vector<std::array<std::string, 5>> rows{{"opcode", "name", "target", "args", "kwargs"}};
    for (const Node& n : nodes_) rows.push_back({opcode_str(n.kind), n.name, target_str(n), args_str(*this, n), kwargs_str(n)});
    std::array<size_t, 5> width{};
    for (const auto& r : rows)
        for (size_t c = 0; c < 5; ++c) width[c] = std::max(width[c], r[c].size());
    std::ostringstream os;
    auto line = [&](const std::array<std::string, 5>& r) {
        for (size_t c = 0; c < 4; ++c) os << std::left << std::setw(int(width[c]) + 2) << r[c];
        os << r[4];  // no trailing padding
        os << "\n";
    };
    line(rows[0]);
    std::array<std::string, 5> rule;
    for (size_t c = 0; c < 5; ++c) rule[c] = std::string(width[c], '-');
    line(rule);
    for (size_t i = 1; i < rows.size(); ++i) line(rows[i]);
    return os.str();
}

void Graph::print_tabular(std::ostream& os) const { os << tabular(); }
void Graph::print_tabular() const { std::cout << tabular(); }

std::string Graph::to_dot() const {
    std::ostringstream os;
    os << "digraph G {\n  rankdir=TB;\n  node [shape=box, fontname=monospace];\n";
    for (size_t i = 0; i < nodes_.size(); ++i) {
        const Node& n = nodes_[i];
        const char* style = n.kind == NodeKind::placeholder ? ", style=filled, fillcolor=lightblue"
                            : n.kind == NodeKind::output ? ", style=filled, fillcolor=lightgrey" : "";
        os << "  n" << i << " [label=\"" << n.name << "\\n" << target_str(n);
        if (n.kind != NodeKind::output) os << "\\n" << n.meta.str();
        os << "\"" << style << "];\n";
        for (int a : n.args) os << "  n" << a << " -> n" << i << ";\n";
    }
    os << "}\n";
    return os.str();
}

std::ostream& operator<<(std::ostream& os, const Graph& g) { return os << g.str(); }

}  // namespace kiln::jit
