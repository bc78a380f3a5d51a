// Backends turn a recorded Graph into something runnable (docs/jit.md). They register
// by name; "eager" interprets the graph op by op through the dispatcher, so autograd's
// tape records as usual. A user callback gets the Graph and example inputs.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "jit/graph.h"

namespace kiln::jit {

// Runs a compiled graph: inputs in placeholder order, outputs in output order.
using CompiledFn = std::function<std::vector<Tensor>(std::span<const Tensor> inputs)>;
using BackendFn = std::function<CompiledFn(const Graph& graph, std::span<const Tensor> example_inputs)>;

// A backend by name ("eager", "aot_eager", "inductor") or a user callback.
struct Backend {
    std::string name = "inductor";
    BackendFn fn;  // set for user callbacks
    Backend() = default;
    Backend(const char* n) : name(n) {}
    Backend(std::string n) : name(std::move(n)) {}
    Backend(BackendFn f) : name("custom"), fn(std::move(f)) {}
    template <class F>
        requires std::is_invocable_r_v<CompiledFn, F, const Graph&, std::span<const Tensor>>
    Backend(F f) : name("custom"), fn(std::move(f)) {}
};

// The compile() options a backend may read, through backend_options(), while its factory
// runs: a thread-local set by backend_compile, so BackendFn keeps its two-argument shape
// and user callbacks need not know about it. A backend that compiles lazily copies it.
struct BackendOptions {
    bool async_compile = false;   // build in the background; interpret until it is ready
    std::string mode = "default";
    bool choose_faster = true;  // inductor: per graph, keep the faster of its kernels and eager
};
const BackendOptions& backend_options();

void register_backend(const std::string& name, BackendFn factory);
bool has_backend(const std::string& name);
std::vector<std::string> list_backends();
// Compiles `graph` with `backend`; the graph stays alive as long as the result.
CompiledFn backend_compile(const Backend& backend, std::shared_ptr<const Graph> graph, std::span<const Tensor> example_inputs,
                           const BackendOptions& options = {});

// What a backend says about a graph it was handed, for explain: `notes`, the nodes it left to
// their eager kernels and why ("Not fused"); `choices`, what it chose to run, measured on the
// first calls ("Backend choice"). A backend keeps its own records (the inductor: in
// codegen::CompiledGraphInfo) and registers a reporter that reads them; explain asks every
// reporter about each graph. jit never includes a backend, so the backend registers itself.
struct BackendReport {
    std::vector<std::string> notes;
    std::vector<std::string> choices;
};
using BackendReporter = std::function<BackendReport(const Graph& graph)>;
void register_backend_reporter(BackendReporter reporter);
BackendReport backend_report(const Graph& graph);  // every reporter's lines, in registration order

// AOT's backward hands the saved tensors over to the compiled backward when the backward
// does not retain the graph: a runner called with exactly the handed-over span may move the
// tensors out of it, so that each is freed after its last reader (eager autograd frees saved
// tensors node by node as well). Thread-local; the first runner to take them ends it.
class InputHandOver {
   public:
    explicit InputHandOver(std::span<Tensor> inputs);
    ~InputHandOver();
    InputHandOver(const InputHandOver&) = delete;
    InputHandOver& operator=(const InputHandOver&) = delete;
};
// `inputs` as tensors the caller may move from, when they were handed over; else empty.
std::span<Tensor> take_handed_over(std::span<const Tensor> inputs);

// The reference interpreter: every node through dispatch(), in order. With a release plan,
// each value is dropped after its last reader, so intermediates live only while needed (as
// in eager code whose handles die); without one, every value lives to the end of the call.
using ReleasePlan = std::vector<std::vector<int>>;  // per node: the values no later node or output reads
ReleasePlan release_plan(const Graph& graph);
std::vector<Tensor> interpret(const Graph& graph, std::span<const Tensor> inputs, const ReleasePlan* release = nullptr);

}  // namespace kiln::jit
