// The tracer: record-while-executing, graph breaks at escapes, replay with verification.
// The Tracer class is in jit/tracer_state.h; its replay half in jit/tracer_replay.cpp.
#include "jit/tracer.h"

#include <string>
#include <utility>

#include "jit/tracer_state.h"

namespace kiln::jit {

BreakInfo describe_escape(Escape kind, const std::source_location& loc) {
    BreakInfo b{.kind = kind};
    std::string fn = loc.function_name();
    if (const HostSiteFn& site = host_site()) {
        b.location = site();
    } else if (kind == Escape::bool_conversion && fn.find("operator bool") != std::string::npos) {
        b.location = "unknown line (Tensor::operator bool cannot see its caller)";
    } else {
        b.location = std::string(loc.file_name()) + ":" + std::to_string(loc.line()) + " in " + fn;
    }
    switch (kind) {
        case Escape::bool_conversion:
            b.reason = "data-dependent branch: a tensor was used as a bool (operator bool)";
            b.hint = "kiln keeps one branch per outcome; use where() to stay in one graph, or wrap the "
                     "condition in jit::cond(t) to record its line";
            break;
        case Escape::item:
            b.reason =
                "item(): a host read of a tensor's value (the host code goes on with the number)";
            b.hint = "host code now depends on data, so fn re-runs on every call; keep the value a tensor to stay in one graph";
            break;
        case Escape::data_access:
            b.reason =
                "a host read of a tensor's values (tolist, to_vector, data_ptr): the host code "
                "goes on with them";
            b.hint = "the host code cannot be recorded, so fn re-runs on every call with its graphs served from the cache";
            break;
        case Escape::print:
            b.reason = "printing a tensor: a host read of its values";
            b.hint =
                "fn re-runs on every call, so the print happens every call; print outside fn to "
                "stay in one graph";
            break;
        case Escape::backward:
            b.reason = "backward(): the autograd engine runs (and writes .grad) outside the graph";
            b.hint = "fn re-runs on every call, so backward, .grad writes and optimizer steps happen every call; the "
                     "graphs before and after it are compiled (the backward itself runs the compiled backward graphs)";
            break;
        case Escape::autograd_function:
            b.reason =
                "autograd Function apply() with an input that needs grad: its backward is user "
                "code the "
                "graph cannot hold, so the Function runs eagerly between two graphs";
            b.hint =
                "fn re-runs on every call, so the Function's forward runs and its node is on the "
                "tape every call; "
                "the graphs before and after it are compiled";
            break;
    }
    return b;
}

bool cond(const Tensor& t, std::source_location loc) {
    KILN_CHECK(t.numel() == 1, "jit::cond: a Tensor with ", t.numel(), " elements is ambiguous as a condition (shape ", t.shape(), ")");
    report_escape(t, Escape::bool_conversion, loc);
    return truth_value(t);
}

namespace {

HostSiteFn& host_site_slot() {
    static thread_local HostSiteFn site;
    return site;
}

}  // namespace

const HostSiteFn& host_site() { return host_site_slot(); }
HostSiteScope::HostSiteScope(HostSiteFn site)
    : prev_(std::exchange(host_site_slot(), std::move(site))) {}
HostSiteScope::~HostSiteScope() { host_site_slot() = std::move(prev_); }

namespace {

struct HookScope {
    DispatchHook* prev;
    explicit HookScope(DispatchHook* h) : prev(dispatch_hook()) { set_dispatch_hook(h); }
    ~HookScope() { set_dispatch_hook(prev); }
};

}  // namespace

using tracing::Tracer;


std::vector<Tensor> trace_entry(Entry& entry, const Args& args, const std::vector<int64_t>& syms,
                                const TraceConfig& cfg, const HostFn& host, TraceStats& stats) {
    Tracer tracer(entry, args, syms, cfg, stats);
    std::vector<Tensor> results;
    {
        HookScope scope(&tracer);
        struct Observe {  // fn's size reads reach the tracer while it has symbols to pin
            bool prev = detail::t_observe_sizes;
            ~Observe() { detail::t_observe_sizes = prev; }
        } observe;
        detail::t_observe_sizes = !syms.empty();
        results = host();
    }
    tracer.finish(results);
    return results;
}

}  // namespace kiln::jit
