// The structured compile log (jit/trace_log.h, docs/trace.md): every event kind appears for a
// function that has it and parses back with the documented fields; provenance points into the
// source; KILN_TRACE and trace_to start it; a bad directory is a clear error.
#include <sys/wait.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "codegen/inductor.h"
#include "jit/trace_log.h"
#include "kiln.h"
#include "tests/json_reader.h"
#include "tests/scoped_env.h"

using namespace kiln;
using kiln_test::Json;

namespace {

namespace fs = std::filesystem;

// A fresh directory under the temp dir, removed at the end of the test.
struct TempDir {
    fs::path path;
    explicit TempDir(const std::string& name)
        : path(fs::temp_directory_path() /
               ("kiln-trace-" + name + "-" + std::to_string(getpid()))) {
        fs::remove_all(path);
    }
    ~TempDir() {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
};

std::vector<Json> read_log(const std::string& file) {
    std::ifstream in(file);
    BOOST_REQUIRE_MESSAGE(in, "no trace file " << file);
    std::vector<Json> out;
    for (std::string line; std::getline(in, line);) out.push_back(kiln_test::parse_json(line));
    return out;
}

std::vector<const Json*> of_kind(const std::vector<Json>& log, const std::string& ev) {
    std::vector<const Json*> out;
    for (const Json& e : log)
        if (e["ev"].s() == ev) out.push_back(&e);
    return out;
}

// A GRAPH object (docs/trace.md): ids n0.. in order, inputs name earlier nodes, outputs exist.
std::set<std::string> check_graph(const Json& g) {
    std::set<std::string> ids;
    for (size_t i = 0; i < g["nodes"].size(); ++i) {
        const Json& n = g["nodes"][i];
        BOOST_TEST(n["id"].s() == "n" + std::to_string(i));
        for (const Json& in : n["inputs"].items)
            BOOST_TEST(ids.count(in.s()) == 1, "input " << in.s() << " of " << n["id"].s());
        BOOST_TEST(!n["op"].s().empty());
        BOOST_TEST(!n["dtype"].s().empty());
        BOOST_TEST(n["device"].s() == "cpu");
        BOOST_TEST((n["shape"].kind == Json::Kind::array));
        ids.insert(n["id"].s());
    }
    BOOST_TEST(g["outputs"].size() >= 1u);
    for (const Json& o : g["outputs"].items) BOOST_TEST(ids.count(o.s()) == 1);
    BOOST_TEST(!g["text"].s().empty());
    return ids;
}

Tensor with_break(Tensor a, Tensor b) {
    Tensor x = a / (abs(a) + 1);
    if (jit::cond(b.sum() < 0)) b = b * -1;  // the break's line is known
    return x * b;
}
const int kBreakLine = __LINE__ - 3;

Tensor reads_size(Tensor x) { return x * double(x.size(0)); }  // pins s0 once sizes are symbols

}  // namespace

BOOST_AUTO_TEST_SUITE(jit_trace_log)

BOOST_AUTO_TEST_CASE(every_event_kind_appears_and_parses_back_with_its_fields) {
    jit::reset();
    TempDir dir("kinds");
    jit::trace_to(dir.path.string());
    std::string file = jit::trace_path();
    BOOST_TEST(file == (dir.path / ("trace_" + std::to_string(getpid()) + ".jsonl")).string());

    auto f = compile(with_break, {.arg_names = {"a", "b"}, .name = "with_break"});
    Tensor a = randn({64}, {.requires_grad = true}), b = randn({64});
    f(a, b).sum().backward();  // record: graphs, break, AOT, the pipeline
    f(a, b);                   // a hit
    auto g = compile(reads_size, {.backend = "eager", .arg_names = {"x"}, .name = "reads_size"});
    g(randn({10}));
    g(randn({8}));                       // recompile: x.size(0) becomes s0, then reading it pins it
    codegen::wait_for_async_compiles();  // the backward half builds in the background
    jit::trace_stop();
    BOOST_TEST(jit::trace_path() == "");

    std::vector<Json> log = read_log(file);
    std::set<std::string> kinds;
    for (size_t i = 0; i < log.size(); ++i) {
        kinds.insert(log[i]["ev"].s());
        BOOST_TEST(log[i]["seq"].n() == double(i));
        if (i) BOOST_TEST(log[i]["t_us"].n() >= log[i - 1]["t_us"].n());
    }
    for (const char* k : {"trace_start", "function", "call", "graph", "break", "guards",
                          "recompile", "symbols", "pin", "aot", "stage", "schedule", "source",
                          "backend", "counters", "totals", "trace_end"})
        BOOST_TEST(kinds.count(k) == 1, "event " << k << " missing");
    BOOST_TEST(log.front()["ev"].s() == "trace_start");
    BOOST_TEST(log.back()["ev"].s() == "trace_end");
    BOOST_TEST(log.front()["pid"].n() == double(getpid()));

    auto fns = of_kind(log, "function");
    BOOST_REQUIRE(fns.size() == 2u);
    BOOST_TEST((*fns[0])["name"].s() == "with_break");
    BOOST_TEST((*fns[0])["fn"].n() == 0);
    BOOST_TEST((*fns[0])["backend"].s() == "inductor");
    BOOST_TEST((*fns[1])["backend"].s() == "eager");

    // graphs: the break splits with_break in two
    std::map<double, std::set<std::string>> graph_ids;  // uid -> node ids, over every GRAPH
    int with_break_graphs = 0;
    for (const Json* e : of_kind(log, "graph")) {
        graph_ids[(*e)["graph"].n()] = check_graph(*e);
        if ((*e)["fn"].n() == 0) ++with_break_graphs;
        BOOST_TEST((*e)["title"].s().find(" graph ") != std::string::npos);
    }
    BOOST_TEST(with_break_graphs == 2);

    auto breaks = of_kind(log, "break");
    BOOST_REQUIRE(breaks.size() == 1u);
    BOOST_TEST((*breaks[0])["kind"].s() == "operator bool");
    BOOST_TEST((*breaks[0])["line"].s().find("test_trace_log.cpp:" + std::to_string(kBreakLine)) !=
                   std::string::npos,
               (*breaks[0])["line"].s());
    BOOST_TEST(!(*breaks[0])["reason"].s().empty());
    BOOST_TEST(!(*breaks[0])["hint"].s().empty());

    auto recompiles = of_kind(log, "recompile");
    BOOST_REQUIRE(recompiles.size() == 1u);
    const Json& rc = *recompiles[0];
    BOOST_TEST(rc["fn"].n() == 1);
    BOOST_TEST(rc["guard"].s() == "x.size(0) == 10");
    BOOST_TEST(rc["old"].s() == "10");
    BOOST_TEST(rc["new"].s() == "8");
    BOOST_TEST(rc["entry"].n() == 2);
    BOOST_TEST(rc["failed_entry"].n() == 1);

    auto symbols = of_kind(log, "symbols");
    BOOST_REQUIRE(symbols.size() == 1u);
    const Json& s0 = (*symbols[0])["symbols"][0];
    BOOST_TEST(s0["name"].s() == "s0");
    BOOST_TEST(s0["from"].s() == "x.size(0)");
    BOOST_TEST(s0["value"].n() == 8);
    BOOST_TEST(s0["pinned"].b);
    auto pins = of_kind(log, "pin");
    BOOST_REQUIRE(pins.size() == 1u);
    BOOST_TEST((*pins[0])["symbol"].s() == "s0");
    BOOST_TEST((*pins[0])["why"].s().find("test_trace_log.cpp") != std::string::npos);

    // guards: each with its source; the pinned symbol's guard says why
    bool argument_guard = false, pin_guard = false;
    for (const Json* e : of_kind(log, "guards"))
        for (const Json& gd : (*e)["guards"].items) {
            argument_guard = argument_guard ||
                             (gd["kind"].s() == "argument" && gd["source"].s() == "argument a" &&
                              gd["text"].s().find("a: float32[64]") == 0);
            pin_guard =
                pin_guard || (gd["kind"].s() == "pin" && gd["text"].s().find("s0 == 8") == 0);
        }
    BOOST_TEST(argument_guard);
    BOOST_TEST(pin_guard);
    for (const Json* e : of_kind(log, "guards")) BOOST_TEST((*e)["first_call_ms"].n() > 0);

    // AOT: halves whose saved tensors exist and weigh their bytes
    auto aots = of_kind(log, "aot");
    BOOST_REQUIRE(aots.size() >= 1u);
    for (const Json* e : aots) {
        BOOST_TEST(graph_ids.count((*e)["graph"].n()) == 1, "aot of an unrecorded graph");
        std::set<std::string> joint = check_graph((*e)["joint"]);
        std::set<std::string> fw = check_graph((*e)["forward"]);
        std::set<std::string> bw = check_graph((*e)["backward"]);
        graph_ids[(*e)["forward"]["graph"].n()] = fw;
        graph_ids[(*e)["backward"]["graph"].n()] = bw;
        double bytes = 0;
        for (const Json& sv : (*e)["saved"].items) {
            BOOST_TEST(joint.count(sv["id"].s()) == 1);
            BOOST_TEST(sv["bytes"].n() > 0);
            bytes += sv["bytes"].n();
        }
        BOOST_TEST(bytes == (*e)["saved_bytes"].n());
        BOOST_TEST((*e)["forward_saved"].size() == (*e)["saved"].size());
        BOOST_TEST((*e)["backward_saved"].size() == (*e)["saved"].size());
        for (const Json& id : (*e)["recomputed"].items) BOOST_TEST(joint.count(id.s()) == 1);
    }

    // the pipeline's stages, each with its output; the schedule's nodes exist in the graph compiled
    std::set<std::string> stages;
    for (const Json* e : of_kind(log, "stage")) {
        stages.insert((*e)["stage"].s());
        BOOST_TEST((*e)["ms"].n() >= 0);
        BOOST_TEST(!(*e)["text"].s().empty());
    }
    for (const char* st : {"lower", "fuse_conv", "schedule", "fuse_epilogues", "emit", "build"})
        BOOST_TEST(stages.count(st) == 1, "stage " << st << " missing");
    for (const Json* e : of_kind(log, "schedule")) {
        BOOST_REQUIRE(graph_ids.count((*e)["graph"].n()) == 1);
        const std::set<std::string>& ids = graph_ids[(*e)["graph"].n()];
        BOOST_TEST((*e)["kernels"].size() >= 1u);
        for (const Json& k : (*e)["kernels"].items)
            for (const Json& n : k["nodes"].items)
                BOOST_TEST(ids.count(n.s()) == 1, n.s() << " of " << k["name"].s());
    }

    // counters: with_break was called twice, recorded once, hit once
    auto counters = of_kind(log, "counters");
    BOOST_REQUIRE(counters.size() == 2u);
    const Json& c0 = *counters[0];
    BOOST_TEST(c0["name"].s() == "with_break");
    BOOST_TEST(c0["calls"].n() == 2);
    BOOST_TEST(c0["records"].n() == 1);
    BOOST_TEST(c0["hits"].n() == 1);
    BOOST_TEST(c0["backend_choice"].size() >= 1u);
    const Json& c1 = *counters[1];
    BOOST_TEST(c1["calls"].n() == 2);
    BOOST_TEST(c1["records"].n() == 2);
    BOOST_TEST(c1["recompiles"].n() == 1);
    jit::reset();
}

BOOST_AUTO_TEST_CASE(provenance_names_nodes_of_the_compiled_graph_and_lines_of_its_source) {
    jit::reset();
    TempDir dir("provenance");
    jit::trace_to(dir.path.string());
    std::string file = jit::trace_path();
    auto f = compile([](Tensor x, Tensor y) { return (sin(x) + cos(y)).sum({0}) * 2 + exp(x); },
                     {.name = "fused"});
    Tensor x = randn({16, 8}), y = randn({16, 8});
    f(x, y);
    jit::trace_stop();

    std::vector<Json> log = read_log(file);
    std::map<double, const Json*> graphs;
    for (const Json* e : of_kind(log, "graph")) graphs[(*e)["graph"].n()] = e;
    auto sources = of_kind(log, "source");
    BOOST_REQUIRE(sources.size() >= 1u);
    for (const Json* e : sources) {
        BOOST_REQUIRE(graphs.count((*e)["graph"].n()) == 1);
        const Json& g = *graphs[(*e)["graph"].n()];
        std::map<std::string, std::string> name_of;  // node id -> its index, as generated names end
        for (const Json& n : g["nodes"].items) name_of[n["id"].s()] = "_" + n["id"].s().substr(1);
        std::vector<std::string> lines;
        std::istringstream in((*e)["text"].s());
        for (std::string l; std::getline(in, l);) lines.push_back(l);
        const Json& prov = (*e)["provenance"];
        std::set<std::string> covered;
        for (const Json& p : prov.items) {
            BOOST_REQUIRE(name_of.count(p["node"].s()) == 1);
            covered.insert(p["node"].s());
            BOOST_TEST(p["kernel"].s().find("kernel_") == 0);
            BOOST_TEST(p["lines"].size() >= 1u);
            for (const Json& r : p["lines"].items) {
                BOOST_TEST(r[0].n() >= 1);
                BOOST_TEST(r[0].n() <= r[1].n());
                BOOST_REQUIRE(r[1].n() <= double(lines.size()));
                // the range's lines name the node (cos_3 for n3)
                const std::string& l = lines[size_t(r[0].n()) - 1];
                BOOST_TEST(l.find(name_of[p["node"].s()]) != std::string::npos,
                           l << " for " << p["node"].s());
            }
        }
        for (const Json& n : g["nodes"].items)
            if (n["op"].s() != "placeholder")
                BOOST_TEST(covered.count(n["id"].s()) == 1, n["id"].s() << " has no lines");
    }
    jit::reset();
}

// not_fused: each value that one kernel writes and another reads, and why they are two.
BOOST_AUTO_TEST_CASE(not_fused_names_the_values_between_kernels_and_why) {
    jit::reset();
    TempDir dir("apart");
    jit::trace_to(dir.path.string());
    std::string file = jit::trace_path();
    auto rows = compile([](Tensor x, Tensor y) { return (exp(x).sum({1}) + 1).unsqueeze(1) * y; },
                        {.name = "rows"});
    rows(randn({16, 8}), randn({16, 8}));
    auto gemm = compile([](Tensor x, Tensor w) { return (matmul(x, w) + 1).sum({0}) * 2 + exp(w); },
                        {.name = "gemm"});
    gemm(randn({16, 8}), randn({8, 8}));
    jit::trace_stop();

    std::vector<Json> log = read_log(file);
    std::map<double, std::set<std::string>> ids;
    for (const Json* e : of_kind(log, "graph"))
        for (const Json& n : (*e)["nodes"].items) ids[(*e)["graph"].n()].insert(n["id"].s());
    std::set<std::string> whys;
    for (const Json* e : of_kind(log, "schedule")) {
        BOOST_REQUIRE(ids.count((*e)["graph"].n()) == 1);
        for (const Json& nf : (*e)["not_fused"].items) {
            BOOST_TEST(ids[(*e)["graph"].n()].count(nf["a"].s()) == 1);
            BOOST_TEST(ids[(*e)["graph"].n()].count(nf["b"].s()) == 1);
            BOOST_TEST(nf["a_kernel"].s() != nf["b_kernel"].s());
            whys.insert(nf["why"].s());
        }
    }
    BOOST_TEST(whys.count("different loops: row [16] x [8] and pointwise [16, 8]") == 1);  // rows
    BOOST_TEST(whys.count("different loops: row [8] x [16] and pointwise [8, 8]") == 1);   // gemm
    BOOST_TEST(whys.count("a matmul is a library call (BLAS), not a loop") == 1);          // gemm
    jit::reset();
}

// Each way a call is served is a "call" event (hits only counted) and a counter.
BOOST_AUTO_TEST_CASE(call_results_are_logged_and_counted_by_kind) {
    jit::reset();
    TempDir dir("calls");
    jit::trace_to(dir.path.string());
    std::string file = jit::trace_path();
    auto branch = compile(
        [](Tensor x) {
            if (jit::cond(x.sum() > 0)) return x * 2;
            return x * 3;
        },
        {.backend = "eager", .name = "branch"});
    branch(full({4}, 1.0));   // record
    branch(full({4}, -1.0));  // replay: the other outcome
    branch(full({4}, 1.0));   // hit
    auto reads = compile(
        [](Tensor x) {
            float v = x.sum().item<float>();  // host code consumes a value: re-run every call
            return v > 0 ? x * 2 : x * 3;
        },
        {.backend = "eager", .name = "reads"});
    reads(full({4}, 1.0));  // record
    reads(full({4}, 1.0));  // rerun
    auto limited = compile([](Tensor x) { return x + 1; }, {.backend = "eager",
                                                            .dynamic = jit::Dynamic::never,
                                                            .cache_size_limit = 1,
                                                            .name = "limited"});
    limited(full({4}, 1.0));  // record
    limited(full({5}, 1.0));  // eager_fallback (warns once)
    auto views = compile(
        [](Tensor x) {
            Tensor head = x.slice(0, 0, 2);
            head.mul_(10);  // an in-place write through a view: the entry runs eagerly
            return x * 1;
        },
        {.backend = "eager", .name = "views"});
    views(full({4}, 1.0));  // record (goes eager)
    views(full({4}, 1.0));  // eager
    jit::trace_stop();

    std::vector<Json> log = read_log(file);
    std::map<std::string, std::vector<std::string>> results;  // fn name -> call results
    std::map<double, std::string> names;
    for (const Json* e : of_kind(log, "function")) names[(*e)["fn"].n()] = (*e)["name"].s();
    for (const Json* e : of_kind(log, "call"))
        results[names[(*e)["fn"].n()]].push_back((*e)["result"].s());
    BOOST_TEST((results["branch"] == std::vector<std::string>{"record", "replay"}));
    BOOST_TEST((results["reads"] == std::vector<std::string>{"record", "rerun"}));
    BOOST_TEST((results["limited"] == std::vector<std::string>{"record", "eager_fallback"}));
    BOOST_TEST((results["views"] == std::vector<std::string>{"record", "eager"}));
    std::map<std::string, const Json*> counters;
    for (const Json* e : of_kind(log, "counters")) counters[(*e)["name"].s()] = e;
    BOOST_TEST((*counters["branch"])["hits"].n() == 1);
    BOOST_TEST((*counters["branch"])["replays"].n() == 1);
    BOOST_TEST((*counters["reads"])["reruns"].n() == 1);
    BOOST_TEST((*counters["limited"])["eager_fallbacks"].n() == 1);
    BOOST_TEST((*counters["views"])["eager_runs"].n() == 1);
    bool went_eager = false;
    for (const Json* e : of_kind(log, "break"))
        went_eager = went_eager || ((*e)["kind"].s() == "runs eagerly" &&
                                    (*e)["reason"].s().find("in-place") != std::string::npos);
    BOOST_TEST(went_eager);
    bool rerun_said = false;
    for (const Json* e : of_kind(log, "guards")) rerun_said = rerun_said || (*e).has("rerun");
    BOOST_TEST(rerun_said);
    jit::reset();
}

BOOST_AUTO_TEST_CASE(kiln_trace_env_starts_a_log_at_compile) {
    jit::reset();
    TempDir dir("env");
    std::string file;
    {
        kiln_test::ScopedEnv env("KILN_TRACE", dir.path.string());
        auto f = compile([](Tensor x) { return x + 1; }, {.backend = "eager", .name = "from_env"});
        file = jit::trace_path();
        f(randn({4}));
        jit::trace_stop();
    }
    BOOST_TEST(file.find(dir.path.string()) == 0);
    std::vector<Json> log = read_log(file);
    auto fns = of_kind(log, "function");
    BOOST_REQUIRE(fns.size() == 1u);
    BOOST_TEST((*fns[0])["name"].s() == "from_env");
    BOOST_TEST(of_kind(log, "graph").size() == 1u);
    jit::reset();
}

BOOST_AUTO_TEST_CASE(nothing_is_written_once_the_log_stops) {
    jit::reset();
    TempDir dir("off");
    jit::trace_to(dir.path.string());
    std::string file = jit::trace_path();
    jit::trace_stop();
    auto size = fs::file_size(file);
    BOOST_TEST(!jit::trace_log::on());
    auto f = compile([](Tensor x) { return x * 2; }, {.name = "untraced"});
    f(randn({4}));
    BOOST_TEST(fs::file_size(file) == size);
    jit::reset();
}

BOOST_AUTO_TEST_CASE(a_directory_that_cannot_be_made_is_a_clear_error) {
    TempDir dir("bad");
    fs::create_directories(dir.path);
    std::ofstream(dir.path / "a_file") << "x";
    std::string bad = (dir.path / "a_file" / "trace").string();
    try {
        jit::trace_to(bad);
        BOOST_FAIL("trace_to accepted " << bad);
    } catch (const Error& e) {
        std::string what = e.what();
        BOOST_TEST(what.find("trace_to") != std::string::npos, what);
        BOOST_TEST(what.find(bad) != std::string::npos, what);
    }
    BOOST_TEST(!jit::trace_log::on());
    BOOST_CHECK_THROW(jit::trace_to(""), Error);
}

BOOST_AUTO_TEST_CASE(a_bad_kiln_trace_makes_compile_fail_clearly) {
    TempDir dir("badenv");
    fs::create_directories(dir.path);
    std::ofstream(dir.path / "a_file") << "x";
    std::string bad = (dir.path / "a_file" / "trace").string();
    kiln_test::ScopedEnv env("KILN_TRACE", bad);
    try {
        auto f = compile([](Tensor x) { return x + 1; }, {.backend = "eager"});
        BOOST_FAIL("compile accepted KILN_TRACE=" << bad);
    } catch (const Error& e) {
        BOOST_TEST(std::string(e.what()).find("can't create the trace directory '" + bad + "'") !=
                       std::string::npos,
                   e.what());
    }
}

// Every line is flushed as it is written: a process that dies mid-run (no exit handlers)
// leaves the events up to its death, each line whole.
BOOST_AUTO_TEST_CASE(a_process_that_dies_keeps_its_log) {
    jit::reset();
    TempDir dir("crash");
    fs::create_directories(dir.path);
    pid_t child = fork();
    BOOST_REQUIRE(child >= 0);
    if (child == 0) {
        jit::trace_to(dir.path.string());
        auto f = compile([](Tensor x) { return x * 3; }, {.backend = "eager", .name = "dies"});
        f(full({4}, 1.0));
        _exit(7);  // no atexit handlers: as a crash would end it
    }
    int status = 0;
    waitpid(child, &status, 0);
    BOOST_TEST(WEXITSTATUS(status) == 7);
    std::vector<Json> log =
        read_log((dir.path / ("trace_" + std::to_string(child) + ".jsonl")).string());
    std::set<std::string> kinds;
    for (const Json& e : log) kinds.insert(e["ev"].s());
    BOOST_TEST(kinds.count("graph") == 1);
    BOOST_TEST(kinds.count("guards") == 1);
    BOOST_TEST(kinds.count("trace_end") == 0);
}

BOOST_AUTO_TEST_CASE(a_forked_child_writes_nothing_into_its_parents_log) {
    jit::reset();
    TempDir dir("fork");
    jit::trace_to(dir.path.string());
    std::string file = jit::trace_path();
    pid_t child = fork();
    BOOST_REQUIRE(child >= 0);
    if (child == 0) {
        auto f = compile([](Tensor x) { return x * 3; }, {.backend = "eager", .name = "in_child"});
        f(full({4}, 1.0));
        _exit(jit::trace_path().empty() ? 0 : 1);
    }
    int status = 0;
    waitpid(child, &status, 0);
    BOOST_TEST(WEXITSTATUS(status) == 0);
    jit::trace_stop();
    std::vector<Json> log = read_log(file);
    BOOST_TEST(of_kind(log, "function").empty());
    BOOST_TEST(of_kind(log, "trace_end").size() == 1u);
}

BOOST_AUTO_TEST_CASE(json_strings_are_escaped) {
    using jit::trace_log::quote;
    BOOST_TEST(quote("a\"b\\c\nd\te\x01") == "\"a\\\"b\\\\c\\nd\\te\\u0001\"");
    Json back = kiln_test::parse_json(
        jit::trace_log::Json().str("k", "x \"y\"\n").num("n", 1.5).boolean("b", true).text());
    BOOST_TEST(back["k"].s() == "x \"y\"\n");
    BOOST_TEST(back["n"].n() == 1.5);
    BOOST_TEST(back["b"].b);
}

BOOST_AUTO_TEST_SUITE_END()
