// jit::explain: compile fn, run it once, and report what the JIT made of it (PyTorch's
// torch._dynamo.explain): graphs, breaks with reason + location + hint, ops, guards.
#pragma once
#include <iosfwd>

#include "jit/compile.h"

namespace kiln::jit {

struct ExplainOutput {
    int graph_count = 0;
    int graph_break_count = 0;
    int op_count = 0;
    std::vector<std::vector<std::string>> ops_per_graph;
    std::vector<std::string> graphs;  // each graph printed
    std::vector<BreakInfo> break_reasons;
    std::vector<std::vector<std::string>> guards;  // per entry
    bool rerun = false;  // host code consumed a value: fn re-runs on every call
    std::vector<std::string> rerun_reasons;   // per re-run entry: why ("entry 1: item() at f.cpp:12")
    std::vector<std::string> eager_reasons;   // per entry that runs eagerly: why
    // Per entry whose recording began shape-only (fake tensors) and needed real ones: why.
    std::vector<std::string> fake_fallbacks;
    std::vector<std::string> write_backs;     // per entry with functionalized in-place writes to inputs
    // Per graph, when AOT autograd partitioned it: saved tensors, eager vs compiled.
    std::vector<std::string> saved_for_backward;
    // Per graph: what its backend said of it (the inductor: nodes left to eager kernels, and why).
    std::vector<std::vector<std::string>> backend_notes;
    // Per graph: what its backend chose to run (the inductor: generated kernels or eager).
    std::vector<std::vector<std::string>> backend_choices;
    // Per graph recorded while a DistributedDataParallel forward ran: how it was cut at the
    // DDP's buckets (jit/ddp_split.h; empty for other graphs), and into how many subgraphs.
    std::vector<std::string> ddp_splits;
    std::vector<int> ddp_subgraphs;  // per graph: 0 when not compiled under a DDP
};
std::ostream& operator<<(std::ostream& os, const ExplainOutput& e);

// What the cache of a compiled function holds now.
ExplainOutput explain_core(const CompiledCore& core);

template <class Sig>
ExplainOutput explain_compiled(const Compiled<Sig>& c) { return explain_core(c.core()); }

// Compiles fn (eager backend, fresh cache), calls it once on args, explains.
template <class F, class... T>
ExplainOutput explain(CompileOptions options, F&& fn, T&&... args) {
    options.backend = "eager";
    auto compiled = compile(std::forward<F>(fn), std::move(options));
    compiled(std::forward<T>(args)...);
    return explain_core(compiled.core());
}
template <class F, class... T>
    requires(!std::is_same_v<std::remove_cvref_t<F>, CompileOptions>)
ExplainOutput explain(F&& fn, T&&... args) {
    return explain(CompileOptions{}, std::forward<F>(fn), std::forward<T>(args)...);
}

}  // namespace kiln::jit
