// Whole models, eager vs compiled: ResNet-18 (torchvision's layout, batch 8 at
// 3x224x224 and a fast 3x32x32 variant) and a GPT-style decoder (4 layers, d = 256, 4 heads,
// sequence 128, batch 8, vocabulary 1024): inference, and one training step (forward,
// backward, SGD with momentum), at 1 and 2 threads. Also the first call of each compiled
// model with an empty kernel cache (cold) and with the cache the cold run filled (warm), and
// the peak memory (RSS) of each training run.
//
// Each measurement runs in a process of its own (this binary again, with --part), so its peak
// RSS is its own and the thread counts and kernel cache are set before anything starts.
// KILN_BENCH_FIRST_ONLY=1 with --part: stop after the first call (to profile it alone).
// Prints one JSON object; bench/torch_models.py measures PyTorch the same way and
// bench/compare_models.py joins the two into one table (docs/perf-models.md).
//   build/bench_models [--quick] [--cuda]   # --quick: the 32x32 ResNet and the decoder only;
//                                            # --cuda: on the GPU (one host thread)
// On the GPU the training step has two more modes: "graphed" (the eager step captured whole
// as one CUDA graph by cuda::GraphedStep: forward, backward, SGD) and "compiled_graphed"
// (the compiled step captured the same way); the first call runs eagerly, the second
// captures, the timed calls are replays. One part alone:
//   build/bench_models --part gpt graphed train 1 cuda
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <string>
#include <vector>

#include "bench/sampler.h"
#include "kiln.h"
#include "models/gpt.h"
#include "models/resnet.h"
#include "tensor/cublaslt.h"
#include "tensor/cuda.h"
#include "tensor/cuda_optim.h"
#include "tensor/cuda_runtime.h"
#include "tensor/parallel.h"
#include "tensor/storage.h"

using namespace kiln;
namespace fs = std::filesystem;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// CPU seconds of this process (all its threads): what a call cost, whatever else the
// machine runs (a shared machine stretches wall times, not this).
double cpu_seconds() {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

// CPU seconds of the calling thread alone. A step's main-thread CPU time is a floor for its
// wall time on an idle machine (the thread's waits for the others are not in it); with
// cpu_ms it tells how evenly a step's work was shared where a loaded machine hides that.
double thread_cpu_seconds() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

double peak_rss_mb() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return double(u.ru_maxrss) / 1024.0;  // Linux: kilobytes
}

// The peak RSS since the last reset_peak_rss() (VmHWM; Linux resets it on "5" > clear_refs).
double peak_rss_since_reset_mb() {
    FILE* f = std::fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    double kb = -1;
    while (std::fgets(line, sizeof line, f))
        if (std::sscanf(line, "VmHWM: %lf kB", &kb) == 1) break;
    std::fclose(f);
    return kb / 1024.0;
}
bool reset_peak_rss() {
    FILE* f = std::fopen("/proc/self/clear_refs", "w");
    if (!f) return false;
    bool ok = std::fputs("5", f) >= 0;
    return std::fclose(f) == 0 && ok;
}

struct Part {
    std::string model, mode, task;
    int threads = 1;
    std::string device = "cpu";  // or "cuda": the model and its inputs on the GPU
};

// One model, mode and task: the first call's time, then the median of `reps` calls.
std::string run_part(const Part& p) {
    set_num_threads(p.threads);
    manual_seed(0);
    std::function<void()> call;
    std::shared_ptr<nn::Module> net;
    Tensor x, target;
    int reps = 5;
    if (p.model.rfind("resnet18", 0) == 0) {
        int64_t side = p.model == "resnet18_224" ? 224 : 32;
        net = std::make_shared<models::ResNet18>(1000);
        x = randn({8, 3, side, side});
        target = randint(0, 1000, {8});
        reps = side == 224 ? 3 : 10;
    } else {
        net = std::make_shared<models::Gpt>(models::GptConfig{.vocab_size = 1024, .max_positions = 128, .layers = 4, .d_model = 256, .heads = 4});
        x = randint(0, 1024, {8, 128});
        target = randint(0, 1024, {8 * 128});
    }
    bool on_gpu = p.device == "cuda";
    if (on_gpu) {
        net->to(Device{DeviceType::cuda, 0});
        x = x.cuda(), target = target.cuda();
    }
    nn::Module& m = *net;
    // The module is an argument, so compiled entries are guarded on it (its training flag).
    auto forward_fn = [](nn::Module& module, const Tensor& input) { return module.forward(input); };
    auto loss_fn = [](nn::Module& module, const Tensor& input, const Tensor& t) {
        Tensor logits = module.forward(input);
        return nn::functional::cross_entropy(logits.reshape({t.size(0), logits.size(-1)}), t);
    };
    auto compiled_forward = compile(forward_fn);
    auto compiled_loss = compile(loss_fn);
    bool compiled = p.mode == "compiled" || p.mode == "compiled_graphed";
    bool graphed = p.mode == "graphed" || p.mode == "compiled_graphed";
    KILN_CHECK(!graphed || (p.device == "cuda" && p.task == "train"), "bench_models: mode ", p.mode,
               " is a CUDA training step (--part MODEL ", p.mode, " train 1 cuda)");
    optim::SGD opt(net->parameters(), 0.01, 0.9);
    std::unique_ptr<cuda::GraphedStep> graphed_step;
    if (p.task == "infer") {
        net->eval();
        call = [&] {
            autograd::NoGradGuard no_grad;
            Tensor y = compiled ? compiled_forward(m, x) : forward_fn(m, x);
            (void)y;
        };
    } else {
        net->train();
        call = [&] {
            opt.zero_grad();
            Tensor loss = compiled ? compiled_loss(m, x, target) : loss_fn(m, x, target);
            loss.backward();
            opt.step();
        };
        if (graphed) {  // x and target are the step's static inputs
            graphed_step = std::make_unique<cuda::GraphedStep>(
                [&, step = call] {
                    step();
                    return std::vector<Tensor>{};
                },
                cuda::GraphedStepOptions{.warmup = 1});
            call = [&] { (*graphed_step)(); };
        }
    }
    if (on_gpu) {  // GPU work is asynchronous: a call's time ends when the device is done
        std::function<void()> inner = call;
        call = [inner] {
            inner();
            cuda::synchronize();
        };
    }
    auto t0 = std::chrono::steady_clock::now();
    double c0 = cpu_seconds();
    call();
    double first_s = seconds_since(t0), first_cpu_s = cpu_seconds() - c0;
    if (const char* f = std::getenv("KILN_BENCH_FIRST_ONLY"); f && std::strcmp(f, "1") == 0) {
        // first_call_window: the call's start and end on CLOCK_MONOTONIC (steady_clock here),
        // for `perf record -k CLOCK_MONOTONIC` + `perf script --time START,END`.
        double start = std::chrono::duration<double>(t0.time_since_epoch()).count();
        char buf[384];  // the first call alone (profiling it: perf record ... --part ...)
        std::snprintf(
            buf, sizeof buf,
            "{\"model\": \"%s\", \"mode\": \"%s\", \"task\": \"%s\", \"first_call_s\": %.3f, "
            "\"first_call_cpu_s\": %.3f, \"first_call_window\": \"%.6f,%.6f\"}",
            p.model.c_str(), p.mode.c_str(), p.task.c_str(), first_s, first_cpu_s, start,
            start + first_s);
        return buf;
    }
    t0 = std::chrono::steady_clock::now();
    call();  // a second warm-up call: the steps below reuse what it allocated (graphed: the
             // capture)
    double second_s = seconds_since(t0);
    // Compiled on the CPU: the inductor's kernels-or-eager measurement runs on the calls
    // after the first (codegen/choose.h, 3 timed calls of each path); time what it chose.
    for (int i = 0; compiled && !on_gpu && i < 5; ++i) call();
    // The steps' own peak: buffers the first call (tracing, compiling) left in the pool go
    // back to the OS, and the high-water mark starts again from what is resident now.
    double process_peak = peak_rss_mb();  // tracing and compiling included
    pool_release_cached();
    bool reset = reset_peak_rss();
    size_t live_before = pool_stats().live_bytes;  // parameters, optimizer state, what compiled code keeps
    pool_reset_peak();
    // Which library paths a step took (docs/cuda.md, "Library paths"): calls per step.
    int64_t cudnn0 = detail::cudnn_conv_calls(), optim0 = cuda::fused_optim_launches(),
            lt0 = cuda::detail::cublaslt_calls(),
            ops0 = on_gpu ? cuda::detail::operations_issued() : 0;
    std::vector<double> ms, cpu_ms, main_cpu_ms;
    // KILN_BENCH_SAMPLE=1: a sampling profile of the timed steps (bench/sampler.h); KILN_BENCH_REPS: more of them.
    if (const char* r = std::getenv("KILN_BENCH_REPS")) reps = std::max(reps, std::atoi(r));
    // KILN_BENCH_AB=VAR=A,B: step i runs with VAR set to A (i even) or B (i odd; an empty value
    // unsets it), for settings read at each call (KILN_EPILOGUE_ROWS, KILN_GEMM, ...). This
    // machine's slowdowns come in blocks of seconds (docs/perf-models.md, "GPT inference at 1
    // and 2 threads"), so alternating steps in one process compares two settings under the
    // same conditions, where two processes may not. Prints each setting's median and fastest.
    std::string ab_var, ab_value[2];
    if (const char* ab = std::getenv("KILN_BENCH_AB")) {
        std::string spec = ab;
        size_t eq = spec.find('='), comma = spec.find(',', eq == std::string::npos ? 0 : eq);
        if (eq == std::string::npos || comma == std::string::npos)
            throw Error("bench_models: KILN_BENCH_AB must be VAR=A,B, got '" + spec + "'");
        ab_var = spec.substr(0, eq);
        ab_value[0] = spec.substr(eq + 1, comma - eq - 1);
        ab_value[1] = spec.substr(comma + 1);
    }
    std::vector<double> ab_ms[2];
    bench_sampler::start();
    for (int i = 0; i < reps; ++i) {
        if (!ab_var.empty()) {
            const std::string& v = ab_value[i % 2];
            if (v.empty())
                unsetenv(ab_var.c_str());
            else
                setenv(ab_var.c_str(), v.c_str(), 1);
        }
        t0 = std::chrono::steady_clock::now();
        c0 = cpu_seconds();
        double m0 = thread_cpu_seconds();
        call();
        main_cpu_ms.push_back((thread_cpu_seconds() - m0) * 1e3);
        ms.push_back(seconds_since(t0) * 1e3);
        cpu_ms.push_back((cpu_seconds() - c0) * 1e3);
        if (!ab_var.empty()) ab_ms[i % 2].push_back(ms.back());
    }
    bench_sampler::stop();
    // KILN_BENCH_STEPS=1: every step's wall time too, in order (is a slow process slow on every
    // step, or on a few?).
    std::string steps;
    if (const char* s = std::getenv("KILN_BENCH_STEPS"); s && std::strcmp(s, "1") == 0) {
        steps = ", \"steps_ms\": [";
        for (size_t i = 0; i < ms.size(); ++i) {
            char v[32];
            std::snprintf(v, sizeof v, "%s%.2f", i ? ", " : "", ms[i]);
            steps += v;
        }
        steps += "]";
    }
    for (int k = 0; k < 2 && !ab_var.empty(); ++k) {
        std::vector<double>& v = ab_ms[k];
        std::sort(v.begin(), v.end());
        char one[256];
        std::snprintf(one, sizeof one, "%s{\"%s\": \"%s\", \"ms\": %.3f, \"fastest_ms\": %.3f}",
                      k ? ", " : ", \"ab\": [", ab_var.c_str(), ab_value[k].c_str(),
                      v.empty() ? 0.0 : v[v.size() / 2], v.empty() ? 0.0 : v[0]);
        steps += one;
        if (k == 1) steps += "]";
    }
    std::sort(ms.begin(), ms.end());
    std::sort(cpu_ms.begin(), cpu_ms.end());
    std::sort(main_cpu_ms.begin(), main_cpu_ms.end());
    char paths[384] = "";
    if (on_gpu)  // operations: launches, library calls, copies and memsets kiln's stream got
        std::snprintf(
            paths, sizeof paths,
            ", \"second_call_s\": %.3f, \"per_step\": {\"cudnn_convs\": %.1f, "
            "\"fused_optim_launches\": %.1f, \"cublaslt_gemms\": %.1f, \"operations\": %.1f}",
            second_s, double(detail::cudnn_conv_calls() - cudnn0) / reps,
            double(cuda::fused_optim_launches() - optim0) / reps,
            double(cuda::detail::cublaslt_calls() - lt0) / reps,
            double(cuda::detail::operations_issued() - ops0) / reps);
    char buf[1024];
    std::snprintf(buf, sizeof buf,
                  "{\"model\": \"%s\", \"device\": \"%s\", \"mode\": \"%s\", \"task\": \"%s\", "
                  "\"threads\": %d, \"first_call_s\": %.3f, \"ms\": %.3f, "
                  "\"first_call_cpu_s\": %.3f, \"cpu_ms\": %.3f, \"main_cpu_ms\": %.3f, "
                  "\"peak_rss_mb\": %.1f, \"steps_peak_rss_mb\": %.1f, \"live_before_mb\": %.1f, "
                  "\"steps_peak_live_mb\": %.1f, \"min_ms\": %.3f%s}",
                  p.model.c_str(), p.device.c_str(), p.mode.c_str(), p.task.c_str(), p.threads,
                  first_s, ms[ms.size() / 2], first_cpu_s, cpu_ms[cpu_ms.size() / 2],
                  main_cpu_ms[main_cpu_ms.size() / 2], process_peak,
                  reset ? peak_rss_since_reset_mb() : -1.0, double(live_before) / 1e6,
                  double(pool_stats().peak_live_bytes) / 1e6, ms.front(), paths);
    std::string out = buf;
    if (!steps.empty()) out.insert(out.size() - 1, steps);
    return out;
}

// Runs one part in a fresh process of this binary and returns the JSON line it printed.
std::string spawn_part(const Part& p, const std::string& cache_dir) {
    std::string self = fs::read_symlink("/proc/self/exe").string();
    std::string cmd = "KILN_NUM_THREADS=" + std::to_string(p.threads) + " OPENBLAS_NUM_THREADS=" + std::to_string(p.threads) +
                      " KILN_CACHE_DIR='" + cache_dir + "' '" + self + "' --part " + p.model + " " + p.mode + " " + p.task + " " +
                      std::to_string(p.threads) + " " + p.device;
    FILE* pipe = popen(cmd.c_str(), "r");
    if (!pipe) return "{\"error\": \"popen failed\"}";
    std::string out;
    char line[1024];
    while (std::fgets(line, sizeof line, pipe)) out += line;
    int status = pclose(pipe);
    while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
    if (status != 0 || out.empty() || out.front() != '{')
        return "{\"model\": \"" + p.model + "\", \"mode\": \"" + p.mode + "\", \"task\": \"" + p.task + "\", \"threads\": " +
               std::to_string(p.threads) + ", \"error\": \"the part failed (exit status " + std::to_string(status) + ")\"}";
    return out.substr(out.rfind('\n') == std::string::npos ? 0 : out.rfind('\n') + 1);
}

}  // namespace

int main(int argc, char** argv) {
    if (argc == 7 && std::strcmp(argv[1], "--part") == 0) {
        try {
            std::printf("%s\n", run_part({argv[2], argv[3], argv[4], std::atoi(argv[5]), argv[6]}).c_str());
        } catch (const Error& e) {
            std::fprintf(stderr, "bench_models: %s\n", e.what());
            return 1;
        }
        return 0;
    }
    bool quick = false, gpu = false;
    for (int i = 1; i < argc; ++i) quick = quick || std::strcmp(argv[i], "--quick") == 0, gpu = gpu || std::strcmp(argv[i], "--cuda") == 0;
    if (gpu && !cuda::is_available()) {
        std::printf("{\"bench\": \"models\", \"skipped\": \"%s\"}\n", cuda::unavailable_reason().c_str());
        return 0;
    }
    std::vector<std::string> model_names = {"resnet18_32", "gpt"};
    if (!quick) model_names.insert(model_names.begin(), "resnet18_224");
    std::vector<int> thread_counts = gpu ? std::vector<int>{1} : std::vector<int>{1, 2};
    // The kernel cache: empty for each model's first compiled part (cold), then kept (warm).
    fs::path cache_root = fs::temp_directory_path() / ("kiln_bench_models_" + std::to_string(getpid()));
    std::vector<std::string> rows;
    for (const std::string& model : model_names)
        for (const char* task : {"infer", "train"}) {
            std::string cache = (cache_root / (model + "_" + task)).string();
            for (int threads : thread_counts)
                for (const char* mode : {"eager", "compiled", "graphed", "compiled_graphed"}) {
                    bool whole_step = std::strstr(mode, "graphed") != nullptr;
                    if (whole_step && !(gpu && std::strcmp(task, "train") == 0))
                        continue;  // a whole step as one CUDA graph: GPU training only
                    std::fprintf(stderr, "bench_models: %s %s %s, %d thread%s%s\n", model.c_str(), task, mode, threads, threads > 1 ? "s" : "",
                                 gpu ? ", cuda" : "");
                    rows.push_back(spawn_part({model, mode, task, threads, gpu ? "cuda" : "cpu"}, cache));
                }
        }
    std::error_code ec;
    fs::remove_all(cache_root, ec);
    std::string out = "{\"bench\": \"models\", \"note\": \"compiled parts at 1 thread start from an empty kernel cache (cold first call); at 2 threads from the cache they filled (warm)\", \"rows\": [\n  ";
    for (size_t i = 0; i < rows.size(); ++i) out += (i ? ",\n  " : "") + rows[i];
    out += "\n]}";
    std::printf("%s\n", out.c_str());
    return 0;
}
