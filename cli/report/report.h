// `kiln report DIR [-o OUT]`: a static HTML site from a trace folder (KILN_TRACE=DIR,
// docs/trace.md): index.html lists the compiled functions in call order with their graphs,
// guards, breaks and recompiles; each graph gets a page (graph as SVG, generated source,
// schedule, passes before/after, stage timeline, node <-> line provenance) and each AOT
// graph a page (forward and backward side by side, saved tensors and their bytes).
// Everything is local: open OUT/index.html from disk, no server and no network.
#pragma once
#include <string>
#include <vector>

#include "cli/report/graph_svg.h"

namespace kiln::report {

struct ReportOptions {
    Layout layout = Layout::automatic;  // graphviz when installed, else the built-in layout
};

// Writes the report of the trace in dir into out (created if needed). Returns the files
// written, relative to out, index.html first. Throws kiln::Error for a missing folder or a
// malformed log line (naming the file and line).
std::vector<std::string> write_report(const std::string& dir, const std::string& out,
                                      const ReportOptions& options = {});

// Where write_report puts the report when no -o is given: DIR/report.
std::string default_report_dir(const std::string& dir);

}  // namespace kiln::report
