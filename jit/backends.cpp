// The backend registry and the eager backend (the graph interpreter).
#include "jit/backends.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <utility>
#include <optional>
#include <array>

#include "autograd/node.h"
#include "jit/aot/aot.h"

namespace kiln::jit {
namespace {

struct Registry {
    std::mutex mu;
    std::map<std::string, BackendFn> backends;
};

CompiledFn eager_backend(const Graph& graph, std::span<const Tensor>) {
    return [&graph, plan = release_plan(graph)](std::span<const Tensor> inputs) { return interpret(graph, inputs, &plan); };
}

Registry& registry() {
    static Registry* r = [] {
        auto* reg = new Registry;
        reg->backends["eager"] = eager_backend;
        reg->backends["aot_eager"] = aot::aot_eager_backend;
        // Until codegen registers itself, inductor is AOT autograd with interpreted halves.
        reg->backends["inductor"] = aot::aot_eager_backend;
        return reg;
    }();
    return *r;
}

// Runs one call node; up to 3 inputs live on the stack (no allocation on the hot path).
Tensor run_call(const Graph& g, const Node& n, std::span<const int64_t> syms, std::span<const Tensor> vals) {
    Attrs scratch;
    const Attrs& attrs = g.attrs(n, syms, scratch);
    std::optional<autograd::NoGradGuard> no_grad;
    if (!n.grad_enabled && autograd::grad_enabled()) no_grad.emplace();
    if (n.args.size() <= 3) {
        std::array<Tensor, 3> in;
        for (size_t i = 0; i < n.args.size(); ++i) in[i] = vals[n.args[i]];
        return dispatch(n.op, std::span<const Tensor>(in.data(), n.args.size()), attrs);
    }
    std::vector<Tensor> in;
    for (int a : n.args) in.push_back(vals[a]);
    return dispatch(n.op, in, attrs);
}

thread_local BackendOptions t_backend_options;

}  // namespace

const BackendOptions& backend_options() { return t_backend_options; }

void register_backend(const std::string& name, BackendFn factory) {
    std::lock_guard lock(registry().mu);
    registry().backends[name] = std::move(factory);
}

bool has_backend(const std::string& name) {
    std::lock_guard lock(registry().mu);
    return registry().backends.count(name) > 0;
}

std::vector<std::string> list_backends() {
    std::lock_guard lock(registry().mu);
    std::vector<std::string> names;
    for (const auto& [n, f] : registry().backends) names.push_back(n);
    return names;
}

namespace {
struct Reporters {
    std::mutex mu;
    std::vector<BackendReporter> list;
};
Reporters& reporters() {
    static Reporters* r = new Reporters;  // leaked: explain may run during static destruction
    return *r;
}
}  // namespace

void register_backend_reporter(BackendReporter reporter) {
    std::lock_guard lock(reporters().mu);
    reporters().list.push_back(std::move(reporter));
}

BackendReport backend_report(const Graph& graph) {
    std::vector<BackendReporter> list;
    {
        std::lock_guard lock(
            reporters().mu);  // not held while a reporter runs (it takes its own lock)
        list = reporters().list;
    }
    BackendReport all;
    for (const BackendReporter& r : list) {
        BackendReport one = r(graph);
        all.notes.insert(all.notes.end(), one.notes.begin(), one.notes.end());
        all.choices.insert(all.choices.end(), one.choices.begin(), one.choices.end());
    }
    return all;
}

CompiledFn backend_compile(const Backend& backend, std::shared_ptr<const Graph> graph,
                           std::span<const Tensor> examples, const BackendOptions& options) {
    BackendFn factory = backend.fn;
    if (!factory) {
        std::lock_guard lock(registry().mu);
        auto it = registry().backends.find(backend.name);
        KILN_CHECK(it != registry().backends.end(), "compile: unknown backend '", backend.name,
                   "'; register it with jit::register_backend or pass a callback");
        factory = it->second;
    }
    struct Scope {  // restores the caller's options even if the factory throws
        BackendOptions saved = t_backend_options;
        ~Scope() { t_backend_options = saved; }
    } scope;
    t_backend_options = options;
    CompiledFn fn = factory(*graph, examples);
    KILN_CHECK(fn != nullptr, "compile: backend '", backend.name, "' returned nothing runnable");
    // The compiled function may refer to the graph: keep it alive alongside.
    return [graph, fn = std::move(fn)](std::span<const Tensor> in) { return fn(in); };
}

namespace {
thread_local std::span<Tensor> t_handed_over;
}

InputHandOver::InputHandOver(std::span<Tensor> inputs) { t_handed_over = inputs; }
InputHandOver::~InputHandOver() { t_handed_over = {}; }

std::span<Tensor> take_handed_over(std::span<const Tensor> inputs) {
    if (inputs.empty() || t_handed_over.data() != inputs.data() || t_handed_over.size() != inputs.size()) return {};
    return std::exchange(t_handed_over, {});
}

ReleasePlan release_plan(const Graph& graph) {
    const auto& nodes = graph.nodes();
    std::vector<size_t> last(nodes.size(), 0);
    std::vector<bool> read(nodes.size(), false);
    for (size_t i = 0; i < nodes.size(); ++i)
        for (int a : nodes[i].args) last[size_t(a)] = i, read[size_t(a)] = true;
    for (int o : graph.outputs()) last[size_t(o)] = nodes.size(), read[size_t(o)] = true;
    ReleasePlan plan(nodes.size());
    for (size_t v = 0; v < nodes.size(); ++v)
        if (read[v] && last[v] < nodes.size()) plan[last[v]].push_back(int(v));
    return plan;
}

std::vector<Tensor> interpret(const Graph& graph, std::span<const Tensor> inputs, const ReleasePlan* release) {
    KILN_CHECK(int(inputs.size()) == graph.num_inputs(), "graph: expected ", graph.num_inputs(), " inputs, got ", inputs.size());
    const auto& nodes = graph.nodes();
    std::vector<int64_t> syms = graph.num_symbols() ? graph.bind_symbols(inputs) : std::vector<int64_t>{};
    std::array<Tensor, 16> small;  // small graphs: no allocation for the values
    std::vector<Tensor> big(nodes.size() > small.size() ? nodes.size() : 0);
    std::span<Tensor> vals = big.empty() ? std::span<Tensor>(small.data(), nodes.size()) : std::span<Tensor>(big);
    std::span<Tensor> owned = release ? take_handed_over(inputs) : std::span<Tensor>();
    for (size_t i = 0; i < nodes.size(); ++i) {
        const Node& n = nodes[i];
        switch (n.kind) {
            case NodeKind::placeholder:
                vals[i] = inputs[i];
                if (!owned.empty()) owned[i] = Tensor();  // vals drops it after its last reader
                break;
            case NodeKind::call: vals[i] = run_call(graph, n, syms, vals); break;
            case NodeKind::detach: vals[i] = vals[n.args[0]].detach(); break;
            case NodeKind::output: break;
        }
        if (release)
            for (int v : (*release)[i]) vals[size_t(v)] = Tensor();
    }
    std::vector<Tensor> out;
    out.reserve(graph.outputs().size());
    for (int o : graph.outputs()) out.push_back(vals[o]);
    return out;
}

}  // namespace kiln::jit
