// The "inductor" backend: aot_compile() with a GraphCompiler that takes each graph (or AOT
// half) through the pipeline (codegen/pipeline.h: plan_graph, then build_plan) — the build
// now, or on a background thread with the interpreter serving calls until the kernels are
// loaded (async_compile) — and keeps what each stage reported (CompiledGraphInfo).
#include "codegen/inductor.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "codegen/pipeline.h"
#include "codegen/toolchain.h"
#include "jit/aot/aot.h"
#include "jit/log.h"
#include "jit/trace_log.h"

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

// What the backend made of each graph, by the uid of the Graph it was handed (Graph::uid():
// a backward half may report after that Graph died; a new one never takes its uid).
struct InfoRegistry {
    std::mutex mu;
    int next_id = 0;
    CompiledGraphInfo last;
    std::map<uint64_t, std::vector<CompiledGraphInfo>> by_graph;
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
void record(uint64_t owner, const CompiledGraphInfo& info) {
    std::lock_guard lock(infos().mu);
    auto& list = infos().by_graph[owner];
    auto it = std::find_if(list.begin(), list.end(), [&](const CompiledGraphInfo& i) { return i.id == info.id; });
    if (it != list.end()) *it = info;
    else list.push_back(info);
    if (infos().last.id <= info.id) infos().last = info;
}

// Stores a choice report in graph `id`'s info (replacing the one for its size class), where
// explain and `:code` read it; KILN_LOGS=choice prints it.
OnChoiceReport report_choice(uint64_t owner, int id) {
    return [owner, id](const ChoiceReport& r) {
        log_event("choice", "inductor graph " + std::to_string(id) + ": " + r.str());
        if (jit::trace_log::on())
            jit::trace_log::emit(
                "choice", jit::trace_log::Json().num("backend_graph", id).str("text", r.str()));
        std::lock_guard lock(infos().mu);
        auto update = [&](CompiledGraphInfo& info) {
            auto it =
                std::find_if(info.choices.begin(), info.choices.end(),
                             [&](const ChoiceReport& c) { return c.size_class == r.size_class; });
            if (it != info.choices.end())
                *it = r;
            else
                info.choices.push_back(r);
        };
        for (CompiledGraphInfo& info : infos().by_graph[owner])
            if (info.id == id) update(info);
        if (infos().last.id == id) update(infos().last);
    };
}

// explain's lines for a graph the inductor was handed (jit::register_backend_reporter): the
// nodes left to eager kernels and the conv epilogues not fused, and the kernels-or-eager
// choices sorted by graph id, then size class.
jit::BackendReport inductor_report(const jit::Graph& graph) {
    jit::BackendReport report;
    std::vector<std::pair<std::pair<int, int>, std::string>> choices;
    for (const CompiledGraphInfo& info : compiled_graphs(&graph)) {
        std::string head = "inductor graph " + std::to_string(info.id) + ": ";
        for (const std::string& f : info.fallbacks)
            report.notes.push_back(head + f + " (runs its eager kernel)");
        for (const std::string& f : info.conv_fusions)
            if (f.find(": not fused") != std::string::npos)
                report.notes.push_back(head + "conv epilogue of " + f);
        for (const ChoiceReport& c : info.choices)
            choices.push_back({{info.id, c.size_class}, head + c.str()});
    }
    std::sort(choices.begin(), choices.end());
    for (auto& [key, line] : choices) report.choices.push_back(std::move(line));
    return report;
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

// The graph as the backend received it (graph_N.txt: the pipeline's input; the stages write
// graph_N.<stage>.txt), and the "schedule" and "code" log events.
void dump(const CompiledGraphInfo& info) {
    std::string n = std::to_string(info.id);
    jit::debug_dump("graph_" + n + ".txt", info.graph);
    std::string head = "inductor graph " + n + (info.interpreted ? " (interpreted: " + info.why_interpreted + ")" : "");
    log_event("schedule", head + ":\n" + info.graph + (info.schedule.empty() ? "" : "schedule:\n" + info.schedule));
    if (!info.source.empty())
        log_event("code", "output_code_" + n + (info.cuda ? ".cu" : ".cpp") + ":\n" + info.source);
}

std::string milliseconds_since(std::chrono::steady_clock::time_point start) {
    char text[32];
    std::snprintf(text, sizeof text, "%.1f ms", std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    return text;
}

// The GraphCompiler: one graph (or AOT half) -> generated kernels, or the interpreter.
// `async`: build in the background and interpret until the kernels are loaded. `background`:
// build in the background and let the first call wait for it, so that an AOT forward and
// backward build at once (two compiler processes on the CPU; on CUDA two batches of NVRTC
// programs, and the forward's first run overlaps the backward's build).
jit::CompiledFn compile_graph(uint64_t owner, std::shared_ptr<const jit::Graph> graph,
                              const jit::BackendOptions& options, bool background) {
    bool async = options.async_compile, reduce_overhead = options.mode == "reduce-overhead";
    ++stats().graphs;
    CompiledGraphInfo info;
    info.id = next_graph_id();
    info.graph = graph->str();
    Plan plan = plan_graph(*graph, info.id);  // lower -> ... -> emit (codegen/pipeline.cpp)
    info.schedule = plan.schedule.print();
    info.source = plan.source;
    info.cuda = !plan.source.empty() && plan.device.type == DeviceType::cuda;
    info.generated_kernels = plan.generated_kernels;
    info.interpreted = !plan.buildable();
    info.why_interpreted = plan.why_interpreted;
    info.fallbacks = plan.fallbacks;
    info.conv_fusions = plan.conv_fusions;
    info.stages = plan.stages;
    record(owner, info);
    dump(info);
    if (jit::trace_log::on())
        jit::trace_log::backend_choice(
            graph->uid(), info.id,
            plan.buildable() ? "generated" : "interpreted: " + info.why_interpreted);
    if (!plan.buildable()) {
        ++stats().graphs_interpreted;
        return interpreted(std::move(graph));
    }
    auto state = std::make_shared<BuildState>();
    state->graph = graph;
    state->reduce_overhead = reduce_overhead;
    auto build = [state, owner, info, plan = std::move(plan)]() mutable {
        int64_t timeouts_before = toolchain_stats().compiler_timeouts;
        try {
            Built built =
                build_plan(std::move(plan), info.id);  // build + load (codegen/pipeline.cpp)
            state->compiled = std::move(built.cpu);
            state->cuda = std::move(built.cuda);
            if (state->cuda && state->reduce_overhead)
                state->replay = std::make_unique<CudaGraphReplay>(*state->cuda);
            info.stages.push_back(built.time);
            record(owner, info);
            ++stats().builds;
            state->ready.store(true, std::memory_order_release);
        } catch (const Error& e) {  // say so, keep running
            build_failed(info.id, e, timeouts_before);
            ++stats().graphs_interpreted;
            info.interpreted = true;
            info.why_interpreted = "the build failed";
            record(owner, info);
            if (jit::trace_log::on())
                jit::trace_log::backend_choice(state->graph->uid(), info.id,
                                               "interpreted: the build failed");
        }
    };
    // Checked before the build, so that a bad KILN_CHOOSE is an error of this compile.
    ChoiceOptions choice = choice_options_from_env();
    if (async) {
        launch(std::move(build));
    } else if (background) {
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
    auto ran = std::make_shared<std::atomic<bool>>(false);  // the first-call report's "first run"
    return [state, generated = std::move(generated), id = info.id,
            ran](std::span<const Tensor> inputs) -> std::vector<Tensor> {
        if (state->built.valid() && state->built.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
            auto start = std::chrono::steady_clock::now();
            state->built.wait();
            add_build_wait(
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
            log_event("compile", "inductor graph " + std::to_string(id) + ": its call waited " + milliseconds_since(start) +
                                     " for the background build");
        }
        if (state->ready.load(std::memory_order_acquire)) {
            if (ran->load(std::memory_order_relaxed) || ran->exchange(true))
                return generated(inputs);
            auto first = std::chrono::steady_clock::now();
            double accounted = accounted_stage_seconds();  // a CUDA graph may load its kernels now
            std::vector<Tensor> out = generated(inputs);
            double seconds =
                std::chrono::duration<double>(std::chrono::steady_clock::now() - first).count();
            add_stage_time(Stage::first_run,
                           std::max(0.0, seconds - (accounted_stage_seconds() - accounted)));
            return out;
        }
        ++stats().calls_interpreted;  // still building (async), or the build failed
        return jit::interpret(*state->graph, inputs);
    };
}

}  // namespace

jit::CompiledFn inductor_backend(const jit::Graph& graph, std::span<const Tensor> examples) {
    // The halves compile lazily (at the first call, the first backward): copy the options now.
    jit::BackendOptions options = jit::backend_options();
    static const bool reporting =
        (jit::register_backend_reporter(inductor_report), true);  // explain asks it
    (void)reporting;
    uint64_t owner = graph.uid();
    {
        std::lock_guard lock(infos().mu);  // a graph compiled again starts without reports
        infos().by_graph.erase(owner);
    }
    // backend_compile keeps `graph` alive as long as the result: a non-owning handle.
    std::shared_ptr<const jit::Graph> g(&graph, [](const jit::Graph*) {});
    // A training step's two halves build at once: the backward right after the forward, both
    // in the background (CPU and CUDA), the forward's first call waiting for its own.
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
    auto it = infos().by_graph.find(graph->uid());
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
