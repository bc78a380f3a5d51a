// lower(): one walk over the Graph's nodes. Value ids are node indices; a detach node
// gets no id of its own but aliases its argument, since generated code has no autograd.
#include "codegen/lower_graph.h"

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

}  // namespace kiln::codegen
