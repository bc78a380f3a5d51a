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
    std::string name, kind;
    std::vector<std::string> nodes;
};

struct NotFused {
    std::string a, b, why;
};

// One node's generated code: its kernel and 1-based [first, last] line ranges in the source.
struct Provenance {
    std::string node, kernel;
    std::vector<std::pair<int, int>> lines;
};

struct Aot {
    GraphView joint, forward, backward;
    std::map<std::string, double> saved_bytes;  // node id -> bytes kept for backward
    std::vector<std::string> recomputed;
};

// One compiled graph (a region between breaks) and what each pipeline stage made of it.
struct Compile {
    std::string graph;  // the graph id kiln prints
    int fn = -1, segment = 0;
    double t_us = 0;
    GraphView view;
    std::vector<Stage> stages;
    std::vector<Kernel> kernels;
    std::vector<NotFused> not_fused;
    std::string target, source;
    std::vector<Provenance> provenance;
    std::vector<Json> symbols;
    bool has_aot = false;
    Aot aot;
};

// A guard entry, a break or a recompile of a function, kept in the order they happened.
struct FunctionEvent {
    std::string kind;  // "graph", "guards", "break", "recompile", "call"
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
    std::string file, pid, device, version;
    std::vector<std::string> argv;
    std::vector<Function> functions;              // by fn number, in order of first call
    std::vector<Compile> compiles;                // in the order they were logged
    std::map<std::string, int> unknown_events;   // newer event kinds this reader skips
    bool ended = false;                            // a trace_end was logged
    Function& function(int fn);
    Compile& compile(const std::string& graph);
};

// Reads every trace_*.jsonl in dir (sorted by name). Throws kiln::Error naming the folder
// when it is missing or holds no log, and "FILE:LINE: ..." for a line that is not an event.
std::vector<TraceRun> read_trace_dir(const std::string& dir);
TraceRun read_trace_file(const std::string& path);

}  // namespace kiln::report
