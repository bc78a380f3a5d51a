// The report's index page, the shared page frame and the stage timeline; write_report.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <sstream>

#include "cli/report/assets.h"
#include "cli/report/html.h"
#include "cli/report/pages.h"
#include "tensor/error.h"

namespace kiln::report {
namespace {

std::string file_part(const std::string& graph) {
    std::string out;
    for (char c : graph) out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
    return out;
}

// The pipeline's stages (docs/trace.md) in their order, one colour each; others by hash.
std::string stage_colour(const std::string& stage) {
    static const char* stages[] = {"lower",          "fuse_conv", "schedule",
                                   "fuse_epilogues", "emit",      "build"};
    static const char* colours[] = {"#60a5fa", "#fbbf24", "#f472b6", "#a78bfa",
                                    "#2dd4bf", "#34d399", "#f87171", "#a3e635"};
    for (size_t i = 0; i < std::size(stages); ++i)
        if (stage == stages[i]) return colours[i];
    return colours[6 + std::hash<std::string>{}(stage) % 2];
}

// "graph 7 (entry 1, segment 2: 5 nodes, 1 kernel, cpp source)" linking its pages, and its AOT
// halves.
std::string graph_event_html(const RunPages& pages, const Json& d) {
    std::string g = d["graph"].str();
    const Compile* c = pages.run.find_compile(g);
    std::ostringstream h;
    h << "<a href=\"" << pages.graph_page(g) << "\">graph " << html_escape(g)
      << "</a> <span class=\"muted\">" << html_escape(d["title"].str()) << "</span> (entry "
      << html_escape(d["entry"].str()) << ", segment " << html_escape(d["segment"].str()) << ": "
      << d["nodes"].array().size() << " nodes";
    if (c && !c->kernels.empty())
        h << ", " << c->kernels.size() << (c->kernels.size() == 1 ? " kernel" : " kernels");
    if (c && !c->target.empty()) h << ", " << html_escape(c->target) << " source";
    h << ")";
    if (c && c->has_aot) {
        h << " &middot; <a href=\"" << pages.aot_page(g) << "\">AOT forward/backward</a>";
        for (const std::string& half : {c->aot.forward_graph, c->aot.backward_graph})
            if (const Compile* hc = pages.run.find_compile(half))
                h << " &middot; <a href=\"" << pages.graph_page(half) << "\">"
                  << html_escape(hc->half) << " graph " << html_escape(half) << "</a>";
    }
    return h.str();
}

std::string event_html(const RunPages& pages, const FunctionEvent& e) {
    const Json& d = e.data;
    std::ostringstream h;
    h << "<div class=\"event\"><span class=\"pill " << e.kind << "\">" << e.kind << "</span> ";
    if (e.kind == "graph") {
        h << graph_event_html(pages, d);
    } else if (e.kind == "guards") {
        h << "entry " << html_escape(d["entry"].str()) << ": " << d["guards"].array().size()
          << " guards<ul>";
        for (const Json& g : d["guards"].array())
            h << "<li><code>" << html_escape(g["text"].str()) << "</code> <span class=\"muted\">"
              << html_escape(g["kind"].str()) << " &middot; " << html_escape(g["source"].str())
              << "</span></li>";
        h << "</ul>";
    } else if (e.kind == "break") {
        h << "<b>" << html_escape(d["kind"].str()) << "</b>: " << html_escape(d["reason"].str())
          << " <span class=\"muted\">at " << html_escape(d["line"].str()) << "</span>";
        if (!d["hint"].str().empty())
            h << "<br><span class=\"muted\">hint: " << html_escape(d["hint"].str()) << "</span>";
    } else if (e.kind == "recompile") {
        h << "guard failed: <code>" << html_escape(d["guard"].str()) << "</code>";
        if (!d["old"].str().empty() || !d["new"].str().empty())
            h << " (was " << html_escape(d["old"].str()) << ", now " << html_escape(d["new"].str())
              << ")";
        if (!d["reason"].str().empty())
            h << "<br><span class=\"muted\">" << html_escape(d["reason"].str()) << "</span>";
        if (!d["note"].str().empty())
            h << "<br><span class=\"muted\">" << html_escape(d["note"].str()) << "</span>";
    } else if (e.kind == "symbols") {
        h << "entry " << html_escape(d["entry"].str()) << ":";
        for (const Json& sym : d["symbols"].array())
            h << " <code>" << html_escape(sym["name"].str())
              << "</code> = " << html_escape(sym["from"].str())
              << (sym["pinned"].str() == "true"
                      ? " (pinned to " + html_escape(sym["pinned_to"].str()) + ")"
                      : "")
              << ";";
    } else if (e.kind == "pin") {
        h << "<code>" << html_escape(d["symbol"].str()) << "</code> pinned to "
          << html_escape(d["value"].str()) << ": " << html_escape(d["why"].str());
    } else {
        h << "call " << html_escape(d["call"].str()) << ": " << html_escape(d["result"].str());
    }
    return h.str() + "</div>\n";
}

std::string function_html(const RunPages& pages, const Function& f) {
    std::ostringstream h;
    h << "<h3 id=\"fn" << f.fn << "\">fn " << f.fn << ": " << html_escape(f.name) << "</h3><p>";
    for (const auto& [label, value] :
         {std::pair{"backend", f.backend}, {"mode", f.mode}, {"dynamic", f.dynamic}})
        if (!value.empty())
            h << "<span class=\"pill\">" << label << " " << html_escape(value) << "</span>";
    if (f.counters.is_object()) {
        h << " <span class=\"muted\">";
        for (const char* k : {"calls", "hits", "records", "recompiles", "replays", "reruns",
                              "eager_runs", "eager_fallbacks"})
            if (f.counters.has(k))
                h << k << " " << html_escape(f.counters[k].str()) << " &middot; ";
        for (const auto& [graph, choice] : f.counters["backend_choice"].object())
            h << "graph " << html_escape(graph) << ": " << html_escape(choice.str()) << " ";
        h << "</span>";
    }
    h << "</p>\n";
    for (const FunctionEvent& e : f.events) h << event_html(pages, e);
    return h.str();
}

}  // namespace

std::string RunPages::graph_page(const std::string& graph) const {
    return prefix + "graph_" + file_part(graph) + ".html";
}
std::string RunPages::aot_page(const std::string& graph) const {
    return prefix + "aot_" + file_part(graph) + ".html";
}
const Function* RunPages::function(int fn) const {
    for (const Function& f : run.functions)
        if (f.fn == fn) return &f;
    return nullptr;
}

std::string page_begin(const std::string& title, const std::string& nav) {
    return "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>" +
           html_escape(title) + "</title><link rel=\"stylesheet\" href=\"style.css\"><script>" +
           kErrorHookJs + "</script></head>\n<body><ul id=\"js-errors\"></ul><header>" + nav +
           "<h1>" + html_escape(title) + "</h1></header><main>\n";
}

// The script is inlined (not report.js beside the page): a browser reports the message of an
// error in a file:// script of another file only as "Script error.".
std::string page_end() {
    return std::string("</main><script>") + kReportJs + "</script></body></html>\n";
}

std::string bytes_text(double bytes) {
    std::ostringstream os;
    os << std::fixed << std::setprecision(1);
    if (bytes >= 1 << 20)
        os << bytes / (1 << 20) << " MiB";
    else if (bytes >= 1 << 10)
        os << bytes / (1 << 10) << " KiB";
    else
        os << static_cast<long long>(bytes) << " B";
    return os.str();
}

// One row per graph a backend compiled in stages (graphs run by eager or a custom backend have
// none), bars in stage order, scaled to the longest row; a legend names the stage colours.
std::string timeline_svg(const std::vector<const Compile*>& all, const RunPages& pages) {
    constexpr int kLabelW = 190, kBarW = 640, kRowH = 24;
    std::vector<const Compile*> compiles;
    std::vector<std::string> stage_names;
    double longest = 0;
    for (const Compile* c : all) {
        double total = 0;
        for (const Stage& s : c->stages) {
            total += s.ms;
            if (std::find(stage_names.begin(), stage_names.end(), s.name) == stage_names.end())
                stage_names.push_back(s.name);
        }
        if (!c->stages.empty()) compiles.push_back(c);
        longest = std::max(longest, total);
    }
    if (compiles.empty() || longest <= 0)
        return "<p class=\"muted\">no stage timings in the log (no graph went through the "
               "inductor's stages)</p>\n";
    std::ostringstream h;
    const int height = int(compiles.size()) * kRowH + 46;
    h << std::fixed << std::setprecision(1);
    h << "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"timeline\" width=\""
      << kLabelW + kBarW + 90 << "\" height=\"" << height << "\">\n";
    for (size_t r = 0; r < compiles.size(); ++r) {
        const Compile& c = *compiles[r];
        const Function* f = pages.function(c.fn);
        double y = double(r) * kRowH, x = kLabelW, total = 0;
        std::string label = "graph " + c.graph + (c.half.empty() ? "" : " (" + c.half + ")") +
                            (f ? " " + f->name : "");
        h << "<a href=\"" << pages.graph_page(c.graph) << "\"><text x=\"4\" y=\"" << y + 16 << "\">"
          << html_escape(label) << "</text></a>\n";
        for (const Stage& s : c.stages) {
            double w = s.ms / longest * kBarW;
            h << "<rect x=\"" << x << "\" y=\"" << y + 3 << "\" width=\"" << std::max(w, 0.5)
              << "\" height=\"" << kRowH - 6 << "\" fill=\"" << stage_colour(s.name) << "\"><title>"
              << html_escape(s.name) << ": " << s.ms << " ms</title></rect>";
            if (w > 46)
                h << "<text x=\"" << x + 3 << "\" y=\"" << y + 16 << "\">" << html_escape(s.name)
                  << "</text>";
            h << "\n";
            x += w, total += s.ms;
        }
        h << "<text x=\"" << x + 4 << "\" y=\"" << y + 16 << "\">" << total << " ms</text>\n";
    }
    const double axis_y = double(compiles.size()) * kRowH + 14;
    h << "<text x=\"" << kLabelW << "\" y=\"" << axis_y << "\">0</text><text x=\""
      << kLabelW + kBarW - 40 << "\" y=\"" << axis_y << "\">" << longest << " ms</text>\n";
    double lx = kLabelW;
    for (const std::string& name : stage_names) {
        h << "<rect x=\"" << lx << "\" y=\"" << axis_y + 12
          << "\" width=\"12\" height=\"12\" fill=\"" << stage_colour(name) << "\"/><text x=\""
          << lx + 16 << "\" y=\"" << axis_y + 22 << "\">" << html_escape(name) << "</text>\n";
        lx += 30 + 7.0 * double(name.size());
    }
    h << "</svg>\n";
    return h.str();
}

std::string index_html(const std::vector<RunPages>& runs, const std::string& dir) {
    std::ostringstream h;
    h << page_begin("kiln compile report",
                    "<span class=\"muted\">from " + html_escape(dir) + "</span>");
    for (const RunPages& pages : runs) {
        const TraceRun& run = pages.run;
        h << "<h2>process " << html_escape(run.pid) << ": <code>";
        for (const std::string& a : run.argv) h << html_escape(a) << " ";
        h << "</code></h2>\n<p class=\"muted\">"
          << html_escape(std::filesystem::path(run.file).filename().string()) << " &middot; device "
          << html_escape(run.device) << " &middot; log format " << html_escape(run.format)
          << "</p>\n";
        if (!run.ended)
            h << "<p><span class=\"pill break\">unfinished</span> the log has no trace_end yet: "
                 "the process was still running (a REPL session) or stopped early, so the counters "
                 "may be missing</p>\n";
        std::vector<const Compile*> compiles;
        for (const Compile& c : run.compiles) compiles.push_back(&c);
        h << "<h3>compile stages</h3>\n" << timeline_svg(compiles, pages);
        h << "<h3>compiled functions, in call order</h3>\n";
        if (run.functions.empty()) h << "<p class=\"muted\">nothing was compiled</p>\n";
        for (const Function& f : run.functions) h << function_html(pages, f);
        std::ostringstream loose;
        for (const Compile& c : run.compiles)
            if (!pages.function(c.fn))
                loose << "<li><a href=\"" << pages.graph_page(c.graph) << "\">graph "
                      << html_escape(c.graph) << "</a></li>";
        if (!loose.str().empty())
            h << "<h3>graphs of no logged function</h3><ul>" << loose.str() << "</ul>\n";
        if (run.totals.is_object()) {
            h << "<p class=\"muted\">totals:";
            for (const auto& [k, v] : run.totals.object())
                if (k != "ev" && k != "seq" && k != "t_us")
                    h << " " << html_escape(k) << " " << html_escape(v.str()) << ";";
            h << "</p>\n";
        }
        if (!run.unknown_events.empty()) {
            h << "<p class=\"muted\">events this kiln report does not draw:";
            for (const auto& [ev, n] : run.unknown_events)
                h << " " << html_escape(ev) << " &times;" << n;
            h << "</p>\n";
        }
    }
    h << page_end();
    return h.str();
}

std::string default_report_dir(const std::string& dir) {
    return (std::filesystem::path(dir) / "report").string();
}

std::vector<std::string> write_report(const std::string& dir, const std::string& out,
                                      const ReportOptions& options) {
    namespace fs = std::filesystem;
    std::vector<TraceRun> runs = read_trace_dir(dir);
    std::error_code ec;
    fs::create_directories(out, ec);
    if (ec) fail("kiln report: cannot create ", out, ": ", ec.message());
    std::vector<std::string> written;
    auto write = [&](const std::string& name, const std::string& text) {
        std::ofstream file(fs::path(out) / name, std::ios::binary);
        file << text;
        if (!file) fail("kiln report: cannot write ", (fs::path(out) / name).string());
        written.push_back(name);
    };
    std::vector<RunPages> pages;
    for (size_t k = 0; k < runs.size(); ++k)
        pages.push_back({runs[k], runs.size() > 1 ? "run" + std::to_string(k + 1) + "_" : ""});
    write("index.html", index_html(pages, dir));
    write("style.css", kStyleCss);
    for (const RunPages& p : pages)
        for (const Compile& c : p.run.compiles) {
            write(p.graph_page(c.graph), graph_html(p, c, options));
            if (c.has_aot) write(p.aot_page(c.graph), aot_html(p, c, options));
        }
    return written;
}

}  // namespace kiln::report
