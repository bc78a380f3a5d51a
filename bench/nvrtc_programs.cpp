// NVRTC's wall time for a model's CUDA source, compiled as one program or split over several
// compiled at once (codegen/cuda_backend.h, nvrtc_programs_for). Needs NVRTC, no GPU: the
// training step (or inference) of a model of bench/models.cpp is traced on the CPU, its AOT
// halves are lowered as CUDA graphs and emitted as the CUDA backend emits them, and each
// half's source is compiled to a cubin for sm_90 with no disk cache, the program counts
// interleaved, `reps` times each. Prints one JSON line per half and program count.
//   build/bench_nvrtc_programs [gpt|resnet18_32|resnet18_224] [train|infer] [reps] [programs...]
//   (programs: counts to compare; default "1 0", where 0 is nvrtc_programs_for's choice)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>
#include <thread>
#include <vector>

#include "codegen/cuda_backend.h"
#include "codegen/emit_cuda.h"
#include "codegen/lower_graph.h"
#include "jit/aot/aot.h"
#include "kiln.h"
#include "models/gpt.h"
#include "models/resnet.h"
#include "tensor/cuda_runtime.h"

using namespace kiln;
using namespace kiln::codegen;

namespace {

const Device kCuda{DeviceType::cuda, 0};

// A half recorded on the CPU, lowered as if recorded on the GPU (factories make their
// tensors there), as the tests of tests/cuda do without a GPU.
LGraph as_cuda_graph(const jit::Graph& half) {
    Lowered lowered = lower(half);
    if (!lowered.graph) fail("bench_nvrtc_programs: a half was not lowered: ", lowered.why_not);
    lowered.graph->device = kCuda;
    for (LNode& n : lowered.graph->nodes)
        if (op_info(n.op).kind == OpKind::factory || op_info(n.op).kind == OpKind::random)
            n.attrs.device = kCuda;
    return *lowered.graph;
}

// The graphs `model`'s compiled step hands the backend: with gradients, AOT's forward and
// backward halves (both at the first call); without, the forward graph.
std::vector<LGraph> model_graphs(const std::string& model, bool train) {
    manual_seed(0);
    std::shared_ptr<nn::Module> net;
    Tensor x, target;
    if (model.rfind("resnet18", 0) == 0) {
        int64_t side = model == "resnet18_224" ? 224 : 32;
        net = std::make_shared<models::ResNet18>(1000);
        x = randn({8, 3, side, side});
        target = randint(0, 1000, {8});
    } else {
        net = std::make_shared<models::Gpt>(models::GptConfig{
            .vocab_size = 1024, .max_positions = 128, .layers = 4, .d_model = 256, .heads = 4});
        x = randint(0, 1024, {8, 128});
        target = randint(0, 1024, {8 * 128});
    }
    std::vector<LGraph> graphs;
    jit::aot::GraphCompiler keep = [&](std::shared_ptr<const jit::Graph> half,
                                       std::span<const Tensor> examples) {
        graphs.push_back(as_cuda_graph(*half));
        return jit::aot::interpret_compiler(half, examples);
    };
    jit::Backend capture = [&](const jit::Graph& g, std::span<const Tensor> examples) {
        auto graph = std::make_shared<const jit::Graph>(g);
        if (!train) return keep(graph, examples);
        return jit::aot::aot_compile(graph, examples, keep, /*backward_with_forward=*/true);
    };
    auto loss_fn = [](nn::Module& m, const Tensor& input, const Tensor& t) {
        Tensor logits = m.forward(input);
        return nn::functional::cross_entropy(logits.reshape({t.size(0), logits.size(-1)}), t);
    };
    auto forward_fn = [](nn::Module& m, const Tensor& input) { return m.forward(input); };
    if (train) {
        net->train();
        (void)compile(loss_fn, {.backend = capture})(*net, x, target);
    } else {
        net->eval();
        autograd::NoGradGuard no_grad;
        (void)compile(forward_fn, {.backend = capture})(*net, x);
    }
    return graphs;
}

// The process's CPU time (every thread's), in seconds.
double cpu_seconds() {
    timespec t{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return double(t.tv_sec) + double(t.tv_nsec) * 1e-9;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
    std::string model = argc > 1 ? argv[1] : "gpt";
    bool train = argc > 2 ? std::string(argv[2]) != "infer" : true;
    int reps = argc > 3 ? std::max(1, std::atoi(argv[3])) : 3;
    std::vector<int> counts;
    for (int i = 4; i < argc; ++i) counts.push_back(std::atoi(argv[i]));
    if (counts.empty()) counts = {1, 0};
    if (std::string why = cuda::detail::nvrtc_unavailable_reason(); !why.empty()) {
        std::printf("{\"bench\": \"nvrtc_programs\", \"skipped\": \"%s\"}\n", why.c_str());
        return 0;
    }
    cuda::detail::set_cubin_store({});  // NVRTC every time: no disk cache
    {
        // What each program repeats: the prelude alone (no kernel).
        std::string prelude = emit_cuda(std::vector<const Schedule*>{});
        auto start = std::chrono::steady_clock::now();
        (void)cuda::detail::compile_cubin(prelude, "prelude", 90);
        std::printf("{\"prelude_kb\": %.1f, \"prelude_nvrtc_s\": %.3f}\n",
                    double(prelude.size()) / 1024, seconds_since(start));
    }
    std::vector<LGraph> graphs = model_graphs(model, train);
    for (size_t g = 0; g < graphs.size(); ++g) {
        std::string source = emit_cuda(schedule(graphs[g]));
        std::vector<std::vector<double>> seconds(counts.size()), cpu(counts.size());
        std::vector<size_t> programs(counts.size());
        // Interleaved: a change of the machine's load hits each count alike.
        for (int r = 0; r < reps; ++r)
            for (size_t c = 0; c < counts.size(); ++c) {
                int asked = counts[c] ? counts[c] : nvrtc_programs_for(source.size());
                std::vector<cuda::detail::NvrtcProgram> nvrtc;
                for (const CudaUnit& unit : split_cuda_source(source, asked))
                    nvrtc.push_back({unit.source, unit.kernels.front()});
                programs[c] = nvrtc.size();
                auto start = std::chrono::steady_clock::now();
                double cpu_start = cpu_seconds();
                (void)cuda::detail::compile_cubins(nvrtc, 90);
                seconds[c].push_back(seconds_since(start));
                cpu[c].push_back(cpu_seconds() - cpu_start);
            }
        for (size_t c = 0; c < counts.size(); ++c) {
            std::vector<double> s = seconds[c];
            std::sort(s.begin(), s.end());
            std::string all, all_cpu;
            for (double t : seconds[c]) all += (all.empty() ? "" : ", ") + std::to_string(t);
            for (double t : cpu[c]) all_cpu += (all_cpu.empty() ? "" : ", ") + std::to_string(t);
            std::printf(
                "{\"model\": \"%s\", \"task\": \"%s\", \"graph\": %zu, \"source_kb\": %.1f, "
                "\"programs\": %zu, \"cores\": %u, \"nvrtc_s_median\": %.3f, \"nvrtc_s\": [%s], "
                "\"process_cpu_s\": [%s]}\n",
                model.c_str(), train ? "train" : "infer", g, double(source.size()) / 1024,
                programs[c], std::thread::hardware_concurrency(), s[s.size() / 2], all.c_str(),
                all_cpu.c_str());
            std::fflush(stdout);
        }
    }
    return 0;
}
