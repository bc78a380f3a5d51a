// lower(): one walk over the Graph's nodes. Value ids are node indices; a detach node
// gets no id of its own but aliases its argument, since generated code has no autograd.
#include "codegen/lower_graph.h"

#include <algorithm>
#include <map>
#include <optional>
#include <sstream>

namespace kiln::codegen {
namespace {

// The node's sizes with its symbolic dims written as -(k+1). The halves AOT cuts have no
// symbols of their own (num_symbols 0) even where their placeholders carry ids: static.
Shape lowered_shape(const jit::ValueMeta& meta, int num_symbols) {
    Shape shape = meta.shape;
    for (size_t d = 0; d < shape.size() && d < meta.sym.size(); ++d)
        if (meta.sym[d] >= 0 && meta.sym[d] < num_symbols) shape[d] = symbol_size(meta.sym[d]);
    return shape;
}

// Why a node's symbolic attributes cannot be said in an LGraph, or "" if they can.
std::string unsupported_patch(const jit::Node& n) {
    for (const jit::AttrPatch& p : n.patches) {
        bool shape_op = n.op == OpId::reshape || n.op == OpId::expand;
        bool one_symbol = p.expr.syms.size() == 1 && p.expr.coeff == 1 && !p.expr.reciprocal;
        if (!shape_op || p.field != jit::AttrField::shape || !one_symbol)
            return "node " + n.name + " has the symbolic attribute " + p.expr.str() + ", which generated code cannot take";
    }
    return "";
}

// "float32[s0, 8]": symbols as s_k, as the schedule prints them.
std::string type_text(const LValue& v) {
    std::ostringstream os;
    os << v.dtype << "[";
    for (size_t d = 0; d < v.shape.size(); ++d)
        os << (d ? ", " : "")
           << (is_symbol(v.shape[d]) ? "s" + std::to_string(symbol_index(v.shape[d]))
                                     : std::to_string(v.shape[d]));
    os << "]";
    return os.str();
}

}  // namespace

std::string LGraph::print() const {
    std::map<int, std::string> names;  // the C++ names the emitter gives them: x_0, cos_2
    for (const LValue& v : inputs)
        names[v.id] = (v.name.empty() ? "in" : v.name) + "_" + std::to_string(v.id);
    for (const LNode& n : nodes)
        names[n.out.id] = (n.out.name.empty() ? std::string(op_info(n.op).name) : n.out.name) +
                          "_" + std::to_string(n.out.id);
    std::ostringstream os;
    os << "inputs:";
    for (const LValue& v : inputs) os << " " << names[v.id] << " " << type_text(v);
    os << "\n";
    for (const LNode& n : nodes) {
        os << names[n.out.id] << " " << type_text(n.out) << " = " << op_info(n.op).name << "(";
        for (size_t i = 0; i < n.inputs.size(); ++i) os << (i ? ", " : "") << names[n.inputs[i]];
        os << ")\n";
    }
    os << "outputs:";
    for (int id : outputs) os << " " << names[id];
    os << "\n";
    return os.str();
}

Lowered lower(const jit::Graph& graph) {
    const auto& nodes = graph.nodes();
    // Generated code runs on one device: the graph's values live there (0-d CPU tensors may
    // mix in, as eager allows: the CUDA runner copies them over).
    std::optional<Device> device;
    for (const jit::Node& n : nodes) {
        if (n.kind == jit::NodeKind::output || (n.meta.shape.empty() && n.meta.device == cpu)) continue;
        if (device && *device != n.meta.device) return {std::nullopt, "the graph mixes devices (" + n.name + " is on another device)"};
        device = n.meta.device;
    }
    int num_symbols = graph.num_symbols();
    std::vector<int> id_of(nodes.size(), -1);  // node index -> value id (detach: its argument's)
    LGraph out;
    out.device = device.value_or(cpu);
    for (size_t i = 0; i < nodes.size(); ++i) {
        const jit::Node& n = nodes[i];
        switch (n.kind) {
            case jit::NodeKind::placeholder:
                id_of[i] = int(i);
                out.inputs.push_back({int(i), lowered_shape(n.meta, num_symbols), n.meta.dtype, n.name});
                break;
            case jit::NodeKind::detach: id_of[i] = id_of[n.args[0]]; break;
            case jit::NodeKind::call: {
                if (std::string why = unsupported_patch(n); !why.empty()) return {std::nullopt, why};
                if (n.op == OpId::to_device) return {std::nullopt, "node " + n.name + " moves a tensor between devices"};
                LNode node{n.op, n.attrs, {}, {int(i), lowered_shape(n.meta, num_symbols), n.meta.dtype, ""}};
                for (int a : n.args) node.inputs.push_back(id_of[a]);
                // reshape/expand read their sizes from out.shape, symbols included
                if (n.op == OpId::reshape || n.op == OpId::expand) node.attrs.shape = node.out.shape;
                id_of[i] = int(i);
                out.nodes.push_back(std::move(node));
                break;
            }
            case jit::NodeKind::output:
                for (int a : n.args) out.outputs.push_back(id_of[a]);
                break;
        }
    }
    return {std::move(out), ""};
}

int transpose_gemm_outputs(LGraph& graph) {
    std::map<int, int> uses, producer;  // value id -> readers (outputs count); -> node index
    std::map<int, Shape> shape_of;
    int next_id = 0;
    for (const LValue& v : graph.inputs)
        shape_of[v.id] = v.shape, next_id = std::max(next_id, v.id + 1);
    for (size_t i = 0; i < graph.nodes.size(); ++i) {
        const LNode& n = graph.nodes[i];
        for (int in : n.inputs) ++uses[in];
        producer[n.out.id] = int(i);
        shape_of[n.out.id] = n.out.shape;
        next_id = std::max(next_id, n.out.id + 1);
    }
    for (int id : graph.outputs) ++uses[id];
    // The last two dims swapped, the others in place: [1, 0], [0, 1, 3, 2], ...
    auto swap_last_two = [](size_t rank) {
        Shape dims;
        for (size_t d = 0; d < rank; ++d) dims.push_back(int64_t(d));
        std::swap(dims[rank - 1], dims[rank - 2]);
        return dims;
    };
    auto is_transpose = [&](const LNode& n) {
        size_t rank = n.out.shape.size();
        return n.op == OpId::permute && rank >= 2 && n.attrs.dims == swap_last_two(rank);
    };
    std::vector<bool> dead(graph.nodes.size(), false);
    std::vector<std::pair<size_t, LNode>> inserts;  // new permutes, each before a node index
    int rewritten = 0;
    for (size_t i = 0; i < graph.nodes.size(); ++i) {
        LNode& t = graph.nodes[i];
        if (!is_transpose(t)) continue;
        // Through reshapes that keep the shape, each read only by the next, to a matmul.
        std::vector<int> chain;
        int v = t.inputs[0];
        while (producer.count(v) && uses[v] == 1) {
            const LNode& n = graph.nodes[producer[v]];
            if (n.op != OpId::reshape || shape_of[n.inputs[0]] != n.out.shape) break;
            chain.push_back(producer[v]);
            v = n.inputs[0];
        }
        if (!producer.count(v) || uses[v] != 1) continue;
        const LNode& mm = graph.nodes[producer[v]];
        // Both operands of the matmul's rank, with its batch dims (no broadcasting).
        const size_t rank = mm.out.shape.size();
        auto same_batch = [&](int operand) {
            const Shape& s = shape_of[operand];
            return s.size() == rank && std::equal(s.begin(), s.end() - 2, mm.out.shape.begin());
        };
        if (mm.op != OpId::matmul || rank != t.out.shape.size() || !same_batch(mm.inputs[0]) ||
            !same_batch(mm.inputs[1]))
            continue;
        chain.push_back(producer[v]);
        // a^T: a permute's own input where a is a transpose, else a new permute node.
        auto transposed = [&](int operand) {
            auto p = producer.find(operand);
            if (p != producer.end() && is_transpose(graph.nodes[p->second]))
                return graph.nodes[p->second].inputs[0];
            Shape s = shape_of[operand];
            std::swap(s[rank - 1], s[rank - 2]);
            LNode n{OpId::permute,
                    {.dims = swap_last_two(rank)},
                    {operand},
                    {next_id++, s, mm.out.dtype, ""}};
            shape_of[n.out.id] = n.out.shape;
            inserts.emplace_back(i, n);
            return n.out.id;
        };
        int a = mm.inputs[0], b = mm.inputs[1];
        LNode product{OpId::matmul, mm.attrs, {}, t.out};
        product.inputs = {transposed(b), transposed(a)};
        for (int k : chain) dead[size_t(k)] = true;
        t = std::move(product);
        ++rewritten;
    }
    if (!rewritten) return 0;
    // The transposes the rewrite stepped over are read by nothing now unless read elsewhere.
    std::map<int, int> reads;
    for (size_t i = 0; i < graph.nodes.size(); ++i)
        if (!dead[i])
            for (int in : graph.nodes[i].inputs) ++reads[in];
    for (const auto& [at, n] : inserts)
        for (int in : n.inputs) ++reads[in];
    for (int id : graph.outputs) ++reads[id];
    for (size_t i = 0; i < graph.nodes.size(); ++i)
        if (is_transpose(graph.nodes[i]) && !reads[graph.nodes[i].out.id]) dead[i] = true;
    std::vector<LNode> nodes;
    size_t next_insert = 0;
    for (size_t i = 0; i < graph.nodes.size(); ++i) {
        for (; next_insert < inserts.size() && inserts[next_insert].first == i; ++next_insert)
            nodes.push_back(std::move(inserts[next_insert].second));
        if (!dead[i]) nodes.push_back(std::move(graph.nodes[i]));
    }
    graph.nodes = std::move(nodes);
    return rewritten;
}

}  // namespace kiln::codegen

namespace kiln::codegen {
namespace {

// Each value id's readers (a graph output counts as one) and the index of the node making it.
std::pair<std::map<int, int>, std::map<int, int>> readers_and_producers(const LGraph& graph) {
    std::map<int, int> uses, producer;
    for (size_t i = 0; i < graph.nodes.size(); ++i) {
        for (int in : graph.nodes[i].inputs) ++uses[in];
        producer[graph.nodes[i].out.id] = int(i);
    }
    for (int id : graph.outputs) ++uses[id];
    return {uses, producer};
}

// The nodes marked dead taken out, the others kept in order.
void drop(LGraph& graph, const std::vector<bool>& dead) {
    std::vector<LNode> nodes;
    for (size_t i = 0; i < graph.nodes.size(); ++i)
        if (!dead[i]) nodes.push_back(std::move(graph.nodes[i]));
    graph.nodes = std::move(nodes);
}

}  // namespace

int slice_backwards_to_cat(LGraph& graph) {
    auto [uses, producer] = readers_and_producers(graph);
    struct Piece {
        int64_t start, end;
        int grad;  // the slice's gradient: the cat's operand
    };
    std::vector<bool> dead(graph.nodes.size(), false);
    int rewritten = 0;
    // Latest first: an add tree's root is seen before its inner adds, which it then takes.
    for (size_t i = graph.nodes.size(); i-- > 0;) {
        LNode& root = graph.nodes[i];
        if (dead[i] || root.op != OpId::add || root.inputs.size() != 2 ||
            root.attrs.scalar_pos != ScalarPos::none)
            continue;
        const Shape& shape = root.out.shape;
        std::vector<Piece> pieces;
        std::vector<int> taken;  // node indices the cat replaces
        int64_t dim = -1;
        bool ok = true;
        std::vector<int> todo = root.inputs;
        while (ok && !todo.empty()) {
            int v = todo.back();
            todo.pop_back();
            auto p = producer.find(v);
            if (p == producer.end() || uses[v] != 1) { ok = false; break; }
            const LNode& n = graph.nodes[size_t(p->second)];
            if (n.out.shape != shape || n.out.dtype != root.out.dtype || dead[size_t(p->second)]) {
                ok = false;
                break;
            }
            if (n.op == OpId::add && n.inputs.size() == 2 && n.attrs.scalar_pos == ScalarPos::none) {
                todo.insert(todo.end(), n.inputs.begin(), n.inputs.end());
                taken.push_back(p->second);
                continue;
            }
            if (n.op != OpId::slice_backward || n.attrs.step != 1 || n.attrs.shape != shape) {
                ok = false;
                break;
            }
            int64_t rank = int64_t(shape.size()), d = n.attrs.dim < 0 ? n.attrs.dim + rank : n.attrs.dim;
            if (d < 0 || d >= rank || (dim >= 0 && d != dim) || is_symbol(shape[size_t(d)])) {
                ok = false;
                break;
            }
            dim = d;
            int64_t size = shape[size_t(d)];
            auto clamp = [size](int64_t x) { return x < 0 ? std::max(x, -size) + size : std::min(x, size); };
            int64_t start = clamp(n.attrs.start), end = std::max(clamp(n.attrs.end), start);
            pieces.push_back({start, end, n.inputs[0]});
            taken.push_back(p->second);
        }
        if (!ok || pieces.size() < 2) continue;
        // The slices must tile the dim exactly: sorted, each starting where the last ended.
        std::sort(pieces.begin(), pieces.end(), [](const Piece& a, const Piece& b) { return a.start < b.start; });
        int64_t at = 0;
        for (const Piece& q : pieces) ok = ok && q.start == at, at = q.end;
        if (!ok || at != shape[size_t(dim)]) continue;
        LNode cat{OpId::cat, {.dim = dim}, {}, root.out};
        for (const Piece& q : pieces)
            if (q.end > q.start) cat.inputs.push_back(q.grad);
        if (cat.inputs.empty()) continue;
        for (int k : taken) dead[size_t(k)] = true;
        root = std::move(cat);
        ++rewritten;
    }
    drop(graph, dead);
    return rewritten;
}

int attention_heads_last(LGraph& graph) {
    auto [uses, producer] = readers_and_producers(graph);
    std::vector<bool> dead(graph.nodes.size(), false);
    int rewritten = 0;
    for (LNode& t : graph.nodes) {
        if (t.op != OpId::permute || t.attrs.dims != Shape{0, 2, 1, 3}) continue;
        auto p = producer.find(t.inputs[0]);
        if (p == producer.end() || uses[t.inputs[0]] != 1) continue;
        LNode& a = graph.nodes[size_t(p->second)];
        if (a.op != OpId::attention || a.attrs.keepdim || a.out.shape.size() != 4) continue;
        // The attention moves to the permute's place (its operands exist there too) and takes
        // the permute's value: its readers read it as they read the permute.
        LNode moved{OpId::attention, a.attrs, a.inputs, t.out};
        moved.attrs.keepdim = true;
        dead[size_t(p->second)] = true;
        t = std::move(moved);
        ++rewritten;
    }
    drop(graph, dead);
    return rewritten;
}

}  // namespace kiln::codegen
