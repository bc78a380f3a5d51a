// The tracer: recording (shape-only or while executing), graph breaks at escapes, replay with
// verification.
// trace_entry runs fn under a Tracer (jit/tracer_state.h, which lists the files of its
// ideas); here too is the Tracer's own state: which slot or graph value each tensor is.
#include "jit/tracer.h"

#include <sstream>
#include <string>
#include <utility>

#include "jit/fake.h"
#include "jit/log.h"
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

namespace tracing {

Tracer::Tracer(Entry& e, const Args& args, const std::vector<int64_t>& syms, const TraceConfig& cfg,
               TraceStats& st)
    : e_(e), syms_(syms), cfg_(cfg), stats_(st) {
    int slot = 0;
    for (size_t i = 0; i < args.size(); ++i) {
        if (args[i].kind != ArgKind::tensor) continue;
        if (e_.root == nullptr && slot >= int(e_.slot_kinds.size()))
            e_.add_slot(SlotKind::argument);
        slot_arg_.push_back(&args[i]);
        slot_guard_.push_back(&e_.guards.args[i]);
        bind(args[i].tensor, RefKind::slot, slot++);
    }
    for (size_t s = 0; s < e_.held.size(); ++s)
        if (e_.held[s].defined()) bind(e_.held[s], RefKind::slot, int(s));
    if (e_.root) {
        cands_ = {e_.root.get()};
    } else {
        // a new entry: shape-only (jit/fake_record.cpp); on a GPU too unless
        // KILN_FAKE_TRACE_CUDA=0 (jit/fake.h, fake_trace_for)
        std::vector<Tensor> seen(e_.held.begin(), e_.held.end());
        for (const auto& a : args)
            if (a.kind == ArgKind::tensor) seen.push_back(a.tensor);
        fake_ = fake_trace_for(seen);
        start_record();
    }
}

void Tracer::host_effect(const std::string& what, const std::source_location& loc) {
    SizesUnobserved quiet;
    if (passthrough_ || in_eager_) return;
    mark_rerun(what + " at " + loc.file_name() + ":" + std::to_string(loc.line()));
}

void Tracer::guard_value(const std::string& what, std::function<int64_t()> read) {
    SizesUnobserved quiet;
    if (passthrough_ || in_eager_) return;
    for (const ValueGuard& g : e_.value_guards)
        if (g.what == what) return;
    int64_t v = read();
    e_.value_guards.push_back({what, std::move(read), v});
    log_event("guards", "guard added to " + cfg_.fn_name + " entry " + std::to_string(e_.id) +
                            ": " + what + " == " + std::to_string(v));
}

const Tracer::Ref* Tracer::resolve(const Tensor& t) {
    auto it = refs_.find(t.impl());
    if (it == refs_.end()) return nullptr;
    if (it->second.w.lock().get() != t.impl()) {  // a freed tensor's address, reused
        refs_.erase(it);
        return nullptr;
    }
    return &it->second;
}

void Tracer::bind(const Tensor& t, RefKind k, int id) {
    refs_[t.impl()] = Ref{t.impl_ptr(), k, id};
    if (k == RefKind::slot) slot_tensor_[id] = t;
}

Tensor Tracer::eager(OpId op, std::span<const Tensor> inputs, const Attrs& attrs) {
    in_eager_ = true;
    struct Reset {
        bool& f;
        ~Reset() { f = false; }
    } reset{in_eager_};
    return dispatch_eager(op, inputs, attrs);
}

void Tracer::go_eager(const std::string& why) {
    if (cfg_.fullgraph)
        fail("compile(fullgraph=true): ", cfg_.fn_name, " can't be captured whole: ", why);
    if (fake_) materialize(why);  // eager from here needs the values so far
    passthrough_ = true;
    e_.eager_reason = why;
    if (trace_log::on()) trace_log::runs_eagerly(&cfg_, e_.id, why);
    log_event("breaks", cfg_.fn_name + " entry " + std::to_string(e_.id) +
                            " runs eagerly from now on: " + why);
}

void Tracer::mark_rerun(const std::string& why) {
    e_.rerun = true;
    if (e_.rerun_reason.empty()) e_.rerun_reason = why;
}

std::string shape_str(const Tensor& t) {
    std::ostringstream os;
    kiln::operator<<(os, t.shape());
    return os.str();
}

}  // namespace tracing

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
