// nn::DistributedDataParallel (PyTorch's DDP): each rank holds a replica of the module and
// trains it on its share of the batch; gradients are averaged over ranks during backward, so
// every replica takes the same step. docs/distributed.md.
//
//   dist::init_process_group();
//   auto ddp = std::make_shared<nn::DistributedDataParallel>(net);   // rank 0's weights everywhere
//   optim::SGD opt(ddp->parameters(), 0.1);
//   loss_fn((*ddp)(x_of_this_rank), y).backward();   // buckets all-reduced as their gradients are
//   ready opt.step();
//
// Gradients are grouped into buckets (bucket_cap_mb, parameters in reverse order, as their
// gradients arrive; the first and the last bucket small); a post-accumulate-grad hook
// (autograd/hooks.h) starts a bucket's all-reduce (average) as soon as its last gradient is
// in, while backward goes on; buckets start in the same order on every rank. The last
// bucket's hook joins all of them and makes each .grad a view of its bucket's averages. On
// GPUs NCCL runs them on a stream of its own and kiln's stream waits for them, not the host.
// A whole DDP step can be captured as one CUDA graph (cuda::GraphedStep): the all-reduces are
// then forked to NCCL's stream and joined back inside the graph, and the host never polls them.
#pragma once
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "dist/dist.h"
#include "jit/ddp_split.h"
#include "nn/module.h"

namespace kiln::nn {

struct DDPOptions {
    double bucket_cap_mb = 25;  // PyTorch's default
    // The first bucket (the last layers' gradients, ready first) holds at most this much, as
    // PyTorch's (dist._DEFAULT_FIRST_BUCKET_BYTES, 1 MiB), so the first all-reduce starts
    // early. The last bucket (the first layers' gradients, ready at the end of backward) too:
    // what it holds is all-reduced after the backward's last kernel, so it is kept small. A
    // parameter larger than a cap gets a bucket of its own. Neither is larger than bucket_cap_mb.
    // Unset (the default): 1 MiB each when the gradients need more than one bucket_cap_mb,
    // and no small buckets when they all fit in one: one all-reduce after the backward was
    // faster than three overlapping it for a model that small (compiled GPT, 13 MB, whole
    // step graphed on 4 H100s: 2.60 against 2.71 ms; ResNet-18's 47 MB: the same either way;
    // docs/distributed.md, "What overlaps").
    std::optional<double> first_bucket_cap_mb;
    std::optional<double> last_bucket_cap_mb;
    bool broadcast_buffers = true;  // rank 0's buffers (batch-norm statistics) before each forward
    // Runs the module instead of module->forward: a compiled forward (compile(*net)) inside DDP.
    // A compiled forward's graph is recorded while this DDP's forward runs, so compile() cuts
    // it at these buckets (jit/ddp_split.h): each bucket's gradients are ready, and its
    // all-reduce starts, while the earlier subgraphs' backward still runs.
    std::function<Tensor(const Tensor&)> forward;
    // Called as each bucket's all-reduce starts (bucket index, launch order): lesson 11 and the
    // tests see what overlaps the backward.
    std::function<void(size_t bucket)> on_all_reduce_start;
};

// What the last forward and backward of a DDP did, as the host saw it (and, with KILN_LOGS=ddp
// on CUDA, as the GPU saw it). KILN_LOGS=ddp prints it after each backward (str()).
struct DDPTimeline {
    // The forward's broadcast of rank 0's buffers: how long the host spent in it, how many
    // engine calls (dist::engine_calls()) it made, how many buffers it carried.
    double buffer_sync_us = 0;
    int64_t buffer_engine_calls = 0;
    size_t buffers = 0;
    // KILN_LOGS=ddp on CUDA: GPU ms kiln's stream spent in the broadcast (from an event before
    // it is issued to one after kiln's stream joined it); -1 otherwise.
    double buffer_gpu_ms = -1;
    // Host times in µs since the backward's first gradient hook (the first parameter's
    // gradient in); -1 where it did not happen.
    double first_hook_after_forward_us = -1;  // from the forward's return to that hook
    struct Bucket {
        size_t params = 0, bytes = 0;
        double ready_us = -1;      // its last gradient's hook
        double enqueued_us = -1;   // its all-reduce handed to the engine (in bucket order)
        double done_us = -1;       // joined at the end: CUDA, kiln's stream waits for it (the host
                                   // does not); CPU, the host's wait returned
        double gpu_ready_ms = -1;  // KILN_LOGS=ddp on CUDA: its flat copy done on the GPU
    };
    std::vector<Bucket> buckets;  // launch order
    double wait_start_us = -1;    // the last bucket's hook starts joining all of them
    double end_us = -1;           // every .grad a view of its bucket's averages
    // KILN_LOGS=ddp on CUDA: GPU ms since the first hook, read from events on kiln's stream:
    // the backward's kernels queued before the wait all ran by gpu_backward_end_ms; the
    // all-reduces were done (and kiln's stream joined them) by gpu_all_reduced_ms. Their
    // difference is what the all-reduces add after the backward on the GPU; the host's wait
    // (end_us - wait_start_us) also holds the backward kernels the GPU had not run yet.
    double gpu_backward_end_ms = -1, gpu_all_reduced_ms = -1;
    std::string str() const;  // one line per bucket
};

// DDP's buckets for parameters of these sizes (bytes, in parameter order): indices into
// them per bucket, in launch order (the last parameters first). Greedy from the last
// parameter back, each bucket up to its cap (first_bucket_cap_mb for the first, bucket_cap_mb
// for the others; a parameter alone may exceed it), then the first parameters, up to
// last_bucket_cap_mb, split off the last bucket into one of their own. Unset small caps are
// 1 MiB when the sizes add up to more than bucket_cap_mb, else bucket_cap_mb (one bucket).
std::vector<std::vector<size_t>> ddp_bucket_assignment(const std::vector<size_t>& bytes,
                                                       const DDPOptions& options);

class DistributedDataParallel : public Module {
   public:
    explicit DistributedDataParallel(std::shared_ptr<Module> module, DDPOptions options = {});
    ~DistributedDataParallel() override;

    Tensor forward(const Tensor& x) override;
    Module& module() { return *module_; }

    // While the guard lives, backward accumulates gradients locally (gradient accumulation);
    // the first backward after it all-reduces what has accumulated (PyTorch's no_sync()).
    class NoSync {
       public:
        explicit NoSync(DistributedDataParallel& d) : d_(d), prev_(d.sync_) { d.sync_ = false; }
        ~NoSync() { d_.sync_ = prev_; }
        NoSync(const NoSync&) = delete;
        NoSync& operator=(const NoSync&) = delete;

       private:
        DistributedDataParallel& d_;
        bool prev_;
    };
    NoSync no_sync() { return NoSync(*this); }

    // Which parameters (indices into parameters()) each bucket holds, in launch order.
    std::vector<std::vector<size_t>> bucket_layout() const;
    // Seconds the last backward's last hook spent joining the all-reduces (lesson 11's split):
    // on CPU processes the host's wait for MPI; on GPUs only the host's cost of queuing kiln's
    // stream's waits, the all-reduces themselves run on while the host goes on.
    double last_wait_seconds() const { return wait_seconds_; }
    // The last forward's buffer broadcast and the last backward's buckets (DDPTimeline).
    const DDPTimeline& last_timeline() const { return timeline_; }

   private:
    void sync_module_states();  // rank 0's state to every rank, when built
    struct Bucket {
        std::vector<size_t> params;  // indices into params_
        size_t ready = 0;            // gradients in, this backward
        Tensor flat;                 // the gradients, concatenated, being averaged
        dist::WorkHandle work;
    };
    void on_grad_ready(size_t param);
    void launch_ready_buckets();
    void finish();
    void broadcast_buffers();
    void check_collectives();
    double since_first_hook_us() const;
    struct GpuMarks;  // KILN_LOGS=ddp on CUDA: events on kiln's stream

    std::shared_ptr<Module> module_;
    DDPOptions options_;
    std::vector<Tensor> params_;
    std::vector<size_t> bucket_of_;  // per parameter
    std::vector<bool> ready_;        // per parameter, this backward
    std::vector<Bucket> buckets_;
    std::vector<int64_t> hooks_;
    size_t next_launch_ = 0;
    bool sync_ = true;
    bool in_backward_ = false;
    double wait_seconds_ = 0;
    DDPTimeline timeline_;
    int64_t backwards_ = 0;  // counted for KILN_LOGS=ddp's lines
    std::chrono::steady_clock::time_point forward_end_, first_hook_;
    std::shared_ptr<GpuMarks> gpu_marks_;
    std::shared_ptr<const jit::DDPBuckets> jit_buckets_;  // what compile() reads during forward
    // Collectives kiln's stream waits for but the host has not seen complete, with the forward
    // count they belong to: polled at the next forward, waited for (with the timeout) at the
    // one after, so a failed or dead peer still raises.
    std::vector<std::pair<dist::WorkHandle, int64_t>> pending_;
    int64_t forwards_ = 0;
    // The buffers' layout when it was last compared between ranks (per buffer: which tensor,
    // its dtype and shape); compared again only when it changes.
    std::vector<std::tuple<TensorImpl*, DType, Shape>> buffer_layout_;
};

}  // namespace kiln::nn
