// nn::DistributedDataParallel (nn/ddp.h): buckets, the hooks that fill them, and the wait
// that writes averaged gradients back.
#include "nn/ddp.h"

#include <chrono>
#include <sstream>

#include "autograd/hooks.h"
#include "tensor/error.h"

namespace kiln::nn {

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<Module> module, DDPOptions options)
    : module_(std::move(module)), options_(std::move(options)) {
    KILN_CHECK(module_, "DistributedDataParallel: the module is null");
    KILN_CHECK(dist::is_initialized(),
               "DistributedDataParallel: call dist::init_process_group() first");
    register_module("module", module_);
    // Every replica starts from rank 0's state; a shape that differs between ranks is named here.
    {
        NoGradGuard no_grad;
        for (const auto& [name, t] : module_->state_dict()) dist::broadcast(t, 0);
    }
    for (const auto& p : module_->parameters())
        if (p.requires_grad()) params_.push_back(p);
    // Buckets of about bucket_cap_mb, filled from the last parameter back: the order in which
    // backward produces gradients.
    const double cap_bytes = options_.bucket_cap_mb * 1024 * 1024;
    bucket_of_.resize(params_.size());
    double bytes = 0;
    for (size_t k = params_.size(); k-- > 0;) {
        double b = double(params_[k].nbytes());
        if (buckets_.empty() || (bytes > 0 && bytes + b > cap_bytes))
            buckets_.emplace_back(), bytes = 0;
        buckets_.back().params.push_back(k);
        bucket_of_[k] = buckets_.size() - 1;
        bytes += b;
    }
    ready_.assign(params_.size(), false);
    auto jit_buckets = std::make_shared<jit::DDPBuckets>();
    jit_buckets->cap_bytes = cap_bytes;
    jit_buckets->params = params_;
    auto named = named_parameters();  // "module.…", as PyTorch names them
    for (const Tensor& p : params_)
        for (const auto& [name, q] : named)
            if (q.same(p)) {
                jit_buckets->names.push_back(name);
                break;
            }
    jit_buckets_ = std::move(jit_buckets);
    for (size_t k = 0; k < params_.size(); ++k)
        hooks_.push_back(autograd::register_post_accumulate_grad_hook(
            params_[k], [this, k](const Tensor&) { on_grad_ready(k); }));
}

DistributedDataParallel::~DistributedDataParallel() {
    for (int64_t id : hooks_) autograd::remove_post_accumulate_grad_hook(id);
}

std::vector<std::vector<size_t>> DistributedDataParallel::bucket_layout() const {
    std::vector<std::vector<size_t>> out;
    for (const auto& b : buckets_) out.push_back(b.params);
    return out;
}

Tensor DistributedDataParallel::forward(const Tensor& x) {
    if (in_backward_) {  // the last backward left a bucket unfinished: some parameter got no
                         // gradient
        std::ostringstream unused;
        auto named = named_parameters();  // "module.…", as PyTorch names them
        for (size_t k = 0; k < params_.size(); ++k)
            if (!ready_[k])
                for (const auto& [name, p] : named)
                    if (p.same(params_[k])) unused << (unused.tellp() ? ", " : "") << name;
        fail("DistributedDataParallel: the previous backward gave no gradient to ", unused.str(),
             ", so its buckets were never all-reduced (kiln's DDP needs every parameter to take "
             "part in the loss; "
             "PyTorch's find_unused_parameters is not supported)");
    }
    if (options_.broadcast_buffers && dist::get_world_size() > 1) {
        NoGradGuard no_grad;
        for (const auto& [name, b] : module_->named_buffers()) dist::broadcast(b, 0);
    }
    // A module compiled inside (or a compiled step around) this forward records its graph
    // under the scope: compile() splits it at the buckets (Dynamo's DDPOptimizer).
    jit::ActiveDDPScope active(jit_buckets_);
    return options_.forward ? options_.forward(x) : (*module_)(x);
}

void DistributedDataParallel::on_grad_ready(size_t k) {
    if (!sync_ || ready_[k]) return;
    in_backward_ = true;
    ready_[k] = true;
    for (size_t i = 0; i < next_launch_; ++i)
        buckets_[i].work->poll();  // MPI progresses inside its calls
    Bucket& b = buckets_[bucket_of_[k]];
    if (++b.ready == b.params.size()) launch_ready_buckets();
}

// Buckets start strictly in index order (the same on every rank, as MPI and NCCL require);
// a bucket ready early waits for the ones before it.
void DistributedDataParallel::launch_ready_buckets() {
    while (next_launch_ < buckets_.size() &&
           buckets_[next_launch_].ready == buckets_[next_launch_].params.size()) {
        Bucket& b = buckets_[next_launch_++];
        std::vector<Tensor> grads;
        for (size_t k : b.params) grads.push_back(params_[k].grad().reshape({-1}));
        b.flat = grads.size() == 1 ? grads[0].clone() : cat(grads, 0);
        b.work = dist::all_reduce_async(b.flat, dist::ReduceOp::avg);
        if (options_.on_all_reduce_start) options_.on_all_reduce_start(next_launch_ - 1);
    }
    if (next_launch_ == buckets_.size()) finish();
}

// Every bucket is in flight: wait for each, write the averages back, reset for the next backward.
void DistributedDataParallel::finish() {
    auto start = std::chrono::steady_clock::now();
    for (Bucket& b : buckets_) {
        b.work->wait();
        int64_t offset = 0;
        for (size_t k : b.params) {
            Tensor g = params_[k].grad();
            g.copy_(b.flat.narrow(0, offset, g.numel()).view(g.shape()));
            offset += g.numel();
        }
        b.work.reset();
        b.flat = Tensor();
        b.ready = 0;
    }
    wait_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ready_.assign(params_.size(), false);
    next_launch_ = 0;
    in_backward_ = false;
}

}  // namespace kiln::nn
