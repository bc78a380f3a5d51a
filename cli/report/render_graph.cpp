// The report's per-graph pages: the graph beside its generated source (provenance both
// ways), schedule, guards, passes before/after, stage timeline; and the AOT page.
#include <map>
#include <set>
#include <sstream>

#include "cli/report/html.h"
#include "cli/report/pages.h"

namespace kiln::report {
namespace {

std::string nav(const RunPages& pages) {
    return "<a href=\"index.html\">&larr; all compiled functions</a>" +
           std::string(pages.prefix.empty() ? "" : " (" + pages.prefix + ")");
}

std::string chips(const std::vector<std::string>& ids) {
    std::string out;
    for (const std::string& id : ids)
        out += "<span class=\"chip\" data-node=\"" + html_escape(id) + "\">" + html_escape(id) +
               "</span>";
    return out;
}

std::string ranges_text(const std::vector<std::pair<int, int>>& lines) {
    std::string out;
    for (auto [a, b] : lines)
        out +=
            (out.empty() ? "" : ", ") + std::to_string(a) + (b > a ? "-" + std::to_string(b) : "");
    return out;
}

// JSON string literal, safe inside a <script> element.
std::string json_string(const std::string& s) {
    std::string out = "\"";
    for (char c : s) {
        if (c == '"' || c == '\\')
            out += '\\', out += c;
        else if (c == '<')
            out += "\\u003c";
        else if (static_cast<unsigned char>(c) < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", c);
            out += buf;
        } else
            out += c;
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
        j << (first ? "" : ",") << json_string(p.node)
          << ":{\"op\":" << json_string(n ? n->op : "?") << ",\"kernel\":" << json_string(p.kernel)
          << ",\"ranges\":" << json_string(ranges_text(p.lines)) << "}";
        first = false;
    }
    return j.str() + "}";
}

std::string schedule_html(const Compile& c) {
    std::ostringstream h;
    h << "<h2>schedule</h2>\n";
    if (!c.backend_choice.empty()) h << "<p>backend: " << html_escape(c.backend_choice) << "</p>\n";
    if (!c.choice_text.empty())
        h << "<p class=\"muted\">" << html_escape(c.choice_text) << "</p>\n";
    if (c.kernels.empty())
        return h.str() +
               "<p class=\"muted\">no schedule in the log (a backend without codegen)</p>\n";
    h << "<table><tr><th>kernel</th><th>kind</th><th>nodes fused into "
         "it</th><th>loads</th><th>stores</th></tr>\n";
    for (const Kernel& k : c.kernels)
        h << "<tr data-nodes=\"" << html_escape([&] {
            std::string s;
            for (const std::string& n : k.nodes) s += (s.empty() ? "" : " ") + n;
            return s;
        }())
          << "\"><td><code>" << html_escape(k.name) << "</code></td><td>" << html_escape(k.kind)
          << "</td><td>" << chips(k.nodes) << "</td></tr>\n";
    h << "</table>\n";
    if (!c.schedule_text.empty())
        h << "<details><summary>the schedule as text</summary><pre>" << html_escape(c.schedule_text)
          << "</pre></details>\n";
    if (!c.not_fused.empty()) {
        h << "<h3>not fused, and why</h3><table><tr><th>nodes</th><th>why not</th></tr>\n";
        for (const NotFused& n : c.not_fused) {
            std::vector<std::string> ids;
            for (const std::string& id : {n.node, n.a, n.b})
                if (!id.empty()) ids.push_back(id);
            h << "<tr><td>" << chips(ids) << "</td><td>" << html_escape(n.why) << "</td></tr>\n";
        }
        h << "</table>\n";
    }
    return h.str();
}

std::string nodes_html(const Compile& c) {
    std::map<std::string, const Provenance*> prov;
    for (const Provenance& p : c.provenance) prov[p.node] = &p;
    std::ostringstream h;
    h << "<h2>nodes</h2><table><tr><th>node</th><th>op</th><th>inputs</th><th>shape</th><th>dtype</"
         "th><th>from</th><th>kernel</th><th>generated lines</th></tr>\n";
    for (const Node& n : c.view.nodes) {
        auto p = prov.find(n.id);
        h << "<tr data-node=\"" << html_escape(n.id) << "\"><td><code>" << html_escape(n.id)
          << "</code></td><td>" << html_escape(n.op) << "</td><td>" << chips(n.inputs)
          << "</td><td>" << html_escape(n.shape) << "</td><td>" << html_escape(n.dtype)
          << "</td><td class=\"muted\">" << html_escape(n.line) << "</td><td>"
          << (p == prov.end() ? "" : html_escape(p->second->kernel)) << "</td><td>"
          << (p == prov.end() ? "" : ranges_text(p->second->lines)) << "</td></tr>\n";
    }
    return h.str() + "</table>\n";
}

// The guards of the entry this graph was recorded in, and its dynamic-shape symbols and pins.
std::string guards_html(const RunPages& pages, const Compile& c) {
    const Function* f = pages.function(c.fn);
    std::ostringstream h;
    h << "<h2>guards of entry " << c.entry << "</h2>\n";
    bool any = false;
    for (const FunctionEvent& e : f ? f->events : std::vector<FunctionEvent>{}) {
        if (int(e.data["entry"].num(-1)) != c.entry) continue;
        if (e.kind == "guards") {
            any = true;
            h << "<table><tr><th>guard</th><th>kind</th><th>made by</th></tr>";
            for (const Json& g : e.data["guards"].array())
                h << "<tr><td><code>" << html_escape(g["text"].str()) << "</code></td><td>"
                  << html_escape(g["kind"].str()) << "</td><td class=\"muted\">"
                  << html_escape(g["source"].str()) << "</td></tr>";
            h << "</table>\n";
        } else if (e.kind == "symbols") {
            h << "<p>dynamic-shape symbols:</p><ul>";
            for (const Json& sym : e.data["symbols"].array())
                h << "<li><code>" << html_escape(sym["name"].str()) << "</code> from <code>"
                  << html_escape(sym["from"].str()) << "</code> (now "
                  << html_escape(sym["value"].str()) << ")"
                  << (sym["pinned"].str() == "true" ? ", pinned: " + html_escape(sym["why"].str())
                                                    : "")
                  << "</li>";
            h << "</ul>\n";
        } else if (e.kind == "pin") {
            h << "<p><code>" << html_escape(e.data["symbol"].str()) << "</code> pinned to "
              << html_escape(e.data["value"].str()) << ": " << html_escape(e.data["why"].str())
              << "</p>\n";
        }
    }
    if (!any) h << "<p class=\"muted\">no guards logged for this entry</p>\n";
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
        h << "<details" << (i == 0 ? " open" : "") << "><summary>" << i + 1 << ". "
          << html_escape(s.name) << " <span class=\"muted\">(" << s.ms
          << " ms)</span></summary><div class=\"two\"><div><h3>before: " << html_escape(before_name)
          << "</h3><pre>" << html_escape(before)
          << "</pre></div><div><h3>after: " << html_escape(s.name) << "</h3><pre>"
          << html_escape(s.text) << "</pre></div></div></details>\n";
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
    std::string what = c.half.empty() ? "" : " (the " + c.half + " half of graph " + c.parent + ")";
    h << page_begin("graph " + c.graph + what + (f ? " of " + f->name : "") + ", entry " +
                        std::to_string(c.entry) + ", segment " + std::to_string(c.segment),
                    nav(pages));
    if (!c.half.empty())
        h << "<p><a href=\"" << pages.aot_page(c.parent) << "\">AOT: both halves of graph "
          << html_escape(c.parent) << ", saved tensors</a></p>\n";
    if (c.has_aot)
        h << "<p><a href=\"" << pages.aot_page(c.graph)
          << "\">AOT: forward and backward graphs, saved tensors</a></p>\n";
    h << "<p class=\"muted\">click or hover a node to see the lines generated for it; click a line "
         "to see its nodes</p>\n<div id=\"selection\"></div>\n";
    h << "<div class=\"two\"><div class=\"panel\"><h3>graph (" << c.view.nodes.size()
      << " nodes)</h3>" << graph_svg(c.view, kernel_marks(c), options.layout)
      << "</div><div class=\"panel\"><h3>generated "
      << html_escape(c.target.empty() ? "source" : c.target) << "</h3>";
    if (c.source.empty())
        h << "<p class=\"muted\">no generated source in the log (eager or aot_eager backend)</p>";
    else
        h << source_html(c);
    h << "</div></div>\n";
    h << "<script type=\"application/json\" id=\"provenance\">" << provenance_json(c)
      << "</script>\n";
    h << schedule_html(c) << nodes_html(c) << guards_html(pages, c) << passes_html(c);
    h << "<h2>compile stages</h2>\n" << timeline_svg({&c}, pages);
    h << page_end();
    return h.str();
}

// The joint graph and its two halves, side by side. Node ids restart in each graph, so on
// this page they carry the graph's prefix (joint:, fw:, bw:); a saved tensor links its joint
// node, the forward output that returns it and the backward placeholder that receives it.
std::string aot_html(const RunPages& pages, const Compile& c, const ReportOptions& options) {
    const Function* f = pages.function(c.fn);
    const Aot& a = c.aot;
    SvgMarks joint{.prefix = "joint:"}, fw{.prefix = "fw:"}, bw{.prefix = "bw:"};
    double total = 0;
    for (const Saved& s : a.saved) {
        std::string ids = "joint:" + s.joint_id +
                          (s.forward_id.empty() ? "" : " fw:" + s.forward_id) +
                          (s.backward_id.empty() ? "" : " bw:" + s.backward_id);
        std::string note = "saved " + bytes_text(s.bytes);
        joint.klass[s.joint_id] = "saved", joint.note[s.joint_id] = note,
        joint.links[s.joint_id] = ids;
        if (!s.forward_id.empty())
            fw.klass[s.forward_id] = "saved", fw.note[s.forward_id] = note,
            fw.links[s.forward_id] = ids;
        if (!s.backward_id.empty())
            bw.klass[s.backward_id] = "saved", bw.note[s.backward_id] = note,
            bw.links[s.backward_id] = ids;
        total += s.bytes;
    }
    for (const std::string& r : a.recomputed)
        joint.klass[r] = "recomputed", joint.note[r] = "recomputed in backward";
    std::ostringstream h;
    h << page_begin(
        "AOT graph " + c.graph + (f ? " of " + f->name : "") + ": forward and backward",
        nav(pages) + " &middot; <a href=\"" + pages.graph_page(c.graph) + "\">recorded graph</a>");
    h << "<p>the min-cut keeps " << a.saved.size()
      << " tensors from the forward for the backward: " << bytes_text(total) << " (red outline)";
    if (a.eager_saved_bytes >= 0)
        h << "; eager autograd would keep " << bytes_text(a.eager_saved_bytes);
    if (!a.recomputed.empty()) {
        std::vector<std::string> ids;
        for (const std::string& r : a.recomputed) ids.push_back("joint:" + r);
        h << "; the backward recomputes " << chips(ids) << " instead of saving them";
    }
    h << ".</p>\n";
    for (const auto& [half, id] :
         {std::pair{"forward", a.forward_graph}, {"backward", a.backward_graph}})
        if (pages.run.find_compile(id))
            h << "<a href=\"" << pages.graph_page(id) << "\">the " << half
              << " half's generated code (graph " << html_escape(id) << ")</a> ";
    h << "<div id=\"selection\"></div>\n";
    h << "<table><tr><th>saved tensor</th><th>joint node</th><th>forward output</th><th>backward "
         "input</th><th>shape</th><th>dtype</th><th>bytes</th></tr>\n";
    for (const Saved& s : a.saved) {
        const Node* n = a.joint.find(s.joint_id);
        h << "<tr data-nodes=\"" << html_escape(joint.links[s.joint_id]) << "\"><td>"
          << html_escape(s.name) << "</td><td><code>" << html_escape(s.joint_id)
          << "</code></td><td><code>" << html_escape(s.forward_id) << "</code></td><td><code>"
          << html_escape(s.backward_id) << "</code></td><td>" << (n ? html_escape(n->shape) : "")
          << "</td><td>" << (n ? html_escape(n->dtype) : "") << "</td><td>"
          << static_cast<long long>(s.bytes) << " (" << bytes_text(s.bytes) << ")</td></tr>\n";
    }
    h << "</table>\n<div class=\"two\"><div class=\"panel\"><h3>forward (graph "
      << html_escape(a.forward_graph) << ", " << a.forward.nodes.size() << " nodes)</h3>"
      << graph_svg(a.forward, fw, options.layout)
      << "</div><div class=\"panel\"><h3>backward (graph " << html_escape(a.backward_graph) << ", "
      << a.backward.nodes.size() << " nodes)</h3>" << graph_svg(a.backward, bw, options.layout)
      << "</div></div>\n";
    h << "<details><summary>the joint graph (" << a.joint.nodes.size()
      << " nodes), before the partition</summary><div class=\"panel\">"
      << graph_svg(a.joint, joint, options.layout) << "</div><pre>" << html_escape(a.joint.text)
      << "</pre></details>\n";
    h << "<div class=\"two\"><div><h3>forward as text</h3><pre>" << html_escape(a.forward.text)
      << "</pre></div><div><h3>backward as text</h3><pre>" << html_escape(a.backward.text)
      << "</pre></div></div>\n";
    h << page_end();
    return h.str();
}

}  // namespace kiln::report
