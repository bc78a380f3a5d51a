// The events of jit/ for the compile log (docs/trace.md): graphs, guards and symbols,
// recompiles with the guard that failed, breaks, pins, AOT halves.
#include <cmath>
#include <cstring>
#include <sstream>

#include "autograd/node.h"
#include "jit/aot/aot.h"
#include "jit/cache.h"
#include "jit/trace_log_state.h"

namespace kiln::jit::trace_log {
namespace {

std::string fmt(double v) {
    std::ostringstream os;
    os << v;
    return os.str();
}

std::string shape_json(const Shape& shape, const std::vector<int>& sym) {
    std::vector<std::string> dims;
    for (size_t d = 0; d < shape.size(); ++d)
        dims.push_back(d < sym.size() && sym[d] >= 0 ? quote("s" + std::to_string(sym[d]))
                                                     : std::to_string(shape[d]));
    return array(dims);
}

std::string device_text(Device d) {
    std::ostringstream os;
    os << d;
    return os.str();
}

std::string guard_arg_name(const ArgGuard& g, const std::vector<std::string>& names) {
    ArgValue probe{
        .kind = g.kind, .position = g.position, .key = g.key ? &*g.key : nullptr, .index = g.index};
    return arg_name(probe, names);
}

struct Failure {
    std::string guard, old_value, new_value;
};

// The first guard of `e` that `args` fail, with the value recorded and the value now.
Failure first_failure(const Entry& e, const Args& args, const std::vector<std::string>& names) {
    const GuardSet& g = e.guards;
    auto on_off = [](bool b) { return std::string(b ? "enabled" : "disabled"); };
    if (autograd::grad_enabled() != g.grad_mode)
        return {"grad_mode", on_off(g.grad_mode), on_off(!g.grad_mode)};
    if (args.size() != g.args.size())
        return {"number of flattened arguments", std::to_string(g.args.size()),
                std::to_string(args.size())};
    std::vector<int64_t> syms(g.sym_values.size(), 0);
    for (size_t i = 0; i < args.size(); ++i) {
        const ArgGuard& a = g.args[i];
        const ArgValue& v = args[i];
        std::string name = guard_arg_name(a, names);
        if (a.kind != v.kind) return {name + " kind", "recorded kind", "another kind"};
        switch (a.kind) {
            case ArgKind::scalar:
                if (std::memcmp(&a.scalar, &v.scalar, sizeof(double)) != 0 &&
                    !(std::isnan(a.scalar) && std::isnan(v.scalar)))
                    return {name + " == " + fmt(a.scalar), fmt(a.scalar), fmt(v.scalar)};
                continue;
            case ArgKind::integer:
                if (a.integer != v.integer)
                    return {name + " == " + std::to_string(a.integer), std::to_string(a.integer),
                            std::to_string(v.integer)};
                continue;
            case ArgKind::string:
                if (a.text != v.text)
                    return {name + " == '" + a.text + "'", a.text, std::string(v.text)};
                continue;
            case ArgKind::object:
                if (a.object != v.object)
                    return {name + " is the same object", "the recorded object", "another object"};
                continue;
            case ArgKind::tensor:
                break;
        }
        const TensorImpl& t = *v.tensor.impl();
        if (t.dtype != a.dtype) return {name + ".dtype", dtype_name(a.dtype), dtype_name(t.dtype)};
        if (device_text(v.tensor.device()) != device_text(a.device))
            return {name + ".device", device_text(a.device), device_text(v.tensor.device())};
        if (v.tensor.requires_grad() != a.requires_grad)
            return {name + ".requires_grad", a.requires_grad ? "true" : "false",
                    v.tensor.requires_grad() ? "true" : "false"};
        if (t.shape.size() != a.sizes.size())
            return {name + ".dim()", std::to_string(a.sizes.size()),
                    std::to_string(t.shape.size())};
        for (size_t d = 0; d < t.shape.size(); ++d) {
            std::string size = name + ".size(" + std::to_string(d) + ")";
            int k = a.sym[d];
            if (k < 0 && t.shape[d] != a.sizes[d])
                return {size + " == " + std::to_string(a.sizes[d]), std::to_string(a.sizes[d]),
                        std::to_string(t.shape[d])};
            if (k >= 0 && t.shape[d] < 2)
                return {size + " >= 2 (s" + std::to_string(k) + ")", std::to_string(a.sizes[d]),
                        std::to_string(t.shape[d])};
            if (k >= 0 && syms[size_t(k)] && syms[size_t(k)] != t.shape[d])
                return {"s" + std::to_string(k) + " == " + size, std::to_string(syms[size_t(k)]),
                        std::to_string(t.shape[d])};
            if (k >= 0) syms[size_t(k)] = t.shape[d];
        }
    }
    for (size_t k = 0; k < g.pinned.size(); ++k)
        if (g.pinned[k] && syms[k] != g.pinned[k])
            return {"s" + std::to_string(k) + " == " + std::to_string(g.pinned[k]),
                    std::to_string(g.pinned[k]), std::to_string(syms[k])};
    for (const ValueGuard& vg : e.value_guards)
        if (int64_t now = vg.read(); now != vg.value)
            return {vg.what + " == " + std::to_string(vg.value), std::to_string(vg.value),
                    std::to_string(now)};
    return {g.failure(args, names), "", ""};  // aliasing: the guard set's own words
}

thread_local std::vector<std::string> t_node_sites;  // per builder id of the open recording

}  // namespace

std::string graph_json(const Graph& g, const std::vector<std::string>* lines) {
    std::vector<std::string> nodes;
    const auto& ns = g.nodes();
    for (size_t i = 0; i + 1 < ns.size(); ++i) {  // the last node is the output node
        const Node& n = ns[i];
        std::vector<std::string> inputs;
        for (int a : n.args) inputs.push_back(quote(node_id(a)));
        Json j;
        j.str("id", node_id(int(i))).str("name", n.name);
        j.str("kind", n.kind == NodeKind::placeholder ? "placeholder"
                      : n.kind == NodeKind::detach    ? "detach"
                                                      : "call");
        j.str("op", n.kind == NodeKind::call     ? op_info(n.op).name
                    : n.kind == NodeKind::detach ? "detach"
                                                 : "placeholder");
        j.raw("inputs", array(inputs)).raw("shape", shape_json(n.meta.shape, n.meta.sym));
        j.str("dtype", dtype_name(n.meta.dtype)).str("device", device_text(n.meta.device));
        if (n.meta.requires_grad) j.boolean("requires_grad", true);
        if (!n.source.empty()) j.str("source", n.source);
        if (lines && i < lines->size() && !(*lines)[i].empty()) j.str("line", (*lines)[i]);
        nodes.push_back(j.text());
    }
    std::vector<std::string> outputs;
    for (int o : g.outputs()) outputs.push_back(quote(node_id(o)));
    Json j;
    j.num("graph", g.uid())
        .num("num_symbols", g.num_symbols())
        .raw("nodes", array(nodes))
        .raw("outputs", array(outputs));
    j.str("text", g.str());
    return j.text();
}

void recompile(const void* fn, int new_entry, const std::vector<std::unique_ptr<Entry>>& entries,
               const Args& args, const CompileOptions& options, const std::string& reason) {
    if (entries.empty()) return;
    const Entry* named = entries.front().get();
    for (const auto& e : entries)
        if (reason.starts_with("entry " + std::to_string(e->id) + ":")) named = e.get();
    const Entry& failed = *named;
    Failure why = first_failure(failed, args, options.arg_names);
    State& s = state();
    std::lock_guard lock(s.mu);
    FnStats* f = fn_locked(s, fn);
    Json j;
    j.num("fn", f ? f->number : -1).num("entry", new_entry).num("failed_entry", failed.id);
    j.str("guard", why.guard)
        .str("old", why.old_value)
        .str("new", why.new_value)
        .str("reason", reason);
    if (reason.find("become symbolic") != std::string::npos)
        j.str("note", "the sizes that changed become symbols");
    emit_locked(s, "recompile", j);
}

void entry_recorded(const void* fn, const Entry& e, const CompileOptions& options,
                    double first_call_ms) {
    const GuardSet& g = e.guards;
    std::vector<std::string> lines = g.lines(options.arg_names);
    std::vector<std::string> guards;
    auto add = [&](const std::string& text, const std::string& source, std::string_view kind,
                   std::string line = "") {
        Json j;
        j.str("text", text).str("kind", kind).str("source", source);
        if (!line.empty()) j.str("line", line);
        guards.push_back(j.text());
    };
    auto pin_line = [&](int k) {
        State& s = state();
        std::lock_guard lock(s.mu);
        auto it = s.pin_lines.find({fn, e.id, k});
        return it == s.pin_lines.end() ? std::string() : it->second;
    };
    // lines(): one per argument leaf, one per symbol, the relations between symbols, grad mode.
    size_t i = 0;
    for (; i < g.args.size() && i < lines.size(); ++i)
        add(lines[i], "argument " + guard_arg_name(g.args[i], options.arg_names), "argument");
    for (int k = 0; k < g.num_symbols() && i < lines.size(); ++k, ++i)
        add(lines[i],
            g.is_pinned(k) ? g.pin_reasons[size_t(k)]
                           : "dynamic shapes (sizes 0 and 1 stay specialized)",
            g.is_pinned(k) ? "pin" : "symbol", g.is_pinned(k) ? pin_line(k) : "");
    for (; i < lines.size(); ++i)
        add(lines[i],
            lines[i].starts_with("grad_mode") ? "autograd's grad mode when fn was recorded"
                                              : "the same symbol at two sizes",
            lines[i].starts_with("grad_mode") ? "grad_mode" : "relation");
    for (const ValueGuard& vg : e.value_guards)
        add(vg.what + " == " + std::to_string(vg.value), "a value fn's code read", "value");

    std::vector<std::string> symbols;
    for (int k = 0; k < g.num_symbols(); ++k) {
        std::string from;
        for (size_t a = 0; a < g.args.size() && from.empty(); ++a)
            for (size_t d = 0; d < g.args[a].sym.size(); ++d)
                if (g.args[a].sym[d] == k) {
                    from = guard_arg_name(g.args[a], options.arg_names) + ".size(" +
                           std::to_string(d) + ")";
                    break;
                }
        Json sj;
        sj.str("name", "s" + std::to_string(k))
            .str("from", from)
            .num("value", g.sym_values[size_t(k)]);
        sj.boolean("pinned", g.is_pinned(k));
        if (g.is_pinned(k))
            sj.num("pinned_to", g.pinned[size_t(k)]).str("why", g.pin_reasons[size_t(k)]);
        symbols.push_back(sj.text());
    }
    State& s = state();
    std::lock_guard lock(s.mu);
    FnStats* f = fn_locked(s, fn);
    int number = f ? f->number : -1;
    Json j;
    j.num("fn", number)
        .num("entry", e.id)
        .num("first_call_ms", first_call_ms)
        .raw("guards", array(guards));
    if (e.rerun) j.str("rerun", e.rerun_reason);
    if (!e.eager_reason.empty()) j.str("eager", e.eager_reason);
    emit_locked(s, "guards", j);
    if (!symbols.empty())
        emit_locked(s, "symbols",
                    Json().num("fn", number).num("entry", e.id).raw("symbols", array(symbols)));
}

void recording_started() { t_node_sites.clear(); }

void node_recorded(int builder_id) {
    if (builder_id < 0) return;
    if (size_t(builder_id) >= t_node_sites.size()) t_node_sites.resize(size_t(builder_id) + 1);
    if (const HostSiteFn& site = host_site()) t_node_sites[size_t(builder_id)] = site();
}

void graph_recorded(const void* fn, int entry, int segment, const std::string& title,
                    const Graph& g, const GraphBuilder& b) {
    std::vector<std::string> lines(g.nodes().size());
    for (size_t id = 0; id < t_node_sites.size(); ++id)
        if (!t_node_sites[id].empty())
            if (int at = b.final_index(int(id)); at >= 0 && size_t(at) < lines.size())
                lines[size_t(at)] = t_node_sites[id];
    std::string body = graph_json(g, &lines);
    State& s = state();
    std::lock_guard lock(s.mu);
    FnStats* f = fn_locked(s, fn);
    s.fn_of_graph[g.uid()] = fn;
    Json j;
    j.num("fn", f ? f->number : -1).num("entry", entry).num("segment", segment).str("title", title);
    // and the graph's own fields (graph, num_symbols, nodes, outputs, text) at the top level
    j.raw_fields(std::string_view(body).substr(1, body.size() - 2));
    emit_locked(s, "graph", j);
}

void graph_break(const void* fn, int entry, const BreakInfo& brk) {
    State& s = state();
    std::lock_guard lock(s.mu);
    FnStats* f = fn_locked(s, fn);
    Json j;
    j.num("fn", f ? f->number : -1)
        .num("entry", entry)
        .str("kind", escape_name(brk.kind))
        .str("reason", brk.reason);
    j.str("line", brk.location).str("hint", brk.hint);
    emit_locked(s, "break", j);
}

void runs_eagerly(const void* fn, int entry, const std::string& why) {
    State& s = state();
    std::lock_guard lock(s.mu);
    FnStats* f = fn_locked(s, fn);
    Json j;
    j.num("fn", f ? f->number : -1)
        .num("entry", entry)
        .str("kind", "runs eagerly")
        .str("reason", why);
    if (const HostSiteFn& site = host_site()) j.str("line", site());
    j.str("hint",
          "the entry runs eagerly on every call: keep in-place ops off tensors that need grad or "
          "share storage");
    emit_locked(s, "break", j);
}

void symbol_pinned(const void* fn, int entry, int sym, int64_t value, const std::string& why) {
    State& s = state();
    std::lock_guard lock(s.mu);
    FnStats* f = fn_locked(s, fn);
    Json j;
    j.num("fn", f ? f->number : -1)
        .num("entry", entry)
        .str("symbol", "s" + std::to_string(sym))
        .num("value", value);
    j.str("why", why);
    if (const HostSiteFn& site = host_site()) {
        j.str("line", site());
        s.pin_lines[{fn, entry, sym}] = site();
    }
    emit_locked(s, "pin", j);
}

void aot_planned(const Graph& forward, const aot::AotPlan& p, const aot::Partition& part) {
    const Graph& joint = *p.joint.graph;
    std::vector<std::string> saved, recomputed, fw_saved, bw_saved;
    for (size_t k = 0; k < part.saved.size(); ++k) {
        int n = part.saved[k];
        const aot::SavedInfo& info = p.memory.compiled[k];
        saved.push_back(
            Json().str("id", node_id(n)).str("name", info.name).num("bytes", info.bytes).text());
        fw_saved.push_back(quote(node_id(p.forward->outputs()[size_t(p.num_outputs) + k])));
    }
    for (int i = 0; i < p.backward->num_inputs(); ++i)
        if (p.backward->nodes()[size_t(i)].source == "saved") bw_saved.push_back(quote(node_id(i)));
    for (size_t i = 0; i < part.in_forward.size() && i < part.in_backward.size(); ++i) {
        bool is_saved = std::find(part.saved.begin(), part.saved.end(), int(i)) != part.saved.end();
        if (part.in_forward[i] && part.in_backward[i] && !is_saved &&
            joint.nodes()[i].kind == NodeKind::call)
            recomputed.push_back(quote(node_id(int(i))));
    }
    std::vector<std::string> eager;
    for (const aot::SavedInfo& e : p.memory.eager)
        eager.push_back(Json().str("name", e.name).num("bytes", e.bytes).text());
    Json j;
    j.num("graph", forward.uid())
        .raw("joint", graph_json(joint))
        .raw("forward", graph_json(*p.forward));
    j.raw("backward", graph_json(*p.backward))
        .raw("saved", array(saved))
        .num("saved_bytes", p.memory.compiled_bytes());
    j.raw("forward_saved", array(fw_saved))
        .raw("backward_saved", array(bw_saved))
        .raw("recomputed", array(recomputed));
    j.raw("eager_saved", array(eager)).num("eager_saved_bytes", p.memory.eager_bytes());
    State& s = state();
    std::lock_guard lock(s.mu);
    if (auto it = s.fn_of_graph.find(forward.uid()); it != s.fn_of_graph.end())
        for (const Graph* g : {&joint, p.forward.get(), p.backward.get()})
            s.fn_of_graph[g->uid()] = it->second;
    emit_locked(s, "aot", j);
}

}  // namespace kiln::jit::trace_log
