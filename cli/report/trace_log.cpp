// The trace folder's reader (cli/report/trace_log.h): one JSON event per line, folded into
// functions and compiles.
#include "cli/report/trace_log.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "tensor/error.h"

namespace kiln::report {
namespace {

std::vector<std::string> strings(const Json& j) {
    std::vector<std::string> out;
    for (const Json& e : j.array()) out.push_back(e.str());
    return out;
}

// "[s0, 4]" from ["s0", 4]; a string shape is kept as written.
std::string shape_text(const Json& j) {
    if (!j.is_array()) return j.str();
    std::string out = "[";
    for (size_t i = 0; i < j.array().size(); ++i) out += (i ? ", " : "") + j.array()[i].str();
    return out + "]";
}

GraphView graph_view(const Json& j) {
    GraphView g;
    for (const Json& n : j["nodes"].array()) {
        Node node{n["id"].str(), n["op"].str(), shape_text(n["shape"]), n["dtype"].str(), n["device"].str(), n["line"].str(), strings(n["inputs"])};
        if (node.id.empty()) fail("a graph node without an \"id\"");
        g.nodes.push_back(std::move(node));
    }
    g.outputs = strings(j["outputs"]);
    g.text = j["text"].str();
    return g;
}

void read_event(TraceRun& run, const Json& e) {
    const std::string ev = e["ev"].str();
    const int fn = e.has("fn") ? int(e["fn"].num(-1)) : -1;
    if (ev == "trace_start") {
        run.pid = e["pid"].str(), run.device = e["device"].str(), run.version = e["kiln_version"].str();
        run.argv = strings(e["argv"]);
    } else if (ev == "trace_end") {
        run.ended = true;
    } else if (ev == "function") {
        Function& f = run.function(fn);
        f.name = e["name"].str(), f.backend = e["backend"].str(), f.mode = e["mode"].str(), f.dynamic = e["dynamic"].str();
    } else if (ev == "graph") {
        Compile& c = run.compile(e["graph"].str());
        c.fn = fn, c.segment = int(e["segment"].num()), c.t_us = e["t_us"].num();
        c.view = graph_view(e);
        if (fn >= 0) run.function(fn).events.push_back({ev, e});
    } else if (ev == "guards" || ev == "break" || ev == "recompile" || ev == "call") {
        if (fn < 0) fail("a \"", ev, "\" event without \"fn\"");
        run.function(fn).events.push_back({ev, e});
    } else if (ev == "counters") {
        if (fn < 0) fail("a \"counters\" event without \"fn\"");
        run.function(fn).counters = e;
    } else if (ev == "symbols") {
        run.compile(e["graph"].str()).symbols.push_back(e);
    } else if (ev == "aot") {
        Compile& c = run.compile(e["graph"].str());
        c.has_aot = true;
        c.aot.joint = graph_view(e["joint"]), c.aot.forward = graph_view(e["forward"]), c.aot.backward = graph_view(e["backward"]);
        for (const Json& s : e["saved"].array()) c.aot.saved_bytes[s["id"].str()] = s["bytes"].num();
        c.aot.recomputed = strings(e["recomputed"]);
    } else if (ev == "stage") {
        run.compile(e["graph"].str()).stages.push_back({e["stage"].str(), e["text"].str(), e["ms"].num()});
    } else if (ev == "schedule") {
        Compile& c = run.compile(e["graph"].str());
        for (const Json& k : e["kernels"].array()) c.kernels.push_back({k["name"].str(), k["kind"].str(), strings(k["nodes"])});
        for (const Json& n : e["not_fused"].array()) c.not_fused.push_back({n["a"].str(), n["b"].str(), n["why"].str()});
    } else if (ev == "source") {
        Compile& c = run.compile(e["graph"].str());
        c.target = e["target"].str(), c.source = e["text"].str();
        for (const Json& p : e["provenance"].array()) {
            Provenance prov{p["node"].str(), p["kernel"].str(), {}};
            for (const Json& r : p["lines"].array()) {
                int first = int(r.array().empty() ? 0 : r.array()[0].num());
                int last = int(r.array().size() > 1 ? r.array()[1].num() : first);
                if (first < 1 || last < first) fail("provenance of ", prov.node, ": bad line range [", first, ", ", last, "]");
                prov.lines.push_back({first, last});
            }
            c.provenance.push_back(std::move(prov));
        }
    } else {
        ++run.unknown_events[ev];
    }
}

}  // namespace

const Node* GraphView::find(const std::string& id) const {
    for (const Node& n : nodes)
        if (n.id == id) return &n;
    return nullptr;
}

Function& TraceRun::function(int fn) {
    if (fn < 0) fail("a function event without \"fn\"");
    for (Function& f : functions)
        if (f.fn == fn) return f;
    functions.push_back(Function{.fn = fn, .name = "fn" + std::to_string(fn)});
    return functions.back();
}

Compile& TraceRun::compile(const std::string& graph) {
    if (graph.empty()) fail("an event without \"graph\"");
    for (Compile& c : compiles)
        if (c.graph == graph) return c;
    compiles.push_back(Compile{.graph = graph});
    return compiles.back();
}

TraceRun read_trace_file(const std::string& path) {
    std::ifstream in(path);
    if (!in) fail("kiln report: cannot read ", path);
    TraceRun run;
    run.file = path;
    std::string line;
    for (int number = 1; std::getline(in, line); ++number) {
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
        try {
            Json e = json_parse(line);
            if (!e.is_object()) fail("expected an event (a JSON object)");
            if (!e["ev"].is_string()) fail("an event without \"ev\" (its kind)");
            read_event(run, e);
        } catch (const kiln::Error& err) {
            fail("kiln report: ", path, ":", number, ": ", err.what());
        }
    }
    return run;
}

std::vector<TraceRun> read_trace_dir(const std::string& dir) {
    namespace fs = std::filesystem;
    if (!fs::is_directory(dir)) fail("kiln report: no trace folder ", dir, " (make one with KILN_TRACE=", dir, " or kiln run --trace ", dir, ")");
    std::vector<std::string> files;
    for (const auto& entry : fs::directory_iterator(dir)) {
        std::string name = entry.path().filename().string();
        if (entry.is_regular_file() && name.rfind("trace_", 0) == 0 && entry.path().extension() == ".jsonl") files.push_back(entry.path().string());
    }
    if (files.empty()) fail("kiln report: ", dir, " holds no trace_*.jsonl (make one with KILN_TRACE=", dir, ")");
    std::sort(files.begin(), files.end());
    std::vector<TraceRun> runs;
    for (const std::string& f : files) runs.push_back(read_trace_file(f));
    return runs;
}

}  // namespace kiln::report
