// A graph as SVG for the report: graphviz `dot -Tsvg` when it is installed, else a built-in
// layered layout (longest-path layers, barycentre ordering). Each node is a
// <g class="node" data-node="ID"> so the page's script can link it to generated lines.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "cli/report/trace_log.h"

namespace kiln::report {

enum class Layout { automatic, dot, builtin };

struct SvgMarks {
    std::string prefix;  // before each data-node: "fw:" on a page with several graphs
    std::map<std::string, std::string>
        links;  // node id -> data-nodes: the ids a click on it selects
    std::map<std::string, std::string> note;    // node id -> an extra label line ("saved 4 KiB")
    std::map<std::string, std::string> klass;   // node id -> extra CSS class ("saved")
    std::map<std::string, std::string> kernel;  // node id -> kernel name (fill colour by kernel)
};

// Whether `dot` can be run (looked up once).
bool have_dot();
// The SVG element (no XML prolog) for g; `layout` automatic means dot when have_dot().
std::string graph_svg(const GraphView& g, const SvgMarks& marks, Layout layout);
// The built-in layout alone (tests check it whether or not dot is installed).
std::string graph_svg_builtin(const GraphView& g, const SvgMarks& marks);

// The built-in layout's geometry: one slot per graph node (the first g.nodes.size() slots, in
// the graph's order), then one per layer an edge skips (a waypoint it is routed through).
struct LayoutSlot {
    int node = -1;  // index in g.nodes; -1 for a waypoint
    int layer = 0;
    std::vector<int> preds;  // slots above it that connect to it
    double width = 0, x = 0, y = 0;
};
struct LayeredLayout {
    std::vector<LayoutSlot> slots;
    std::vector<std::vector<int>> rows;   // slot indices, left to right, per layer
    std::vector<std::vector<int>> edges;  // per edge: its slots from input to user
    double width = 0, height = 0;
};
LayeredLayout layered_layout(const GraphView& g);

}  // namespace kiln::report
