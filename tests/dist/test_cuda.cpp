// dist on CUDA tensors (NCCL): the collectives and DDP's equality with one process, run by
// `kiln launch --nproc N` on a machine with N GPUs (CTest entries dist.2ranks.cuda and
// dist.4ranks.cuda). Without a
// GPU every case says why it is skipped (tests/cuda/needs_gpu.h).
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <cstdlib>
#include <iostream>

#include "autograd/hooks.h"
#include "jit/explain.h"
#include "jit/log.h"
#include "kiln.h"
#include "tests/cuda/needs_gpu.h"

using namespace kiln;
using kiln_test::kCuda;

namespace {
void join() {
    if (!dist::is_initialized()) dist::init_process_group();
}
Tensor of_rank(int r, int64_t n) { return (arange(0, double(n)) + double(r + 1)).to(kCuda); }
}  // namespace

// One GPU per rank (NCCL cannot put two ranks on one GPU): with fewer, every rank skips, so
// none waits for a rank that skipped. `kiln launch` says how many there are (KILN_LAUNCH_GPUS).
struct NeedsGpuPerRank {
    boost::test_tools::assertion_result operator()(boost::unit_test::test_unit_id id) {
        const char* gpus = std::getenv("KILN_LAUNCH_GPUS");
        const char* world = std::getenv("WORLD_SIZE");
        if (gpus && world && std::atoi(gpus) < std::atoi(world)) {
            std::cout << "dist_cuda: SKIPPED (" << world << " ranks need a GPU each; this host has "
                      << gpus << ")\n";
            boost::test_tools::assertion_result r(false);
            r.message() << world << " ranks need a GPU each; this host has " << gpus;
            return r;
        }
        return kiln_test::NeedsGpu{"dist_cuda"}(id);
    }
};

// DDP against one process: this rank's replica (seeded apart from the others, so DDP must
// broadcast rank 0's weights) trains on rows [4 rank, 4 rank + 4) of the batch, a reference
// model on the whole batch; both on the GPU.
struct DdpAgainstOneProcess {
    int rank = 0, world = 1;
    Tensor x, y;  // the whole batch
    std::shared_ptr<nn::Sequential> reference, replica;

    DdpAgainstOneProcess() {
        join();
        rank = dist::get_rank(), world = dist::get_world_size();
        auto make = [] {
            return std::make_shared<nn::Sequential>(
                nn::sequential(nn::Linear(8, 64), nn::ReLU(), nn::Linear(64, 4)));
        };
        manual_seed(100);
        x = randn({4 * world, 8}).to(kCuda);
        y = randn({4 * world, 4}).to(kCuda);
        manual_seed(1);
        reference = make();
        reference->to(kCuda);
        manual_seed(1 + rank);
        replica = make();
        replica->to(kCuda);
    }

    // One step of the reference on the whole batch; the replica, after its step `s`, equals it.
    void step_reference_and_compare(optim::SGD& ref_opt, nn::DistributedDataParallel& ddp, int s) {
        ref_opt.zero_grad();
        nn::functional::mse_loss((*reference)(x), y).backward();
        ref_opt.step();
        auto got = ddp.module().parameters(), want = reference->parameters();
        for (size_t k = 0; k < got.size(); ++k)
            BOOST_CHECK_MESSAGE(allclose(got[k].cpu(), want[k].cpu(), 1e-4, 1e-5),
                                "rank " << rank << " step " << s);
    }
};

BOOST_AUTO_TEST_SUITE(dist_cuda, *boost::unit_test::precondition(NeedsGpuPerRank{}))

BOOST_AUTO_TEST_CASE(nccl_collectives_match_their_cpu_meaning) {
    join();
    int rank = dist::get_rank(), world = dist::get_world_size();
    BOOST_TEST_MESSAGE("dist_cuda: " << dist::backend_summary());
    Tensor sum = of_rank(rank, 1000), avg = of_rank(rank, 1000), mx = of_rank(rank, 5);
    dist::all_reduce(sum);
    dist::all_reduce(avg, dist::ReduceOp::avg);
    dist::all_reduce(mx, dist::ReduceOp::max);
    Tensor want = zeros({1000}, {.device = kCuda});
    for (int r = 0; r < world; ++r) want = want + of_rank(r, 1000);
    BOOST_CHECK(allclose(sum.cpu(), want.cpu()));
    BOOST_CHECK(allclose(avg.cpu(), (want / double(world)).cpu()));
    BOOST_CHECK(allclose(mx.cpu(), of_rank(world - 1, 5).cpu()));
    Tensor b = of_rank(rank, 6);
    dist::broadcast(b, world - 1);
    BOOST_CHECK(allclose(b.cpu(), of_rank(world - 1, 6).cpu()));
    Tensor all = dist::all_gather(of_rank(rank, 4));
    for (int r = 0; r < world; ++r) BOOST_CHECK(allclose(all[r].cpu(), of_rank(r, 4).cpu()));
    Tensor part = dist::reduce_scatter(of_rank(rank, 2 * world), dist::ReduceOp::sum);
    Tensor total = zeros({2 * world}, {.device = kCuda});
    for (int r = 0; r < world; ++r) total = total + of_rank(r, 2 * world);
    BOOST_CHECK(allclose(part.cpu(), total.cpu().narrow(0, 2 * rank, 2)));
}

BOOST_AUTO_TEST_CASE(nccl_shape_mismatch_names_the_ranks) {
    join();
    if (dist::get_world_size() < 2) return;  // nothing can differ in a world of one
    Tensor t = ones({2 + dist::get_rank()}, {.device = kCuda});
    BOOST_CHECK_EXCEPTION(dist::all_reduce(t), Error, [](const Error& e) {
        return std::string(e.what()).find("rank 1 called all_reduce with float32 [3]") !=
               std::string::npos;
    });
}

BOOST_FIXTURE_TEST_CASE(ddp_on_gpus_equals_one_process_on_the_whole_batch, DdpAgainstOneProcess) {
    nn::DistributedDataParallel ddp(replica, {.bucket_cap_mb = 0.001});
    optim::SGD opt(ddp.parameters(), 0.05, 0.9), ref_opt(reference->parameters(), 0.05, 0.9);
    for (int s = 0; s < 3; ++s) {
        opt.zero_grad();
        nn::functional::mse_loss(ddp(x.narrow(0, 4 * rank, 4)), y.narrow(0, 4 * rank, 4))
            .backward();
        opt.step();
        step_reference_and_compare(ref_opt, ddp, s);
    }
}

// DDP's whole step (forward, backward with its bucketed all-reduces on NCCL's stream, the
// optimizer) captured as one CUDA graph (cuda::GraphedStep): two warm-up steps, the capture,
// then replays; after every step the replica equals one process trained on the whole batch,
// a replay is one launch on kiln's stream, and the host never waits for a captured
// all-reduce. Several buckets, so the capture forks to NCCL's stream and joins back per bucket.
BOOST_FIXTURE_TEST_CASE(ddp_step_captured_as_one_cuda_graph_equals_one_process,
                        DdpAgainstOneProcess) {
    nn::DistributedDataParallel ddp(replica, {.bucket_cap_mb = 0.001});
    BOOST_TEST(ddp.bucket_layout().size() > 1u);
    optim::SGD opt(ddp.parameters(), 0.05, 0.9), ref_opt(reference->parameters(), 0.05, 0.9);
    Tensor xs = x.narrow(0, 4 * rank, 4).clone(),
           ys = y.narrow(0, 4 * rank, 4).clone();  // static inputs
    cuda::GraphedStep step(
        [&] {
            opt.zero_grad();
            Tensor loss = nn::functional::mse_loss(ddp(xs), ys);
            loss.backward();
            opt.step();
            return loss;
        },
        {.warmup = 2});
    for (int s = 0; s < 6; ++s) {
        int64_t ops = cuda::detail::operations_issued(), waits = cuda::detail::host_waits();
        Tensor loss = step()[0];
        if (s >= 3) {
            BOOST_TEST(cuda::detail::operations_issued() - ops == 1,
                       "step " << s << ": a replay is one launch");
            BOOST_TEST(cuda::detail::host_waits() - waits == 0, "step " << s);
        }
        step_reference_and_compare(ref_opt, ddp, s);
    }
    BOOST_TEST(step.captured());
    BOOST_TEST(step.replays() == 4);
}

// A compiled model inside DDP on GPUs: its graph is cut at the buckets (more than one
// subgraph), bucket 0's all-reduce starts before the first layer has its gradient (the first
// subgraph's backward, the last to run), and training equals one process's on the whole batch.
BOOST_FIXTURE_TEST_CASE(compiled_ddp_on_gpus_splits_overlaps_and_equals_one_process,
                        DdpAgainstOneProcess) {
    auto f = std::make_shared<decltype(compile(*replica))>(compile(*replica));
    std::vector<std::string> events;
    nn::DistributedDataParallel ddp(
        replica, {.bucket_cap_mb = 0.001,
                  .forward = [f](const Tensor& t) { return (*f)(t); },
                  .on_all_reduce_start = [&](size_t b) {
                      events.push_back("all-reduce " + std::to_string(b));
                  }});
    int64_t hook = autograd::register_post_accumulate_grad_hook(
        replica->named_parameters().at(0).second,
        [&](const Tensor&) { events.push_back("first layer ready"); });
    optim::SGD opt(ddp.parameters(), 0.05, 0.9), ref_opt(reference->parameters(), 0.05, 0.9);
    for (int s = 0; s < 3; ++s) {
        events.clear();
        opt.zero_grad();
        nn::functional::mse_loss(ddp(x.narrow(0, 4 * rank, 4)), y.narrow(0, 4 * rank, 4))
            .backward();
        opt.step();
        auto first = std::find(events.begin(), events.end(), "all-reduce 0");
        BOOST_CHECK_MESSAGE(first < std::find(events.begin(), events.end(), "first layer ready"),
                            "step " << s << ": bucket 0's all-reduce did not start first");
        step_reference_and_compare(ref_opt, ddp, s);
    }
    autograd::remove_post_accumulate_grad_hook(hook);
    jit::ExplainOutput e = jit::explain_compiled(*f);
    BOOST_REQUIRE(!e.ddp_subgraphs.empty());
    BOOST_CHECK_GT(e.ddp_subgraphs[0], 1);
}

// DDP's buffers on GPUs travel in one NCCL group of broadcasts, one engine call for float32
// statistics and int64 counters together (2 when they were flattened per dtype; rank 0's
// values reach every rank), and with KILN_LOGS=ddp the timeline holds GPU times in order:
// each bucket's gradients ready, then the backward's kernels done, then the all-reduces.
BOOST_AUTO_TEST_CASE(ddp_buffers_in_one_group_broadcast_and_gpu_timeline_on_gpus) {
    join();
    int rank = dist::get_rank(), world = dist::get_world_size();
    manual_seed(3 + rank);
    auto net = std::make_shared<nn::Sequential>(nn::sequential(
        nn::Conv2d(3, 8, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, false), nn::BatchNorm2d(8), nn::ReLU(),
        nn::Conv2d(8, 8, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, false), nn::BatchNorm2d(8)));
    net->to(kCuda);
    nn::DistributedDataParallel ddp(net, {.bucket_cap_mb = 0.001});
    for (int i = 0; i <= rank; ++i) (*net)(randn({2, 3, 6, 6}).to(kCuda));  // drift apart
    ddp.eval();
    int64_t before = dist::engine_calls();
    ddp(randn({2, 3, 6, 6}).to(kCuda));
    BOOST_CHECK_EQUAL(dist::engine_calls() - before, world > 1 ? 1 : 0);
    for (const auto& [name, b] : net->named_buffers()) {
        Tensor all = dist::all_gather(b).cpu();
        for (int r = 1; r < world; ++r)
            BOOST_CHECK_MESSAGE(allclose(all[r], all[0], 0, 0), name << " differs on rank " << r);
    }
    ddp.train();
    setenv("KILN_LOGS", "ddp", 1);
    log_reload();
    ddp(randn({2, 3, 6, 6}).to(kCuda)).mean().backward();
    unsetenv("KILN_LOGS");
    log_reload();
    const nn::DDPTimeline& t = ddp.last_timeline();
    BOOST_TEST_MESSAGE(t.str());
    BOOST_REQUIRE_GT(t.buckets.size(), 1u);
    for (size_t i = 0; i < t.buckets.size(); ++i) {
        BOOST_CHECK_GE(t.buckets[i].gpu_ready_ms, 0);
        if (i > 0) BOOST_CHECK_GE(t.buckets[i].gpu_ready_ms, t.buckets[i - 1].gpu_ready_ms);
        BOOST_CHECK_LE(t.buckets[i].gpu_ready_ms, t.gpu_backward_end_ms);
    }
    BOOST_CHECK_GE(t.gpu_all_reduced_ms, t.gpu_backward_end_ms);
    if (world > 1) BOOST_CHECK_GE(t.buffer_gpu_ms, 0);
}

// DDP's step puts its collectives behind kiln's stream without the host waiting for them:
// with a long GPU job queued first, the forward (its buffer broadcast) and the backward (its
// all-reduces) return long before the job ends, as the same step without DDP does. Before,
// the broadcast and the last gradient hook waited on the host for the collectives, and so for
// the job queued before them. Rank 0's buffers and the averaged gradients still arrive (the
// stream order): the replicas end equal.
BOOST_AUTO_TEST_CASE(a_ddp_step_on_gpus_does_not_wait_on_the_host) {
    join();
    int rank = dist::get_rank(), world = dist::get_world_size();
    manual_seed(4 + rank);
    auto make = [] {
        return std::make_shared<nn::Sequential>(nn::sequential(
            nn::Conv2d(3, 8, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, false), nn::BatchNorm2d(8),
            nn::ReLU(), nn::Conv2d(8, 8, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, false),
            nn::BatchNorm2d(8)));
    };
    auto net = make(), plain = make();
    net->to(kCuda);
    plain->to(kCuda);
    nn::DistributedDataParallel ddp(net, {.bucket_cap_mb = 0.001});
    optim::SGD opt(ddp.parameters(), 0.05, 0.9), plain_opt(plain->parameters(), 0.05, 0.9);
    Tensor x = randn({4, 3, 16, 16}).to(kCuda), seed = ones({}).to(kCuda);
    Tensor a = (randn({4096, 4096}) * (1.0 / 64)).to(kCuda);
    int n = 4;
    auto job = [&] {  // matmuls queued on kiln's stream, nothing read back
        Tensor t = a;
        for (int i = 0; i < n; ++i) t = matmul(t, a);
        return t;
    };
    using Clock = std::chrono::steady_clock;
    auto ms = [](Clock::time_point t) {
        return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
    };
    auto ddp_step = [&] {
        opt.zero_grad();
        ddp(x).mean().backward(seed);
        opt.step();
    };
    auto plain_step = [&] {
        plain_opt.zero_grad();
        (*plain)(x).mean().backward(seed);
        plain_opt.step();
    };
    for (int i = 0; i < 2; ++i) ddp_step(), plain_step(), job();  // kernels built, memory cached
    cuda::synchronize();
    double job_ms = 0;
    for (; n < 4096; n *= 2) {  // at least 100 ms of GPU work
        auto t = Clock::now();
        job();
        cuda::synchronize();
        if ((job_ms = ms(t)) >= 100) break;
    }
    Tensor busy = job();
    auto t = Clock::now();
    plain_step();
    double plain_ms = ms(t);
    cuda::synchronize();
    busy = job();
    t = Clock::now();
    ddp_step();
    double ddp_ms = ms(t);
    cuda::synchronize();
    BOOST_TEST_MESSAGE("rank " << rank << ": GPU job " << job_ms << " ms; queued behind it, a step "
                               << plain_ms << " ms on the host without DDP, " << ddp_ms
                               << " ms with DDP");
    BOOST_REQUIRE_MESSAGE(plain_ms < job_ms / 2,
                          "the step without DDP already waits on the host ("
                              << plain_ms << " ms behind a " << job_ms
                              << " ms GPU job): this case cannot tell DDP's waits apart");
    BOOST_CHECK_MESSAGE(
        ddp_ms < job_ms / 2,
        "DDP's step waited on the host: " << ddp_ms << " ms behind a " << job_ms << " ms GPU job");
    ddp.eval();
    ddp(x);  // rank 0's statistics broadcast, stream-ordered
    for (const Tensor& p : ddp.parameters()) {
        Tensor all = dist::all_gather(p).cpu();
        for (int r = 1; r < world; ++r)
            BOOST_CHECK_MESSAGE(allclose(all[r], all[0], 1e-5, 1e-6),
                                "a parameter differs on rank " << r);
    }
    for (const auto& [name, b] : net->named_buffers()) {
        Tensor all = dist::all_gather(b).cpu();
        for (int r = 1; r < world; ++r)
            BOOST_CHECK_MESSAGE(allclose(all[r], all[0], 0, 0), name << " differs on rank " << r);
    }
}

BOOST_AUTO_TEST_SUITE_END()
