// Lesson 07: fusion — what the "inductor" backend writes, and why it is faster.
//
// Mirrors "Getting Started" (torch.compiler_get_started): fn(x, y) = cos(x) + sin(y),
// "2 reads and 2 writes into 1 read and 1 write", the generated kernel found with
// TORCH_COMPILE_DEBUG=1, CUDA graphs; and the walk-through's "Inductor (compile graph to
// kernel)".
//
// Eager runs one kernel per op, and every op's result goes to memory and comes back:
// cos writes a tensor, sin writes a tensor, add reads both. A pointwise chain needs none
// of those intermediates in memory. kiln's inductor backend groups the chain into one
// loop (a fused kernel), writes it as C++ with SIMD batches (kiln's own vector type and its
// sin/cos/exp/log/tanh/erf, tensor/fast_math.h; xsimd behind a precompiled header only for a
// function kiln has no form of), builds it with the system compiler, and caches the shared
// object on disk (KILN_CACHE_DIR).
//
// Where there is a GPU, the lesson then runs fn on CUDA tensors: the same schedule written
// as a CUDA kernel (the tutorial's Triton kernel, here CUDA C++ built by NVRTC), walked
// through line by line, and mode = "reduce-overhead": a CUDA graph's warm-up, capture and
// replays, with the launch overhead it saves; then a whole training step (forward,
// backward, SGD) captured as one CUDA graph by cuda::GraphedStep (torch.cuda.graph). Without
// a GPU it prints why not.
//
// Build and run: make demo, or build/tutorial_07_fusion_and_codegen (tutorials/README.md).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "codegen/cuda_backend.h"
#include "kiln.h"
#include "tensor/cuda.h"
#include "tensor/cuda_graph_step.h"
#include "tensor/cuda_runtime.h"

using namespace kiln;
namespace fs = std::filesystem;

Tensor fn(Tensor x, Tensor y) {
    Tensor a = cos(x);
    Tensor b = sin(y);
    return a + b;
}

// The GPU half of the lesson (run only where cuda::is_available()): the same fn on CUDA
// tensors, the kernel kiln writes for it, and mode = "reduce-overhead" (CUDA graphs).
template <class Check, class Backend>
void cuda_part(Check& check, Backend watched_inductor, const jit::Graph*& graph) {
    std::cout << "CUDA: " << cuda::device_name(0) << "\n";
    // Tensors on the GPU make the graph a GPU graph. The inductor lowers and schedules it
    // exactly as on the CPU; the schedule goes to the CUDA emitter (codegen/emit_cuda.cpp)
    // instead of the C++ one, and NVRTC compiles the source at run time (docs/cuda.md).
    Tensor x = randn({10000}), y = randn({10000});
    Tensor xg = x.cuda(), yg = y.cuda();
    auto gpu_fn = compile(fn, {.backend = watched_inductor, .arg_names = {"x", "y"}});
    Tensor out = gpu_fn(xg, yg);
    check(out.device().type == DeviceType::cuda && allclose(out.cpu(), fn(x, y), 1e-4, 1e-5),
          "on the GPU, new_fn(x, y) equals fn(x, y) on the CPU");
    codegen::CompiledGraphInfo info = codegen::last_compiled();
    std::cout << "GPU schedule (one line per kernel):\n" << info.schedule;
    check(info.cuda && info.generated_kernels == 1 && !info.interpreted,
          "on the GPU, cos, sin and add became one CUDA kernel built by NVRTC");
    // The same traffic as on the CPU: the graph did not change, only where it runs.
    int reads = graph->num_inputs(), writes = int(graph->outputs().size());
    std::printf("GPU fused kernel: %d reads + %d write of a %.0f KiB tensor = %.0f KiB moved\n",
                reads, writes, 10000 * 4 / 1024.0, (reads + writes) * 10000 * 4 / 1024.0);

    // --- The generated CUDA source. The file (output_code_N.cu in KILN_DEBUG_DIR) starts
    // with small device helpers (kiln_math: sin, cos, block reductions); the kernel follows
    // the line "// ---- graph". Print the kernel, then walk through it.
    std::string kernel_text =
        info.source.substr(std::min(info.source.find("// ---- graph"), info.source.size()));
    std::cout << "\n---- output_code_" << info.id << ".cu (the kernel) ----\n"
              << kernel_text << "---- end ----\n\n";
    // How it is launched (codegen/cuda_backend.cpp): each thread takes up to four elements,
    // 256 threads a block, at most 8 blocks per multiprocessor; the loop is grid-stride, so
    // any grid covers every element.
    const int64_t items = (10000 + 3) / 4, blocks = (items + 255) / 256;
    std::printf(
        "launch: 10000 elements, 4 per thread = %lld threads: a grid of %lld blocks x 256 "
        "threads\n",
        (long long)items, (long long)blocks);
    std::cout << "The kernel, line by line:\n";
    std::istringstream src(kernel_text);
    int loads = 0, math = 0, stores = 0;
    for (std::string line; std::getline(src, line);) {
        auto has = [&](const char* text) { return line.find(text) != std::string::npos; };
        if (has("__global__")) {
            std::cout << "  entry  " << line
                      << "\n";  // one pointer per buffer: x, y, then the output
        } else if (has("blockIdx.x")) {
            std::cout << "  index  " << line
                      << "\n";  // this thread's first group: block * blockDim + thread
        } else if (has("blockDim.x * gridDim.x")) {
            std::cout << "  stride " << line << "\n";  // every thread of the grid, the loop's step
        } else if (has("% 16 == 0")) {
            std::cout << "  align  " << line << "\n";  // float4 needs 16-byte aligned addresses
        } else if (has("reinterpret_cast<const float4*>")) {
            std::cout << "  load   " << line << "\n";  // 4 floats of x (then y) in one 16-byte load
            ++loads;
        } else if (has("make_float4")) {
            std::cout << "  store  " << line << "\n";  // the 4 results in one 16-byte store
            ++stores;
        } else if (stores == 0 && loads > 0 && has("const float ") && !has("_v[") && has("(")) {
            std::cout << "  math   " << line << "\n";  // the op table's math text, in registers
            ++math;
        } else if (stores == 0 && loads > 0 && has("const float ") && has(" + ") && !has("_v[")) {
            std::cout << "  math   " << line << "\n";
            ++math;
        } else if (has("the tail")) {
            std::cout << "  tail   " << line << "\n";  // the last n % 4 elements, one at a time
        }
    }
    check(loads == 2 && math == 3 && stores == 1,
          "the CUDA kernel: 2 float4 loads, cos/sin/add in registers, 1 float4 store");
    // Compare the tutorial's Triton kernel: tl.program_id and BLOCK_SIZE are the block and
    // thread indices above, tl.load / tl.store the float4 loads and store, and the mask the
    // tail loop.

    // --- mode = "reduce-overhead": CUDA graphs. Each kernel launch costs the CPU a few
    // microseconds; a function of many small kernels spends its time launching. A CUDA
    // graph records the launches once and replays them with one launch. The function here
    // is 8 layers of tanh(h @ w) on 64 x 64 matrices: 8 cuBLAS GEMMs and 8 tanh kernels
    // per call, each too small to keep the GPU busy.
    auto layers = [](Tensor h, Tensor w) {
        for (int i = 0; i < 8; ++i) h = tanh(matmul(h, w));
        return h;
    };
    Tensor h = randn({64, 64}), w = randn({64, 64}) * 0.125;
    Tensor hg = h.cuda(), wg = w.cuda();
    Tensor expected = layers(h, w);
    auto plain = compile(layers);
    auto graphed = compile(layers, {.mode = "reduce-overhead"});
    // Call 1 is the warm-up: it runs as the default mode does (NVRTC, cuBLAS and the
    // allocator are ready after it). Call 2 captures the launches into a CUDA graph and
    // replays it. Every later call only replays. (h and w come at the same addresses each
    // call, so the graph reads them in place; new addresses or shapes would capture again.)
    std::vector<std::string> phases = {"warm-up", "capture", "replay", "replay"};
    codegen::CudaGraphStats start = codegen::cuda_graph_stats();
    bool phases_right = true, results_right = true;
    for (int call = 1; call <= 4; ++call) {
        Tensor r = graphed(hg, wg);
        codegen::CudaGraphStats now = codegen::cuda_graph_stats();
        long long captures = now.captures - start.captures, replays = now.replays - start.replays;
        std::printf("reduce-overhead call %d (%s): captures so far %lld, replays so far %lld\n",
                    call, phases[call - 1].c_str(), captures, replays);
        phases_right = phases_right && captures == (call >= 2) && replays == std::max(0, call - 1);
        results_right = results_right && allclose(r.cpu(), expected, 1e-3, 1e-4);
    }
    check(phases_right, "call 1 warms up, call 2 captures and replays, calls 3 and 4 replay");
    check(results_right, "every reduce-overhead call equals eager on the CPU");

    // The launch overhead per call, measured: many calls back to back, then one wait for
    // the GPU, the wall time divided by the calls (GPU work is asynchronous: a call returns
    // once its launches are queued). Timings move with the machine; nothing checks them.
    (void)plain(hg, wg);
    auto per_call_us = [&](auto&& call) {
        const int n = 200;
        call();
        cuda::synchronize();
        auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < n; ++i) call();
        cuda::synchronize();
        return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0)
                   .count() /
               n;
    };
    double eager_us = per_call_us([&] { return layers(hg, wg); });
    double plain_us = per_call_us([&] { return plain(hg, wg); });
    double graphed_us = per_call_us([&] { return graphed(hg, wg); });
    std::printf("8 layers of tanh(h @ w), 64 x 64, per call (200 calls, wall time):\n");
    std::printf("  eager                      %8.1f us  (16 launches)\n", eager_us);
    std::printf("  compiled, default mode     %8.1f us  (16 launches)\n", plain_us);
    std::printf("  compiled, reduce-overhead  %8.1f us  (1 graph launch)\n", graphed_us);
    std::printf("  launch overhead saved by the graph: %.1f us per call\n", plain_us - graphed_us);

    // --- The whole training step as one CUDA graph. reduce-overhead captures each compiled
    // graph; a training step also runs autograd's engine, gradient accumulation and the
    // optimizer between them, each a launch or more from the host. cuda::GraphedStep
    // (PyTorch's torch.cuda.graph, "whole-network capture") captures all of it: forward,
    // loss.backward() and SGD. Its inputs are static tensors the loop refills in place with
    // copy_; its output (the loss) is one tensor each replay rewrites. Calls 1 and 2 run
    // eagerly (the optimizer's momentum buffers are made), call 3 captures and replays,
    // later calls only replay: one launch per training step. Here a twin model trained
    // eagerly from the same start must end with the same weights (docs/cuda.md, "Whole-step
    // capture").
    auto make_mlp = [] {
        manual_seed(7);
        auto net = nn::sequential(nn::Linear(64, 64), nn::ReLU(), nn::Linear(64, 64), nn::ReLU(),
                                  nn::Linear(64, 1));
        net->to(Device{DeviceType::cuda, 0});
        return net;
    };
    auto net_eager = make_mlp(), net_graphed = make_mlp();
    optim::SGD opt_eager(net_eager->parameters(), 0.05, 0.9),
        opt_graphed(net_graphed->parameters(), 0.05, 0.9);
    Device gpu{DeviceType::cuda, 0};
    Tensor xs = zeros({128, 64}, {.device = gpu}), ys = zeros({128, 1}, {.device = gpu});
    auto train_step = [&](nn::Module& net, optim::SGD& opt) {
        opt.zero_grad();
        Tensor loss = nn::functional::mse_loss(net(xs), ys);
        loss.backward();
        opt.step();
        return loss;
    };
    cuda::GraphedStep whole_step([&] { return train_step(*net_graphed, opt_graphed); },
                                 {.warmup = 2});
    bool losses_equal = true;
    int64_t ops_per_replay = -1;
    for (int step = 1; step <= 6; ++step) {
        Tensor xb = randn({128, 64}), yb = randn({128, 1});
        {
            NoGradGuard no_grad;
            xs.copy_(xb.cuda()), ys.copy_(yb.cuda());
        }
        Tensor want = train_step(*net_eager, opt_eager).detach().cpu();
        int64_t ops = cuda::detail::operations_issued();
        Tensor got = whole_step()[0].cpu();
        if (step == 6) ops_per_replay = cuda::detail::operations_issued() - ops;
        losses_equal = losses_equal && allclose(got, want, 1e-4, 1e-5);
    }
    bool weights_equal = true;
    auto pe = net_eager->parameters(), pg = net_graphed->parameters();
    for (size_t i = 0; i < pe.size(); ++i)
        weights_equal =
            weights_equal && allclose(pg[i].detach().cpu(), pe[i].detach().cpu(), 1e-4, 1e-5);
    std::printf(
        "whole training step as one CUDA graph: %lld calls, %lld replays, %lld device "
        "operations in the last call\n",
        (long long)whole_step.calls(), (long long)whole_step.replays(), (long long)ops_per_replay);
    check(whole_step.captured() && whole_step.replays() == 4,
          "calls 1 and 2 run eagerly, call 3 captures and replays, calls 4 to 6 replay");
    check(losses_equal && weights_equal,
          "the graphed training step's losses and weights equal the eager twin's");
}

int main() {
    int failures = 0;
    auto check = [&](bool ok, const std::string& fact) {
        std::cout << "  check: " << fact << ": " << (ok ? "yes" : "NO") << "\n";
        failures += !ok;
    };
    manual_seed(0);

    // TORCH_COMPILE_DEBUG=1's folder is KILN_DEBUG_DIR here: every graph the inductor
    // compiles is written there as graph_N.txt, one file per pipeline stage
    // (graph_N.0_lowered.txt ... graph_N.3_epilogues.txt, the schedule) and output_code_N.cpp.
    // A program may set it for itself before compiling, as this one does.
    // (The process id keeps two runs at once apart.)
    fs::path debug_dir =
        fs::temp_directory_path() / ("kiln_lesson07_debug_" + std::to_string(getpid()));
    fs::remove_all(debug_dir);
    setenv("KILN_DEBUG_DIR", debug_dir.c_str(), 1);

    // The backend is "inductor", wrapped in a two-line custom backend (lesson 02) that
    // keeps a pointer to the graph it is given, so the lesson can count its reads and
    // writes below.
    const jit::Graph* graph = nullptr;
    auto watched_inductor = [&graph](const jit::Graph& g, std::span<const Tensor> example_inputs) {
        graph = &g;
        return codegen::inductor_backend(g, example_inputs);
    };
    auto new_fn = compile(fn, {.backend = watched_inductor, .arg_names = {"x", "y"}});
    Tensor x = randn({10000}), y = randn({10000});
    Tensor out = new_fn(x, y);
    check(allclose(out, fn(x, y), 1e-5, 1e-6), "new_fn(x, y) equals fn(x, y)");

    // --- What the backend made of the graph. codegen::last_compiled() is the same
    // information the debug folder holds.
    codegen::CompiledGraphInfo info = codegen::last_compiled();
    std::cout << "graph " << info.id << ":\n"
              << info.graph << "schedule (one line per kernel):\n"
              << info.schedule;
    check(info.generated_kernels == 1 && !info.interpreted,
          "cos, sin and add became one generated kernel");

    // --- Memory traffic, counted from the graph. Eager: each op reads its inputs and
    // writes its output. Fused: the kernel reads the graph's inputs and writes its
    // outputs; cos and sin live in registers.
    auto count_traffic = [](const jit::Graph& g, int& eager_reads, int& eager_writes,
                            int& fused_reads, int& fused_writes) {
        eager_reads = eager_writes = 0;
        for (const jit::Node& n : g.nodes())
            if (n.kind == jit::NodeKind::call) eager_reads += int(n.args.size()), eager_writes += 1;
        fused_reads = g.num_inputs();
        fused_writes = int(g.outputs().size());
    };
    const double tensor_kib = 10000 * 4 / 1024.0;
    int eager_reads, eager_writes, fused_reads, fused_writes;
    count_traffic(*graph, eager_reads, eager_writes, fused_reads, fused_writes);
    std::printf("eager: %d reads + %d writes of a %.0f KiB tensor = %.0f KiB moved\n", eager_reads,
                eager_writes, tensor_kib, (eager_reads + eager_writes) * tensor_kib);
    std::printf("fused: %d reads + %d write  = %.0f KiB moved\n", fused_reads, fused_writes,
                (fused_reads + fused_writes) * tensor_kib);
    check(eager_reads == 4 && eager_writes == 3 && fused_reads == 2 && fused_writes == 1,
          "eager moves 7 tensors, the fused kernel 3");

    // The tutorial calls new_fn(input_tensor, input_tensor): both arguments one tensor.
    // kiln guards that aliasing (a new entry), and the graph recorded for it has one
    // input (named after the last argument that holds it): "2 reads and 2 writes into
    // 1 read and 1 write".
    Tensor same = new_fn(x, x);
    check(allclose(same, fn(x, x), 1e-5, 1e-6), "new_fn(x, x) equals fn(x, x)");
    std::cout << "graph for new_fn(x, x):\n" << graph->str();
    count_traffic(*graph, eager_reads, eager_writes, fused_reads, fused_writes);
    std::printf("eager: %d reads + %d writes; fused: %d read + %d write\n", eager_reads,
                eager_writes, fused_reads, fused_writes);
    check(fused_reads == 1 && fused_writes == 1,
          "new_fn(x, x): the fused kernel reads x once and writes once");

    // --- The generated source, walked through. Print it whole, then the loop's lines.
    std::cout << "\n---- output_code_" << info.id << ".cpp ----\n"
              << info.source << "---- end ----\n\n";
    std::cout << "The vector loop of the kernel, line by line:\n";
    std::istringstream src(info.source);
    int loads = 0, math = 0, stores = 0;
    bool in_loop = false;
    for (std::string line; std::getline(src, line);) {
        if (line.find("j += W") != std::string::npos) in_loop = true;  // the vector body starts
        if (!in_loop) continue;
        if (line.find("load_unaligned") != std::string::npos) {
            std::cout << "  load   " << line << "\n";  // a batch of x (W floats), a batch of y
            ++loads;
        } else if (line.find("store_unaligned") != std::string::npos) {
            std::cout << "  store  " << line << "\n";  // only the result goes back to memory
            ++stores;
            break;
        } else if (line.find("auto ") != std::string::npos) {
            std::cout << "  math   " << line << "\n";  // the op table's math text, on registers
            ++math;
        }
    }
    check(loads == 2 && math == 3 && stores == 1,
          "the vector loop: 2 loads, cos/sin/add in registers, 1 store");
    // Compare Triton's tl.load / tl.cos / tl.sin / tl.store in the tutorial: the same
    // four steps; the tail loop after it does the last elements one float at a time.

    // --- The debug folder.
    // The inductor's files are numbered by graph; the JIT adds each entry's graphs
    // ("fn entry 1 graph 1.txt" and a Graphviz .dot of it).
    std::vector<std::string> files;
    for (const auto& entry : fs::directory_iterator(debug_dir))
        files.push_back(entry.path().filename().string());
    std::sort(files.begin(), files.end());
    std::cout << "\nKILN_DEBUG_DIR holds:\n";
    for (const std::string& f : files) std::cout << "  " << f << "\n";
    bool has_code = std::find(files.begin(), files.end(),
                              "output_code_" + std::to_string(info.id) + ".cpp") != files.end();
    check(has_code, "output_code_" + std::to_string(info.id) + ".cpp was written");
    fs::remove_all(debug_dir);
    unsetenv("KILN_DEBUG_DIR");

    // --- mode = "reduce-overhead" is accepted everywhere: on the CPU it is passed to the
    // backend (jit::backend_options()) and the result is the same function. Its CUDA graphs
    // are a GPU feature, shown below when there is one.
    auto overhead = compile(fn, {.mode = "reduce-overhead"});
    check(allclose(overhead(x, y), fn(x, y), 1e-5, 1e-6),
          "mode = \"reduce-overhead\" runs on the CPU and equals fn");

    // --- CUDA: the same function on the GPU. Without one, the lesson says why, in the
    // CUDA runtime's own words (no driver, no device, ...), and stops here.
    std::cout << "\n";
    if (!cuda::is_available()) {
        std::cout << "CUDA: not available here (" << cuda::unavailable_reason() << ")\n";
    } else {
        cuda_part(check, watched_inductor, graph);
    }

    // --- See it drawn: KILN_TRACE=DIR logs every compile of a run (docs/trace.md), and
    // `kiln report DIR` turns the log into pages to open in a browser (docs/report.md).
    std::cout << "\nthe compile report of this lesson (each graph beside its generated C++; click "
                 "a node to light up the lines computing it):\n"
                 "  KILN_TRACE=/tmp/trace07 build/tutorial_07_fusion_and_codegen && build/kiln "
                 "report /tmp/trace07\n";

    std::cout << (failures ? "lesson 07: FAILED\n" : "lesson 07: all checks passed\n");
    return failures ? 1 : 0;
}
