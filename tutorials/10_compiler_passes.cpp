// Lesson 10: the compiler's passes — one graph, printed after each stage.
//
// Mirrors the walk-through's "Backend: compile and optimize computation graph" and
// Inductor's lowering and scheduling, which the tutorials describe but never print. The
// graph is a ResNet basic block (models/resnet.h) and a GPT attention block
// (models/gpt.h), in eval mode, compiled together, so the graph holds convolutions with
// batch norm and a residual add, layernorms, matmuls with bias and GELU, and a softmax.
// The inductor's pipeline (codegen/pipeline.cpp, docs/codegen.md) takes it through:
//   1. lowering   jit::Graph -> LGraph: call nodes become ops over values of known shape
//                 (codegen/lower_graph.h);
//   2. conv fusion  a conv2d and the per-channel math, residual add and relu after it
//                 become one conv2d_fused node, run as oneDNN post-ops (codegen/fuse_conv.h);
//   3. scheduling   nodes grouped into kernels: pointwise chains fuse into one loop,
//                 reductions with what feeds and follows them into row kernels; matmuls
//                 are blas kernels; each value gets a home (codegen/schedule.h);
//   4. epilogues    the pointwise kernel right after a matmul runs on each block of GEMM
//                 rows while it is in cache (codegen/epilogue.cpp);
//   5. emission     the schedule written as one C++ translation unit (codegen/emit_cpp.h).
// The lesson runs each stage itself, on the graph the JIT handed to the backend, and says
// what changed (KILN_LOGS=passes prints each stage's output and time for any graph). Then it switches passes off, the way a student can from the shell
// (docs/env.md), and compares kernels, memory traffic and time:
//   KILN_CONV_FUSE=0 build/tutorial_10_compiler_passes   # the walk-through without stage 2
//   KILN_EPILOGUE=0  build/tutorial_10_compiler_passes   # ... without stage 4
// Timings are printed, never checked.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "codegen/emit_cpp.h"
#include "codegen/fuse_conv.h"
#include "codegen/lower_graph.h"
#include "codegen/schedule.h"
#include "kiln.h"
#include "models/gpt.h"
#include "models/resnet.h"

using namespace kiln;
using namespace kiln::codegen;

namespace {

// The two blocks as one function: one graph for the backend.
std::tuple<Tensor, Tensor> blocks(nn::Module& res_block, nn::Module& attn_block, Tensor image,
                                  Tensor seq) {
    return {res_block.forward(image), attn_block.forward(seq)};
}

// An LGraph, one line per node: "conv2d_7 float32[2, 16, 8, 8] = conv2d(image_0, w_1)".
std::map<int, std::string> value_names(const LGraph& g) {
    std::map<int, std::string> names;
    for (const LValue& v : g.inputs)
        names[v.id] = (v.name.empty() ? "in" : v.name) + "_" + std::to_string(v.id);
    for (const LNode& n : g.nodes)
        names[n.out.id] = (n.out.name.empty() ? std::string(op_info(n.op).name) : n.out.name) +
                          "_" + std::to_string(n.out.id);
    return names;
}
std::string node_text(const LGraph& g, const LNode& n) {
    std::map<int, std::string> names = value_names(g);
    std::ostringstream os;
    os << names[n.out.id] << " " << n.out.dtype << n.out.shape << " = " << op_info(n.op).name
       << "(";
    for (size_t i = 0; i < n.inputs.size(); ++i) os << (i ? ", " : "") << names[n.inputs[i]];
    os << ")";
    return os.str();
}
int count_op(const LGraph& g, const std::string& op) {
    return int(std::count_if(g.nodes.begin(), g.nodes.end(),
                             [&](const LNode& n) { return op == op_info(n.op).name; }));
}

// Kernels of each kind, and the steps the runner takes (a matmul and its epilogue: one).
struct KernelCounts {
    int pointwise = 0, row = 0, blas = 0, fallback = 0, epilogues = 0;
    int generated() const { return pointwise + row; }
    int steps() const { return pointwise + row + blas + fallback - epilogues; }
};
KernelCounts count_kernels(const Schedule& s) {
    KernelCounts c;
    for (const Kernel& k : s.kernels) {
        c.pointwise += k.kind == KernelKind::pointwise;
        c.row += k.kind == KernelKind::row;
        c.blas += k.kind == KernelKind::blas;
        c.fallback += k.kind == KernelKind::fallback;
        c.epilogues += k.epilogue_of >= 0;
    }
    return c;
}
void print_counts(const char* when, const KernelCounts& c) {
    std::printf(
        "%s: %d pointwise + %d row kernels (generated), %d blas, %d fallback; %d epilogues "
        "fused -> %d steps\n",
        when, c.pointwise, c.row, c.blas, c.fallback, c.epilogues, c.steps());
}

// Bytes each kernel reads from and writes to memory: its loads and stores. An epilogue
// reads its matmul's output block while it is still in cache, so that read is not counted.
double traffic_mb(const Schedule& s) {
    auto bytes = [&](int id) {
        int64_t n = 1;
        for (int64_t d : s.value(id).shape) n *= d;
        return double(n) * dtype_bytes(s.value(id).dtype);
    };
    double total = 0;
    for (const Kernel& k : s.kernels) {
        if (k.kind == KernelKind::blas || k.kind == KernelKind::fallback) {
            for (int in : s.graph.nodes[k.nodes[0]].inputs) total += bytes(in);
            total += bytes(s.graph.nodes[k.nodes[0]].out.id);
            continue;
        }
        int gemm_out =
            k.epilogue_of >= 0 ? s.graph.nodes[s.kernels[k.epilogue_of].nodes[0]].out.id : -1;
        for (int v : k.loads)
            if (v != gemm_out) total += bytes(v);
        for (int v : k.stores) total += bytes(v);
    }
    return total / 1e6;
}

double median_ms(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

}  // namespace

int main() {
    int failures = 0;
    auto check = [&](bool ok, const std::string& fact) {
        std::cout << "  check: " << fact << ": " << (ok ? "yes" : "NO") << "\n";
        failures += !ok;
    };
    // The passes a student may have switched off from the shell (docs/env.md).
    const bool conv_fuse_on =
        !(std::getenv("KILN_CONV_FUSE") && std::string(std::getenv("KILN_CONV_FUSE")) == "0");
    const bool epilogue_on = epilogue_fusion_enabled();
    std::printf("passes: conv fusion %s, matmul epilogues %s (KILN_CONV_FUSE, KILN_EPILOGUE)\n",
                conv_fuse_on ? "on" : "off", epilogue_on ? "on" : "off");

    manual_seed(0);
    models::BasicBlock res_block(16, 16, 1);
    models::GptBlock attn_block(32, 2);
    res_block.eval();
    attn_block.eval();
    Tensor image = randn({2, 16, 8, 8}), seq = randn({2, 8, 32});
    NoGradGuard no_grad;  // inference: one graph, no backward half

    // The graph the JIT hands to the inductor, kept by a two-line custom backend (lesson 02).
    const jit::Graph* graph = nullptr;
    auto keep = [&graph](const jit::Graph& g, std::span<const Tensor> examples) {
        graph = &g;
        return inductor_backend(g, examples);
    };
    auto compiled =
        compile(blocks, {.backend = keep, .arg_names = {"res", "attn", "image", "seq"}});
    auto [res_out, attn_out] = compiled(res_block, attn_block, image, seq);
    auto [res_ref, attn_ref] = blocks(res_block, attn_block, image, seq);
    check(allclose(res_out, res_ref, 1e-4, 1e-5) && allclose(attn_out, attn_ref, 1e-4, 1e-5),
          "the compiled blocks equal eager");

    // ---- 0. What the backend receives: the JIT's graph (placeholders for the inputs and
    // the lifted parameters, one call node per op, an output node).
    std::cout << "\n==== 0. the graph from the JIT: " << graph->num_inputs() << " inputs, "
              << graph->num_ops() << " ops\n"
              << graph->str();

    // ---- 1. Lowering. Each call node becomes an LNode over values whose shapes and dtypes
    // are known; a detach becomes an alias; composites (batch norm in eval mode, layernorm,
    // GELU, attention) are already primitive ops in the recording.
    Lowered lowered = lower(*graph);
    check(lowered.graph.has_value(), "the graph lowers (every op has a lowered form)");
    if (!lowered.graph) return 1;
    LGraph lg = *lowered.graph;
    std::cout << "\n==== 1. lowering: LGraph with " << lg.inputs.size() << " inputs, "
              << lg.nodes.size() << " nodes\n";
    for (const LNode& n : lg.nodes) std::cout << "  " << node_text(lg, n) << "\n";
    // (Scalars, such as batch norm's eps in add_27, live in a node's attributes.) What changed:
    // the JIT's detach nodes are no LNodes; their values alias their inputs.
    int calls = 0, detaches = 0;
    for (const jit::Node& n : graph->nodes())
        calls += n.kind == jit::NodeKind::call, detaches += n.kind == jit::NodeKind::detach;
    std::printf("lowering: %d call nodes -> %zu LNodes; %d detach node(s) became aliases\n", calls,
                lg.nodes.size(), detaches);
    check(int(lg.nodes.size()) == calls, "every call node became one LNode");

    // ---- 2. Conv fusion. Each conv2d takes the chain after it: batch norm's per-channel
    // sub/mul/add, the residual add, relu. The fused node runs them as oneDNN post-ops on the
    // convolution's output while it is in cache: no separate pass, no intermediate tensor.
    ConvFusion fusion = fuse_conv(lg);
    std::cout << "\n==== 2. conv fusion: " << lg.nodes.size() << " -> " << fusion.graph.nodes.size()
              << " nodes, " << fusion.fused << " conv2d fused\n";
    for (const std::string& note : fusion.notes) std::cout << "  " << note << "\n";
    for (const LNode& n : fusion.graph.nodes)
        if (std::string(op_info(n.op).name) == "conv2d_fused")
            std::cout << "  now: " << node_text(fusion.graph, n) << "\n";
    if (conv_fuse_on)
        check(fusion.fused == 2 && count_op(fusion.graph, "conv2d_fused") == 2 &&
                  fusion.graph.nodes.size() < lg.nodes.size(),
              "both convolutions took their batch norm (and relu, residual add): fewer nodes");
    else
        check(fusion.fused == 0 && fusion.graph.nodes.size() == lg.nodes.size(),
              "KILN_CONV_FUSE=0: every conv2d left alone");

    // ---- 3. Scheduling (epilogues are the next stage's). One line per kernel: its kind, its
    // loop, the nodes it runs.
    Schedule s = schedule(fusion.graph);
    KernelCounts before = count_kernels(s);
    std::cout << "\n==== 3. scheduling: " << fusion.graph.nodes.size() << " nodes -> "
              << s.kernels.size() << " kernels\n"
              << s.print();
    print_counts("after scheduling", before);
    std::printf("memory traffic: %.3f MB\n", traffic_mb(s));
    check(int(s.kernels.size()) < int(fusion.graph.nodes.size()) && before.generated() > 0,
          "fusion: fewer kernels than nodes");
    check(before.row >= 3, "each layernorm and the softmax is one row kernel");

    // ---- 4. Matmul epilogues. Each pointwise (or row) kernel that reads a matmul's output
    // element by element becomes that matmul's epilogue: it runs on each block of GEMM rows
    // right after BLAS writes it, instead of a second pass over the whole output.
    double traffic_before = traffic_mb(s);
    s = fuse_epilogues(std::move(s));  // KILN_EPILOGUE=0: unchanged
    KernelCounts after = count_kernels(s);
    std::cout << "\n==== 4. epilogues:\n" << s.print();
    print_counts("after epilogues", after);
    std::printf("memory traffic: %.3f MB (was %.3f MB)\n", traffic_mb(s), traffic_before);
    if (epilogue_on)
        check(after.epilogues >= 2 && after.steps() < before.steps(),
              "the linear layers' bias (and GELU) run as epilogues: fewer steps");
    else
        check(after.epilogues == 0, "KILN_EPILOGUE=0: no epilogue fused");

    // ---- 5. Emission: one C++ translation unit, one extern "C" entry per generated kernel
    // (kernels that differ only in names are written once), plus a `_rows` entry for each
    // epilogue. blas and fallback kernels have no code: the runner calls BLAS or eager.
    std::string source = emit(s);
    std::istringstream src(source);
    int entries = 0, lines = 0;
    std::cout << "\n==== 5. emission: the entries of the translation unit\n";
    for (std::string line; std::getline(src, line); ++lines)
        if (line.rfind("extern \"C\" void ", 0) == 0) {
            ++entries;
            std::cout << "  " << line.substr(0, line.find('(')) << "\n";
        }
    std::printf("%d lines, %d entries for %d generated kernels\n", lines, entries,
                after.generated());
    check(entries > 0 && entries <= after.generated() + after.epilogues,
          "at most one entry per generated kernel (and one per epilogue's rows)");
    // The same text the inductor built for this graph (it ran these stages with the
    // environment as it is).
    check(last_compiled().source == source, "the lesson's stages give the inductor's source");

    // ---- Switching passes off. Each configuration compiles the blocks again (jit::reset()
    // forgets the entry); the environment variable is read when a graph compiles.
    struct Config {
        const char* name;
        const char* var;
        const char* value;
    };
    std::vector<Config> configs = {{"all passes", nullptr, nullptr},
                                   {"KILN_CONV_FUSE=0", "KILN_CONV_FUSE", "0"},
                                   {"KILN_EPILOGUE=0", "KILN_EPILOGUE", "0"}};
    std::printf("\n%-18s %8s %10s %6s %10s %10s\n", "configuration", "kernels", "generated",
                "steps", "traffic MB", "ms/call");
    std::vector<KernelCounts> counts;
    std::vector<double> traffic;
    bool all_equal = true;
    const char* shell_conv = std::getenv("KILN_CONV_FUSE");
    const char* shell_epilogue = std::getenv("KILN_EPILOGUE");
    const std::string saved_conv = shell_conv ? shell_conv : "",
                      saved_epilogue = shell_epilogue ? shell_epilogue : "";
    for (const Config& c : configs) {
        // Both passes on unless this configuration turns one off (whatever the shell said).
        unsetenv("KILN_CONV_FUSE");
        unsetenv("KILN_EPILOGUE");
        if (c.var) setenv(c.var, c.value, 1);
        jit::reset();
        auto f = compile(blocks, {.backend = keep, .arg_names = {"res", "attn", "image", "seq"}});
        auto [r, a] = f(res_block, attn_block, image, seq);
        all_equal =
            all_equal && allclose(r, res_ref, 1e-4, 1e-5) && allclose(a, attn_ref, 1e-4, 1e-5);
        Schedule sc = fuse_epilogues(schedule(fuse_conv(*lower(*graph).graph).graph));
        // The first calls after a compile time the kernels against eager (docs/codegen.md,
        // "Kernels or eager"); time the calls after that choice.
        for (int i = 0; i < 7; ++i) f(res_block, attn_block, image, seq);
        std::vector<double> ms;
        for (int i = 0; i < 5; ++i) {
            auto t0 = std::chrono::steady_clock::now();
            f(res_block, attn_block, image, seq);
            ms.push_back(
                std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                    .count());
        }
        KernelCounts kc = count_kernels(sc);
        counts.push_back(kc);
        traffic.push_back(traffic_mb(sc));
        std::printf("%-18s %8d %10d %6d %10.3f %10.3f\n", c.name,
                    kc.pointwise + kc.row + kc.blas + kc.fallback, kc.generated(), kc.steps(),
                    traffic.back(), median_ms(ms));
    }
    unsetenv("KILN_CONV_FUSE");
    unsetenv("KILN_EPILOGUE");
    if (shell_conv) setenv("KILN_CONV_FUSE", saved_conv.c_str(), 1);
    if (shell_epilogue) setenv("KILN_EPILOGUE", saved_epilogue.c_str(), 1);
    check(all_equal, "every configuration computes the same blocks");
    // Without conv fusion the kernel count can stay the same: the batch norm chain after
    // each conv becomes one pointwise kernel, and the small kernel that computed
    // 1/sqrt(var + eps) for the fused conv folds into it. What changes is traffic: each
    // conv's output now goes to memory and comes back for the chain.
    check(
        traffic[1] > traffic[0],
        "without conv fusion: each conv's output makes a round trip through memory, more traffic");
    check(counts[2].steps() > counts[0].steps() && traffic[2] > traffic[0],
          "without epilogues: a separate pass after each matmul, more traffic");
    // On a busy machine the times move; the kernel counts and bytes do not.

    // --- See it drawn: KILN_TRACE=DIR logs every compile of a run (docs/trace.md), and
    // `kiln report DIR` turns the log into pages to open in a browser (docs/report.md).
    std::cout << "\nthe compile report of this lesson (each pass's output beside its input, the "
                 "schedule, the generated code):\n"
                 "  KILN_TRACE=/tmp/trace10 build/tutorial_10_compiler_passes && build/kiln report "
                 "/tmp/trace10\n";

    std::cout << (failures ? "lesson 10: FAILED\n" : "lesson 10: all checks passed\n");
    return failures ? 1 : 0;
}
