// plan() cuts the joint graph into forward and backward graphs; aot_compile() runs them,
// entering the eager tape as one AotNode per call.
#include "jit/aot/aot.h"

#include <map>
#include <mutex>
#include <set>
#include <sstream>

#include "autograd/node.h"
#include "jit/aot/partition.h"
#include "jit/log.h"
#include "jit/trace_log.h"

namespace kiln::jit::aot {
namespace {

size_t meta_bytes(const ValueMeta& m) { return size_t(shape_numel(m.shape)) * dtype_bytes(m.dtype); }

// Every random op runs in the forward, its result used or not: each draw moves the
// generator, and the call must leave it where eager leaves it.
void keep_random_ops(const Graph& g, std::vector<bool>& in_forward) {
    const auto& nodes = g.nodes();
    for (size_t i = in_forward.size(); i-- > 0;) {
        const Node& n = nodes[i];
        bool random = n.kind == NodeKind::call && op_info(n.op).kind == OpKind::random;
        if (random) in_forward[i] = true;
        if (in_forward[i] && random)
            for (int a : n.args) in_forward[size_t(a)] = true;
    }
    // The inputs of what was added, transitively (nodes are in topological order).
    for (size_t i = in_forward.size(); i-- > 0;)
        if (in_forward[i])
            for (int a : nodes[i].args) in_forward[size_t(a)] = true;
}

// Copies the nodes of `keep` from the joint graph into `b`, mapping ids through `ids`, in the
// joint graph's order or in `order`.
void copy_nodes(const Graph& g, const std::vector<bool>& keep, GraphBuilder& b, std::vector<int>& ids,
                const std::vector<int>* order = nullptr) {
    for (size_t k = 0; k + 1 < (order ? order->size() + 1 : g.nodes().size()); ++k) {
        size_t i = order ? size_t((*order)[k]) : k;
        const Node& n = g.nodes()[i];
        if (!keep[i] || n.kind == NodeKind::placeholder) continue;
        std::vector<int> args;
        for (int a : n.args) {
            KILN_CHECK(ids[a] >= 0, "aot: node ", n.name, " needs ", g.nodes()[a].name, ", which its graph lacks");
            args.push_back(ids[a]);
        }
        ids[i] = n.kind == NodeKind::detach ? b.detach(args[0], n.meta) : b.call(n.op, n.attrs, args, n.meta, true);
    }
}

// The backward graph's nodes in an order that recomputes late: nodes that depend on a tangent
// keep the joint graph's order, and a recomputed forward node (one that depends on no tangent)
// comes just before its first reader. Recomputing everything up front would keep all those
// values alive beside the saved ones for the whole backward.
std::vector<int> backward_order(const Graph& g, const std::vector<bool>& keep, int num_primals) {
    const auto& nodes = g.nodes();
    size_t n = nodes.size() - 1;
    std::vector<bool> on_tangent(n, false), placed(n, false);
    for (size_t i = 0; i < n; ++i) {
        on_tangent[i] = nodes[i].kind == NodeKind::placeholder && int(i) >= num_primals;
        for (int a : nodes[i].args) on_tangent[i] = on_tangent[i] || on_tangent[a];
    }
    std::vector<int> order, stack;
    auto place = [&](int root) {  // root after the recomputed nodes it needs, depth first
        stack.push_back(root);
        while (!stack.empty()) {
            int i = stack.back();
            if (placed[i] || !keep[i] || nodes[i].kind == NodeKind::placeholder) {
                stack.pop_back();
                continue;
            }
            bool ready = true;
            for (int a : nodes[i].args)
                if (!placed[a] && keep[a] && nodes[a].kind != NodeKind::placeholder) ready = false, stack.push_back(a);
            if (!ready) continue;
            placed[i] = true, order.push_back(i);
            stack.pop_back();
        }
    };
    for (size_t i = 0; i < n; ++i)
        if (on_tangent[i]) place(int(i));
    for (size_t i = 0; i < n; ++i) place(int(i));  // what only the outputs read
    return order;
}

// What eager autograd would save for the same graph: each op's `saves` per the table.
std::vector<SavedInfo> eager_saved(const Graph& fw, std::span<const Tensor> inputs) {
    const auto& nodes = fw.nodes();
    std::vector<bool> needs(nodes.size(), false);
    std::set<int> saved;
    for (size_t i = 0, p = 0; i < nodes.size(); ++i) {
        const Node& n = nodes[i];
        if (n.kind == NodeKind::placeholder) needs[i] = inputs[p++].requires_grad();
        if (n.kind != NodeKind::call) continue;
        for (int a : n.args) needs[i] = needs[i] || needs[a];
        const OpInfo& info = op_info(n.op);
        if (!needs[i] || !info.backward || !n.grad_enabled) continue;
        bool left = n.attrs.scalar_pos == ScalarPos::left;
        for (size_t k = 0; k < n.args.size(); ++k) {
            bool is_x = k == 0 && !left, is_y = k == 1 || (k == 0 && left);
            bool keep = n.op == OpId::where ? k == 0 : (is_x && info.saves_x) || (is_y && info.saves_y) || k >= 2;
            if (keep) saved.insert(n.args[k]);
        }
        if (info.saves_out) saved.insert(int(i));
    }
    std::vector<SavedInfo> out;
    for (int s : saved) out.push_back({nodes[s].name, nodes[s].meta.shape, meta_bytes(nodes[s].meta)});
    return out;
}

std::mutex g_reports_mu;
std::map<uint64_t, MemoryReport> g_reports;  // by Graph::uid(): an address can be reused
MemoryReport g_latest;

}  // namespace

std::vector<PartitionNode> partition_input(const JointGraph& j) {
    const auto& nodes = j.graph->nodes();
    std::vector<PartitionNode> pn(nodes.size() - 1);  // all but the output node
    for (size_t i = 0; i + 1 < nodes.size(); ++i) {
        const Node& n = nodes[i];
        pn[i] = {n.name, n.args, meta_bytes(n.meta)};
        pn[i].is_primal = n.kind == NodeKind::placeholder && int(i) < j.num_primals;
        pn[i].is_tangent = n.kind == NodeKind::placeholder && int(i) >= j.num_primals;
        pn[i].recomputable = n.kind != NodeKind::call || op_info(n.op).recompute;
    }
    for (int o : j.fw_outputs) pn[o].is_fw_output = true;
    for (int g : j.input_grads)
        if (g >= 0) pn[g].is_bw_output = true;
    return pn;
}

size_t MemoryReport::eager_bytes() const {
    size_t n = 0;
    for (const auto& s : eager) n += s.bytes;
    return n;
}
size_t MemoryReport::compiled_bytes() const {
    size_t n = 0;
    for (const auto& s : compiled) n += s.bytes;
    return n;
}
std::string MemoryReport::str() const {
    using kiln::operator<<;
    std::ostringstream os;
    auto list = [&](const char* what, const std::vector<SavedInfo>& v, size_t total) {
        os << what << ": " << v.size() << " tensors, " << total << " bytes\n";
        for (const auto& s : v) os << "    " << s.name << " " << s.shape << " " << s.bytes << " bytes\n";
    };
    list("  saved for backward, eager", eager, eager_bytes());
    list("  saved for backward, compiled", compiled, compiled_bytes());
    return os.str();
}

// Which outputs each input reaches through nodes that carry gradient (not detach).
static std::vector<std::vector<int>> outputs_of_inputs(const Graph& fw) {
    const auto& nodes = fw.nodes();
    std::vector<std::vector<bool>> reaches(nodes.size(), std::vector<bool>(fw.num_inputs(), false));
    for (size_t i = 0; i < nodes.size(); ++i) {
        const Node& n = nodes[i];
        if (n.kind == NodeKind::placeholder) reaches[i][i] = true;
        // An int64 or bool result carries no gradient (as eager: it never requires grad),
        // so an input that reaches an output only through one gets none, not zeros.
        if (n.kind != NodeKind::call || !op_info(n.op).backward || !is_floating(n.meta.dtype)) continue;
        for (int a : n.args)
            for (int k = 0; k < fw.num_inputs(); ++k) reaches[i][k] = reaches[i][k] || reaches[a][k];
    }
    std::vector<std::vector<int>> out(fw.num_inputs());
    for (size_t o = 0; o < fw.outputs().size(); ++o)
        for (int k = 0; k < fw.num_inputs(); ++k)
            if (reaches[fw.outputs()[o]][k]) out[k].push_back(int(o));
    return out;
}

AotPlan plan(const Graph& fw, std::span<const Tensor> examples) {
    AotPlan p;
    p.joint = build_joint(fw, examples);
    const JointGraph& j = p.joint;
    const Graph& g = *j.graph;
    Partition part = partition(partition_input(j));
    keep_random_ops(g, part.in_forward);

    GraphBuilder fb;
    std::vector<int> fids(g.nodes().size(), -1);
    for (int i = 0; i < j.num_primals; ++i) fids[i] = fb.placeholder(g.nodes()[i].name, g.nodes()[i].meta, "primal");
    copy_nodes(g, part.in_forward, fb, fids);
    std::vector<int> fouts;
    for (int o : j.fw_outputs) fouts.push_back(fids[o]);
    for (int s : part.saved) fouts.push_back(fids[s]);
    p.forward = fb.build(fouts);
    p.num_outputs = int(j.fw_outputs.size());
    p.outputs_of_input = outputs_of_inputs(fw);

    GraphBuilder bb;
    std::vector<int> bids(g.nodes().size(), -1);
    for (int s : part.saved) bids[s] = bb.placeholder(g.nodes()[s].name, g.nodes()[s].meta, "saved");
    for (size_t k = 0; k < j.tangent_of.size(); ++k) {
        int t = j.tangent_of[k];
        if (t < 0) continue;
        bids[t] = bb.placeholder(g.nodes()[t].name, g.nodes()[t].meta, "tangent");
        p.tangent_outputs.push_back(int(k));
    }
    std::vector<int> order = backward_order(g, part.in_backward, j.num_primals);
    copy_nodes(g, part.in_backward, bb, bids, &order);
    std::vector<int> bouts;
    for (int gi : j.input_grads) {
        p.input_grad_slot.push_back(gi >= 0 ? int(bouts.size()) : -1);
        if (gi >= 0) bouts.push_back(bids[gi]);
    }
    p.backward = bb.build(bouts);

    p.memory.eager = eager_saved(fw, examples);
    for (int s : part.saved) p.memory.compiled.push_back({g.nodes()[s].name, g.nodes()[s].meta.shape, meta_bytes(g.nodes()[s].meta)});
    if (trace_log::on()) trace_log::aot_planned(fw, p, part);
    if (log_enabled("aot")) {
        std::ostringstream os;
        os << "joint graph:\n" << g << "forward graph:\n" << *p.forward << "backward graph:\n" << *p.backward << p.memory.str();
        log_event("aot", os.str());
    }
    std::lock_guard lock(g_reports_mu);
    g_reports[fw.uid()] = p.memory;
    g_latest = p.memory;
    return p;
}

MemoryReport last_memory_report(const Graph* graph) {
    std::lock_guard lock(g_reports_mu);
    auto it = g_reports.find(graph->uid());
    return it == g_reports.end() ? MemoryReport{} : it->second;
}

MemoryReport latest_memory_report() {
    std::lock_guard lock(g_reports_mu);
    return g_latest;
}

CompiledFn aot_eager_backend(const Graph& graph, std::span<const Tensor> examples) {
    // backend_compile keeps `graph` alive as long as the result: a non-owning handle.
    std::shared_ptr<const Graph> g(&graph, [](const Graph*) {});
    return aot_compile(g, examples, interpret_compiler);
}

CompiledFn interpret_compiler(std::shared_ptr<const Graph> graph, std::span<const Tensor>) {
    return [graph, plan = release_plan(*graph)](std::span<const Tensor> inputs) { return interpret(*graph, inputs, &plan); };
}

}  // namespace kiln::jit::aot
