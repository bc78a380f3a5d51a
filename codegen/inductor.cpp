// The "inductor" backend: aot_compile() with a GraphCompiler that lowers each graph (or AOT
// half), schedules it, and builds it with the CPU code generator — now, or on a background
// thread with the interpreter serving calls until the kernels are loaded (async_compile).
#include "codegen/inductor.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <future>
#include <cstdlib>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "codegen/cpu_backend.h"
#include "codegen/cuda_backend.h"
#include "codegen/emit_cuda.h"
#include "codegen/fuse_conv.h"
#include "codegen/lower_graph.h"
#include "codegen/toolchain.h"
#include "jit/aot/aot.h"
#include "jit/log.h"

namespace kiln::codegen {
namespace {

struct Stats {
    std::atomic<int64_t> graphs{0}, graphs_interpreted{0}, builds{0}, calls_compiled{0}, calls_interpreted{0};
};
// Leaked on purpose, like the toolchain's state: a background build may outlive statics.
Stats& stats() {
    static Stats* s = new Stats;
    return *s;
}

struct InfoRegistry {
    std::mutex mu;
    int next_id = 0;
    CompiledGraphInfo last;
    std::map<const jit::Graph*, std::vector<CompiledGraphInfo>> by_graph;
};
InfoRegistry& infos() {
    static InfoRegistry* r = new InfoRegistry;
    return *r;
}

int next_graph_id() {
    std::lock_guard lock(infos().mu);
    return ++infos().next_id;
}

// Adds `info` under `owner`, or replaces the entry with the same id (a build that finished).
void record(const jit::Graph* owner, const CompiledGraphInfo& info) {
    std::lock_guard lock(infos().mu);
    auto& list = infos().by_graph[owner];
    auto it = std::find_if(list.begin(), list.end(), [&](const CompiledGraphInfo& i) { return i.id == info.id; });
    if (it != list.end()) *it = info;
    else list.push_back(info);
    if (infos().last.id <= info.id) infos().last = info;
}

// Stores a choice report in graph `id`'s info (replacing the one for its size class).
void record_choice(const jit::Graph* owner, int id, const ChoiceReport& r) {
    std::lock_guard lock(infos().mu);
    auto update = [&](CompiledGraphInfo& info) {
        auto it = std::find_if(info.choices.begin(), info.choices.end(),
                               [&](const ChoiceReport& c) { return c.size_class == r.size_class; });
        if (it != info.choices.end())
            *it = r;
        else
            info.choices.push_back(r);
    };
    if (auto it = infos().by_graph.find(owner); it != infos().by_graph.end())
        for (CompiledGraphInfo& info : it->second)
            if (info.id == id) update(info);
    if (infos().last.id == id) update(infos().last);
}

// Where the choice for graph `id` goes: its info, explain's "Backend choice", KILN_LOGS=choice.
OnChoiceReport report_choice(const jit::Graph* owner, int id) {
    // Reports come from calls, maybe of a backward half run after `owner` died: by uid.
    return [owner, uid = owner->uid(), id](const ChoiceReport& r) {
        record_choice(owner, id, r);
        char key[32];  // sorts graphs by id, then size classes
        std::snprintf(key, sizeof key, "%08d/%02d", id, r.size_class + 1);
        std::string line = "inductor graph " + std::to_string(id) + ": " + r.str();
        jit::set_backend_choice(uid, key, line);
        log_event("choice", line);
    };
}

// Why generated kernels are off although a graph has some: "" (they are not), "no C++
// compiler" ($CXX does not run), a compiler that timed out earlier in this process
// (toolchain.cpp stops running it; it still answers --version), or a bad setting.
std::string compiler_problem() {
    try {
        if (compiler_available()) return "";
    } catch (const Error& e) {  // a setting it cannot use, such as KILN_COMPILE_TIMEOUT_S=abc
        return std::string("the C++ toolchain is misconfigured: ") + e.what();
    }
    try {
        compiler_version();
    } catch (const Error&) {
        return "no C++ compiler";
    }
    return "the C++ compiler timed out earlier in this process";
}

// True the first time for each cause and compiler, so each warning is printed once.
bool first_warning(const std::string& cause) {
    static std::mutex mu;
    static std::set<std::string>* warned = new std::set<std::string>;  // leaked, like stats()
    const char* cxx = std::getenv("CXX");
    std::lock_guard lock(mu);
    return warned->insert(cause + '\0' + (cxx != nullptr ? cxx : "")).second;
}

// A graph interpreted for `problem` (from compiler_problem()). A timeout was already
// reported by the build it killed (build_failed), so it is never called "no compiler".
void warn_compiler_problem(const std::string& problem) {
    if (!first_warning(problem)) return;
    if (problem == "no C++ compiler")
        std::cerr << "kiln: warning: no C++ compiler found ($CXX, else c++): running graphs in the interpreter. "
                     "Install g++ or clang++, or point CXX at one, to get generated kernels.\n";
    else
        std::cerr << "kiln: warning: " << problem << (problem.find("timed out") != std::string::npos ? " ($KILN_COMPILE_TIMEOUT_S)" : "")
                  << ": running graphs in the interpreter.\n";
}

// A build of graph `id` threw. A compiler that timed out or is missing is a problem of the
// environment, warned once per cause (the next graphs skip the build: warn_compiler_problem
// stays quiet for a cause warned here); anything else is a kiln bug, warned every time.
void build_failed(int id, const Error& e, int64_t timeouts_before) {
    std::string problem = compiler_problem();
    if (problem.empty() && toolchain_stats().compiler_timeouts > timeouts_before)
        problem = "the C++ compiler timed out earlier in this process";  // $CXX changed since
    if (!problem.empty() && !first_warning(problem)) return;
    std::cerr << "kiln: warning: inductor could not build graph " << id << ", interpreting it instead:\n" << e.what() << "\n";
}

// Background builds: counted so that tests (and process exit) can wait for them.
struct AsyncJobs {
    std::mutex mu;
    std::condition_variable done;
    int pending = 0;
};
AsyncJobs& jobs() {
    static AsyncJobs* j = new AsyncJobs;
    return *j;
}

void launch(std::function<void()> job) {
    // A process that exits mid-build waits for it rather than unloading code under it.
    static struct WaitAtExit {
        ~WaitAtExit() { wait_for_async_compiles(); }
    } wait_at_exit;
    {
        std::lock_guard lock(jobs().mu);
        ++jobs().pending;
    }
    std::thread([job = std::move(job)] {
        job();
        std::lock_guard lock(jobs().mu);
        --jobs().pending;
        jobs().done.notify_all();
    }).detach();
}

// What a compiled graph's CompiledFn shares with its (maybe background) build.
struct BuildState {
    std::shared_ptr<const jit::Graph> graph;
    std::optional<CompiledCpuGraph> compiled;  // set once, before `ready` (CPU graphs)
    std::optional<CompiledCudaGraph> cuda;     // ... or this (CUDA graphs)
    bool reduce_overhead = false;              // mode="reduce-overhead": CUDA graphs replay `cuda`
    std::unique_ptr<CudaGraphReplay> replay;
    std::atomic<bool> ready{false};
    std::shared_future<void> built;  // a background build the first call waits for
};

jit::CompiledFn interpreted(std::shared_ptr<const jit::Graph> graph) {
    return [graph, plan = jit::release_plan(*graph)](std::span<const Tensor> inputs) {
        ++stats().calls_interpreted;
        return jit::interpret(*graph, inputs, &plan);
    };
}

int count_generated(const Schedule& s) {
    int n = 0;
    for (const Kernel& k : s.kernels) n += k.kind == KernelKind::pointwise || k.kind == KernelKind::row;
    return n;
}

// What plan_graph made of a graph, handed to the build as is: each stage runs once.
struct Plan {
    Schedule schedule;
    std::string source;
    Device device;
};

// The pipeline up to the source: lower -> fuse_conv -> schedule (with its epilogues) ->
// emit. On success fills info.schedule/source and returns the plan, else sets
// info.why_interpreted.
std::optional<Plan> plan_graph(const jit::Graph& graph, CompiledGraphInfo& info) {
    Lowered lowered = lower(graph);
    if (!lowered.graph) {
        info.why_interpreted = lowered.why_not;
        return std::nullopt;
    }
    ConvFusion fusion = fuse_conv(*lowered.graph);  // conv2d + its epilogue -> conv2d_fused
    lowered.graph = std::move(fusion.graph);
    info.conv_fusions = std::move(fusion.notes);
    try {
        Schedule s = schedule(*lowered.graph);
        info.schedule = s.print();
        info.generated_kernels = count_generated(s);
        for (const Kernel& k : s.kernels)
            if (k.kind == KernelKind::fallback)
                info.fallbacks.push_back(s.value_name(s.graph.nodes[k.nodes[0]].out.id) + ": " + k.why);
        if (info.generated_kernels == 0) {
            info.why_interpreted = "no kernel to generate (only views, matmuls and ops that run eagerly)";
            return std::nullopt;
        }
        info.cuda = lowered.graph->device.type == DeviceType::cuda;
        if (info.cuda) {  // NVRTC builds it: no C++ compiler needed
            info.source = emit_cuda(s);
        } else {
            if (std::string problem = compiler_problem(); !problem.empty()) {
                warn_compiler_problem(problem);
                info.why_interpreted = problem;
                return std::nullopt;
            }
            info.source = emit(s);
        }
        Device device = lowered.graph->device;
        return Plan{std::move(s), info.source, device};
    } catch (const Error& e) {
        info.why_interpreted = std::string("the scheduler refused it: ") + e.what();
        return std::nullopt;
    }
}

void dump(const CompiledGraphInfo& info) {
    std::string n = std::to_string(info.id);
    jit::debug_dump("graph_" + n + ".txt", info.graph);
    if (!info.schedule.empty()) jit::debug_dump("schedule_" + n + ".txt", info.schedule);
    std::string code_file = "output_code_" + n + (info.cuda ? ".cu" : ".cpp");
    if (!info.source.empty()) jit::debug_dump(code_file, info.source);
    std::string head = "inductor graph " + n + (info.interpreted ? " (interpreted: " + info.why_interpreted + ")" : "");
    log_event("schedule", head + ":\n" + info.graph + (info.schedule.empty() ? "" : "schedule:\n" + info.schedule));
    if (!info.source.empty()) log_event("code", code_file + ":\n" + info.source);
}

std::string milliseconds_since(std::chrono::steady_clock::time_point start) {
    char text[32];
    std::snprintf(text, sizeof text, "%.1f ms", std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    return text;
}

// The GraphCompiler: one graph (or AOT half) -> generated kernels, or the interpreter.
// `async`: build in the background and interpret until the kernels are loaded. `background`:
// build in the background and let the first call wait for it, so that an AOT forward and
// backward build at once (two compiler processes).
jit::CompiledFn compile_graph(const jit::Graph* owner, std::shared_ptr<const jit::Graph> graph,
                              const jit::BackendOptions& options, bool background) {
    bool async = options.async_compile, reduce_overhead = options.mode == "reduce-overhead";
    ++stats().graphs;
    CompiledGraphInfo info;
    info.id = next_graph_id();
    info.graph = graph->str();
    std::optional<Plan> plan = plan_graph(*graph, info);
    info.interpreted = !plan;
    record(owner, info);
    dump(info);
    for (const std::string& f : info.fallbacks)  // explain lists them under the graph the backend received
        jit::add_backend_note(owner, "inductor graph " + std::to_string(info.id) + ": " + f + " (runs its eager kernel)");
    for (const std::string& f : info.conv_fusions)  // the conv epilogues left as separate kernels
        if (f.find(": not fused") != std::string::npos)
            jit::add_backend_note(
                owner, "inductor graph " + std::to_string(info.id) + ": conv epilogue of " + f);
    if (!plan) {
        ++stats().graphs_interpreted;
        return interpreted(std::move(graph));
    }
    auto state = std::make_shared<BuildState>();
    state->graph = graph;
    state->reduce_overhead = reduce_overhead;
    auto build = [state, owner, info, plan = std::move(*plan)]() mutable {
        int64_t timeouts_before = toolchain_stats().compiler_timeouts;
        try {
            auto start = std::chrono::steady_clock::now();
            size_t nodes = plan.schedule.graph.nodes.size();
            if (plan.device.type == DeviceType::cuda) {
                state->cuda.emplace(build_cuda(std::move(plan.schedule), std::move(plan.source)));
                if (state->reduce_overhead) state->replay = std::make_unique<CudaGraphReplay>(*state->cuda);
            }
            else state->compiled.emplace(build_cpu(std::move(plan.schedule), std::move(plan.source)));
            if (log_enabled("compile"))
                log_event("compile", "inductor graph " + std::to_string(info.id) + ": " + std::to_string(nodes) +
                                         " nodes, kernels ready in " + milliseconds_since(start) +
                                         " (kernel cache or compiler, load)");
            ++stats().builds;
            state->ready.store(true, std::memory_order_release);
        } catch (const Error& e) {  // say so, keep running
            build_failed(info.id, e, timeouts_before);
            ++stats().graphs_interpreted;
            info.interpreted = true;
            info.why_interpreted = "the build failed";
            record(owner, info);
        }
    };
    // Checked before the build, so that a bad KILN_CHOOSE is an error of this compile.
    ChoiceOptions choice = choice_options_from_env();
    if (async) {
        launch(std::move(build));
    } else if (background && !info.cuda) {
        auto done = std::make_shared<std::promise<void>>();
        state->built = done->get_future().share();
        launch([build = std::move(build), done]() mutable {
            build();  // reports its own failure; the call then interprets
            done->set_value();
        });
    } else {
        build();
    }
    jit::CompiledFn generated = [state](std::span<const Tensor> inputs) {
        ++stats().calls_compiled;
        if (state->replay) return state->replay->run(inputs);
        return state->cuda ? state->cuda->run(inputs) : state->compiled->run(inputs);
    };
    // CUDA kernels are kept: timing them needs a device synchronize per call, which would
    // cost more than the choice could find (eager CUDA kernels launch one per op).
    if (options.choose_faster && choice.enabled && !info.cuda)
        generated = choose_faster(info.id, std::move(generated), interpreted(graph), choice,
                                  graph->num_symbols() > 0, report_choice(owner, info.id));
    return [state, generated = std::move(generated), id = info.id](
               std::span<const Tensor> inputs) -> std::vector<Tensor> {
        if (state->built.valid() && state->built.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
            auto start = std::chrono::steady_clock::now();
            state->built.wait();
            log_event("compile", "inductor graph " + std::to_string(id) + ": its call waited " + milliseconds_since(start) +
                                     " for the background build");
        }
        if (state->ready.load(std::memory_order_acquire)) return generated(inputs);
        ++stats().calls_interpreted;  // still building (async), or the build failed
        return jit::interpret(*state->graph, inputs);
    };
}

}  // namespace

jit::CompiledFn inductor_backend(const jit::Graph& graph, std::span<const Tensor> examples) {
    // The halves compile lazily (at the first call, the first backward): copy the options now.
    jit::BackendOptions options = jit::backend_options();
    const jit::Graph* owner = &graph;
    // backend_compile keeps `graph` alive as long as the result: a non-owning handle.
    std::shared_ptr<const jit::Graph> g(&graph, [](const jit::Graph*) {});
    // A training step's two halves build at once: the backward right after the forward, both
    // in the background (CPU), the forward's first call waiting for its own.
    return jit::aot::aot_compile(
        g, examples,
        [owner, options](std::shared_ptr<const jit::Graph> half, std::span<const Tensor>) {
            return compile_graph(owner, std::move(half), options, true);
        },
        true);
}

CompiledGraphInfo last_compiled() {
    std::lock_guard lock(infos().mu);
    return infos().last;
}

std::vector<CompiledGraphInfo> compiled_graphs(const jit::Graph* graph) {
    std::lock_guard lock(infos().mu);
    auto it = infos().by_graph.find(graph);
    return it == infos().by_graph.end() ? std::vector<CompiledGraphInfo>{} : it->second;
}

InductorStats inductor_stats() {
    Stats& s = stats();
    return {s.graphs.load(), s.graphs_interpreted.load(), s.builds.load(), s.calls_compiled.load(), s.calls_interpreted.load()};
}

void wait_for_async_compiles() {
    std::unique_lock lock(jobs().mu);
    jobs().done.wait(lock, [] { return jobs().pending == 0; });
}

}  // namespace kiln::codegen
