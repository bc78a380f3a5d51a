// The structured compile log: the file, its start and end, and the per-function counters
// (docs/trace.md). The events of jit/ are built in jit/trace_events.cpp.
#include "jit/trace_log.h"

#include <pthread.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "jit/cache.h"
#include "jit/trace_log_state.h"
#include "tensor/cuda.h"

namespace kiln::jit {
namespace trace_log {

std::atomic<bool> enabled{false};

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

namespace {

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

}  // namespace

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

// --- calls: counted per function ("call" events for all but hits)
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
