// Assignment 5: the reference solution (not shipped to students: make assignment-release).
#include "assignments/a5/student.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>

namespace student {

using namespace kiln;

bool fusible(const Graph& graph, int node) {
    const jit::Node& n = graph.nodes()[node];
    if (n.kind != jit::NodeKind::call) return false;
    const OpInfo& op = op_info(n.op);
    if (op.kind != OpKind::pointwise || !op.math || n.meta.dtype != DType::float32) return false;
    if (n.args.size() + (n.attrs.scalar_pos != ScalarPos::none) > 2) return false;
    for (int a : n.args) {
        const jit::ValueMeta& m = graph.nodes()[a].meta;
        if (m.dtype != DType::float32 || m.shape != n.meta.shape) return false;
    }
    return true;
}

std::vector<Group> group_pointwise(const Graph& graph) {
    const auto& nodes = graph.nodes();
    std::vector<Group> groups;
    std::vector<int> group_of(nodes.size(), -1);
    bool open = false;
    for (int i = 0; i < int(nodes.size()); ++i) {
        if (!fusible(graph, i)) {
            open = false;
            continue;
        }
        if (!open || nodes[groups.back().nodes.front()].meta.shape != nodes[i].meta.shape)
            groups.emplace_back();
        open = true;
        Group& g = groups.back();
        int gi = int(groups.size()) - 1;
        for (int a : nodes[i].args)
            if (group_of[a] != gi &&
                std::find(g.inputs.begin(), g.inputs.end(), a) == g.inputs.end())
                g.inputs.push_back(a);
        g.nodes.push_back(i);
        group_of[i] = gi;
    }
    // Outputs: values read by a node of another group (or none), or returned by the graph.
    for (int i = 0; i < int(nodes.size()); ++i)
        for (int a : nodes[i].args)
            if (group_of[a] >= 0 &&
                (nodes[i].kind == jit::NodeKind::output || group_of[a] != group_of[i])) {
                auto& outs = groups[group_of[a]].outputs;
                if (std::find(outs.begin(), outs.end(), a) == outs.end()) outs.push_back(a);
            }
    for (Group& g : groups) std::sort(g.outputs.begin(), g.outputs.end());
    return groups;
}

namespace {
std::string float_literal(double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "float(%.17g)", v);
    return buf;
}
}  // namespace

std::string emit_kernel(const Graph& graph, const Group& group, const std::string& name) {
    const auto& nodes = graph.nodes();
    std::map<int, std::string> var;  // node -> the C++ expression holding its value
    for (size_t k = 0; k < group.inputs.size(); ++k)
        var[group.inputs[k]] = "in[" + std::to_string(k) + "][i]";
    std::ostringstream os;
    os << "namespace kiln_math {\n"
       << "extern \"C\" void " << name
       << "(const float* const* in, float* const* out, int64_t n) {\n"
       << "    for (int64_t i = 0; i < n; ++i) {\n";
    for (int id : group.nodes) {
        const jit::Node& node = nodes[id];
        std::vector<std::string> xs;
        if (node.attrs.scalar_pos == ScalarPos::left)
            xs.push_back(float_literal(node.attrs.scalar));
        for (int a : node.args) xs.push_back(var.at(a));
        if (node.attrs.scalar_pos == ScalarPos::right)
            xs.push_back(float_literal(node.attrs.scalar));
        std::string v = "v" + std::to_string(id);
        os << "        float " << v << " = "
           << math_text(op_info(node.op).math, xs[0], xs.size() > 1 ? xs[1] : "") << ";  // "
           << node.name << "\n";
        var[id] = v;
    }
    for (size_t k = 0; k < group.outputs.size(); ++k)
        os << "        out[" << k << "][i] = " << var.at(group.outputs[k]) << ";\n";
    os << "    }\n}\n}  // namespace kiln_math\n";
    return os.str();
}

FusedGraph compile_fused(const Graph& graph) {
    FusedGraph fused;
    fused.groups = group_pointwise(graph);
    if (fused.groups.empty()) return fused;
    fused.source = kernel_preamble();
    for (size_t k = 0; k < fused.groups.size(); ++k)
        fused.source += emit_kernel(graph, fused.groups[k], "kernel_" + std::to_string(k));
    codegen::BuildOptions options;
    options.include_dirs = {KILN_SOURCE_DIR};
    fused.library = codegen::build_library(fused.source, options);
    return fused;
}

std::vector<Tensor> run_fused(const FusedGraph& fused, const Graph& graph,
                              std::span<const Tensor> inputs) {
    const auto& nodes = graph.nodes();
    std::vector<int> starts(nodes.size(), -1), in_group(nodes.size(), 0);
    for (size_t k = 0; k < fused.groups.size(); ++k) {
        starts[fused.groups[k].nodes.front()] = int(k);
        for (int id : fused.groups[k].nodes) in_group[id] = 1;
    }
    std::vector<int64_t> syms = graph.bind_symbols(inputs);
    std::vector<Tensor> env(nodes.size());
    for (int i = 0; i < graph.num_inputs(); ++i) env[i] = inputs[i];
    for (int i = graph.num_inputs(); i + 1 < int(nodes.size()); ++i) {
        const jit::Node& n = nodes[i];
        if (int k = starts[i]; k >= 0) {
            const Group& g = fused.groups[k];
            std::vector<Tensor> ins;
            std::vector<const float*> in_ptrs;
            for (int a : g.inputs)
                ins.push_back(env[a].contiguous()),
                    in_ptrs.push_back(static_cast<const float*>(ins.back().raw_data()));
            std::vector<float*> out_ptrs;
            for (int o : g.outputs) {
                env[o] = empty(env[g.inputs.front()].shape());
                out_ptrs.push_back(static_cast<float*>(env[o].raw_data()));
            }
            auto kernel =
                reinterpret_cast<KernelFn>(fused.library->symbol("kernel_" + std::to_string(k)));
            kernel(in_ptrs.data(), out_ptrs.data(), ins.front().numel());
            continue;
        }
        if (in_group[i]) continue;  // computed by its group's kernel
        std::vector<Tensor> args;
        for (int a : n.args) args.push_back(env[a]);
        Attrs scratch;
        env[i] = n.kind == jit::NodeKind::detach
                     ? args[0].detach()
                     : dispatch(n.op, args, graph.attrs(n, syms, scratch));
    }
    std::vector<Tensor> out;
    for (int o : graph.outputs()) out.push_back(env[o]);
    return out;
}

}  // namespace student
