// The tracer: runs fn once under a dispatch hook. Ops are recorded into a Graph, on fake
// tensors (shape-only: jit/fake_record.cpp) or, with KILN_FAKE_TRACE=0 and after an op with
// no shape rule, running eagerly as they are recorded; at an escape (operator bool, item,
// data access) the graph so far becomes a segment, runs, and recording continues in a new
// one. Where the entry already has segments, the tracer *replays*: it checks each op against
// the recording and only records what is new (a branch outcome not seen before).
#pragma once
#include <functional>

#include "jit/program.h"

namespace kiln::jit {

struct TraceConfig {
    Backend backend;
    bool fullgraph = false;
    std::vector<std::string> arg_names;
    std::string fn_name = "fn";
    BackendOptions backend_options;  // passed to the backend as it compiles each graph
};

struct TraceStats {
    int graphs_compiled = 0;  // new segments with ops, compiled by the backend
    int breaks = 0;           // new graph breaks recorded
};

using HostFn = std::function<std::vector<Tensor>()>;

// Runs `host` (fn applied to `args`) under the tracer, grafting new segments onto `entry`;
// `syms` are the symbol values bound by the entry's guards. Returns fn's results.
std::vector<Tensor> trace_entry(Entry& entry, const Args& args, const std::vector<int64_t>& syms,
                                const TraceConfig& cfg, const HostFn& host, TraceStats& stats);

// Where the user's code is when it is not C++: the script interpreter sets its current
// line ("demo.ks:3 in f") while it runs fn, and escapes name that instead of the C++ line
// that reported them. Per thread; scopes nest.
using HostSiteFn = std::function<std::string()>;
const HostSiteFn& host_site();
class HostSiteScope {
   public:
    explicit HostSiteScope(HostSiteFn site);
    ~HostSiteScope();
    HostSiteScope(const HostSiteScope&) = delete;
    HostSiteScope& operator=(const HostSiteScope&) = delete;

   private:
    HostSiteFn prev_;
};

// Describes an escape as a graph break: reason, "file:line in function" (or the host
// site), hint.
BreakInfo describe_escape(Escape kind, const std::source_location& loc);

// `if (jit::cond(t))`: operator bool with the caller's line recorded for explain/fullgraph.
bool cond(const Tensor& t, std::source_location loc = std::source_location::current());

}  // namespace kiln::jit
