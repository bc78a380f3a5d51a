// `kiln report` (cli/report/): the JSON reader, the trace reader's errors, the highlighter,
// the built-in graph layout, and the written site: files, links, balanced tags, and the
// provenance map against the page's graph and source.
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <filesystem>
#include <fstream>
#include <functional>
#include <regex>
#include <sstream>

#include "cli/report/html.h"
#include "cli/report/json.h"
#include "cli/report/report.h"
#include "cli/report/trace_log.h"
#include "tensor/error.h"
#include "tests/report/html_check.h"

namespace fs = std::filesystem;
using namespace kiln::report;
using kiln_test::scan_html;

namespace {

const std::string kFixture = std::string(KILN_SOURCE_DIR) + "/tests/report/traces/basic";

std::string read_all(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

// A fresh folder under the temp dir, removed at the end of the test.
struct TempDir {
    fs::path path;
    explicit TempDir(const std::string& name)
        : path(fs::temp_directory_path() /
               ("kiln-report-test-" + name + "-" + std::to_string(getpid()))) {
        fs::remove_all(path);
        fs::create_directories(path);
    }
    ~TempDir() { fs::remove_all(path); }
};

std::string error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const kiln::Error& e) {
        return e.what();
    }
    return "(no error)";
}

// A trace folder holding one file with these lines.
void write_trace(const fs::path& dir, const std::vector<std::string>& lines) {
    std::ofstream out(dir / "trace_1.jsonl");
    for (const std::string& l : lines) out << l << "\n";
}

std::set<std::string> split_ids(const std::string& s) {
    std::set<std::string> out;
    std::istringstream in(s);
    for (std::string id; in >> id;) out.insert(id);
    return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(report_json)

BOOST_AUTO_TEST_CASE(parses_the_values_a_trace_line_holds) {
    Json j = json_parse(
        R"( {"ev":"graph","n":-1.5e2,"ok":true,"no":null,"s":"a\"b\u00e9\n","a":[1,[2],{}]} )");
    BOOST_TEST(j["ev"].str() == "graph");
    BOOST_TEST(j["n"].num() == -150.0);
    BOOST_TEST(j["ok"].str() == "true");
    BOOST_TEST(j["no"].is_null());
    BOOST_TEST(j["s"].str() == "a\"b\xc3\xa9\n");
    BOOST_TEST(j["a"].array().size() == 3u);
    BOOST_TEST(j["a"].array()[1].array()[0].str() == "2");
    BOOST_TEST(j["missing"].is_null());
}

BOOST_AUTO_TEST_CASE(a_malformed_value_names_its_column) {
    BOOST_TEST(error_of([] { json_parse(R"({"a":1 "b":2})"); }) ==
               "column 8: expected ',' or '}', found '\"'");
    BOOST_TEST(error_of([] { json_parse(R"({"a":)"); }) ==
               "column 6: expected a value, found the end of the line");
    BOOST_TEST(error_of([] {
                   json_parse(R"({"a":1} x)");
               }).find("column 9: expected the end of the line") == 0u);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(report_trace)

BOOST_AUTO_TEST_CASE(reads_the_fixture_into_functions_and_compiles) {
    std::vector<TraceRun> runs = read_trace_dir(kFixture);
    BOOST_REQUIRE(runs.size() == 1u);
    const TraceRun& run = runs[0];
    BOOST_TEST(run.pid == "4242");
    BOOST_TEST(run.format == "1");
    BOOST_TEST(run.ended);
    BOOST_TEST(run.totals["graph_breaks"].str() == "1");
    BOOST_REQUIRE(run.functions.size() == 2u);
    BOOST_TEST(run.functions[0].name == "modified_sigmoid");
    std::string kinds;
    for (const FunctionEvent& e : run.functions[1].events) kinds += e.kind + " ";
    BOOST_TEST(kinds == "call graph guards call recompile graph break symbols pin guards ");
    BOOST_TEST(run.functions[1].counters["recompiles"].str() == "1");
    BOOST_REQUIRE(run.compiles.size() ==
                  4u);  // graphs 1, 2 and 6, and graph 2's compiled forward half 4
    const Compile& c = run.compiles[0];
    BOOST_TEST(c.view.nodes.size() == 7u);
    BOOST_TEST(c.view.nodes[0].shape == "[1024]");
    BOOST_TEST(c.kernels.size() == 2u);
    BOOST_TEST(c.not_fused.at(0).node == "n5");
    BOOST_TEST(c.provenance.size() == 7u);
    BOOST_TEST(c.stages.size() == 4u);
    BOOST_TEST(c.backend_choice == "generated");
    BOOST_TEST(c.choice_text.find("generated 2.1x faster") != std::string::npos);
    const Compile& aot = run.compiles[1];
    BOOST_TEST(aot.has_aot);
    BOOST_TEST(aot.aot.forward_graph == "4");
    BOOST_REQUIRE(aot.aot.saved.size() == 2u);
    BOOST_TEST(aot.aot.saved[1].joint_id == "n4");
    BOOST_TEST(aot.aot.saved[1].forward_id == "n3");
    BOOST_TEST(aot.aot.saved[1].backward_id == "n1");
    BOOST_TEST(aot.aot.saved[1].bytes == 2048.0);
    BOOST_TEST(aot.aot.eager_saved_bytes == 8192.0);
    const Compile& half = run.compiles[2];  // known from its stage events, named by the aot event
    BOOST_TEST(half.graph == "4");
    BOOST_TEST(half.half == "forward");
    BOOST_TEST(half.parent == "2");
    BOOST_TEST(half.fn == 1);
    BOOST_TEST(half.view.nodes.size() == 5u);
    BOOST_TEST(run.compiles[3].entry == 2);
    BOOST_TEST(run.unknown_events.at("future_event") == 1);
}

BOOST_AUTO_TEST_CASE(a_missing_or_empty_folder_is_an_error_naming_it) {
    BOOST_TEST(error_of([] {
                   read_trace_dir("/nonexistent/kiln-trace");
               }).find("kiln report: no trace folder /nonexistent/kiln-trace") == 0u);
    TempDir empty("empty");
    BOOST_TEST(error_of([&] {
                   read_trace_dir(empty.path.string());
               }).find("holds no trace_*.jsonl") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_malformed_line_is_an_error_naming_file_and_line) {
    TempDir dir("malformed");
    std::string file = (dir.path / "trace_1.jsonl").string();
    write_trace(dir.path,
                {R"({"ev":"trace_start","pid":1})", R"({"ev":"function","fn":0,"name":"f")"});
    BOOST_TEST(error_of([&] { read_trace_dir(dir.path.string()); }) ==
               "kiln report: " + file +
                   ":2: column 35: expected ',' or '}', found the end of the line");
    write_trace(dir.path, {R"({"ev":"trace_start"})", "", R"({"fn":0})"});
    BOOST_TEST(error_of([&] { read_trace_dir(dir.path.string()); }) ==
               "kiln report: " + file + ":3: an event without \"ev\" (its kind)");
    write_trace(dir.path, {R"([1,2])"});
    BOOST_TEST(error_of([&] { read_trace_dir(dir.path.string()); }) ==
               "kiln report: " + file + ":1: expected an event (a JSON object)");
    write_trace(
        dir.path,
        {R"({"ev":"source","graph":1,"text":"x","provenance":[{"node":"n1","lines":[[3,2]]}]})"});
    BOOST_TEST(error_of([&] { read_trace_dir(dir.path.string()); }) ==
               "kiln report: " + file + ":1: provenance of n1: bad line range [3, 2]");
    write_trace(dir.path, {R"({"ev":"break","reason":"x"})"});
    BOOST_TEST(error_of([&] { read_trace_dir(dir.path.string()); }) ==
               "kiln report: " + file + ":1: a \"break\" event without \"fn\"");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(report_highlight)

BOOST_AUTO_TEST_CASE(tokens_get_classes_and_spans_stay_on_their_line) {
    auto lines =
        highlight_cpp("#include <cmath>\nfor (int i = 0; i < n; ++i) { /* a\nb */ x = \"s<\"; }\n");
    BOOST_REQUIRE(lines.size() == 3u);
    BOOST_TEST(lines[0] == "<span class=\"tok-pre\">#include &lt;cmath&gt;</span>");
    BOOST_TEST(lines[1].find("<span class=\"tok-kw\">for</span> (<span class=\"tok-ty\">int</span> "
                             "i = <span class=\"tok-num\">0</span>") == 0u);
    BOOST_TEST(lines[1].find("<span class=\"tok-com\">/* a</span>") != std::string::npos);
    BOOST_TEST(lines[2].find("<span class=\"tok-com\">b */</span>") == 0u);
    BOOST_TEST(lines[2].find("<span class=\"tok-str\">&quot;s&lt;&quot;</span>") !=
               std::string::npos);
    for (const std::string& l : lines) BOOST_TEST(scan_html("<p>" + l + "</p>").error == "");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(report_layout)

// Longest-path layering: every edge points down, to a lower layer.
BOOST_AUTO_TEST_CASE(builtin_layout_puts_each_node_below_its_inputs) {
    const std::vector<TraceRun> runs = read_trace_dir(kFixture);
    const Compile& c = runs[0].compiles[0];
    std::string svg = graph_svg_builtin(c.view, {});
    std::map<std::string, double> y;
    std::regex node_re("data-node=\"([^\"]+)\" transform=\"translate\\(([-0-9.]+),([-0-9.]+)\\)\"");
    for (std::sregex_iterator it(svg.begin(), svg.end(), node_re), end; it != end; ++it)
        y[(*it)[1]] = std::stod((*it)[3]);
    BOOST_REQUIRE(y.size() == c.view.nodes.size());
    int edges = 0;
    for (const Node& n : c.view.nodes)
        for (const std::string& in : n.inputs) {
            BOOST_TEST(y.at(in) < y.at(n.id), in << " -> " << n.id);
            ++edges;
        }
    BOOST_TEST(edges == 7);
    BOOST_TEST(y.at("n6") ==
               y.at("n5"));  // both one below n4: the longest path decides, not list order
    BOOST_TEST(scan_html(svg).error == "");
}

// An edge that skips layers (n0 -> n6 skips four) gets a waypoint in each, placed beside the
// boxes of that layer, so it is drawn between them, not through them.
BOOST_AUTO_TEST_CASE(builtin_layout_routes_long_edges_between_the_boxes) {
    const std::vector<TraceRun> runs = read_trace_dir(kFixture);
    const GraphView& g = runs[0].compiles[0].view;
    LayeredLayout l = layered_layout(g);
    BOOST_TEST(l.edges.size() == 7u);
    BOOST_TEST(l.slots.size() == g.nodes.size() + 4);
    for (const std::vector<int>& chain : l.edges)
        for (size_t k = 1; k < chain.size(); ++k)
            BOOST_TEST(l.slots[chain[k - 1]].layer + 1 == l.slots[chain[k]].layer);
    int waypoints = 0;
    for (const LayoutSlot& w : l.slots) {
        if (w.node >= 0) continue;
        ++waypoints;
        for (int k : l.rows[w.layer]) {
            const LayoutSlot& box = l.slots[k];
            if (box.node < 0) continue;
            bool apart = w.x + w.width <= box.x || box.x + box.width <= w.x;
            BOOST_TEST(apart, "a waypoint in layer " << w.layer << " overlaps node "
                                                     << g.nodes[box.node].id);
        }
    }
    BOOST_TEST(waypoints == 4);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(report_site)

// Every page of the site: written, tags balanced, links to written files, and on graph pages
// each provenance entry names a node drawn in the SVG and lines that name it back.
void check_site(Layout layout) {
    TempDir out("site");
    std::vector<std::string> files =
        write_report(kFixture, out.path.string(), ReportOptions{layout});
    BOOST_REQUIRE(!files.empty());
    BOOST_TEST(files[0] == "index.html");
    std::set<std::string> written(files.begin(), files.end());
    for (const char* expected : {"style.css", "graph_1.html", "graph_2.html", "graph_4.html",
                                 "graph_6.html", "aot_2.html"})
        BOOST_TEST(written.count(expected), expected);
    int graph_pages = 0;
    for (const std::string& f : files) {
        BOOST_TEST_CONTEXT(f) {
            BOOST_REQUIRE(fs::exists(out.path / f));
            if (fs::path(f).extension() != ".html") continue;
            kiln_test::HtmlScan page = scan_html(read_all(out.path / f));
            BOOST_TEST(page.error == "");
            std::map<std::string, std::set<std::string>> svg_nodes;  // id -> tags drawing it
            std::map<int, std::set<std::string>> line_nodes;         // source line -> its nodes
            std::string provenance;
            for (const auto& e : page.elements) {
                for (const char* link : {"href", "src"}) {
                    auto it = e.attrs.find(link);
                    if (it == e.attrs.end() || it->second.rfind("#", 0) == 0) continue;
                    BOOST_TEST(it->second.find("://") == std::string::npos,
                               "a link off the disk: " << it->second);
                    std::string target = it->second.substr(0, it->second.find_first_of("?#"));
                    BOOST_TEST(written.count(target),
                               f << " links to " << target << ", which was not written");
                }
                if (e.tag == "g" && e.attrs.count("data-node"))
                    svg_nodes[e.attrs.at("data-node")].insert(e.tag);
                if (e.tag == "span" && e.attrs.count("data-n"))
                    line_nodes[std::stoi(e.attrs.at("data-n"))] =
                        e.attrs.count("data-nodes") ? split_ids(e.attrs.at("data-nodes"))
                                                    : std::set<std::string>{};
                if (e.tag == "script" && e.attrs.count("id") && e.attrs.at("id") == "provenance")
                    provenance = e.text;
            }
            if (f.rfind("graph_", 0) != 0) continue;
            ++graph_pages;
            Json map = json_parse(provenance);
            BOOST_TEST(map.is_object());
            for (const auto& [id, entry] : map.object()) {
                BOOST_TEST(svg_nodes.count(id),
                           "provenance names " << id << ", which the graph does not draw");
                std::string ranges = entry["ranges"].str();
                BOOST_TEST(!ranges.empty());
                std::smatch m;
                for (std::string rest = ranges;
                     std::regex_search(rest, m, std::regex("(\\d+)(-(\\d+))?"));
                     rest = m.suffix()) {
                    int first = std::stoi(m[1]), last = m[3].matched ? std::stoi(m[3]) : first;
                    for (int l = first; l <= last; ++l)
                        BOOST_TEST(line_nodes[l].count(id),
                                   "line " << l << " does not name " << id << " back");
                }
            }
            if (f == "graph_1.html") BOOST_TEST(map.object().size() == 7u);
            if (f == "graph_4.html") BOOST_TEST(map.object().size() == 2u);
        }
    }
    BOOST_TEST(graph_pages == 4);
}

BOOST_AUTO_TEST_CASE(site_with_the_builtin_layout) { check_site(Layout::builtin); }

BOOST_AUTO_TEST_CASE(site_with_graphviz) {
    if (!have_dot()) {
        BOOST_TEST_MESSAGE(
            "report_site/site_with_graphviz: SKIPPED: no `dot` (apt-get install graphviz; make "
            "deps does)");
        return;
    }
    check_site(Layout::dot);
}

BOOST_AUTO_TEST_CASE(report_of_a_bad_folder_writes_nothing) {
    TempDir out("bad");
    write_trace(out.path, {R"({"ev":"trace_start"})", "{oops"});
    fs::path site = out.path / "site";
    BOOST_TEST(error_of([&] {
                   write_report(out.path.string(), site.string());
               }).find("trace_1.jsonl:2: column 2: expected a key in quotes") != std::string::npos);
    BOOST_TEST(!fs::exists(site));
}

BOOST_AUTO_TEST_SUITE_END()
