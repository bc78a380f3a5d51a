// The cache of one compiled function: its entries (guards + program), the lookup a call
// makes, and the counters tests and explain read (docs/jit.md).
#pragma once
#include <atomic>
#include <memory>
#include <shared_mutex>
#include <string>
#include <vector>

#include "jit/program.h"
#include "jit/tracer.h"

namespace kiln {

struct CompileOptions {
    jit::Backend backend = "inductor";
    bool fullgraph = false;                   // the first graph break is an error
    jit::Dynamic dynamic = jit::Dynamic::auto_;
    int cache_size_limit = 8;                 // entries per function, then eager
    std::string mode = "default";             // default | reduce-overhead | max-autotune
    bool async_compile = false;               // inductor: interpret while the compiler runs
    bool choose_faster = true;  // inductor: per graph, keep the faster of kernels and eager
    std::vector<std::string> arg_names;       // parameter names for guards and graphs (default arg0 ...)
    std::string name = "fn";                  // the function's name in logs and errors
};

namespace jit {

// Counts since the last reset(), over every compiled function.
struct Counters {
    int64_t compiles = 0;         // entries recorded (traces of fn for a new guard set)
    int64_t recompiles = 0;       // of which: a function already had entries
    int64_t cache_hits = 0;       // calls served by an existing entry
    int64_t replays = 0;          // calls that replayed fn to record a new branch
    int64_t reruns = 0;           // calls of re-run entries (host code consumed a value)
    int64_t graphs_compiled = 0;  // segments handed to a backend
    int64_t graph_breaks = 0;     // breaks recorded
    int64_t eager_fallbacks = 0;  // calls run eagerly: cache_size_limit reached
    int64_t eager_runs = 0;       // calls of entries that run eagerly (could not be functionalized)
    std::vector<std::string> recompile_reasons;
};
Counters counters();
// Forgets every compiled function's entries and zeroes the counters.
void reset();

class CompiledCore {
   public:
    explicit CompiledCore(CompileOptions options);
    // One call of the compiled function: `host` runs fn itself (recording, re-run, fallback).
    std::vector<Tensor> call(const Args& args, const HostFn& host);
    const CompileOptions& options() const { return options_; }
    void clear();

    // Read access for explain and tests (takes the lock).
    template <class F>
    void with_entries(F&& f) const {
        std::shared_lock lock(mu_);
        f(entries_);
    }

   private:
    std::vector<Tensor> record_new(const Args& args, const HostFn& host);
    std::set<ArgDim> choose_symbolic(const Args& args, std::string& reason) const;
    std::vector<Tensor> trace(Entry& e, const Args& args, const std::vector<int64_t>& syms, const HostFn& host);

    CompileOptions options_;
    TraceConfig cfg_;
    mutable std::shared_mutex mu_;
    std::vector<std::unique_ptr<Entry>> entries_;
    int next_entry_id_ = 1;
    bool warned_ = false;
};

// Makes `core` reachable by reset().
void register_core(const std::shared_ptr<CompiledCore>& core);

}  // namespace jit
}  // namespace kiln
