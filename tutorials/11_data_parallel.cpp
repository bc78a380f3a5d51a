// Lesson 11: data parallel — several processes train one model and end with the model one
// process would have trained on the whole batch.
//
// Mirrors PyTorch's "Getting Started with Distributed Data Parallel" and the DDP part of
// the torch.compile tutorials. Each process (a *rank*) holds a replica of the model and
// takes a share of every batch; after backward, DistributedDataParallel has averaged the
// gradients over the ranks, so every replica takes the same optimizer step. The average of
// the shares' gradients is the whole batch's gradient (the loss is a mean over equal
// shares), so N ranks give, step by step, what one process gives on the whole batch.
//
// Gradients are averaged in buckets, each as soon as its last gradient is ready, while
// backward continues with the layers before it: that is the overlap that makes DDP scale.
// This lesson prints, per step, the time spent computing and the time backward's end
// still waited for the all-reduces. A compiled model keeps the overlap: its graph is cut at
// the buckets into subgraphs, each with its own backward, and the lesson prints the cut.
//
// Run it on one process, then on two (docs/distributed.md):
//   build/tutorial_11_data_parallel
//   build/kiln launch --nproc 2 build/tutorial_11_data_parallel
#include <chrono>
#include <cstdio>

#include "jit/explain.h"
#include "kiln.h"

using namespace kiln;

namespace {

int failures = 0;
void check(bool ok, const std::string& what) {
    if (dist::get_rank() == 0) std::printf("check: %s: %s\n", what.c_str(), ok ? "yes" : "NO");
    failures += !ok;
}

std::shared_ptr<nn::Module> make_model() {
    manual_seed(0);  // every rank builds the same model (DDP broadcasts rank 0's anyway)
    return std::make_shared<nn::Sequential>(nn::sequential(
        nn::Linear(32, 128), nn::ReLU(), nn::Linear(128, 128), nn::ReLU(), nn::Linear(128, 10)));
}

constexpr int kSteps = 5, kGlobalBatch = 64;

// Trains with DDP on this rank's share of each batch; returns the trained parameters.
std::vector<Tensor> train_ddp(const std::vector<Tensor>& xs, const std::vector<Tensor>& ys,
                              bool compiled) {
    int rank = dist::get_rank(), world = dist::get_world_size();
    int64_t share = kGlobalBatch / world;
    auto model = make_model();
    nn::DDPOptions options{.bucket_cap_mb =
                               0.05};  // small buckets, so this small model has several
    std::shared_ptr<decltype(compile(*model))> f;
    if (compiled) {  // a compiled model inside DDP
        f = std::make_shared<decltype(compile(*model))>(compile(*model));
        options.forward = [f](const Tensor& x) { return (*f)(x); };
    }
    nn::DistributedDataParallel ddp(model, options);
    optim::SGD opt(ddp.parameters(), 0.1, 0.9);
    if (rank == 0)
        std::printf("\n%s model, %d rank(s), %lld examples each, %zu gradient buckets\n",
                    compiled ? "compiled" : "eager", world, (long long)share,
                    ddp.bucket_layout().size());
    for (int s = 0; s < kSteps; ++s) {
        auto start = std::chrono::steady_clock::now();
        opt.zero_grad();
        Tensor loss = nn::functional::cross_entropy(ddp(xs[s].narrow(0, rank * share, share)),
                                                    ys[s].narrow(0, rank * share, share));
        loss.backward();  // the buckets' all-reduces start in here
        opt.step();
        double total_ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                .count();
        double wait_ms = ddp.last_wait_seconds() * 1e3;
        Tensor mean_loss = loss.detach().clone();
        dist::all_reduce(mean_loss, dist::ReduceOp::avg);  // the whole batch's loss
        if (rank == 0)
            std::printf("  step %d: loss %.4f   compute %7.2f ms   all-reduce wait %6.2f ms\n", s,
                        mean_loss.item<double>(), total_ms - wait_ms, wait_ms);
    }
    if (compiled) {
        // Compiled under DDP, the model's graph was cut at the buckets, one subgraph each, so
        // the last layers' gradients (and their all-reduce) come before the first layers'
        // backward has run: explain shows the cut (Dynamo's DDPOptimizer does the same).
        jit::ExplainOutput e = jit::explain_compiled(*f);
        if (rank == 0 && !e.ddp_splits.empty()) std::printf("  DDP split: %s", e.ddp_splits[0].c_str());
        check(!e.ddp_subgraphs.empty() && e.ddp_subgraphs[0] > 1,
              "the compiled graph is cut into one subgraph per bucket");
    }
    return ddp.module().parameters();
}

// The same steps in one process, on the whole batch: no ranks, no DDP.
std::vector<Tensor> train_one_process(const std::vector<Tensor>& xs,
                                      const std::vector<Tensor>& ys) {
    auto model = make_model();
    optim::SGD opt(model->parameters(), 0.1, 0.9);
    for (int s = 0; s < kSteps; ++s) {
        opt.zero_grad();
        nn::functional::cross_entropy((*model)(xs[s]), ys[s]).backward();
        opt.step();
    }
    return model->parameters();
}

double max_difference(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
    double d = 0;
    for (size_t k = 0; k < a.size(); ++k)
        d = std::max(d, (a[k] - b[k]).abs().amax().item<double>());
    return d;
}

}  // namespace

int main() {
    dist::init_process_group();  // RANK, WORLD_SIZE, MASTER_ADDR/PORT: kiln launch sets them
    int world = dist::get_world_size();
    if (dist::get_rank() == 0)
        std::printf("lesson 11: data parallel on %d process(es); global batch %d\n", world,
                    kGlobalBatch);
    KILN_CHECK(kGlobalBatch % world == 0, "lesson 11: the batch of ", kGlobalBatch,
               " does not split over ", world, " ranks");
    manual_seed(1);  // every rank draws the same batches and keeps its share
    std::vector<Tensor> xs, ys;
    for (int s = 0; s < kSteps; ++s)
        xs.push_back(randn({kGlobalBatch, 32})), ys.push_back(randint(0, 10, {kGlobalBatch}));

    std::vector<Tensor> reference = train_one_process(xs, ys);
    for (bool compiled : {false, true}) {
        double d = max_difference(train_ddp(xs, ys, compiled), reference);
        if (dist::get_rank() == 0)
            std::printf("  largest difference from one process on the whole batch: %.2g\n", d);
        check(d < 1e-5, std::string("the ") + (compiled ? "compiled" : "eager") +
                            " DDP model equals one process's trained on the whole batch");
    }
    if (dist::get_rank() == 0 && failures == 0) std::printf("lesson 11: all checks passed\n");
    return failures == 0 ? 0 : 1;
}
