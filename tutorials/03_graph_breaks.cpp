// Lesson 03: graph breaks — where a graph must end, how kiln resumes after it, and how
// to ask for one whole graph (fullgraph, export).
//
// Mirrors "Introduction to torch.compile", section "TorchDynamo and FX Graphs" (bar, its
// three graphs, explain, fullgraph=True, torch.export), and the walk-through's "How does
// Dynamo transform and modify the function?" (resume functions).
//
// A graph holds tensor ops only. When host code needs a tensor's *value* — here the
// `if` reads b.sum() < 0 as a bool — the graph so far must run so the value exists:
// a graph break. Dynamo then resumes tracing in a "resume function". kiln does the same
// with a program tree: graph 1 ends at the branch, and each outcome of the branch gets
// its own child graph, recorded the first time that outcome is seen.
//
// Build and run: make demo, or build/tutorial_03_graph_breaks (tutorials/README.md).
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <iostream>

#include "kiln.h"

using namespace kiln;

Tensor bar(Tensor a, Tensor b) {
    Tensor x = a / (abs(a) + 1);
    if (b.sum() < 0) b = b * -1;
    return x * b;
}

// The same function with the condition wrapped in jit::cond: operator bool cannot learn
// its caller's line, jit::cond can, so explain and fullgraph errors name this line.
Tensor bar_cond(Tensor a, Tensor b) {
    Tensor x = a / (abs(a) + 1);
    if (jit::cond(b.sum() < 0)) b = b * -1;
    return x * b;
}

// The break removed: both outcomes computed, where() picks per element. One graph.
Tensor bar_where(Tensor a, Tensor b) {
    Tensor x = a / (abs(a) + 1);
    b = where(b.sum() < 0, b * -1, b);
    return x * b;
}

int main() {
    int failures = 0;
    auto check = [&](bool ok, const std::string& fact) {
        std::cout << "  check: " << fact << ": " << (ok ? "yes" : "NO") << "\n";
        failures += !ok;
    };
    manual_seed(0);
    Tensor inp1 = randn({10}), inp2 = randn({10});
    if (inp2.sum().item<float>() >= 0) inp2 = -inp2;  // so the first call takes the `b * -1` branch

    // --- A custom backend that numbers each graph it receives, prints it, and returns a
    // callable that announces itself before interpreting the graph. It shows both what
    // was captured and which graphs run on each call.
    int graphs_seen = 0;
    auto numbering_backend = [&graphs_seen](const jit::Graph& gm,
                                            std::span<const Tensor>) -> jit::CompiledFn {
        int id = ++graphs_seen;
        std::cout << "custom backend called with graph " << id << ":\n";
        gm.print_tabular();
        return [&gm, id](std::span<const Tensor> inputs) {
            std::cout << "    [running graph " << id << "]\n";
            return jit::interpret(gm, inputs);
        };
    };

    auto opt_bar =
        compile(bar, {.backend = numbering_backend, .arg_names = {"a", "b"}, .name = "bar"});
    jit::reset();
    std::cout << "opt_bar(inp1, inp2)  [b.sum() < 0]\n";
    Tensor r1 = opt_bar(inp1, inp2);
    check(allclose(r1, bar(inp1, inp2)), "opt_bar(inp1, inp2) equals bar(inp1, inp2)");
    check(graphs_seen == 2 && jit::counters().graph_breaks == 1,
          "one break: graphs 1 (up to the if) and 2 (b * -1; x * b)");

    // The other outcome: guards still hold (same shapes), so this is the same entry. At
    // the branch the program tree has no child for "false" yet, so kiln *replays* bar:
    // it checks each op against graph 1 and records only the new tail, graph 3. (So
    // graph 1 runs twice on this call: once in the cached program, which stops at the
    // unknown outcome having changed nothing, then again under the replay.)
    std::cout << "opt_bar(inp1, -inp2)  [b.sum() >= 0]\n";
    Tensor r2 = opt_bar(inp1, -inp2);
    check(allclose(r2, bar(inp1, -inp2)), "opt_bar(inp1, -inp2) equals bar(inp1, -inp2)");
    check(graphs_seen == 3, "three graphs in all, as in the tutorial");
    check(jit::counters().compiles == 1 && jit::counters().replays == 1,
          "one entry; the new outcome was a replay, not a new entry");

    // Now both children exist: a call runs graph 1, reads the bool, and runs graph 2 or
    // 3 — with no host code of bar at all (the "[running graph k]" lines).
    std::cout << "two more calls, one per outcome:\n";
    opt_bar(inp1, inp2);
    opt_bar(inp1, -inp2);
    check(graphs_seen == 3 && jit::counters().cache_hits == 2,
          "both were cache hits, nothing new compiled");

    // --- explain: the report torch._dynamo.explain prints. It compiles a fresh copy
    // (eager backend), calls it once, and reports graphs, breaks (reason, location,
    // hint), ops per graph, guards.
    std::cout << "\njit::explain(bar, inp1, inp2):\n";
    jit::ExplainOutput e = jit::explain(CompileOptions{.arg_names = {"a", "b"}}, bar, inp1, inp2);
    std::cout << e;
    check(e.graph_count == 2 && e.graph_break_count == 1,
          "explain: Graph Count 2, Graph Break Count 1");
    check(e.break_reasons.at(0).reason.find("operator bool") != std::string::npos,
          "the reason: a tensor used as a bool");
    check(e.ops_per_graph.at(0).size() == 5, "graph 1 holds abs add div sum lt");

    jit::ExplainOutput ec =
        jit::explain(CompileOptions{.arg_names = {"a", "b"}}, bar_cond, inp1, inp2);
    std::cout << "with jit::cond, the break's location: " << ec.break_reasons.at(0).location
              << "\n";
    check(ec.break_reasons.at(0).location.find("03_graph_breaks.cpp:") != std::string::npos,
          "jit::cond records the file and line of the if");

    // --- fullgraph = true (torch.compile(fullgraph=True), Dynamo's nopython=True): the
    // first break is an error naming the reason, the location and a hint.
    auto full_bar = compile(bar_cond, {.fullgraph = true, .name = "bar_cond"});
    bool threw = false;
    try {
        full_bar(inp1, inp2);
    } catch (const Error& err) {
        threw = true;
        std::cout << "\nfullgraph = true raised:\n" << err.what() << "\n";
    }
    check(threw, "fullgraph turned the break into an error");

    // The hint says how to stay in one graph: where(). bar_where has no break, so it
    // compiles whole under fullgraph (here with the default inductor backend)...
    auto full_where = compile(bar_where, {.fullgraph = true, .name = "bar_where"});
    check(allclose(full_where(inp1, inp2), bar(inp1, inp2)) &&
              allclose(full_where(inp1, -inp2), bar(inp1, -inp2)),
          "bar_where under fullgraph equals bar on both outcomes");

    // ... and exports: torch.export's job, one graph that runs without the C++ function.
    // Saved as text (one line per node), loaded back, run on new inputs.
    jit::ExportedProgram exported = jit::export_graph(bar_where, inp1, inp2);
    std::cout << "\nexported graph of bar_where:\n" << exported.graph().str();
    std::string file =
        "kiln_lesson03_bar_where_" + std::to_string(getpid()) + ".kg";  // one per run
    std::string path = (std::filesystem::temp_directory_path() / file).string();
    exported.save(path);
    jit::ExportedProgram loaded = jit::ExportedProgram::load(path);
    std::filesystem::remove(path);
    Tensor a3 = randn({10}), b3 = randn({10});
    check(allclose(loaded.run({a3, b3}).at(0), bar(a3, b3)) &&
              allclose(loaded.run({a3, -b3}).at(0), bar(a3, -b3)),
          "the saved and reloaded program equals bar on new inputs, both outcomes");
    // Export refuses a function with a break, like torch.export.
    threw = false;
    try {
        jit::export_graph(bar, inp1, inp2);
    } catch (const Error& err) {
        threw = true;
        std::cout << "export_graph(bar) raised: " << std::string(err.what()).substr(0, 120)
                  << "...\n";
    }
    check(threw, "export_graph(bar) is an error: it has a break");

    // --- reset(): forget every compiled function's entries (torch._dynamo.reset()).
    // opt_bar's next call records again from scratch.
    jit::reset();
    check(jit::counters().compiles == 0, "after reset() the counters are zero");
    opt_bar(inp1, inp2);
    check(jit::counters().compiles == 1 && graphs_seen == 5,
          "opt_bar recorded a new entry (graphs 4 and 5)");

    // --- See it drawn: KILN_TRACE=DIR logs every compile of a run (docs/trace.md), and
    // `kiln report DIR` turns the log into pages to open in a browser (docs/report.md).
    std::cout << "\nthe compile report of this lesson (its breaks with their reasons and lines, "
                 "each graph and its guards):\n"
                 "  KILN_TRACE=/tmp/trace03 build/tutorial_03_graph_breaks && build/kiln report "
                 "/tmp/trace03\n";

    std::cout << (failures ? "lesson 03: FAILED\n" : "lesson 03: all checks passed\n");
    return failures ? 1 : 0;
}
