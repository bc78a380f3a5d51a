// bench_ddp: DistributedDataParallel's step time on 1 rank and on N (weak scaling: the same
// batch per rank), printed as one JSON object. It runs itself through `kiln launch` once per
// world size (the kiln binary beside it) and reads each run's line:
//   build/bench_ddp --model resnet18 --device cuda --batch 32 --nproc 1,2,4 [--compiled]
//   build/bench_ddp --model mlp --nproc 1,2           (CPU, MPI)
//   build/bench_ddp --model gpt --device cuda --batch 8 --nproc 1,2,4 --graph
// --graph: each rank's whole step (forward, backward with the bucketed all-reduces, SGD) is
// captured as one CUDA graph (cuda::GraphedStep) during the untimed warm-up steps and
// replayed; allreduce_wait_ms and buffer_sync_ms are then -1 (no host code runs per step).
// --no-sync: no all-reduce at all (DDP's no_sync() around every step), to tell the cost of
// communication from the cost of running N ranks on one host.
// --no-ddp: the same step with no DDP at all (each rank trains alone; the process group is
// initialised but nothing is broadcast, so the engine, NCCL or MPI, is never started), and
// --no-ddp --touch-engine: the same after one all_reduce of one number (the engine started,
// idle during the steps): with --no-sync they tell which of DDP and the engine costs what.
// Efficiency at N ranks = step time at 1 / step time at N (1.0: perfect). docs/distributed.md.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <sstream>

#include "kiln.h"
#include "median.h"
#include "models/gpt.h"
#include "models/resnet.h"
#include "tensor/cuda.h"

using namespace kiln;

namespace {

struct Args {
    std::string model = "mlp", device = "cpu", nproc = "1,2";
    int64_t batch = 32, image = 224, seq = 128;
    int steps = 10, warmup = 3;
    double bucket_cap_mb = 25;
    std::optional<double> first_bucket_cap_mb, last_bucket_cap_mb;  // unset: DDP's default
    bool compiled = false, worker = false, graph = false, no_sync = false, no_ddp = false,
         touch_engine = false, empty_cache = false;
    std::string touch_params;
};

std::shared_ptr<nn::Module> make_model(const Args& a) {
    if (a.model == "resnet18") return std::make_shared<models::ResNet18>(1000);
    if (a.model == "gpt") return std::make_shared<models::Gpt>();
    KILN_CHECK(a.model == "mlp", "bench_ddp: --model is mlp, resnet18 or gpt, got ", a.model);
    return std::make_shared<nn::Sequential>(nn::sequential(nn::Linear(1024, 4096), nn::ReLU(),
                                                           nn::Linear(4096, 4096), nn::ReLU(),
                                                           nn::Linear(4096, 10)));
}

// One rank: DDP steps (forward, backward with the all-reduces, SGD); rank 0 prints one line.
int worker(const Args& a) {
    dist::init_process_group();
    Device dev = a.device == "cuda" ? Device{DeviceType::cuda, 0} : kiln::cpu;
    manual_seed(0);
    auto net = make_model(a);
    net->to(dev);
    Tensor x, y;
    if (a.model == "gpt") {
        x = randint(0, 256, {a.batch, a.seq}).to(dev);
        y = randint(0, 256, {a.batch * a.seq}).to(dev);
    } else {
        x = (a.model == "resnet18" ? randn({a.batch, 3, a.image, a.image}) : randn({a.batch, 1024}))
                .to(dev);
        y = randint(0, 10, {a.batch}).to(dev);
    }
    nn::DDPOptions options{.bucket_cap_mb = a.bucket_cap_mb,
                           .first_bucket_cap_mb = a.first_bucket_cap_mb,
                           .last_bucket_cap_mb = a.last_bucket_cap_mb};
    if (a.compiled) {
        auto f = std::make_shared<decltype(compile(*net))>(compile(*net));
        options.forward = [f](const Tensor& t) { return (*f)(t); };
    }
    std::unique_ptr<nn::DistributedDataParallel> ddp;
    if (!a.no_ddp) ddp = std::make_unique<nn::DistributedDataParallel>(net, options);
    if (a.touch_engine) dist::all_reduce(ones({1}).to(dev));
    if (!a.touch_params.empty()) {  // what DDP's constructor does: rank 0's state to every rank
        NoGradGuard no_grad;
        for (const auto& [name, t] : net->state_dict()) {
            if (a.touch_params == "broadcast") dist::broadcast(t, 0);
            if (a.touch_params == "copies") dist::broadcast(t.clone(), 0);
            if (a.touch_params == "write") Tensor(t).copy_(t.clone());
        }
    }
    if (a.empty_cache && dev.type == DeviceType::cuda) cuda::empty_cache();
    // --no-sync: every step under DDP's no_sync(), so no bucket is copied or all-reduced: the
    // step's cost at N ranks without communication, beside the same run with it.
    std::optional<nn::DistributedDataParallel::NoSync> local_only;
    if (a.no_sync && ddp) local_only.emplace(*ddp);
    optim::SGD opt(ddp ? ddp->parameters() : net->parameters(), 0.01, 0.9);
    std::vector<double> waits, buffer_syncs, gpu_ms, launch_ms;
    // On CUDA, each step's GPU time (events on kiln's stream around it) and the host's time to
    // issue it (before the wait): with wall time they tell a slower GPU from a slower host.
    std::optional<cuda::Event> started, ended;
    if (dev.type == DeviceType::cuda) started.emplace(), ended.emplace();
    auto train = [&] {
        opt.zero_grad();
        Tensor out = ddp ? (*ddp)(x) : options.forward ? options.forward(x) : (*net)(x);
        if (a.model == "gpt") out = out.reshape({-1, out.size(-1)});
        nn::functional::cross_entropy(out, y).backward();
        opt.step();
    };
    // --graph: the eager warm-up steps but the last, then the capture (all untimed), then replays.
    KILN_CHECK(!a.graph || (dev.type == DeviceType::cuda && a.warmup >= 2),
               "bench_ddp: --graph needs --device cuda and --warmup 2 or more, got --device ",
               a.device, " --warmup ", a.warmup);
    std::unique_ptr<cuda::GraphedStep> graphed;
    if (a.graph)
        graphed = std::make_unique<cuda::GraphedStep>(
            [&] {
                train();
                return std::vector<Tensor>{};
            },
            cuda::GraphedStepOptions{.warmup = a.warmup - 1});
    auto step = [&] {
        auto issue = std::chrono::steady_clock::now();
        if (started) started->record();
        if (graphed)
            (*graphed)();
        else
            train();
        if (ended) ended->record();
        launch_ms.push_back(
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - issue)
                .count());
        if (dev.type == DeviceType::cuda) {
            cuda::synchronize();
            gpu_ms.push_back(started->elapsed_ms(*ended));
        }
        waits.push_back(graphed || !ddp ? -1.0 : ddp->last_wait_seconds() * 1e3);
        buffer_syncs.push_back(graphed || !ddp ? -1.0 : ddp->last_timeline().buffer_sync_us / 1e3);
    };
    double ms = kiln_bench::median_ms(step, a.steps, a.warmup);
    auto timed_median = [&](std::vector<double>& v) {
        if (v.empty()) return -1.0;
        std::sort(v.begin() + a.warmup, v.end());
        return v[size_t(a.warmup) + size_t(a.steps) / 2];
    };
    double wait_ms = timed_median(waits), buffer_ms = timed_median(buffer_syncs);
    double gpu = timed_median(gpu_ms), launch = timed_median(launch_ms);
    KILN_CHECK(!graphed || graphed->replays() >= a.steps,
               "bench_ddp: the timed steps were not replays (", graphed ? graphed->replays() : 0,
               " replays for ", a.steps, " steps)");
    if (dist::get_rank() == 0)
        std::printf(
            "{\"world_size\": %d, \"step_ms\": %.3f, \"allreduce_wait_ms\": %.3f, "
            "\"buffer_sync_ms\": %.3f, \"gpu_ms\": %.3f, \"issue_ms\": %.3f}\n",
            dist::get_world_size(), ms, wait_ms, buffer_ms, gpu, launch);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"bench_ddp: DDP step time on 1 and N ranks, one JSON object"};
    Args a;
    app.add_option("--model", a.model, "mlp, resnet18 or gpt");
    app.add_option("--device", a.device, "cpu (MPI) or cuda (NCCL)");
    app.add_option("--nproc", a.nproc, "world sizes, comma-separated");
    app.add_option("--batch", a.batch, "examples per rank");
    app.add_option("--image", a.image, "resnet18's image size");
    app.add_option("--seq", a.seq, "gpt's sequence length");
    app.add_option("--steps", a.steps, "timed steps (median)");
    app.add_option("--warmup", a.warmup, "untimed steps first (compiling)");
    app.add_option("--bucket-cap-mb", a.bucket_cap_mb, "DDP's bucket size");
    app.add_option("--first-bucket-cap-mb", a.first_bucket_cap_mb,
                   "DDP's first bucket (the last layers'); unset: DDP's default (1 MiB when the "
                   "gradients need more than one bucket, else one bucket); 25 with "
                   "--last-bucket-cap-mb 25: plain 25 MB buckets");
    app.add_option("--last-bucket-cap-mb", a.last_bucket_cap_mb,
                   "DDP's last bucket (the first layers')");
    app.add_flag("--compiled", a.compiled, "a compiled model inside DDP");
    app.add_flag("--no-sync", a.no_sync,
                 "every step under DDP's no_sync(): no all-reduce (the cost of N ranks without communication)");
    app.add_flag("--no-ddp", a.no_ddp,
                 "no DDP: each rank trains alone (the engine is never started)");
    app.add_flag("--touch-engine", a.touch_engine,
                 "one all_reduce of one number before the steps (starts the engine)");
    app.add_option("--touch-params", a.touch_params,
                   "broadcast: the model's state from rank 0 first, as DDP's constructor does; "
                   "copies: copies of it; write: each tensor written in place, no broadcast");
    app.add_flag("--empty-cache", a.empty_cache,
                 "give the CUDA allocator's cached blocks back before the first step");
    app.add_flag(
        "--graph", a.graph,
        "capture each rank's whole step as one CUDA graph (cuda::GraphedStep) and replay it");
    app.add_flag("--worker", a.worker, "internal: one rank of a run");
    CLI11_PARSE(app, argc, argv);
    try {
        if (a.worker) return worker(a);
    } catch (const Error& e) {
        std::fprintf(stderr, "bench_ddp: %s\n", e.what());
        return 1;
    }
    std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
    std::string kiln = (std::filesystem::path(self).parent_path() / "kiln").string();
    std::ostringstream runs;
    std::vector<std::pair<int, double>> times;
    std::stringstream list(a.nproc);
    for (std::string n; std::getline(list, n, ',');) {
        std::ostringstream cmd;
        cmd << kiln << " launch --nproc " << n << " " << self << " --worker --model " << a.model
            << " --device " << a.device << " --batch " << a.batch << " --image " << a.image
            << " --seq " << a.seq << " --steps " << a.steps << " --warmup " << a.warmup
            << " --bucket-cap-mb " << a.bucket_cap_mb
            << (a.first_bucket_cap_mb
                    ? " --first-bucket-cap-mb " + std::to_string(*a.first_bucket_cap_mb)
                    : "")
            << (a.last_bucket_cap_mb
                    ? " --last-bucket-cap-mb " + std::to_string(*a.last_bucket_cap_mb)
                    : "")
            << (a.compiled ? " --compiled" : "") << (a.graph ? " --graph" : "")
            << (a.no_sync ? " --no-sync" : "") << (a.no_ddp ? " --no-ddp" : "")
            << (a.touch_engine ? " --touch-engine" : "")
            << (a.touch_params.empty() ? "" : " --touch-params " + a.touch_params)
            << (a.empty_cache ? " --empty-cache" : "");
        FILE* p = popen(cmd.str().c_str(), "r");
        char line[512] = {};
        std::string got;
        while (p && std::fgets(line, sizeof line, p)) got += line;
        int rc = p ? pclose(p) : -1;
        if (rc != 0 || got.find("step_ms") == std::string::npos) {
            std::fprintf(stderr, "bench_ddp: the run on %s rank(s) failed: %s\n%s", n.c_str(),
                         cmd.str().c_str(), got.c_str());
            return 1;
        }
        got = got.substr(got.find('{'));
        got = got.substr(0, got.find('}') + 1);
        runs << (times.empty() ? "" : ", ") << got;
        times.emplace_back(std::stoi(n), std::stod(got.substr(got.find("\"step_ms\": ") + 11)));
    }
    std::ostringstream eff;
    for (const auto& [n, ms] : times)
        if (times[0].first == 1)
            eff << (eff.tellp() ? ", " : "") << "\"" << n << "\": " << times[0].second / ms;
    std::printf(
        "{\"bench\": \"ddp\", \"model\": \"%s\", \"device\": \"%s\", \"compiled\": %s, "
        "\"graph\": %s, \"no_sync\": %s, \"no_ddp\": %s, \"batch_per_rank\": %lld, "
        "\"runs\": [%s], \"scaling_efficiency\": {%s}}\n",
        a.model.c_str(), a.device.c_str(), a.compiled ? "true" : "false",
        a.graph ? "true" : "false", a.no_sync ? "true" : "false", a.no_ddp ? "true" : "false",
        (long long)a.batch,
        runs.str().c_str(), eff.str().c_str());
    return 0;
}
