// Matmul epilogues fused into the GEMM's row blocks (docs/codegen.md, "Matmul epilogues"):
// compiled with fusion, compiled without (KILN_EPILOGUE=0 while the graph compiles), and eager,
// at 1 and 2 threads, on linear + bias + GELU [1024, 256] x [256, 1024], linear + bias + relu
// [8192, 784] x [784, 512], attention scores softmax(q @ k^T * scale + mask) for [8, 4, 128, 64],
// and the GPT of bench_models (4 layers, d = 256, 4 heads, seq 128, batch 8): inference and one
// SGD training step. Each thread count runs in a process of its own (this binary with
// --threads T, OPENBLAS_NUM_THREADS=T); the three modes take turns within each repetition, so
// noise from other processes falls on all three alike. Also the share of each step spent
// inside BLAS (tensor/gemm.h's profile; threads' times added, so at 2 threads up to 2x wall).
// Prints one JSON object.
//   build/bench_epilogue [--reps N] [--no-gpt]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "kiln.h"
#include "models/gpt.h"
#include "tensor/gemm.h"
#include "tensor/parallel.h"

using namespace kiln;
namespace fs = std::filesystem;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// Compiles `make()`'s function and runs its first calls (the build, then the kernels-or-eager
// measurement) with KILN_EPILOGUE set to `epilogue`, so its schedule is built that way.
template <class F>
void warm_up(F& f, const char* epilogue, int calls = 8) {
    setenv("KILN_EPILOGUE", epilogue, 1);
    for (int i = 0; i < calls; ++i) {
        f();
        codegen::wait_for_async_compiles();
    }
    unsetenv("KILN_EPILOGUE");
}

struct Mode {
    const char* name;
    std::function<void()> call;
    std::vector<double> ms;
    double blas_ns = 0;
};

// The modes take turns, `reps` times; returns one JSON object.
std::string measure(const std::string& workload, std::vector<Mode>& modes, int reps) {
    for (int r = 0; r < reps; ++r)
        for (Mode& m : modes) {
            gemm_profile(true);
            auto t0 = std::chrono::steady_clock::now();
            m.call();
            m.ms.push_back(seconds_since(t0) * 1e3);
            m.blas_ns += double(gemm_profile_counts().ns);
            gemm_profile(false);
        }
    std::string out =
        "{\"workload\": \"" + workload + "\", \"threads\": " + std::to_string(num_threads());
    for (Mode& m : modes) {
        char buf[160];
        double total_ms = 0;
        for (double t : m.ms) total_ms += t;
        std::snprintf(buf, sizeof buf, ", \"%s_ms\": %.3f, \"%s_blas_share\": %.2f", m.name,
                      median(m.ms), m.name, m.blas_ns / 1e6 / total_ms);
        out += buf;
    }
    char buf[200];
    std::snprintf(buf, sizeof buf, ", \"fused_vs_unfused\": %.3f, \"fused_vs_eager\": %.3f}",
                  median(modes[2].ms) / median(modes[1].ms),
                  median(modes[0].ms) / median(modes[1].ms));
    return out + buf;
}

Tensor linear_gelu(Tensor x, Tensor w, Tensor b) {
    return nn::functional::gelu(matmul(x, w.t()) + b, "tanh");
}
Tensor linear_relu(Tensor x, Tensor w, Tensor b) { return relu(matmul(x, w.t()) + b); }
Tensor attention_scores(Tensor q, Tensor k, Tensor mask) {
    return softmax(matmul(q, k.transpose(-2, -1)) * 0.125 + mask, -1);
}

// One of the three-input workloads above: eager, compiled fused, compiled unfused.
std::string three_input(const std::string& name, Tensor (*fn)(Tensor, Tensor, Tensor), Tensor a,
                        Tensor b, Tensor c, int reps) {
    CompileOptions options;
    options.choose_faster = false;  // time the generated code itself
    auto fused = compile(fn, options), unfused = compile(fn, options);
    auto call_fused = [&] { (void)fused(a, b, c); };
    auto call_unfused = [&] { (void)unfused(a, b, c); };
    warm_up(call_fused, "1", 2);
    warm_up(call_unfused, "0", 2);
    std::vector<Mode> modes = {{"eager", [&] { (void)fn(a, b, c); }, {}},
                               {"fused", call_fused, {}},
                               {"unfused", call_unfused, {}}};
    return measure(name, modes, reps);
}

std::vector<std::string> gpt(int reps) {
    manual_seed(0);
    auto net = std::make_shared<models::Gpt>(models::GptConfig{
        .vocab_size = 1024, .max_positions = 128, .layers = 4, .d_model = 256, .heads = 4});
    Tensor x = randint(0, 1024, {8, 128}), target = randint(0, 1024, {8 * 128});
    nn::Module& m = *net;
    auto forward_fn = [](nn::Module& module, const Tensor& input) { return module.forward(input); };
    auto loss_fn = [](nn::Module& module, const Tensor& input, const Tensor& t) {
        Tensor logits = module.forward(input);
        return nn::functional::cross_entropy(logits.reshape({t.size(0), logits.size(-1)}), t);
    };
    optim::SGD opt(net->parameters(), 0.01, 0.9);
    std::vector<std::string> rows;
    {
        net->eval();
        auto fused = compile(forward_fn), unfused = compile(forward_fn);
        auto infer = [&](auto& f) {
            autograd::NoGradGuard no_grad;
            (void)f(m, x);
        };
        auto call_fused = [&] { infer(fused); };
        auto call_unfused = [&] { infer(unfused); };
        warm_up(call_fused, "1");
        warm_up(call_unfused, "0");
        std::vector<Mode> modes = {{"eager", [&] { infer(forward_fn); }, {}},
                                   {"fused", call_fused, {}},
                                   {"unfused", call_unfused, {}}};
        rows.push_back(measure("gpt_infer", modes, reps));
    }
    {
        net->train();
        auto fused = compile(loss_fn), unfused = compile(loss_fn);
        auto step = [&](auto& f) {
            opt.zero_grad();
            Tensor loss = f(m, x, target);
            loss.backward();
            opt.step();
        };
        auto call_fused = [&] { step(fused); };
        auto call_unfused = [&] { step(unfused); };
        warm_up(call_fused, "1");
        warm_up(call_unfused, "0");
        std::vector<Mode> modes = {{"eager", [&] { step(loss_fn); }, {}},
                                   {"fused", call_fused, {}},
                                   {"unfused", call_unfused, {}}};
        rows.push_back(measure("gpt_train_step", modes, reps));
    }
    return rows;
}

std::string run_threads(int reps, bool with_gpt) {
    std::vector<std::string> rows;
    rows.push_back(three_input("linear_bias_gelu_1024x256_256x1024", linear_gelu,
                               randn({1024, 256}), randn({1024, 256}) * 0.06, randn({1024}), reps));
    rows.push_back(three_input("linear_bias_relu_8192x784_784x512", linear_relu, randn({8192, 784}),
                               randn({512, 784}) * 0.04, randn({512}), reps));
    Tensor causal = (arange(128.0).unsqueeze(1) < arange(128.0).unsqueeze(0)).to(float32) * -1e9;
    rows.push_back(three_input("attention_scores_softmax_8x4x128x64", attention_scores,
                               randn({8, 4, 128, 64}), randn({8, 4, 128, 64}), causal, reps));
    if (with_gpt)
        for (std::string& r : gpt(std::max(3, reps / 3))) rows.push_back(r);
    std::string out;
    for (size_t i = 0; i < rows.size(); ++i) out += (i ? ",\n  " : "") + rows[i];
    return out;
}

}  // namespace

int main(int argc, char** argv) {
    int reps = 21, threads = 0;
    bool with_gpt = true;
    for (int i = 1; i < argc; ++i) with_gpt = with_gpt && std::strcmp(argv[i], "--no-gpt") != 0;
    for (int i = 1; i + 1 < argc; ++i) {
        if (std::strcmp(argv[i], "--reps") == 0) reps = std::atoi(argv[i + 1]);
        if (std::strcmp(argv[i], "--threads") == 0) threads = std::atoi(argv[i + 1]);
    }
    if (threads > 0) {  // a child: one thread count
        set_num_threads(threads);
        std::printf("%s\n", run_threads(reps, with_gpt).c_str());
        return 0;
    }
    std::string self = fs::read_symlink("/proc/self/exe").string();
    std::string cache =
        (fs::temp_directory_path() / ("kiln-bench-epilogue-" + std::to_string(getpid()))).string();
    std::string out =
        "{\"bench\": \"epilogue\", \"stat\": \"median\", \"reps\": " + std::to_string(reps) +
        ", \"rows\": [\n  ";
    for (int t : {1, 2}) {
        std::string cmd = "KILN_NUM_THREADS=" + std::to_string(t) +
                          " OPENBLAS_NUM_THREADS=" + std::to_string(t) + " KILN_CACHE_DIR='" +
                          cache + "' '" + self + "' --reps " + std::to_string(reps) +
                          " --threads " + std::to_string(t) + (with_gpt ? "" : " --no-gpt");
        std::fprintf(stderr, "bench_epilogue: %d thread%s\n", t, t > 1 ? "s" : "");
        FILE* pipe = popen(cmd.c_str(), "r");
        std::string part;
        char line[4096];
        while (pipe && std::fgets(line, sizeof line, pipe)) part += line;
        if (pipe) pclose(pipe);
        while (!part.empty() && part.back() == '\n') part.pop_back();
        out += (t > 1 ? ",\n  " : "") + part;
    }
    std::error_code ec;
    fs::remove_all(cache, ec);
    std::printf("%s\n]}\n", out.c_str());
    return 0;
}
