// Graph drawing for the report (cli/report/graph_svg.h).
#include "cli/report/graph_svg.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli/report/html.h"

namespace kiln::report {
namespace {

constexpr int kNodeW = 170, kNodeH = 46, kGapX = 30, kGapY = 56, kMargin = 16, kWaypointW = 10;

std::string label_of(const Node& n) { return n.id + " " + n.op; }
std::string detail_of(const Node& n) {
    std::string d = n.shape;
    if (!n.dtype.empty()) d += (d.empty() ? "" : " ") + n.dtype;
    return d;
}

// One of a few soft colours per kernel, so nodes fused into one kernel share a fill.
std::string kernel_fill(const SvgMarks& marks, const std::string& id) {
    static const char* fills[] = {"#dbeafe", "#dcfce7", "#fef3c7", "#fce7f3",
                                  "#e0e7ff", "#ccfbf1", "#fee2e2", "#ede9fe"};
    auto it = marks.kernel.find(id);
    if (it == marks.kernel.end()) return "#f3f4f6";
    return fills[std::hash<std::string>{}(it->second) % (sizeof(fills) / sizeof(fills[0]))];
}

std::string node_class(const SvgMarks& marks, const std::string& id) {
    auto it = marks.klass.find(id);
    return it == marks.klass.end() ? "node" : "node " + it->second;
}

// The attributes the page's script reads: data-node, and data-nodes for a linked node.
std::string node_attrs(const SvgMarks& marks, const std::string& id) {
    std::string a = "class=\"" + node_class(marks, id) + "\" data-node=\"" +
                    html_escape(marks.prefix + id) + "\"";
    if (auto it = marks.links.find(id); it != marks.links.end())
        a += " data-nodes=\"" + html_escape(it->second) + "\"";
    return a;
}

// Runs `dot -Tsvg` on text; empty on failure.
std::string run_dot(const std::string& text) {
    namespace fs = std::filesystem;
    fs::path in = fs::temp_directory_path() / ("kiln-report-" + std::to_string(getpid()) + ".dot");
    { std::ofstream(in) << text; }
    std::string cmd = "dot -Tsvg '" + in.string() + "' 2>/dev/null";
    std::string out;
    if (FILE* p = popen(cmd.c_str(), "r")) {
        char buf[4096];
        size_t n;
        while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
        if (pclose(p) != 0) out.clear();
    }
    fs::remove(in);
    size_t start = out.find("<svg");
    return start == std::string::npos ? "" : out.substr(start);
}

std::string dot_quote(const std::string& s) {
    std::string out = "\"";
    for (char c : s)
        out += c == '\n'               ? std::string("\\n")
               : c == '"' || c == '\\' ? std::string("\\") + c
                                       : std::string(1, c);
    return out + "\"";
}

// The id graphviz gives a node's <g>, unique on the page.
std::string dot_id(const SvgMarks& marks, const std::string& id) {
    std::string out = "kn_";
    for (char c : marks.prefix + id) out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
    return out;
}

std::string graph_svg_dot(const GraphView& g, const SvgMarks& marks) {
    std::ostringstream dot;
    dot << "digraph G {\n  rankdir=TB; bgcolor=\"transparent\";\n"
        << "  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", fontsize=11];\n";
    for (const Node& n : g.nodes) {
        std::string label = label_of(n) + "\n" + detail_of(n);
        if (auto it = marks.note.find(n.id); it != marks.note.end()) label += "\n" + it->second;
        dot << "  " << dot_quote(n.id) << " [id=" << dot_quote(dot_id(marks, n.id))
            << ", label=" << dot_quote(label)
            << ", fillcolor=" << dot_quote(kernel_fill(marks, n.id)) << "];\n";
    }
    for (const Node& n : g.nodes)
        for (const std::string& in : n.inputs)
            if (g.find(in)) dot << "  " << dot_quote(in) << " -> " << dot_quote(n.id) << ";\n";
    dot << "}\n";
    std::string svg = run_dot(dot.str());
    if (svg.empty()) return "";
    // <g id="kn_n3" class="node"> -> with the data-node the page's script looks for.
    for (const Node& n : g.nodes) {
        std::string from = "<g id=\"" + html_escape(dot_id(marks, n.id)) + "\" class=\"node\">";
        size_t at = svg.find(from);
        if (at != std::string::npos)
            svg.replace(at, from.size(),
                        "<g id=\"" + html_escape(dot_id(marks, n.id)) + "\" " +
                            node_attrs(marks, n.id) + ">");
    }
    return svg;
}

}  // namespace

bool have_dot() {
    static const bool found = std::system("command -v dot >/dev/null 2>&1") == 0;
    return found;
}

std::string graph_svg(const GraphView& g, const SvgMarks& marks, Layout layout) {
    if (layout == Layout::dot || (layout == Layout::automatic && have_dot())) {
        std::string svg = graph_svg_dot(g, marks);
        if (!svg.empty()) return svg;
    }
    return graph_svg_builtin(g, marks);
}

// Sugiyama-style: each node's layer is one below its deepest input (longest path from the
// inputs); an edge that skips layers gets a waypoint in each layer it crosses, so it is routed
// between the boxes, not through them; within a layer, nodes and waypoints are ordered by the
// mean position of their predecessors, sweeping down twice, which untangles most of the
// crossings in kiln's small graphs.
LayeredLayout layered_layout(const GraphView& g) {
    LayeredLayout out;
    std::map<std::string, int> index;
    for (size_t i = 0; i < g.nodes.size(); ++i) {
        // Nodes come in topological order; an input not in the graph is not drawn.
        LayoutSlot slot{.node = int(i), .width = kNodeW};
        for (const std::string& in : g.nodes[i].inputs)
            if (auto it = index.find(in); it != index.end())
                slot.layer = std::max(slot.layer, out.slots[it->second].layer + 1);
        index[g.nodes[i].id] = int(i);
        out.slots.push_back(slot);
    }
    for (size_t i = 0; i < g.nodes.size(); ++i)
        for (const std::string& in : g.nodes[i].inputs) {
            auto it = index.find(in);
            if (it == index.end()) continue;
            std::vector<int> chain = {it->second};
            for (int l = out.slots[it->second].layer + 1; l < out.slots[i].layer; ++l) {
                out.slots.push_back(
                    {.node = -1, .layer = l, .preds = {chain.back()}, .width = kWaypointW});
                chain.push_back(int(out.slots.size()) - 1);
            }
            out.slots[i].preds.push_back(chain.back());
            chain.push_back(int(i));
            out.edges.push_back(chain);
        }
    int depth = 0;
    for (const LayoutSlot& s : out.slots) depth = std::max(depth, s.layer + 1);
    out.rows.resize(depth);
    for (size_t k = 0; k < out.slots.size(); ++k) out.rows[out.slots[k].layer].push_back(int(k));
    std::vector<double> pos(out.slots.size());
    for (auto& row : out.rows)
        for (size_t k = 0; k < row.size(); ++k) pos[row[k]] = double(k);
    for (int sweep = 0; sweep < 2; ++sweep)
        for (int r = 1; r < depth; ++r) {
            std::vector<std::pair<double, int>> keyed;
            for (int k : out.rows[r]) {
                double sum = 0;
                for (int p : out.slots[k].preds) sum += pos[p];
                const auto& preds = out.slots[k].preds;
                keyed.push_back({preds.empty() ? pos[k] : sum / double(preds.size()), k});
            }
            std::stable_sort(keyed.begin(), keyed.end(),
                             [](auto& a, auto& b) { return a.first < b.first; });
            for (size_t k = 0; k < keyed.size(); ++k)
                out.rows[r][k] = keyed[k].second, pos[keyed[k].second] = double(k);
        }
    auto row_width = [&](const std::vector<int>& row) {
        double w = -kGapX;
        for (int k : row) w += out.slots[k].width + kGapX;
        return std::max(w, 0.0);
    };
    double widest = 1;
    for (auto& row : out.rows) widest = std::max(widest, row_width(row));
    out.width = widest + 2 * kMargin;
    out.height = std::max(1.0, depth * double(kNodeH + kGapY) - kGapY + 2 * kMargin);
    for (int r = 0; r < depth; ++r) {
        double x = (out.width - row_width(out.rows[r])) / 2;  // each row centred
        for (int k : out.rows[r]) {
            out.slots[k].x = x, out.slots[k].y = kMargin + r * double(kNodeH + kGapY);
            x += out.slots[k].width + kGapX;
        }
    }
    return out;
}

namespace {

// An edge's path: a curve from each slot's bottom to the next one's top, straight down
// through each waypoint.
std::string edge_path(const LayeredLayout& l, const std::vector<int>& chain) {
    std::ostringstream d;
    auto centre = [&](int k) { return l.slots[k].x + l.slots[k].width / 2; };
    double x = centre(chain[0]), y = l.slots[chain[0]].y + kNodeH;
    d << "M" << x << "," << y;
    for (size_t i = 1; i < chain.size(); ++i) {
        double x2 = centre(chain[i]), y2 = l.slots[chain[i]].y, mid = (y + y2) / 2;
        d << " C" << x << "," << mid << " " << x2 << "," << mid << " " << x2 << "," << y2;
        x = x2, y = y2;
        if (i + 1 < chain.size()) d << " L" << x << "," << (y += kNodeH);
    }
    return d.str();
}

}  // namespace

std::string graph_svg_builtin(const GraphView& g, const SvgMarks& marks) {
    const LayeredLayout l = layered_layout(g);
    static int drawn = 0;  // one arrow marker per SVG: ids stay unique on a page with several
    const std::string arrow = "arrow" + std::to_string(++drawn);
    std::ostringstream svg;
    svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"graph builtin\" width=\"" << l.width
        << "\" height=\"" << l.height << "\" viewBox=\"0 0 " << l.width << " " << l.height
        << "\">\n"
        << "<defs><marker id=\"" << arrow
        << "\" viewBox=\"0 0 10 10\" refX=\"10\" refY=\"5\" markerWidth=\"7\" markerHeight=\"7\" "
           "orient=\"auto\">"
        << "<path d=\"M0,0 L10,5 L0,10 z\" fill=\"#6b7280\"/></marker></defs>\n";
    for (const std::vector<int>& chain : l.edges)
        svg << "<path class=\"edge\" d=\"" << edge_path(l, chain)
            << "\" fill=\"none\" stroke=\"#6b7280\" marker-end=\"url(#" << arrow << ")\"/>\n";
    for (size_t i = 0; i < g.nodes.size(); ++i) {
        const Node& n = g.nodes[i];
        bool is_output = std::find(g.outputs.begin(), g.outputs.end(), n.id) != g.outputs.end();
        svg << "<g " << node_attrs(marks, n.id) << " transform=\"translate(" << l.slots[i].x << ","
            << l.slots[i].y << ")\">"
            << "<title>" << html_escape(label_of(n) + (n.line.empty() ? "" : " (" + n.line + ")"))
            << "</title>"
            << "<rect width=\"" << kNodeW << "\" height=\"" << kNodeH << "\" rx=\"6\" fill=\""
            << kernel_fill(marks, n.id) << "\" stroke=\"" << (is_output ? "#111827" : "#9ca3af")
            << "\" stroke-width=\"" << (is_output ? 2 : 1) << "\"/>"
            << "<text x=\"8\" y=\"17\" class=\"op\">" << html_escape(label_of(n)) << "</text>";
        std::string second = detail_of(n);
        if (auto it = marks.note.find(n.id); it != marks.note.end()) second = it->second;
        svg << "<text x=\"8\" y=\"35\" class=\"shape\">" << html_escape(second) << "</text></g>\n";
    }
    svg << "</svg>\n";
    return svg.str();
}

}  // namespace kiln::report
