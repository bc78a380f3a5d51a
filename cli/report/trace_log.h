// Reading a trace folder (KILN_TRACE=DIR, docs/trace.md) into what the report draws: per
// process, the compiled functions in call order, and per graph its nodes, guards, stages,
// schedule, generated source with provenance, and the AOT forward/backward split.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "cli/report/json.h"

namespace kiln::report {

struct Node {
    std::string id, op, shape, dtype, device, line;
    std::vector<std::string> inputs;
};

struct GraphView {
    std::vector<Node> nodes;
    std::vector<std::string> outputs;
    std::string text;
    const Node* find(const std::string& id) const;
};

struct Stage {
    std::string name, text;
    double ms = 0;
};

struct Kernel {
    std::string name, kind, why;  // why: for a fallback kernel, why it is not generated
    std::vector<std::string> nodes, loads, stores;
};

// A node left out of the generated kernels (`node`), or a pair not fused (`a` into `b`).
struct NotFused {
    std::string node, a, b, why;
};

// One node's generated code: its kernel and 1-based [first, last] line ranges in the source.
struct Provenance {
    std::string node, kernel;
    std::vector<std::pair<int, int>> lines;
};

// One tensor the forward keeps for the backward: its joint node, the forward output that
// returns it and the backward placeholder that receives it.
struct Saved {
    std::string joint_id, forward_id, backward_id, name;
    double bytes = 0;
};

struct Aot {
    GraphView joint, forward, backward;
    std::string forward_graph, backward_graph;  // the halves' graph ids (their compiles' keys)
    std::vector<Saved> saved;
    std::vector<std::string> recomputed;  // joint node ids
    double eager_saved_bytes = -1;        // what eager autograd would keep (-1: not logged)
};

// One compiled graph (a region between breaks) and what each pipeline stage made of it.
struct Compile {
    std::string graph;  // the graph id kiln prints
    int fn = -1, entry = 0, segment = 0;
    double t_us = 0;
    std::string title;          // "f entry 1 graph 2"
    std::string half, parent;   // an AOT half: "forward"/"backward" of graph `parent`
    std::string backend_graph;  // the inductor's number for it (output_code_N.cpp)
    std::string backend_choice, choice_text, schedule_text;
    GraphView view;
    std::vector<Stage> stages;
    std::vector<Kernel> kernels;
    std::vector<NotFused> not_fused;
    std::string target, source;
    std::vector<Provenance> provenance;
    bool has_aot = false;
    Aot aot;
};

// A guard entry, a break or a recompile of a function, kept in the order they happened.
struct FunctionEvent {
    std::string kind;  // "graph", "guards", "break", "recompile", "call", "symbols", "pin"
    Json data;
};

struct Function {
    int fn = -1;
    std::string name, backend, mode, dynamic;
    std::vector<FunctionEvent> events;
    Json counters;
};

// One trace_<pid>.jsonl file: one process.
struct TraceRun {
    std::string file, pid, device, format;
    std::vector<std::string> argv;
    std::vector<Function> functions;            // by fn number, in order of first call
    std::vector<Compile> compiles;              // in the order they were logged
    Json totals;                                // jit::counters() at the end
    std::vector<Json> choices;                  // kernels-or-eager timing choices
    std::map<std::string, int> unknown_events;  // newer event kinds this reader skips
    bool ended = false;                         // a trace_end was logged
    Function& function(int fn);
    Compile& compile(const std::string& graph);
    const Compile* find_compile(const std::string& graph) const;
};

// Reads every trace_*.jsonl in dir (sorted by name). Throws kiln::Error naming the folder
// when it is missing or holds no log, and "FILE:LINE: ..." for a line that is not an event.
std::vector<TraceRun> read_trace_dir(const std::string& dir);
TraceRun read_trace_file(const std::string& path);

}  // namespace kiln::report
