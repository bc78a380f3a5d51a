// jit::trace: the TorchScript-trace analogue. Records the one path fn takes on the
// example inputs into one Graph, with no guards and no breaks: values read by host code
// are baked in as they were. Kept to show why compile needs guards and branch points:
// on data-dependent control flow a trace is silently wrong.
#pragma once
#include <iostream>
#include <optional>

#include "jit/compile.h"

namespace kiln::jit {

struct OneGraph {
    std::shared_ptr<const Graph> graph;
    std::vector<int> input_args;       // per placeholder: tensor-argument ordinal, or -1 (constant)
    std::vector<Tensor> constants;     // per placeholder: the lifted tensor (when input_args is -1)
    std::vector<BreakInfo> escapes;    // what trace ignored
};

struct OneGraphOptions {
    bool fail_on_escape = false;  // export: an escape is an error; trace: its value is baked in
    std::vector<std::string> arg_names;
    std::string caller = "export";                  // the API, named by its errors
    std::string fn_name = "fn";                     // the user's function, named by its errors
    std::optional<BreakInfo>* failed_at = nullptr;  // set to the escape before the error is thrown
};

// Runs `host` once, recording every op into one graph. At an escape: ignore it (trace)
// or fail with the break's reason and location (export).
OneGraph record_one_graph(const Args& args, const HostFn& host, const OneGraphOptions& options);
std::vector<Tensor> run_one_graph(const OneGraph& g, const Args& args);

// PyTorch's TracerWarning for a value a trace baked in (a tensor used as a bool, read as a
// number or as values), with its site and `language` ("C++", "Python"): "" for other
// escapes, and for a site that already warned in this process (once per site, as
// Python's warnings do).
std::string trace_warning(const BreakInfo& escape, const std::string& language);

template <class Sig>
class Traced;
template <class R, class... A>
class Traced<R(A...)> {
   public:
    explicit Traced(OneGraph g) : g_(std::make_shared<OneGraph>(std::move(g))) {}
    R operator()(A... a) const {
        Args args;
        int pos = 0;
        (flatten_arg(args, a, ArgPath{.position = pos++}), ...);
        return unflatten_result<R>(run_one_graph(*g_, args));
    }
    const Graph& graph() const { return *g_->graph; }
    const std::vector<BreakInfo>& ignored_escapes() const { return g_->escapes; }

   private:
    std::shared_ptr<const OneGraph> g_;
};

template <class F, class... T>
auto trace(F&& fn, T&&... example_args) {
    using Sig = typename fn_traits<std::remove_cvref_t<std::remove_pointer_t<std::decay_t<F>>>>::sig;
    std::function<Sig> f(std::forward<F>(fn));
    Args args;
    int pos = 0;
    (flatten_arg(args, example_args, ArgPath{.position = pos++}), ...);
    OneGraph g = record_one_graph(args, [&] { return flatten_result(f(example_args...)); },
                                  {.caller = "jit::trace"});
    for (const BreakInfo& e : g.escapes) std::cerr << trace_warning(e, "C++");
    return Traced<Sig>(std::move(g));
}

}  // namespace kiln::jit
