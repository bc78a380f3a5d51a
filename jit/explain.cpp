// Collecting and printing explain's report.
#include "jit/explain.h"

#include <ostream>

#include "jit/aot/aot.h"
#include "jit/ddp_split.h"

namespace kiln::jit {

ExplainOutput explain_core(const CompiledCore& core) {
    ExplainOutput out;
    core.with_entries([&](const std::vector<std::unique_ptr<Entry>>& entries) {
        for (const auto& e : entries) {
            for (const Segment* s : e->segments()) {
                if (!s->graph) continue;
                ++out.graph_count;
                out.op_count += s->num_ops();
                out.ops_per_graph.push_back(s->graph->op_names());
                out.graphs.push_back(s->graph->str());
                aot::MemoryReport m = aot::last_memory_report(s->graph.get());
                out.saved_for_backward.push_back(m.eager.empty() && m.compiled.empty() ? "" : m.str());
                BackendReport report = backend_report(*s->graph);
                out.backend_notes.push_back(std::move(report.notes));
                out.backend_choices.push_back(std::move(report.choices));
                auto split = ddp_split_of(*s->graph);
                out.ddp_splits.push_back(split ? split->str() : "");
                out.ddp_subgraphs.push_back(split ? int(split->pieces.size()) : 0);
            }
            out.break_reasons.insert(out.break_reasons.end(), e->breaks.begin(), e->breaks.end());
            out.guards.push_back(e->guards.lines(core.options().arg_names));
            for (const ValueGuard& g : e->value_guards) out.guards.back().push_back(g.what + " == " + std::to_string(g.value));
            std::string entry = "entry " + std::to_string(e->id) + ": ";
            out.rerun = out.rerun || e->rerun;
            if (e->rerun) out.rerun_reasons.push_back(entry + e->rerun_reason);
            if (!e->eager_reason.empty()) out.eager_reasons.push_back(entry + e->eager_reason);
            if (!e->fake_fallback.empty()) out.fake_fallbacks.push_back(entry + e->fake_fallback);
            if (!e->mutated_slots.empty()) {
                std::string w = entry + std::to_string(e->mutated_slots.size()) + " input(s) mutated in place (slots";
                for (int s : e->mutated_slots)
                    w += " " + std::to_string(s) + (e->slot_kinds[s] == SlotKind::argument ? "=argument" : "=captured tensor");
                out.write_backs.push_back(w + "), written back after the graph");
            }
        }
    });
    out.graph_break_count = int(out.break_reasons.size());
    return out;
}

std::ostream& operator<<(std::ostream& os, const ExplainOutput& e) {
    os << "Graph Count: " << e.graph_count << "\n"
       << "Graph Break Count: " << e.graph_break_count << "\n"
       << "Op Count: " << e.op_count
       << " (every op recorded in the graphs, views and detaches included; PyTorch counts FX "
          "call_function nodes)\n"
       << "Break Reasons:\n";
    for (size_t i = 0; i < e.break_reasons.size(); ++i) {
        const BreakInfo& b = e.break_reasons[i];
        os << "  Break Reason " << i + 1 << ":\n"
           << "    Reason: " << b.reason << "\n"
           << "    Location: " << b.location << "\n"
           << "    Hint: " << b.hint << "\n";
    }
    os << "Ops per Graph:\n";
    for (size_t i = 0; i < e.ops_per_graph.size(); ++i) {
        os << "  Ops per Graph " << i + 1 << ":";
        for (const std::string& op : e.ops_per_graph[i]) os << " " << op;
        os << "\n";
    }
    os << "Guards:\n";
    for (size_t i = 0; i < e.guards.size(); ++i) {
        os << "  Entry " << i + 1 << ":\n";
        for (const std::string& g : e.guards[i]) os << "    " << g << "\n";
    }
    bool any_aot = false;
    for (const std::string& m : e.saved_for_backward) any_aot = any_aot || !m.empty();
    if (any_aot) {
        os << "Saved for backward (AOT autograd):\n";
        for (size_t i = 0; i < e.saved_for_backward.size(); ++i)
            if (!e.saved_for_backward[i].empty()) os << "  Graph " << i + 1 << ":\n" << e.saved_for_backward[i];
    }
    bool any_note = false;
    for (const auto& notes : e.backend_notes) any_note = any_note || !notes.empty();
    if (any_note) {
        os << "Not fused (the backend runs these nodes' eager kernels):\n";
        for (size_t i = 0; i < e.backend_notes.size(); ++i)
            for (const std::string& n : e.backend_notes[i]) os << "  Graph " << i + 1 << ": " << n << "\n";
    }
    bool any_choice = false;
    for (const auto& choices : e.backend_choices) any_choice = any_choice || !choices.empty();
    if (any_choice) {
        os << "Backend choice (generated kernels or eager, measured on the first calls):\n";
        for (size_t i = 0; i < e.backend_choices.size(); ++i)
            for (const std::string& c : e.backend_choices[i])
                os << "  Graph " << i + 1 << ": " << c << "\n";
    }
    bool any_split = false;
    for (const std::string& d : e.ddp_splits) any_split = any_split || !d.empty();
    if (any_split) {
        os << "DDP split (compiled under DistributedDataParallel: one subgraph per gradient "
              "bucket):\n";
        for (size_t i = 0; i < e.ddp_splits.size(); ++i)
            if (!e.ddp_splits[i].empty()) os << "  Graph " << i + 1 << ": " << e.ddp_splits[i];
    }
    if (!e.write_backs.empty()) {
        os << "Functionalized in-place writes:\n";
        for (const std::string& w : e.write_backs) os << "  " << w << "\n";
    }
    os << "Re-run every call: " << (e.rerun ? "yes (host code runs on every call, its graphs from the cache)" : "no") << "\n";
    for (const std::string& r : e.rerun_reasons) os << "  " << r << "\n";
    if (!e.eager_reasons.empty()) {
        os << "Runs eagerly (could not be functionalized):\n";
        for (const std::string& r : e.eager_reasons) os << "  " << r << "\n";
    }
    if (!e.fake_fallbacks.empty()) {
        os << "Recorded with real tensors from a point on (shape-only tracing stopped there):\n";
        for (const std::string& r : e.fake_fallbacks) os << "  " << r << "\n";
    }
    os << "Host side effects that touch no tensor run only when fn's host code runs (recording, re-run "
          "entries); see docs/jit.md, \"What compile guarantees\"\n";
    return os;
}

}  // namespace kiln::jit
