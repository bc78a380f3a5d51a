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

constexpr int kNodeW = 170, kNodeH = 46, kGapX = 30, kGapY = 56, kMargin = 16;

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
// inputs); within a layer, nodes are ordered by the mean position of their inputs, sweeping
// down twice, which untangles most of the crossings in kiln's small graphs.
std::string graph_svg_builtin(const GraphView& g, const SvgMarks& marks) {
    std::map<std::string, int> layer, index;
    for (size_t i = 0; i < g.nodes.size(); ++i) index[g.nodes[i].id] = int(i);
    // Nodes come in topological order; a forward reference (should not happen) counts as layer 0.
    int depth = 0;
    for (const Node& n : g.nodes) {
        int l = 0;
        for (const std::string& in : n.inputs)
            if (auto it = layer.find(in); it != layer.end()) l = std::max(l, it->second + 1);
        layer[n.id] = l;
        depth = std::max(depth, l + 1);
    }
    std::vector<std::vector<int>> rows(depth);
    for (size_t i = 0; i < g.nodes.size(); ++i) rows[layer[g.nodes[i].id]].push_back(int(i));
    std::vector<double> pos(g.nodes.size());
    for (auto& row : rows)
        for (size_t k = 0; k < row.size(); ++k) pos[row[k]] = double(k);
    for (int sweep = 0; sweep < 2; ++sweep) {
        for (int r = 1; r < depth; ++r) {
            std::vector<std::pair<double, int>> keyed;
            for (int i : rows[r]) {
                double sum = 0;
                int count = 0;
                for (const std::string& in : g.nodes[i].inputs)
                    if (auto it = index.find(in); it != index.end())
                        sum += pos[it->second], ++count;
                keyed.push_back({count ? sum / count : pos[i], i});
            }
            std::stable_sort(keyed.begin(), keyed.end(),
                             [](auto& a, auto& b) { return a.first < b.first; });
            for (size_t k = 0; k < keyed.size(); ++k)
                rows[r][k] = keyed[k].second, pos[keyed[k].second] = double(k);
        }
    }
    size_t widest = 1;
    for (auto& row : rows) widest = std::max(widest, row.size());
    const int width = int(widest) * (kNodeW + kGapX) - kGapX + 2 * kMargin;
    const int height = depth * (kNodeH + kGapY) - kGapY + 2 * kMargin;
    std::vector<double> x(g.nodes.size()), y(g.nodes.size());
    for (int r = 0; r < depth; ++r) {
        // Centre each row.
        double row_w = double(rows[r].size()) * (kNodeW + kGapX) - kGapX;
        double left = (width - row_w) / 2;
        for (size_t k = 0; k < rows[r].size(); ++k) {
            x[rows[r][k]] = left + double(k) * (kNodeW + kGapX);
            y[rows[r][k]] = kMargin + r * (kNodeH + kGapY);
        }
    }
    static int drawn = 0;  // one arrow marker per SVG: ids stay unique on a page with several
    const std::string arrow = "arrow" + std::to_string(++drawn);
    std::ostringstream svg;
    svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"graph builtin\" width=\"" << width
        << "\" height=\"" << std::max(height, 1) << "\" viewBox=\"0 0 " << width << " "
        << std::max(height, 1) << "\">\n"
        << "<defs><marker id=\"" << arrow
        << "\" viewBox=\"0 0 10 10\" refX=\"10\" refY=\"5\" markerWidth=\"7\" markerHeight=\"7\" "
           "orient=\"auto\">"
        << "<path d=\"M0,0 L10,5 L0,10 z\" fill=\"#6b7280\"/></marker></defs>\n";
    for (size_t i = 0; i < g.nodes.size(); ++i)
        for (const std::string& in : g.nodes[i].inputs) {
            auto it = index.find(in);
            if (it == index.end()) continue;
            double x1 = x[it->second] + kNodeW / 2.0, y1 = y[it->second] + kNodeH,
                   x2 = x[i] + kNodeW / 2.0, y2 = y[i];
            double mid = (y1 + y2) / 2;
            svg << "<path class=\"edge\" d=\"M" << x1 << "," << y1 << " C" << x1 << "," << mid
                << " " << x2 << "," << mid << " " << x2 << "," << y2
                << "\" fill=\"none\" stroke=\"#6b7280\" marker-end=\"url(#" << arrow << ")\"/>\n";
        }
    for (size_t i = 0; i < g.nodes.size(); ++i) {
        const Node& n = g.nodes[i];
        bool is_output = std::find(g.outputs.begin(), g.outputs.end(), n.id) != g.outputs.end();
        svg << "<g " << node_attrs(marks, n.id) << " transform=\"translate(" << x[i] << "," << y[i]
            << ")\">"
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
