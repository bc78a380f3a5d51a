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
        Node node{n["id"].str(),     n["op"].str(),   shape_text(n["shape"]), n["dtype"].str(),
                  n["device"].str(), n["line"].str(), strings(n["inputs"])};
        if (node.id.empty()) fail("a graph node without an \"id\"");
        g.nodes.push_back(std::move(node));
    }
    g.outputs = strings(j["outputs"]);
    g.text = j["text"].str();
    return g;
}

// Events of a compiled graph: stage outputs, the schedule, the generated source.
void read_compile_event(Compile& c, const std::string& ev, const Json& e) {
    if (e.has("backend_graph")) c.backend_graph = e["backend_graph"].str();
    if (ev == "stage") {
        c.stages.push_back({e["stage"].str(), e["text"].str(), e["ms"].num()});
    } else if (ev == "schedule") {
        for (const Json& k : e["kernels"].array())
            c.kernels.push_back({k["name"].str(), k["kind"].str(), k["why"].str(),
                                 strings(k["nodes"]), strings(k["loads"]), strings(k["stores"])});
        for (const Json& n : e["not_fused"].array())
            c.not_fused.push_back({n["node"].str(), n["a"].str(), n["b"].str(), n["why"].str()});
        c.schedule_text = e["text"].str();
    } else if (ev == "source") {
        c.target = e["target"].str(), c.source = e["text"].str();
        for (const Json& p : e["provenance"].array()) {
            Provenance prov{p["node"].str(), p["kernel"].str(), {}};
            for (const Json& r : p["lines"].array()) {
                int first = int(r.array().empty() ? 0 : r.array()[0].num());
                int last = int(r.array().size() > 1 ? r.array()[1].num() : first);
                if (first < 1 || last < first)
                    fail("provenance of ", prov.node, ": bad line range [", first, ", ", last, "]");
                prov.lines.push_back({first, last});
            }
            c.provenance.push_back(std::move(prov));
        }
    } else {  // backend
        c.backend_choice = e["choice"].str();
    }
}

// A graph planned twice (a lesson that calls aot::plan itself, then compiles) keeps the last plan.
void read_aot(Compile& c, const Json& e) {
    c.has_aot = true;
    Aot& a = c.aot = Aot{};
    a.joint = graph_view(e["joint"]), a.forward = graph_view(e["forward"]),
    a.backward = graph_view(e["backward"]);
    a.forward_graph = e["forward"]["graph"].str(), a.backward_graph = e["backward"]["graph"].str();
    std::vector<std::string> fw = strings(e["forward_saved"]), bw = strings(e["backward_saved"]);
    const Json::Array& saved = e["saved"].array();
    for (size_t i = 0; i < saved.size(); ++i)
        a.saved.push_back({saved[i]["id"].str(), i < fw.size() ? fw[i] : "",
                           i < bw.size() ? bw[i] : "", saved[i]["name"].str(),
                           saved[i]["bytes"].num()});
    a.recomputed = strings(e["recomputed"]);
    if (e.has("eager_saved_bytes")) a.eager_saved_bytes = e["eager_saved_bytes"].num();
}

void read_event(TraceRun& run, const Json& e) {
    const std::string ev = e["ev"].str();
    const int fn = e.has("fn") ? int(e["fn"].num(-1)) : -1;
    if (ev == "trace_start") {
        run.pid = e["pid"].str(), run.device = e["device"].str(), run.format = e["format"].str();
        run.argv = strings(e["argv"]);
    } else if (ev == "trace_end") {
        run.ended = true;
    } else if (ev == "totals") {
        run.totals = e;
    } else if (ev == "function") {
        Function& f = run.function(fn);
        f.name = e["name"].str(), f.backend = e["backend"].str(), f.mode = e["mode"].str(),
        f.dynamic = e["dynamic"].str();
    } else if (ev == "graph") {
        Compile& c = run.compile(e["graph"].str());
        c.fn = fn, c.entry = int(e["entry"].num()), c.segment = int(e["segment"].num()),
        c.t_us = e["t_us"].num();
        c.title = e["title"].str();
        c.view = graph_view(e);
        if (fn >= 0) run.function(fn).events.push_back({ev, e});
    } else if (ev == "guards" || ev == "break" || ev == "recompile" || ev == "call" ||
               ev == "symbols" || ev == "pin") {
        if (fn < 0) fail("a \"", ev, "\" event without \"fn\"");
        run.function(fn).events.push_back({ev, e});
    } else if (ev == "counters") {
        if (fn < 0) fail("a \"counters\" event without \"fn\"");
        run.function(fn).counters = e;
    } else if (ev == "aot") {
        read_aot(run.compile(e["graph"].str()), e);
    } else if (ev == "stage" || ev == "schedule" || ev == "source" || ev == "backend") {
        read_compile_event(run.compile(e["graph"].str()), ev, e);
    } else if (ev == "choice") {
        run.choices.push_back(e);
    } else {
        ++run.unknown_events[ev];
    }
}

// After the last line: an AOT half that a backend compiled takes its graph, function and
// name from the aot event; a timing choice goes to the graph of its backend number.
void link_compiles(TraceRun& run) {
    std::vector<std::pair<std::string, std::string>> halves;  // half graph id -> parent
    for (const Compile& c : run.compiles)
        if (c.has_aot)
            halves.push_back({c.aot.forward_graph, c.graph}),
                halves.push_back({c.aot.backward_graph, c.graph});
    for (auto& [half, parent] : halves) {
        if (half.empty() || !run.find_compile(half)) continue;
        Compile& h = run.compile(half);
        const Compile& p = *run.find_compile(parent);
        bool forward = half == p.aot.forward_graph;
        h.half = forward ? "forward" : "backward", h.parent = parent, h.fn = p.fn,
        h.entry = p.entry, h.segment = p.segment;
        if (h.view.nodes.empty()) h.view = forward ? p.aot.forward : p.aot.backward;
    }
    for (const Json& choice : run.choices)
        for (Compile& c : run.compiles)
            if (!c.backend_graph.empty() && c.backend_graph == choice["backend_graph"].str())
                c.choice_text = choice["text"].str();
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

const Compile* TraceRun::find_compile(const std::string& graph) const {
    for (const Compile& c : compiles)
        if (c.graph == graph) return &c;
    return nullptr;
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
    link_compiles(run);
    return run;
}

std::vector<TraceRun> read_trace_dir(const std::string& dir) {
    namespace fs = std::filesystem;
    if (!fs::is_directory(dir))
        fail("kiln report: no trace folder ", dir, " (make one with KILN_TRACE=", dir,
             " or kiln run --trace ", dir, ")");
    std::vector<std::string> files;
    for (const auto& entry : fs::directory_iterator(dir)) {
        std::string name = entry.path().filename().string();
        if (entry.is_regular_file() && name.rfind("trace_", 0) == 0 &&
            entry.path().extension() == ".jsonl")
            files.push_back(entry.path().string());
    }
    if (files.empty())
        fail("kiln report: ", dir, " holds no trace_*.jsonl (make one with KILN_TRACE=", dir, ")");
    std::sort(files.begin(), files.end());
    std::vector<TraceRun> runs;
    for (const std::string& f : files) runs.push_back(read_trace_file(f));
    return runs;
}

}  // namespace kiln::report
