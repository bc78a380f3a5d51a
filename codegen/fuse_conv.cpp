// fuse_conv(): walks each conv2d's chain of single readers and folds the ops oneDNN can run
// as post-ops into one conv2d_fused node, placed where the chain's last op was (all its
// operands exist there). The rest of the pipeline sees an ordinary fallback node.
#include "codegen/fuse_conv.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <optional>
#include <sstream>
#include <string_view>

namespace kiln::codegen {
namespace {

using detail::ConvPostOp;

struct GraphIndex {
    std::map<int, const LValue*> values;      // id -> value (inputs and node outputs)
    std::map<int, int> producer;              // id -> node index
    std::map<int, std::vector<int>> readers;  // id -> node index, once per operand slot
    std::vector<int> outputs;
};

GraphIndex index(const LGraph& g) {
    GraphIndex ix;
    for (const LValue& v : g.inputs) ix.values[v.id] = &v;
    for (size_t i = 0; i < g.nodes.size(); ++i) {
        ix.values[g.nodes[i].out.id] = &g.nodes[i].out;
        ix.producer[g.nodes[i].out.id] = int(i);
        for (int in : g.nodes[i].inputs) ix.readers[in].push_back(int(i));
    }
    ix.outputs = g.outputs;
    return ix;
}

bool fusion_enabled() {
    const char* e = std::getenv("KILN_CONV_FUSE");
    std::string_view v = e ? e : "";
    KILN_CHECK(v.empty() || v == "0" || v == "1", "KILN_CONV_FUSE: expected 0 or 1, got '", v, "'");
    return v != "0";
}

std::string name_of(const LGraph& g, const GraphIndex& ix, int id) {
    auto it = ix.producer.find(id);
    if (it == ix.producer.end())
        return ix.values.at(id)->name.empty() ? "in_" + std::to_string(id) : ix.values.at(id)->name;
    return std::string(op_info(g.nodes[size_t(it->second)].op).name) + "_" + std::to_string(id);
}

// [C, 1, 1] or [1, C, 1, 1] with C the output's channels: one value per channel.
bool per_channel(const Shape& s, const Shape& out) {
    return s == Shape{out[1], 1, 1} || s == Shape{1, out[1], 1, 1};
}

struct Step {
    ConvPostOp op;
    std::optional<int> operand;  // value id
};

// The post-op that node `n` is when `cur` (the chain's value) is one of its inputs, or why not.
std::optional<Step> as_post_op(const LNode& n, int cur, const Shape& shape, const GraphIndex& ix,
                               bool residual_taken, std::string& why) {
    std::string op = op_info(n.op).name;
    if (n.out.dtype != DType::float32 || n.out.shape != shape) {
        why = op + " changes the dtype or shape";
        return std::nullopt;
    }
    if (n.op == OpId::relu) return Step{ConvPostOp::relu, std::nullopt};
    bool binary = n.op == OpId::add || n.op == OpId::sub || n.op == OpId::mul || n.op == OpId::div;
    if (!binary) {
        why = op + " is not a post-op oneDNN runs (relu, add, sub, mul, div)";
        return std::nullopt;
    }
    if (n.attrs.scalar_pos != ScalarPos::none || n.inputs.size() != 2) {
        why = op + " with a scalar operand";
        return std::nullopt;
    }
    bool left = n.inputs[0] == cur;
    if (!left && (n.op == OpId::sub || n.op == OpId::div)) {
        why = op + " takes the conv's value as its right operand";
        return std::nullopt;
    }
    int other = left ? n.inputs[1] : n.inputs[0];
    const LValue& o = *ix.values.at(other);
    if (o.dtype != DType::float32) {
        why = op + "'s other operand is " + dtype_name(o.dtype);
        return std::nullopt;
    }
    if (per_channel(o.shape, shape)) {
        ConvPostOp p = n.op == OpId::add   ? ConvPostOp::add_channel
                       : n.op == OpId::sub ? ConvPostOp::sub_channel
                       : n.op == OpId::mul ? ConvPostOp::mul_channel
                                           : ConvPostOp::div_channel;
        return Step{p, other};
    }
    if (n.op == OpId::add && o.shape == shape && !residual_taken)
        return Step{ConvPostOp::add_tensor, other};
    std::ostringstream os;
    os << op << "'s other operand " << o.shape << " is neither per-channel nor "
       << (residual_taken ? "the first residual" : "a residual of the output's shape");
    why = os.str();
    return std::nullopt;
}

// Whether reader `n` takes the value in its operand `slot` as an activation oneDNN reads in
// any layout: a conv2d_fused's input (slot 0) or its residual (add_tensor's operand).
bool reads_as_activation(const LNode& n, size_t slot) {
    if (n.op != OpId::conv2d_fused) return false;
    if (slot == 0) return true;
    size_t operands = size_t(std::count_if(n.attrs.dims.begin(), n.attrs.dims.end(), [](int64_t c) {
        return ConvPostOp(c) != ConvPostOp::relu;
    }));
    size_t next = n.inputs.size() - operands;
    for (int64_t code : n.attrs.dims) {
        if (ConvPostOp(code) == ConvPostOp::relu) continue;
        if (ConvPostOp(code) == ConvPostOp::add_tensor && slot == next) return true;
        ++next;
    }
    return false;
}

// attrs.keepdim on each conv2d_fused whose every reader reads it as an activation (fuse_conv.h).
void mark_channels_last(LGraph& g, const std::map<int, size_t>& note_of,
                        std::vector<std::string>& notes) {
    std::map<int, bool> all_convs;  // conv2d_fused output id -> every reader so far takes it
    for (const LNode& n : g.nodes)
        if (n.op == OpId::conv2d_fused) all_convs[n.out.id] = false;  // no reader yet
    std::map<int, int> readers;
    for (const LNode& n : g.nodes)
        for (size_t slot = 0; slot < n.inputs.size(); ++slot) {
            auto it = all_convs.find(n.inputs[slot]);
            if (it == all_convs.end()) continue;
            bool ok = reads_as_activation(n, slot);
            it->second = readers[it->first]++ == 0 ? ok : it->second && ok;
        }
    for (int id : g.outputs)
        if (all_convs.count(id)) all_convs[id] = false;
    for (LNode& n : g.nodes) {
        if (n.op != OpId::conv2d_fused || !all_convs[n.out.id]) continue;
        n.attrs.keepdim = true;
        if (auto it = note_of.find(n.out.id); it != note_of.end())
            notes[it->second] += "; channels-last out";
    }
}

}  // namespace

ConvFusion fuse_conv(const LGraph& graph) {
    ConvFusion out{graph, 0, {}};
    if (graph.device.type != DeviceType::cpu || !fusion_enabled()) return out;
    GraphIndex ix = index(graph);
    std::vector<bool> removed(graph.nodes.size(), false);
    std::map<size_t, LNode> replaced;  // node index -> the fused node placed there
    std::map<int, size_t> note_of;     // fused node's output id -> its note
    for (size_t c = 0; c < graph.nodes.size(); ++c) {
        const LNode& conv = graph.nodes[c];
        if (conv.op != OpId::conv2d || conv.out.dtype != DType::float32) continue;
        const Shape& shape = conv.out.shape;
        std::string conv_name = name_of(graph, ix, conv.out.id), why;
        LNode fused{OpId::conv2d_fused, conv.attrs, conv.inputs, conv.out};
        std::vector<size_t> chain;
        bool residual = false;
        for (int cur = conv.out.id;;) {
            if (std::count(ix.outputs.begin(), ix.outputs.end(), cur)) {
                why = name_of(graph, ix, cur) + " is returned";
                break;
            }
            const std::vector<int>& readers = ix.readers[cur];
            if (readers.size() != 1) {
                why = name_of(graph, ix, cur) + " is read " + std::to_string(readers.size()) +
                      " times";
                break;
            }
            size_t r = size_t(readers[0]);
            if (removed[r] || replaced.count(r)) {
                why = name_of(graph, ix, cur) + "'s reader fused into another conv";
                break;
            }
            std::optional<Step> step = as_post_op(graph.nodes[r], cur, shape, ix, residual, why);
            if (!step) {
                why = name_of(graph, ix, graph.nodes[r].out.id) + ": " + why;
                break;
            }
            fused.attrs.dims.push_back(int64_t(step->op));
            if (step->operand) fused.inputs.push_back(*step->operand);
            residual = residual || step->op == ConvPostOp::add_tensor;
            chain.push_back(r);
            cur = graph.nodes[r].out.id;
        }
        if (chain.empty()) {
            out.notes.push_back(conv_name + ": not fused (" + why + ")");
            continue;
        }
        std::string ops;
        for (size_t r : chain)
            ops += std::string(ops.empty() ? "" : ", ") + op_info(graph.nodes[r].op).name;
        out.notes.push_back(conv_name + ": fused " + ops + " (stopped: " + why + ")");
        fused.out = graph.nodes[chain.back()].out;
        note_of[fused.out.id] = out.notes.size() - 1;
        removed[c] = true;
        for (size_t i = 0; i + 1 < chain.size(); ++i) removed[chain[i]] = true;
        replaced[chain.back()] = std::move(fused);
        ++out.fused;
    }
    out.graph.nodes.clear();
    for (size_t i = 0; i < graph.nodes.size(); ++i) {
        if (removed[i]) continue;
        auto it = replaced.find(i);
        out.graph.nodes.push_back(it != replaced.end() ? it->second : graph.nodes[i]);
    }
    mark_channels_last(out.graph, note_of, out.notes);
    return out;
}

}  // namespace kiln::codegen
