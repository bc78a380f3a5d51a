// The inductor's pipeline, read top to bottom: plan_graph runs each stage once, in order,
// and shows what it made (StageLog); build_plan turns the plan into loaded kernels.
#include "codegen/pipeline.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <mutex>
#include <set>

#include "codegen/channels_last.h"
#include "codegen/emit_cpp.h"
#include "codegen/emit_cuda.h"
#include "codegen/fuse_conv.h"
#include "codegen/lower_graph.h"
#include "codegen/toolchain.h"
#include "codegen/trace_codegen.h"
#include "jit/log.h"
#include "jit/trace_log.h"

namespace kiln::codegen {
namespace {

// Times the stages of one graph and shows what each made: KILN_LOGS=passes prints it,
// KILN_DEBUG_DIR keeps it as graph_N.<stage>.txt, KILN_TRACE logs it (a "stage" event). The
// text is made only when one of them is on, and its making is not counted in the stage's time.
class StageLog {
   public:
    StageLog(int id, uint64_t graph_uid)
        : id_(id), uid_(graph_uid), shown_(log_enabled("passes") || !jit::debug_dir().empty()) {}

    // Ends the stage that began at the previous done() (or at construction).
    void done(const std::string& stage, const std::function<std::string()>& output,
              std::string file = "") {
        double ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_)
                .count();
        times.push_back({stage, ms});
        bool traced = jit::trace_log::on();
        std::string text = shown_ || traced ? output() : "";
        if (traced) trace_stage(uid_, id_, stage, ms, text);
        if (shown_) {
            if (file.empty()) file = "graph_" + std::to_string(id_) + "." + stage + ".txt";
            jit::debug_dump(file, text);
            char head[160];
            std::snprintf(head, sizeof head, "inductor graph %d, stage %s: %.3f ms (%s)\n", id_,
                          stage.c_str(), ms, file.c_str());
            log_event("passes", head + text);
        }
        start_ = std::chrono::steady_clock::now();
    }

    // Starts the next stage now: what ran since the last done() is no stage's time.
    void restart() { start_ = std::chrono::steady_clock::now(); }

    std::vector<StageTime> times;

   private:
    int id_;
    uint64_t uid_;
    bool shown_;
    std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

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
    static std::set<std::string>* warned =
        new std::set<std::string>;  // leaked: builds may outlive statics
    const char* cxx = std::getenv("CXX");
    std::lock_guard lock(mu);
    return warned->insert(cause + '\0' + (cxx != nullptr ? cxx : "")).second;
}

// A graph interpreted for `problem` (from compiler_problem()). A timeout was already
// reported by the build it killed (build_failed), so it is never called "no compiler".
void warn_compiler_problem(const std::string& problem) {
    if (!first_warning(problem)) return;
    if (problem == "no C++ compiler")
        std::cerr << "kiln: warning: no C++ compiler found ($CXX, else c++): running graphs in the "
                     "interpreter. "
                     "Install g++ or clang++, or point CXX at one, to get generated kernels.\n";
    else
        std::cerr << "kiln: warning: " << problem
                  << (problem.find("timed out") != std::string::npos ? " ($KILN_COMPILE_TIMEOUT_S)"
                                                                     : "")
                  << ": running graphs in the interpreter.\n";
}

int count_generated(const Schedule& s) {
    int n = 0;
    for (const Kernel& k : s.kernels)
        n += k.kind == KernelKind::pointwise || k.kind == KernelKind::row;
    return n;
}

std::string lines(const std::vector<std::string>& notes) {
    std::string out;
    for (const std::string& n : notes) out += n + "\n";
    return out;
}

}  // namespace

Plan plan_graph(const jit::Graph& graph, int id) {
    Plan plan;
    plan.graph_uid = graph.uid();
    StageLog log(id, graph.uid());
    auto planned = [&] {  // the stages' times, kept and added to the first-call report
        plan.stages = log.times;
        double ms = 0;
        for (const StageTime& t : plan.stages) ms += t.ms;
        add_stage_time(Stage::planning, ms / 1e3);
    };
    auto interpreted = [&](std::string why) {  // nothing to build: the interpreter runs the graph
        plan.why_interpreted = std::move(why);
        planned();
        return std::move(plan);
    };
    // 0. lower: the JIT's Graph -> LGraph, ops over values of known shape (lower_graph.cpp).
    Lowered lowered = lower(graph);
    // A transposed GEMM result becomes the GEMM of the transposed operands (lower_graph.h).
    if (lowered.graph && lowered.graph->device.type == DeviceType::cpu)
        transpose_gemm_outputs(*lowered.graph);
    // Gradients of slices that tile a dim are one cat, not zeros scattered and added (lower_graph.h).
    if (lowered.graph) slice_backwards_to_cat(*lowered.graph);
    // Attention writes the heads-last layout its reader permutes to (lower_graph.h).
    if (lowered.graph) attention_heads_last(*lowered.graph);
    log.done("0_lowered", [&] {
        return lowered.graph ? lowered.graph->print() : "not lowered: " + lowered.why_not + "\n";
    });
    if (!lowered.graph) return interpreted(lowered.why_not);
    plan.device = lowered.graph->device;
    const bool cuda = plan.device.type == DeviceType::cuda;
    // 1. fuse_conv: a conv2d and the per-channel chain after it -> conv2d_fused (fuse_conv.cpp).
    ConvFusion fusion = fuse_conv(*lowered.graph);
    // The convolutions left (a training graph's, and their gradients) and the ops between them
    // on NHWC values (channels_last.cpp).
    if (std::string note = channels_last(fusion.graph).note(); !note.empty())
        fusion.notes.push_back(note);
    plan.conv_fusions = fusion.notes;
    log.done("1_conv_fused", [&] { return lines(fusion.notes) + fusion.graph.print(); });
    try {
        // 2. schedule: nodes grouped into kernels, each value given a home (schedule.cpp).
        plan.schedule = schedule(fusion.graph);
        log.done("2_schedule", [&] { return plan.schedule.print(); });
        // 3. fuse_epilogues: a CPU matmul's elementwise reader runs on its blocks of GEMM rows
        // (epilogue.cpp).
        plan.schedule = fuse_epilogues(std::move(plan.schedule));
        log.done("3_epilogues", [&] { return plan.schedule.print(); });
        if (jit::trace_log::on()) trace_schedule(graph.uid(), id, plan.schedule, plan.conv_fusions);
        const Schedule& s = plan.schedule;
        plan.generated_kernels = count_generated(s);
        for (const Kernel& k : s.kernels)
            if (k.kind == KernelKind::fallback)
                plan.fallbacks.push_back(s.value_name(s.graph.nodes[k.nodes[0]].out.id) + ": " +
                                         k.why);
        if (plan.generated_kernels == 0)
            return interpreted(
                "no kernel to generate (only views, matmuls and ops that run eagerly)");
        std::string problem = cuda ? "" : compiler_problem();  // NVRTC needs no C++ compiler
        if (!problem.empty()) {
            warn_compiler_problem(problem);
            return interpreted(problem);
        }
        // 4. emit(target): the schedule as SIMD C++ (emit_cpp.cpp) or CUDA C++ (emit_cuda.cpp).
        log.restart();  // the checks above are no stage's time
        plan.source = cuda ? emit_cuda(s) : emit(s);
        log.done(
            "4_emit", [&] { return plan.source; },
            "output_code_" + std::to_string(id) + (cuda ? ".cu" : ".cpp"));
        if (jit::trace_log::on()) trace_source(graph.uid(), id, s, plan.source, cuda);
    } catch (const Error& e) {
        return interpreted(std::string("the scheduler refused it: ") + e.what());
    }
    planned();
    return plan;
}

Built build_plan(Plan plan, int id) {
    StageLog log(id, plan.graph_uid);
    size_t nodes = plan.schedule.graph.nodes.size();
    Built built;
    // 5. build(target) + load: compiler or kernel cache, dlopen (cpu_backend.cpp, toolchain.cpp);
    // NVRTC or the cubin cache, module load (cuda_backend.cpp).
    if (plan.device.type == DeviceType::cuda)
        built.cuda.emplace(build_cuda(std::move(plan.schedule), std::move(plan.source)));
    else
        built.cpu.emplace(build_cpu(std::move(plan.schedule), std::move(plan.source)));
    log.done("5_build", [&] { return std::to_string(nodes) + " nodes: kernels loaded\n"; });
    built.time = log.times.back();
    if (log_enabled("compile")) {
        char text[200];
        if (built.cuda)
            std::snprintf(text, sizeof text,
                          "inductor graph %d: %zu nodes, kernels ready in %.1f ms (cubin cache or "
                          "NVRTC in %d programs at once, module load)",
                          id, nodes, built.time.ms, built.cuda->nvrtc_programs());
        else
            std::snprintf(text, sizeof text,
                          "inductor graph %d: %zu nodes, kernels ready in %.1f ms (kernel cache or "
                          "compiler, load)",
                          id, nodes, built.time.ms);
        log_event("compile", text);
    }
    return built;
}

void build_failed(int id, const Error& e, int64_t timeouts_before) {
    std::string problem = compiler_problem();
    if (problem.empty() && toolchain_stats().compiler_timeouts > timeouts_before)
        problem = "the C++ compiler timed out earlier in this process";  // $CXX changed since
    if (!problem.empty() && !first_warning(problem)) return;
    std::cerr << "kiln: warning: inductor could not build graph " << id
              << ", interpreting it instead:\n"
              << e.what() << "\n";
}

}  // namespace kiln::codegen
