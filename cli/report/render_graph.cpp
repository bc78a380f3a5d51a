// The report's per-graph pages: the graph beside its generated source (provenance both
// ways), schedule, guards, passes before/after, stage timeline; and the AOT page.
#include <map>
#include <set>
#include <sstream>

#include "cli/report/html.h"
#include "cli/report/pages.h"

namespace kiln::report {
namespace {

std::string nav(const RunPages& pages) { return "<a href=\"index.html\">&larr; all compiled functions</a>" + std::string(pages.prefix.empty() ? "" : " (" + pages.prefix + ")"); }

std::string chips(const std::vector<std::string>& ids) {
    std::string out;
    for (const std::string& id : ids) out += "<span class=\"chip\" data-node=\"" + html_escape(id) + "\">" + html_escape(id) + "</span>";
    return out;
}

std::string ranges_text(const std::vector<std::pair<int, int>>& lines) {
    std::string out;
    for (auto [a, b] : lines) out += (out.empty() ? "" : ", ") + std::to_string(a) + (b > a ? "-" + std::to_string(b) : "");
    return out;
}

// JSON string literal, safe inside a <script> element.
std::string json_string(const std::string& s) {
    std::string out = "\"";
    for (char c : s) {
        if (c == '"' || c == '\\') out += '\\', out += c;
        else if (c == '<') out += "\\u003c";
        else if (static_cast<unsigned char>(c) < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", c);
            out += buf;
        } else out += c;
    }
    return out + "\"";
}

// The source, one <span class="ln" data-nodes="..."> per line: the nodes whose code it is.
std::string source_html(const Compile& c) {
    std::vector<std::string> lines = highlight_cpp(c.source);
    std::vector<std::vector<std::string>> owners(lines.size());
    for (const Provenance& p : c.provenance)
        for (auto [a, b] : p.lines)
            for (int l = a; l <= b && l <= int(lines.size()); ++l) owners[l - 1].push_back(p.node);
    std::ostringstream h;
    h << "<div class=\"src\">";
    for (size_t i = 0; i < lines.size(); ++i) {
        h << "<span class=\"ln\" id=\"L" << i + 1 << "\" data-n=\"" << i + 1 << "\"";
        if (!owners[i].empty()) {
            std::string ids;
            for (const std::string& id : owners[i]) ids += (ids.empty() ? "" : " ") + id;
            h << " data-nodes=\"" << html_escape(ids) << "\"";
        }
        h << ">" << lines[i] << "</span>";
    }
    h << "</div>\n";
    return h.str();
}

std::string provenance_json(const Compile& c) {
    std::ostringstream j;
    j << "{";
    bool first = true;
    for (const Provenance& p : c.provenance) {
        const Node* n = c.view.find(p.node);
        j << (first ? "" : ",") << json_string(p.node) << ":{\"op\":" << json_string(n ? n->op : "?") << ",\"kernel\":" << json_string(p.kernel)
          << ",\"ranges\":" << json_string(ranges_text(p.lines)) << "}";
        first = false;
    }
    return j.str() + "}";
}

std::string schedule_html(const Compile& c) {
    std::ostringstream h;
    h << "<h2>schedule</h2>\n";
    if (c.kernels.empty()) return h.str() + "<p class=\"muted\">no schedule in the log (a backend without codegen)</p>\n";
    h << "<table><tr><th>kernel</th><th>kind</th><th>nodes fused into it</th></tr>\n";
    for (const Kernel& k : c.kernels)
        h << "<tr data-nodes=\"" << html_escape([&] {
            std::string s;
            for (const std::string& n : k.nodes) s += (s.empty() ? "" : " ") + n;
            return s;
        }()) << "\"><td><code>" << html_escape(k.name) << "</code></td><td>" << html_escape(k.kind) << "</td><td>" << chips(k.nodes) << "</td></tr>\n";
    h << "</table>\n";
    if (!c.not_fused.empty()) {
        h << "<h3>not fused, and why</h3><table><tr><th>producer</th><th>consumer</th><th>why not</th></tr>\n";
        for (const NotFused& n : c.not_fused)
            h << "<tr><td>" << chips({n.a}) << "</td><td>" << chips({n.b}) << "</td><td>" << html_escape(n.why) << "</td></tr>\n";
        h << "</table>\n";
    }
    return h.str();
}

std::string nodes_html(const Compile& c) {
    std::map<std::string, const Provenance*> prov;
    for (const Provenance& p : c.provenance) prov[p.node] = &p;
    std::ostringstream h;
    h << "<h2>nodes</h2><table><tr><th>node</th><th>op</th><th>inputs</th><th>shape</th><th>dtype</th><th>from</th><th>kernel</th><th>generated lines</th></tr>\n";
    for (const Node& n : c.view.nodes) {
        auto p = prov.find(n.id);
        h << "<tr data-node=\"" << html_escape(n.id) << "\"><td><code>" << html_escape(n.id) << "</code></td><td>" << html_escape(n.op) << "</td><td>"
          << chips(n.inputs) << "</td><td>" << html_escape(n.shape) << "</td><td>" << html_escape(n.dtype) << "</td><td class=\"muted\">" << html_escape(n.line)
          << "</td><td>" << (p == prov.end() ? "" : html_escape(p->second->kernel)) << "</td><td>"
          << (p == prov.end() ? "" : ranges_text(p->second->lines)) << "</td></tr>\n";
    }
    return h.str() + "</table>\n";
}

std::string guards_html(const RunPages& pages, const Compile& c) {
    const Function* f = pages.function(c.fn);
    std::ostringstream h;
    h << "<h2>guards</h2>\n";
    bool any = false;
    for (const FunctionEvent& e : f ? f->events : std::vector<FunctionEvent>{}) {
        if (e.kind != "guards") continue;
        any = true;
        h << "<p>entry " << html_escape(e.data["entry"].str()) << ":</p><ul>";
        for (const Json& g : e.data["guards"].array())
            h << "<li><code>" << html_escape(g["text"].str()) << "</code> <span class=\"muted\">made at " << html_escape(g["source"].str()) << "</span></li>";
        h << "</ul>\n";
    }
    if (!any) h << "<p class=\"muted\">no guards logged for this function</p>\n";
    for (const Json& s : c.symbols) {
        h << "<p>dynamic-shape symbols:</p><ul>";
        for (const Json& sym : s["symbols"].array())
            h << "<li><code>" << html_escape(sym["name"].str()) << "</code> from <code>" << html_escape(sym["from"].str()) << "</code>"
              << (sym["pinned"].str() == "true" ? " (pinned)" : "") << "</li>";
        h << "</ul>\n";
    }
    return h.str();
}

// Each stage's output beside the one before it (the first beside the recorded graph).
std::string passes_html(const Compile& c) {
    std::ostringstream h;
    h << "<h2>passes, before and after</h2>\n";
    if (c.stages.empty()) return h.str() + "<p class=\"muted\">no stage outputs in the log</p>\n";
    std::string before_name = "recorded graph", before = c.view.text;
    for (size_t i = 0; i < c.stages.size(); ++i) {
        const Stage& s = c.stages[i];
        h << "<details" << (i == 0 ? " open" : "") << "><summary>" << i + 1 << ". " << html_escape(s.name) << " <span class=\"muted\">(" << s.ms
          << " ms)</span></summary><div class=\"two\"><div><h3>before: " << html_escape(before_name) << "</h3><pre>" << html_escape(before)
          << "</pre></div><div><h3>after: " << html_escape(s.name) << "</h3><pre>" << html_escape(s.text) << "</pre></div></div></details>\n";
        if (!s.text.empty()) before_name = s.name, before = s.text;
    }
    return h.str();
}

SvgMarks kernel_marks(const Compile& c) {
    SvgMarks marks;
    for (const Kernel& k : c.kernels)
        for (const std::string& n : k.nodes) marks.kernel[n] = k.name;
    return marks;
}

}  // namespace

std::string graph_html(const RunPages& pages, const Compile& c, const ReportOptions& options) {
    const Function* f = pages.function(c.fn);
    std::ostringstream h;
    h << page_begin("graph " + c.graph + (f ? " of " + f->name : "") + " (segment " + std::to_string(c.segment) + ")", nav(pages));
    if (c.has_aot) h << "<p><a href=\"" << pages.aot_page(c.graph) << "\">AOT: forward and backward graphs, saved tensors</a></p>\n";
    h << "<p class=\"muted\">click or hover a node to see the lines generated for it; click a line to see its nodes</p>\n<div id=\"selection\"></div>\n";
    h << "<div class=\"two\"><div class=\"panel\"><h3>graph (" << c.view.nodes.size() << " nodes)</h3>" << graph_svg(c.view, kernel_marks(c), options.layout)
      << "</div><div class=\"panel\"><h3>generated " << html_escape(c.target.empty() ? "source" : c.target) << "</h3>";
    if (c.source.empty()) h << "<p class=\"muted\">no generated source in the log (eager or aot_eager backend)</p>";
    else h << source_html(c);
    h << "</div></div>\n";
    h << "<script type=\"application/json\" id=\"provenance\">" << provenance_json(c) << "</script>\n";
    h << schedule_html(c) << nodes_html(c) << guards_html(pages, c) << passes_html(c);
    h << "<h2>compile stages</h2>\n" << timeline_svg({&c}, pages);
    h << page_end();
    return h.str();
}

std::string aot_html(const RunPages& pages, const Compile& c, const ReportOptions& options) {
    const Function* f = pages.function(c.fn);
    SvgMarks marks;
    double total = 0;
    for (const auto& [id, bytes] : c.aot.saved_bytes) marks.klass[id] = "saved", marks.note[id] = "saved " + bytes_text(bytes), total += bytes;
    std::ostringstream h;
    h << page_begin("AOT graph " + c.graph + (f ? " of " + f->name : "") + ": forward and backward", nav(pages) + " &middot; <a href=\"" + pages.graph_page(c.graph) + "\">graph page</a>");
    h << "<p>the min-cut keeps " << c.aot.saved_bytes.size() << " tensors from forward for backward, " << bytes_text(total)
      << " in all (red outline)";
    if (!c.aot.recomputed.empty()) h << "; backward recomputes " << chips(c.aot.recomputed) << " instead of saving them";
    h << ".</p><div id=\"selection\"></div>\n";
    h << "<table><tr><th>saved tensor</th><th>op</th><th>shape</th><th>dtype</th><th>bytes</th></tr>\n";
    for (const auto& [id, bytes] : c.aot.saved_bytes) {
        const Node* n = c.aot.forward.find(id);
        if (!n) n = c.aot.joint.find(id);
        h << "<tr data-node=\"" << html_escape(id) << "\"><td><code>" << html_escape(id) << "</code></td><td>" << (n ? html_escape(n->op) : "")
          << "</td><td>" << (n ? html_escape(n->shape) : "") << "</td><td>" << (n ? html_escape(n->dtype) : "") << "</td><td>" << static_cast<long long>(bytes)
          << " (" << bytes_text(bytes) << ")</td></tr>\n";
    }
    h << "</table>\n<div class=\"two\"><div class=\"panel\"><h3>forward (" << c.aot.forward.nodes.size() << " nodes)</h3>"
      << graph_svg(c.aot.forward, marks, options.layout) << "</div><div class=\"panel\"><h3>backward (" << c.aot.backward.nodes.size() << " nodes)</h3>"
      << graph_svg(c.aot.backward, marks, options.layout) << "</div></div>\n";
    h << "<details><summary>joint graph (" << c.aot.joint.nodes.size() << " nodes), before the partition</summary><div class=\"panel\">"
      << graph_svg(c.aot.joint, marks, options.layout) << "</div><pre>" << html_escape(c.aot.joint.text) << "</pre></details>\n";
    h << "<div class=\"two\"><div><h3>forward as text</h3><pre>" << html_escape(c.aot.forward.text) << "</pre></div><div><h3>backward as text</h3><pre>"
      << html_escape(c.aot.backward.text) << "</pre></div></div>\n";
    h << page_end();
    return h.str();
}

}  // namespace kiln::report
