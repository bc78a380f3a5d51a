// Cache lookup: guards first (shared lock, no host code), then record or replay (exclusive).
#include "jit/cache.h"

#include <chrono>
#include <cstdio>

#include <algorithm>

#include <iostream>
#include <mutex>

#include "jit/log.h"
#include "jit/trace_log.h"

namespace kiln::jit {
namespace {

struct Global {
    std::atomic<int64_t> fast_hits = 0;  // the hot path takes no lock
    std::mutex mu;
    Counters counts;
    std::vector<std::weak_ptr<CompiledCore>> cores;
};
Global& global() {
    static Global g;
    return g;
}

template <class F>
void count(F&& f) {
    std::lock_guard lock(global().mu);
    f(global().counts);
}

bool holds(const Entry& e, const Args& args, std::vector<int64_t>& syms) {
    return e.guards.check(args, syms) && e.values_hold() && e.aliasing_ok(args);
}

// An entry kiln could not functionalize: fn runs eagerly, outside the cache's lock.
template <class Lock>
std::vector<Tensor> run_eagerly(Lock& lock, const HostFn& host, const void* fn) {
    lock.unlock();
    if (trace_log::on()) trace_log::call_result(fn, "eager");
    count([](Counters& c) { ++c.eager_runs; });
    return host();
}

bool valid_mode(const std::string& m) {
    return m == "default" || m == "reduce-overhead" || m == "max-autotune" || m == "max-autotune-no-cudagraphs";
}

}  // namespace

Counters counters() {
    std::lock_guard lock(global().mu);
    Counters c = global().counts;
    c.cache_hits += global().fast_hits.load();
    return c;
}

void reset() {
    std::vector<std::shared_ptr<CompiledCore>> live;
    {
        std::lock_guard lock(global().mu);
        global().counts = Counters{};
        global().fast_hits = 0;
        for (auto& w : global().cores)
            if (auto c = w.lock()) live.push_back(c);
        global().cores.clear();
        for (auto& c : live) global().cores.push_back(c);
    }
    for (auto& c : live) c->clear();
}

void register_core(const std::shared_ptr<CompiledCore>& core) {
    std::lock_guard lock(global().mu);
    global().cores.push_back(core);
}

CompiledCore::CompiledCore(CompileOptions options) : options_(std::move(options)) {
    trace_log::start_from_env();  // KILN_TRACE=DIR (docs/trace.md)
    KILN_CHECK(options_.backend.fn || has_backend(options_.backend.name), "compile: unknown backend '", options_.backend.name,
               "'; known: eager, aot_eager, inductor, or a callback");
    KILN_CHECK(valid_mode(options_.mode), "compile: unknown mode '", options_.mode,
               "' (expected default, reduce-overhead, max-autotune or max-autotune-no-cudagraphs)");
    KILN_CHECK(options_.cache_size_limit >= 0, "compile: cache_size_limit must be >= 0, got ", options_.cache_size_limit);
    cfg_ = TraceConfig{options_.backend,
                       options_.fullgraph,
                       options_.arg_names,
                       options_.name,
                       {.async_compile = options_.async_compile,
                        .mode = options_.mode,
                        .choose_faster = options_.choose_faster}};
}

void CompiledCore::clear() {
    std::unique_lock lock(mu_);
    entries_.clear();
    next_entry_id_ = 1;  // a fresh start: the next recording is entry 1 again
    warned_ = false;
}

std::vector<Tensor> CompiledCore::call(const Args& args, const HostFn& host) {
    std::vector<int64_t> syms;
    if (trace_log::on()) trace_log::call_begin(&cfg_, options_);
    {
        std::shared_lock lock(mu_);
        for (const auto& e : entries_) {
            if (!holds(*e, args, syms)) continue;
            if (!e->eager_reason.empty())
                return run_eagerly(lock, host, &cfg_);  // could not be functionalized
            std::vector<Tensor> out;
            if (!e->rerun && program_run(*e, args, syms, out)) {
                global().fast_hits.fetch_add(1, std::memory_order_relaxed);
                if (trace_log::on()) trace_log::call_result(&cfg_, "hit");
                return out;
            }
            break;  // re-run entry or an unseen branch: needs the exclusive path
        }
    }
    std::unique_lock lock(mu_);
    for (const auto& e : entries_) {
        if (!holds(*e, args, syms)) continue;
        if (!e->eager_reason.empty()) return run_eagerly(lock, host, &cfg_);
        count([&](Counters& c) { ++(e->rerun ? c.reruns : c.replays); if (e->rerun) ++c.cache_hits; });
        if (trace_log::on()) trace_log::call_result(&cfg_, e->rerun ? "rerun" : "replay");
        return trace(*e, args, syms, host);
    }
    // An undefined tensor argument has nothing to guard: fn runs as eager runs it (its
    // result, or eager's own error naming the op), and nothing is recorded.
    // (CUDA tensors are recorded like CPU ones: guards key on the device, and the inductor
    // builds graphs whose inputs live on the GPU with the CUDA emitter.)
    auto eager_only = [](const ArgValue& a) { return a.kind == ArgKind::tensor && !a.tensor.defined(); };
    if (std::any_of(args.begin(), args.end(), eager_only)) {
        count([](Counters& c) { ++c.eager_fallbacks; });
        if (trace_log::on()) trace_log::call_result(&cfg_, "eager_fallback");
        lock.unlock();
        return host();
    }
    if (int(entries_.size()) >= options_.cache_size_limit) {
        if (!warned_) {
            std::cerr << "kiln: warning: " << options_.name << " hit cache_size_limit (" << options_.cache_size_limit
                      << "); new specializations run eagerly, the " << entries_.size() << " entries kept. Last guard failure: "
                      << (entries_.empty() ? "none" : entries_.back()->guards.failure(args, options_.arg_names))
                      << ". Consider dynamic=always or raising cache_size_limit.\n";
            warned_ = true;
        }
        count([](Counters& c) { ++c.eager_fallbacks; });
        if (trace_log::on()) trace_log::call_result(&cfg_, "eager_fallback");
        lock.unlock();
        return host();
    }
    return record_new(args, host);
}

std::set<ArgDim> CompiledCore::choose_symbolic(const Args& args, std::string& reason) const {
    for (const auto& e : entries_) {
        std::string why = e->guards.failure(args, options_.arg_names);
        if (reason.empty()) reason = "entry " + std::to_string(e->id) + ": " + why;
        if (options_.dynamic != Dynamic::auto_) continue;
        if (auto changed = e->guards.size_only_mismatch(args)) {
            reason = "entry " + std::to_string(e->id) + ": " + why + " (sizes that changed become symbolic)";
            std::set<ArgDim> dims = e->guards.symbolic_dims();
            dims.insert(changed->begin(), changed->end());
            return dims;
        }
    }
    return options_.dynamic == Dynamic::always ? all_dims(args) : std::set<ArgDim>{};
}

std::vector<Tensor> CompiledCore::record_new(const Args& args, const HostFn& host) {
    std::string reason;
    auto e = std::make_unique<Entry>();
    e->guards = make_guards(args, choose_symbolic(args, reason));
    e->id = next_entry_id_++;
    bool recompile = !entries_.empty();
    count([&](Counters& c) {
        ++c.compiles;
        if (recompile) ++c.recompiles, c.recompile_reasons.push_back(options_.name + ": " + reason);
    });
    if (trace_log::on()) trace_log::call_result(&cfg_, recompile ? "recompile" : "record");
    if (recompile && trace_log::on())
        trace_log::recompile(&cfg_, e->id, entries_, args, options_, reason);
    if (recompile) log_event("recompiles", "recompiling " + options_.name + " (entry " + std::to_string(e->id) + "): " + reason);
    std::string guard_text;
    for (const std::string& l : e->guards.lines(options_.arg_names)) guard_text += "\n  " + l;
    log_event("guards", "guards of " + options_.name + " entry " + std::to_string(e->id) + ":" + guard_text);
    auto start = std::chrono::steady_clock::now();
    double accounted = accounted_stage_seconds();
    std::vector<Tensor> out = trace(*e, args, e->guards.sym_values, host);
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    add_stage_time(Stage::tracing,
                   std::max(0.0, seconds - (accounted_stage_seconds() - accounted)));
    if (trace_log::on())
        trace_log::entry_recorded(
            &cfg_, *e, options_,
            seconds * 1e3);
    if (log_enabled("compile")) {
        char line[200];
        std::snprintf(line, sizeof line,
                      "%s entry %d: first call %.1f ms (tracing, backend compiles, running)",
                      options_.name.c_str(), e->id, seconds * 1e3);
        log_event("compile", line);
    }
    entries_.push_back(std::move(e));
    return out;
}

std::vector<Tensor> CompiledCore::trace(Entry& e, const Args& args, const std::vector<int64_t>& syms, const HostFn& host) {
    TraceStats stats;
    struct Commit {  // count what was compiled even when fn throws half way
        TraceStats& s;
        ~Commit() { count([&](Counters& c) { c.graphs_compiled += s.graphs_compiled, c.graph_breaks += s.breaks; }); }
    } commit{stats};
    return trace_entry(e, args, syms, cfg_, host, stats);
}

}  // namespace kiln::jit
