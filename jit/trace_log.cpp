// The structured compile log: the file, the JSON writer and the jit/ events (docs/trace.md).
#include "jit/trace_log.h"

#include <pthread.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <tuple>

#include "autograd/node.h"
#include "jit/aot/aot.h"
#include "jit/cache.h"
#include "tensor/cuda.h"

namespace kiln::jit {
namespace trace_log {

std::atomic<bool> enabled{false};

namespace {

// Per compiled function, since the log started.
struct FnStats {
    int number = 0;  // 0, 1, 2 ... in order of first call
    std::string name;
    int64_t calls = 0, hits = 0, records = 0, recompiles = 0, replays = 0, reruns = 0, eager = 0,
            eager_fallbacks = 0;
    std::map<int, std::string> backend_choice;  // backend graph id -> choice
};

struct State {
    std::mutex mu;
    FILE* file = nullptr;
    std::string path;
    int64_t seq = 0;
    int logs_started = 0;  // by process `pid`: its second log in one directory gets a suffix
    pid_t pid = 0;
    std::chrono::steady_clock::time_point start;
    std::map<const void*, FnStats> fns;
    std::vector<FnStats> retired;  // functions whose core died and whose address came back
    std::map<uint64_t, const void*> fn_of_graph;  // graph uid -> compiled function
    std::map<std::tuple<const void*, int, int>, std::string>
        pin_lines;  // (fn, entry, symbol) -> script line
};
State& state() {
    static State* s = new State;  // leaked: background builds may log after statics die
    return *s;
}

void emit_locked(State& s, std::string_view ev, const Json& fields) {
    if (!s.file) return;
    auto us = std::chrono::duration_cast<std::chrono::microseconds>(
                  std::chrono::steady_clock::now() - s.start)
                  .count();
    std::string line = "{\"ev\":" + quote(ev) + ",\"seq\":" + std::to_string(s.seq++) +
                       ",\"t_us\":" + std::to_string(us);
    if (!fields.body().empty()) line += "," + fields.body();
    line += "}\n";
    std::fwrite(line.data(), 1, line.size(), s.file);
    std::fflush(s.file);  // a crashed run still has its log
}

// The function's stats (the "function" event at its first call in this log). Locked.
FnStats* fn_locked(State& s, const void* fn) {
    auto it = s.fns.find(fn);
    return it == s.fns.end() ? nullptr : &it->second;
}

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

std::string argv_json() {
    std::ifstream f("/proc/self/cmdline", std::ios::binary);
    std::vector<std::string> args;
    std::string a;
    while (std::getline(f, a, '\0')) args.push_back(a);
    return string_array(args);
}

std::string devices() {
    std::string d = "cpu";
    try {
        if (cuda::is_available())
            for (int i = 0; i < cuda::device_count(); ++i)
                d += ", cuda:" + std::to_string(i) + " " + cuda::device_name(i);
    } catch (const Error&) {
    }
    return d;
}

// The name of argument leaf `g` (as GuardSet::lines names it).
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

// --- JSON
std::string quote(std::string_view s) {
    std::string out = "\"";
    for (unsigned char c : s) {
        switch (c) {
            case '"':
                out += "\\\"";
                break;
            case '\\':
                out += "\\\\";
                break;
            case '\n':
                out += "\\n";
                break;
            case '\t':
                out += "\\t";
                break;
            case '\r':
                out += "\\r";
                break;
            default:
                if (c < 0x20) {
                    char buf[8];
                    std::snprintf(buf, sizeof buf, "\\u%04x", c);
                    out += buf;
                } else {
                    out += char(c);
                }
        }
    }
    return out + "\"";
}

std::string array(const std::vector<std::string>& items) {
    std::string out = "[";
    for (size_t i = 0; i < items.size(); ++i) out += (i ? "," : "") + items[i];
    return out + "]";
}

std::string string_array(const std::vector<std::string>& items) {
    std::vector<std::string> q;
    for (const std::string& s : items) q.push_back(quote(s));
    return array(q);
}

Json& Json::raw(std::string_view key, std::string_view json) {
    if (!body_.empty()) body_ += ",";
    body_ += quote(key);
    body_ += ":";
    body_ += json;
    return *this;
}
Json& Json::raw_fields(std::string_view fields) {
    if (fields.empty()) return *this;
    if (!body_.empty()) body_ += ",";
    body_ += fields;
    return *this;
}
Json& Json::str(std::string_view key, std::string_view value) { return raw(key, quote(value)); }
Json& Json::num(std::string_view key, double value) {
    if (!std::isfinite(value)) return raw(key, "null");
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.6g", value);
    return raw(key, buf);
}

// --- the file
void emit(std::string_view ev, const Json& fields) {
    State& s = state();
    std::lock_guard lock(s.mu);
    emit_locked(s, ev, fields);
}

void start_from_env() {
    const char* dir = std::getenv("KILN_TRACE");
    if (dir && *dir && !on()) trace_to(dir);
}

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

// --- jit/ hooks
void call_begin(const void* fn, const CompileOptions& options) {
    State& s = state();
    std::lock_guard lock(s.mu);
    auto [it, fresh] = s.fns.try_emplace(fn);
    if (!fresh && it->second.name != options.name) {  // another function at a dead one's address
        s.retired.push_back(std::move(it->second));
        it->second = FnStats{};
        fresh = true;
    }
    FnStats& f = it->second;
    ++f.calls;
    if (!fresh) return;
    f.number = int(s.fns.size() + s.retired.size()) - 1;
    f.name = options.name;
    Json j;
    j.num("fn", f.number)
        .str("name", options.name)
        .str("backend", options.backend.fn ? "custom" : options.backend.name);
    j.str("mode", options.mode);
    j.str("dynamic", options.dynamic == Dynamic::auto_    ? "auto"
                     : options.dynamic == Dynamic::always ? "always"
                                                          : "never");
    j.boolean("fullgraph", options.fullgraph).num("cache_size_limit", options.cache_size_limit);
    j.raw("arg_names", string_array(options.arg_names));
    emit_locked(s, "function", j);
}

void call_result(const void* fn, std::string_view result) {
    State& s = state();
    std::lock_guard lock(s.mu);
    FnStats* f = fn_locked(s, fn);
    if (!f) return;  // the log started mid-call
    if (result == "hit")
        ++f->hits;
    else if (result == "record")
        ++f->records;
    else if (result == "recompile")
        ++f->records, ++f->recompiles;
    else if (result == "replay")
        ++f->replays;
    else if (result == "rerun")
        ++f->reruns;
    else if (result == "eager")
        ++f->eager;
    else if (result == "eager_fallback")
        ++f->eager_fallbacks;
    if (result == "hit") return;
    emit_locked(s, "call", Json().num("fn", f->number).num("call", f->calls).str("result", result));
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

void backend_choice(uint64_t graph_uid, int backend_graph_id, const std::string& choice) {
    State& s = state();
    std::lock_guard lock(s.mu);
    if (auto it = s.fn_of_graph.find(graph_uid); it != s.fn_of_graph.end())
        if (FnStats* f = fn_locked(s, it->second)) f->backend_choice[backend_graph_id] = choice;
    emit_locked(s, "backend",
                Json()
                    .num("graph", graph_uid)
                    .num("backend_graph", backend_graph_id)
                    .str("choice", choice));
}

}  // namespace trace_log

// --- start and stop
void trace_to(const std::string& dir) {
    namespace fs = std::filesystem;
    trace_stop();
    KILN_CHECK(!dir.empty(),
               "trace_to: the trace directory is empty (give KILN_TRACE=DIR or trace_to(DIR) a "
               "directory)");
    std::error_code ec;
    fs::create_directories(dir, ec);
    KILN_CHECK(!ec && fs::is_directory(dir), "trace_to: can't create the trace directory '", dir,
               "': ", ec ? ec.message() : "it is not a directory");
    trace_log::State& s = trace_log::state();
    std::lock_guard lock(s.mu);
    if (s.pid != getpid()) s.pid = getpid(), s.logs_started = 0;
    std::string name = "trace_" + std::to_string(getpid()) +
                       (s.logs_started ? "." + std::to_string(s.logs_started) : "") + ".jsonl";
    std::string path = (fs::path(dir) / name).string();
    FILE* f = std::fopen(path.c_str(), "w");
    KILN_CHECK(f != nullptr, "trace_to: can't write the trace file '", path,
               "': ", std::strerror(errno));
    (void)counters();  // constructed before the handler is registered, so alive when it runs
    static bool at_exit = (std::atexit([] { trace_stop(); }), true);
    // A forked child writes no line into its parent's log (KILN_TRACE starts its own).
    static bool at_fork = (pthread_atfork(nullptr, nullptr,
                                          [] {
                                              trace_log::State& c = trace_log::state();
                                              if (c.file) std::fclose(c.file);
                                              c.file = nullptr;
                                              trace_log::enabled.store(false);
                                          }),
                           true);
    (void)at_exit, (void)at_fork;
    ++s.logs_started;
    s.file = f;
    s.path = path;
    s.seq = 0;
    s.start = std::chrono::steady_clock::now();
    s.fns.clear();
    s.retired.clear();
    s.fn_of_graph.clear();
    s.pin_lines.clear();
    trace_log::Json j;
    j.num("pid", int64_t(getpid()))
        .raw("argv", trace_log::argv_json())
        .str("device", trace_log::devices());
    j.num("format", 1);
    trace_log::emit_locked(s, "trace_start", j);
    trace_log::enabled.store(true);
}

void trace_stop() {
    trace_log::State& s = trace_log::state();
    std::lock_guard lock(s.mu);
    if (!s.file) return;
    trace_log::enabled.store(false);
    std::vector<const trace_log::FnStats*> order(s.fns.size() + s.retired.size());
    for (const auto& [key, f] : s.fns) order[size_t(f.number)] = &f;
    for (const trace_log::FnStats& f : s.retired) order[size_t(f.number)] = &f;
    for (const trace_log::FnStats* f : order) {
        trace_log::Json choice;
        for (const auto& [id, c] : f->backend_choice) choice.str(std::to_string(id), c);
        trace_log::Json j;
        j.num("fn", f->number)
            .str("name", f->name)
            .num("calls", f->calls)
            .num("hits", f->hits)
            .num("records", f->records);
        j.num("recompiles", f->recompiles).num("replays", f->replays).num("reruns", f->reruns);
        j.num("eager_runs", f->eager)
            .num("eager_fallbacks", f->eager_fallbacks)
            .raw("backend_choice", choice.text());
        trace_log::emit_locked(s, "counters", j);
    }
    Counters c = counters();
    trace_log::Json t;
    t.num("compiles", c.compiles)
        .num("recompiles", c.recompiles)
        .num("cache_hits", c.cache_hits)
        .num("replays", c.replays);
    t.num("reruns", c.reruns)
        .num("graphs_compiled", c.graphs_compiled)
        .num("graph_breaks", c.graph_breaks);
    t.num("eager_fallbacks", c.eager_fallbacks).num("eager_runs", c.eager_runs);
    trace_log::emit_locked(s, "totals", t);
    trace_log::emit_locked(s, "trace_end", {});
    std::fclose(s.file);
    s.file = nullptr;
}

std::string trace_path() {
    trace_log::State& s = trace_log::state();
    std::lock_guard lock(s.mu);
    return s.file ? s.path : "";
}

}  // namespace kiln::jit
