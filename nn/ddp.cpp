// nn::DistributedDataParallel (nn/ddp.h): buckets, the hooks that fill them, and the wait
// that writes averaged gradients back.
#include "nn/ddp.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <sstream>

#include "autograd/hooks.h"
#include "jit/log.h"
#include "tensor/cuda.h"
#include "tensor/cuda_runtime.h"
#include "tensor/error.h"
#include "tensor/ops.h"

namespace kiln::nn {

using Clock = std::chrono::steady_clock;

namespace {
// Whether this DDP's work is being captured into a CUDA graph (cuda::GraphedStep): its
// collectives are recorded, not run, so the host neither polls nor waits for them.
bool capturing(const std::vector<Tensor>& params) {
    return !params.empty() && params[0].device().type == DeviceType::cuda &&
           cuda::detail::capturing();
}
}  // namespace

// KILN_LOGS=ddp on CUDA: events on kiln's stream at the first hook, at each bucket's launch
// (its flat copy queued), before the wait (the backward's kernels queued) and after it.
struct DistributedDataParallel::GpuMarks {
    cuda::Event first_hook, backward_end, all_reduced;
    std::vector<std::unique_ptr<cuda::Event>> ready;  // per bucket
};

std::string DDPTimeline::str() const {
    std::ostringstream os;
    char line[256];
    std::snprintf(line, sizeof line, "forward: %zu buffers broadcast in %.0f us (%lld engine calls",
                  buffers, buffer_sync_us, (long long)buffer_engine_calls);
    os << line;
    if (buffer_gpu_ms >= 0) {
        std::snprintf(line, sizeof line, "; on the GPU %.3f ms", buffer_gpu_ms);
        os << line;
    }
    std::snprintf(line, sizeof line,
                  "); backward: first gradient %.0f us after the forward returned (times below "
                  "from it)\n",
                  first_hook_after_forward_us);
    os << line;
    for (size_t i = 0; i < buckets.size(); ++i) {
        const Bucket& b = buckets[i];
        std::snprintf(line, sizeof line,
                      "  bucket %zu: %zu params, %.2f MB: ready %.0f us, enqueued %.0f us, "
                      "joined %.0f us",
                      i, b.params, b.bytes / 1e6, b.ready_us, b.enqueued_us, b.done_us);
        os << line;
        if (b.gpu_ready_ms >= 0) {
            std::snprintf(line, sizeof line, "; on the GPU its gradients ready at %.3f ms",
                          b.gpu_ready_ms);
            os << line;
        }
        os << "\n";
    }
    std::snprintf(line, sizeof line, "  host: joining from %.0f us to %.0f us (%.0f us)",
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

std::vector<std::vector<size_t>> ddp_bucket_assignment(const std::vector<size_t>& bytes,
                                                       const DDPOptions& o) {
    const double first_mb = o.first_bucket_cap_mb.value_or(1),
                 last_mb = o.last_bucket_cap_mb.value_or(1);
    KILN_CHECK(o.bucket_cap_mb > 0 && first_mb >= 0 && last_mb >= 0,
               "DistributedDataParallel: bucket_cap_mb ", o.bucket_cap_mb,
               " must be positive, first_bucket_cap_mb ", first_mb, " and last_bucket_cap_mb ",
               last_mb, " not negative");
    const double mb = 1024 * 1024, cap = o.bucket_cap_mb * mb;
    double total = 0;
    for (size_t b : bytes) total += double(b);
    // Unset small caps apply only to gradients that need more than one bucket anyway.
    const bool one_bucket_fits = total <= cap;
    auto small_cap = [&](const std::optional<double>& set) {
        if (set) return std::min(cap, *set * mb);
        return one_bucket_fits ? cap : std::min(cap, mb);
    };
    const double first_cap = small_cap(o.first_bucket_cap_mb);
    const double last_cap = small_cap(o.last_bucket_cap_mb);
    std::vector<std::vector<size_t>> buckets;
    double filled = 0;
    for (size_t k = bytes.size(); k-- > 0;) {
        double b = double(bytes[k]);
        double limit = buckets.size() == 1 ? first_cap : cap;
        if (buckets.empty() || (filled > 0 && filled + b > limit))
            buckets.emplace_back(), filled = 0;
        buckets.back().push_back(k);
        filled += b;
    }
    if (buckets.empty()) return buckets;
    // The first parameters, up to last_cap (at least one), become the last bucket.
    std::vector<size_t>& last = buckets.back();  // descending: its first parameters at the end
    size_t take = 0;
    double front = 0;
    while (take < last.size() &&
           (take == 0 || front + double(bytes[last[last.size() - 1 - take]]) <= last_cap))
        front += double(bytes[last[last.size() - 1 - take++]]);
    if (take < last.size()) {
        std::vector<size_t> tail(last.end() - std::ptrdiff_t(take), last.end());
        last.resize(last.size() - take);
        buckets.push_back(std::move(tail));
    }
    return buckets;
}

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<Module> module, DDPOptions options)
    : module_(std::move(module)), options_(std::move(options)) {
    KILN_CHECK(module_, "DistributedDataParallel: the module is null");
    KILN_CHECK(dist::is_initialized(),
               "DistributedDataParallel: call dist::init_process_group() first");
    register_module("module", module_);
    sync_module_states();
    for (const auto& p : module_->parameters())
        if (p.requires_grad()) params_.push_back(p);
    // The buffers' layout was compared between ranks by the broadcast above.
    for (const auto& [name, b] : module_->named_buffers())
        buffer_layout_.emplace_back(b.impl(), b.dtype(), b.shape());
    // Buckets from the last parameter back, the order in which backward produces gradients.
    std::vector<size_t> sizes;
    for (const Tensor& p : params_) sizes.push_back(p.nbytes());
    bucket_of_.resize(params_.size());
    for (auto& bucket : ddp_bucket_assignment(sizes, options_)) {
        buckets_.emplace_back();
        buckets_.back().params = std::move(bucket);
        for (size_t k : buckets_.back().params) bucket_of_[k] = buckets_.size() - 1;
    }
    ready_.assign(params_.size(), false);
    auto jit_buckets = std::make_shared<jit::DDPBuckets>();
    jit_buckets->cap_bytes = options_.bucket_cap_mb * 1024 * 1024;
    jit_buckets->params = params_;
    jit_buckets->bucket_of.assign(bucket_of_.begin(), bucket_of_.end());
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

// Every replica starts from rank 0's state, as PyTorch's _sync_module_states: the state's
// layout (each tensor's dtype and shape, in order) is compared between ranks once, through a
// fingerprint all-gathered, then the state goes as one coalesced broadcast (NCCL: one group;
// MPI: one flat tensor per dtype): the all_gather and its own comparison, then one engine
// call (NCCL) or one per dtype (MPI). One broadcast per tensor, each with its own comparison,
// took two engine calls per tensor (60 for GPT) and left every later step of GPT on 4 H100s
// 0.14 ms slower (docs/perf.md, "The cost of N ranks with no communication"). Where the
// fingerprints differ, or a tensor is not contiguous, the tensors go one by one, and the first
// that differs between ranks is named.
void DistributedDataParallel::sync_module_states() {
    NoGradGuard no_grad;
    auto state = module_->state_dict();
    if (dist::get_world_size() == 1 || state.empty()) return;
    std::vector<Tensor> tensors;  // a tensor registered twice (a tied weight) goes once
    uint64_t fingerprint = 1469598103934665603ull;  // FNV-1a over dtypes and shapes
    auto mix = [&](int64_t v) { fingerprint = (fingerprint ^ uint64_t(v)) * 1099511628211ull; };
    bool coalesce = true;
    for (const auto& [name, t] : state) {
        mix(int64_t(t.dtype()));
        mix(t.dim());
        for (int64_t d : t.shape()) mix(d);
        coalesce = coalesce && t.is_contiguous() && t.device() == state[0].second.device();
        bool seen = false;
        for (const Tensor& u : tensors)
            seen = seen || (u.raw_data() == t.raw_data() && u.numel() == t.numel());
        if (!seen) tensors.push_back(t);
    }
    Tensor mine = tensor(std::vector<int64_t>{int64_t(state.size()), int64_t(fingerprint >> 1),
                                              int64_t(coalesce)})
                      .to(state[0].second.device());
    std::vector<int64_t> all = dist::all_gather(mine).cpu().to_vector<int64_t>();
    for (size_t i = 3; i < all.size(); ++i) coalesce = coalesce && all[i] == all[i % 3];
    coalesce = coalesce && all[2] == 1;  // every rank's state contiguous on one device
    if (coalesce) {
        dist::broadcast_coalesced(tensors, 0)->wait();
        return;
    }
    for (const auto& [name, t] : state) {
        try {
            dist::broadcast(t, 0);
        } catch (const Error& e) {
            fail("DistributedDataParallel: the replicas differ at '", name, "' (rank 0's state "
                 "is broadcast to every rank when DDP is built): ", e.what());
        }
    }
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
    check_collectives();
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

// The host learns here whether the collectives kiln's stream waits for (the last steps'
// all-reduces and broadcasts) failed: those of the previous forward are polled, older ones
// waited for, with the timeout. So the host runs at most two steps ahead of them, and a rank
// that died still makes the others raise.
void DistributedDataParallel::check_collectives() {
    if (capturing(params_)) return;  // the capture began after the stream ran them all
    ++forwards_;
    std::vector<std::pair<dist::WorkHandle, int64_t>> left;
    for (auto& [work, forward] : pending_) {
        if (forward + 1 < forwards_)
            work->wait();  // raises when it failed or timed out; pending_ keeps the rest
        else if (!work->poll())
            left.emplace_back(work, forward);
    }
    pending_ = std::move(left);
}

// Rank 0's buffers (batch-norm statistics) for every rank, before the forward: one
// dist::broadcast_coalesced (NCCL: one group of in-place broadcasts; MPI: one flat tensor per
// dtype), PyTorch's coalesced broadcast. Their layout was compared between ranks when DDP was
// built; it is compared again only when it changes (a buffer replaced). On GPUs nothing here
// waits on the host: kiln's stream waits for the broadcast, so the forward's kernels (and the
// running-statistics updates of training mode) run after it. Per buffer, dist::broadcast made
// a comparison (an all_gather, a copy to the device and one back, each a host wait) plus a
// broadcast: 120 engine calls per forward for ResNet-18's 60 buffers; flattened per dtype, 2
// engine calls and a host wait, then 60 copies back; now 1 on GPUs.
void DistributedDataParallel::broadcast_buffers() {
    auto start = Clock::now();
    int64_t calls = dist::engine_calls();
    NoGradGuard no_grad;
    std::vector<Tensor> buffers;
    bool same_layout = true;
    {
        auto named = module_->named_buffers();
        same_layout = named.size() == buffer_layout_.size();
        for (size_t i = 0; i < named.size(); ++i) {
            const Tensor& b = named[i].second;
            buffers.push_back(b);
            same_layout = same_layout && std::get<0>(buffer_layout_[i]) == b.impl() &&
                          std::get<1>(buffer_layout_[i]) == b.dtype() &&
                          std::get<2>(buffer_layout_[i]) == b.shape();
        }
    }
    // Under compile() (a compiled step calling DDP) each buffer's collective is a graph break
    // (a data access), as dist::broadcast reports it; the collective is host code around the
    // graphs, run eagerly on every call, not recorded.
    for (const Tensor& b : buffers)
        report_escape(b, Escape::data_access, std::source_location::current());
    NoDispatchHook eager;
    if (!same_layout) {  // compared between ranks (dist::broadcast's check), then remembered
        buffer_layout_.clear();
        for (const Tensor& b : buffers) {
            dist::broadcast(b.is_contiguous() ? b : b.contiguous(), 0);
            buffer_layout_.emplace_back(b.impl(), b.dtype(), b.shape());
        }
    }
    std::unique_ptr<cuda::Event> before;
    bool on_gpu = !buffers.empty() && buffers[0].device().type == DeviceType::cuda;
    const bool captured = capturing(params_);
    if (on_gpu && log_enabled("ddp") && !captured) {
        before = std::make_unique<cuda::Event>();
        before->record();
    }
    timeline_.buffer_gpu_ms = -1;
    // Split by device (one collective each); a non-contiguous buffer travels through a copy.
    std::vector<std::vector<Tensor>> by_device;
    std::vector<std::pair<Tensor, Tensor>> copies;  // (buffer, its contiguous copy)
    for (const Tensor& b : buffers) {
        Tensor t = b;
        if (!b.is_contiguous()) copies.emplace_back(b, t = b.contiguous());
        auto it = std::find_if(by_device.begin(), by_device.end(),
                               [&](const auto& g) { return g[0].device() == t.device(); });
        if (it == by_device.end())
            by_device.push_back({t});
        else
            it->push_back(t);
    }
    for (const auto& group : by_device) {
        dist::WorkHandle w = dist::broadcast_coalesced(group, 0);
        w->wait_on_stream();
        if (!captured) pending_.emplace_back(std::move(w), forwards_);
    }
    for (auto& [b, c] : copies) Tensor(b).copy_(c);
    if (before) {  // waits for the GPU: only while logging
        cuda::Event after;
        after.record();
        timeline_.buffer_gpu_ms = before->elapsed_ms(after);
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
        if (log_enabled("ddp") && params_[k].device().type == DeviceType::cuda &&
            !capturing(params_)) {
            gpu_marks_ = std::make_shared<GpuMarks>();
            gpu_marks_->first_hook.record();
        }
    }
    in_backward_ = true;
    ready_[k] = true;
    if (params_[k].device().type != DeviceType::cuda)
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

// Every bucket is in flight: join each (on GPUs kiln's stream waits for it, the host does
// not; on CPU processes the host waits for MPI), make each .grad a view of its bucket's
// averages (no copy back), reset for the next backward. The views share their bucket's
// memory; the next zero_grad() drops them, and the next backward's buckets are new tensors.
void DistributedDataParallel::finish() {
    auto start = Clock::now();
    timeline_.wait_start_us = since_first_hook_us();
    if (gpu_marks_) gpu_marks_->backward_end.record();
    NoGradGuard no_grad;
    for (size_t i = 0; i < buckets_.size(); ++i) {
        Bucket& b = buckets_[i];
        b.work->wait_on_stream();
        timeline_.buckets[i].done_us = since_first_hook_us();
        int64_t offset = 0;
        for (size_t k : b.params) {
            Shape shape = params_[k].shape();
            int64_t n = shape_numel(shape);
            params_[k].set_grad(b.flat.narrow(0, offset, n).view(shape));
            offset += n;
        }
        // A captured all-reduce has no Work to poll: replays are watched (dist/backend_nccl.cpp).
        if (!capturing(params_)) pending_.emplace_back(std::move(b.work), forwards_);
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
