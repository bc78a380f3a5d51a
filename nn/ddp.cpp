// nn::DistributedDataParallel (nn/ddp.h): buckets, the hooks that fill them, and the wait
// that writes averaged gradients back.
#include "nn/ddp.h"

#include <chrono>
#include <cstdio>
#include <map>
#include <sstream>

#include "autograd/hooks.h"
#include "jit/log.h"
#include "tensor/cuda.h"
#include "tensor/error.h"
#include "tensor/ops.h"

namespace kiln::nn {

using Clock = std::chrono::steady_clock;

// KILN_LOGS=ddp on CUDA: events on kiln's stream at the first hook, at each bucket's launch
// (its flat copy queued), before the wait (the backward's kernels queued) and after it.
struct DistributedDataParallel::GpuMarks {
    cuda::Event first_hook, backward_end, all_reduced;
    std::vector<std::unique_ptr<cuda::Event>> ready;  // per bucket
};

std::string DDPTimeline::str() const {
    std::ostringstream os;
    char line[256];
    std::snprintf(line, sizeof line,
                  "forward: %zu buffers broadcast in %.0f us (%lld engine calls); backward: "
                  "first gradient %.0f us after the forward returned (times below from it)\n",
                  buffers, buffer_sync_us, (long long)buffer_engine_calls,
                  first_hook_after_forward_us);
    os << line;
    for (size_t i = 0; i < buckets.size(); ++i) {
        const Bucket& b = buckets[i];
        std::snprintf(line, sizeof line,
                      "  bucket %zu: %zu params, %.2f MB: ready %.0f us, enqueued %.0f us, wait "
                      "returned %.0f us",
                      i, b.params, b.bytes / 1e6, b.ready_us, b.enqueued_us, b.done_us);
        os << line;
        if (b.gpu_ready_ms >= 0) {
            std::snprintf(line, sizeof line, "; on the GPU its gradients ready at %.3f ms",
                          b.gpu_ready_ms);
            os << line;
        }
        os << "\n";
    }
    std::snprintf(line, sizeof line, "  host: wait from %.0f us to %.0f us (%.0f us)",
                  wait_start_us, end_us, end_us - wait_start_us);
    os << line;
    if (gpu_backward_end_ms >= 0) {
        std::snprintf(line, sizeof line,
                      "; GPU: backward's kernels done %.3f ms, all-reduces done %.3f ms (%.3f ms "
                      "after the backward)",
                      gpu_backward_end_ms, gpu_all_reduced_ms,
                      gpu_all_reduced_ms - gpu_backward_end_ms);
        os << line;
    }
    return os.str();
}

double DistributedDataParallel::since_first_hook_us() const {
    return std::chrono::duration<double, std::micro>(Clock::now() - first_hook_).count();
}

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
    if (options_.broadcast_buffers && dist::get_world_size() > 1) broadcast_buffers();
    // A module compiled inside (or a compiled step around) this forward records its graph
    // under the scope: compile() splits it at the buckets (Dynamo's DDPOptimizer).
    Tensor out;
    {
        jit::ActiveDDPScope active(jit_buckets_);
        out = options_.forward ? options_.forward(x) : (*module_)(x);
    }
    forward_end_ = Clock::now();
    return out;
}

// Rank 0's buffers, flattened into one tensor per (dtype, device) and broadcast with one
// collective each, without the per-call shape comparison (PyTorch's coalesced broadcast):
// the layout was compared when DDP was built (the state_dict broadcast). dist::broadcast per
// buffer made each a comparison (an all_gather, a copy to the device and one back, each a
// wait of the host for the device) plus a broadcast: 120 engine calls per forward for
// ResNet-18's 60 buffers, 2 now.
void DistributedDataParallel::broadcast_buffers() {
    auto start = Clock::now();
    int64_t calls = dist::engine_calls();
    NoGradGuard no_grad;
    std::vector<Tensor> buffers;
    for (const auto& [name, b] : module_->named_buffers()) buffers.push_back(b);
    // Under compile() (a compiled step calling DDP) each buffer's collective is a graph break
    // (a data access), as dist::broadcast reports it; the flattening and the copies back are
    // host code around the collective, run eagerly on every call, not recorded.
    for (const Tensor& b : buffers)
        report_escape(b, Escape::data_access, std::source_location::current());
    NoDispatchHook eager;
    // Buffers per (dtype, device), in the order they first appear: the same on every rank.
    std::map<std::pair<int, std::string>, std::vector<size_t>> groups;
    std::vector<std::pair<int, std::string>> order;
    for (size_t i = 0; i < buffers.size(); ++i) {
        std::ostringstream dev;
        dev << buffers[i].device();
        std::pair<int, std::string> key{int(buffers[i].dtype()), dev.str()};
        auto [it, fresh] = groups.try_emplace(key);
        if (fresh) order.push_back(key);
        it->second.push_back(i);
    }
    std::vector<std::pair<Tensor, dist::WorkHandle>> flats;
    for (const auto& key : order) {
        std::vector<Tensor> parts;
        for (size_t i : groups[key]) parts.push_back(buffers[i].reshape({-1}));
        Tensor flat = parts.size() == 1 ? parts[0].clone() : cat(parts, 0);
        flats.emplace_back(flat, dist::broadcast_async(flat, 0));
    }
    for (size_t g = 0; g < order.size(); ++g) {
        auto& [flat, work] = flats[g];
        work->wait();
        int64_t offset = 0;
        for (size_t i : groups[order[g]]) {
            Tensor& b = buffers[i];
            b.copy_(flat.narrow(0, offset, b.numel()).reshape(b.shape()));
            offset += b.numel();
        }
    }
    timeline_.buffers = buffers.size();
    timeline_.buffer_engine_calls = dist::engine_calls() - calls;
    timeline_.buffer_sync_us =
        std::chrono::duration<double, std::micro>(Clock::now() - start).count();
}

void DistributedDataParallel::on_grad_ready(size_t k) {
    if (!sync_ || ready_[k]) return;
    if (!in_backward_) {  // the first gradient of this backward
        first_hook_ = Clock::now();
        timeline_.first_hook_after_forward_us =
            std::chrono::duration<double, std::micro>(first_hook_ - forward_end_).count();
        timeline_.buckets.assign(buckets_.size(), {});
        for (size_t i = 0; i < buckets_.size(); ++i) {
            timeline_.buckets[i].params = buckets_[i].params.size();
            for (size_t p : buckets_[i].params) timeline_.buckets[i].bytes += params_[p].nbytes();
        }
        timeline_.wait_start_us = timeline_.end_us = -1;
        timeline_.gpu_backward_end_ms = timeline_.gpu_all_reduced_ms = -1;
        gpu_marks_.reset();
        if (log_enabled("ddp") && params_[k].device().type == DeviceType::cuda) {
            gpu_marks_ = std::make_shared<GpuMarks>();
            gpu_marks_->first_hook.record();
        }
    }
    in_backward_ = true;
    ready_[k] = true;
    for (size_t i = 0; i < next_launch_; ++i)
        buckets_[i].work->poll();  // MPI progresses inside its calls
    Bucket& b = buckets_[bucket_of_[k]];
    if (++b.ready == b.params.size()) {
        timeline_.buckets[bucket_of_[k]].ready_us = since_first_hook_us();
        launch_ready_buckets();
    }
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
        if (gpu_marks_) {
            gpu_marks_->ready.push_back(std::make_unique<cuda::Event>());
            gpu_marks_->ready.back()->record();
        }
        b.work = dist::all_reduce_async(b.flat, dist::ReduceOp::avg);
        timeline_.buckets[next_launch_ - 1].enqueued_us = since_first_hook_us();
        if (options_.on_all_reduce_start) options_.on_all_reduce_start(next_launch_ - 1);
    }
    if (next_launch_ == buckets_.size()) finish();
}

// Every bucket is in flight: wait for each, write the averages back, reset for the next backward.
void DistributedDataParallel::finish() {
    auto start = Clock::now();
    timeline_.wait_start_us = since_first_hook_us();
    if (gpu_marks_) gpu_marks_->backward_end.record();
    for (size_t i = 0; i < buckets_.size(); ++i) {
        Bucket& b = buckets_[i];
        b.work->wait();
        timeline_.buckets[i].done_us = since_first_hook_us();
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
    wait_seconds_ = std::chrono::duration<double>(Clock::now() - start).count();
    timeline_.end_us = since_first_hook_us();
    if (log_enabled("ddp")) {
        if (gpu_marks_) {  // waits for the GPU: only while logging
            GpuMarks& m = *gpu_marks_;
            m.all_reduced.record();
            for (size_t i = 0; i < m.ready.size(); ++i)
                timeline_.buckets[i].gpu_ready_ms = m.first_hook.elapsed_ms(*m.ready[i]);
            timeline_.gpu_backward_end_ms = m.first_hook.elapsed_ms(m.backward_end);
            timeline_.gpu_all_reduced_ms = m.first_hook.elapsed_ms(m.all_reduced);
            gpu_marks_.reset();
        }
        log_event("ddp", "rank " + std::to_string(dist::get_rank()) + " backward " +
                             std::to_string(++backwards_) + ": " + timeline_.str());
    }
    ready_.assign(params_.size(), false);
    next_launch_ = 0;
    in_backward_ = false;
}

}  // namespace kiln::nn
