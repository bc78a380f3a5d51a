// The report's page writers (cli/report/report.h), shared by render_index.cpp and
// render_graph.cpp.
#pragma once
#include <string>
#include <vector>

#include "cli/report/report.h"
#include "cli/report/trace_log.h"

namespace kiln::report {

struct RunPages {
    const TraceRun& run;
    std::string prefix;  // "" for a single process, "run2_" when the folder holds several
    std::string graph_page(const std::string& graph) const;
    std::string aot_page(const std::string& graph) const;
    const Function* function(int fn) const;
};

std::string page_begin(const std::string& title, const std::string& nav);
std::string page_end();
// Stage bars, one row per compile (where the compile time went).
std::string timeline_svg(const std::vector<const Compile*>& compiles, const RunPages& pages);
std::string bytes_text(double bytes);

std::string index_html(const std::vector<RunPages>& runs, const std::string& dir);
std::string graph_html(const RunPages& pages, const Compile& c, const ReportOptions& options);
std::string aot_html(const RunPages& pages, const Compile& c, const ReportOptions& options);

}  // namespace kiln::report
