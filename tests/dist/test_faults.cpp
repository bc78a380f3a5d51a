// Faults between ranks: a rank that leaves early or never joins makes the others raise within
// the timeout, and a shape mismatch names the ranks. The two-rank cases are disabled in the
// plain `dist` entry (one process) and run by tests/dist/launch_tests.cmake's 2-rank entries.
#include <unistd.h>

#include <atomic>
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <filesystem>
#include <thread>

#include "dist/dist.h"
#include "dist/watchdog.h"
#include "nn/ddp.h"
#include "nn/layers.h"
#include "tensor/ops.h"

using namespace kiln;
namespace utf = boost::unit_test;

namespace {
bool says(const Error& e, const std::string& words) {
    return std::string(e.what()).find(words) != std::string::npos;
}
double seconds_since(std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}
}  // namespace

// A process group already made by another suite of this binary is left first.
struct NoGroup {
    NoGroup() { dist::destroy_process_group(); }
};

BOOST_FIXTURE_TEST_SUITE(dist_join, NoGroup)

BOOST_AUTO_TEST_CASE(a_rank_that_never_joins_is_named_after_the_timeout) {
    auto dir =
        std::filesystem::temp_directory_path() / ("kiln-dist-join-" + std::to_string(getpid()));
    auto start = std::chrono::steady_clock::now();
    BOOST_CHECK_EXCEPTION(dist::init_process_group({.init_method = "file://" + dir.string(),
                                                    .rank = 0,
                                                    .world_size = 2,
                                                    .timeout_s = 0.5}),
                          Error, [](const Error& e) {
                              return says(e, "rank 1 of 2 to join") && says(e, "KILN_DIST_TIMEOUT");
                          });
    BOOST_CHECK_LT(seconds_since(start), 5.0);
    BOOST_CHECK(!dist::is_initialized());
    std::filesystem::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(a_world_of_two_without_a_rendezvous_says_what_to_set) {
    BOOST_CHECK_EXCEPTION(
        dist::init_process_group({.rank = 1, .world_size = 2}), Error,
        [](const Error& e) { return says(e, "MASTER_ADDR") && says(e, "kiln launch"); });
}

BOOST_AUTO_TEST_SUITE_END()

// Run by `kiln launch --nproc 2` (launch_tests.cmake), with KILN_DIST_TIMEOUT=3.
BOOST_AUTO_TEST_SUITE(dist_faults, *utf::disabled())

BOOST_AUTO_TEST_CASE(a_shape_mismatch_names_both_ranks) {
    dist::init_process_group();
    int rank = dist::get_rank();
    Tensor t = ones({2 + rank, 3});
    BOOST_CHECK_EXCEPTION(dist::all_reduce(t), Error, [](const Error& e) {
        return says(e, "ranks disagree") &&
               says(e, "rank 0 called all_reduce with float32 [2, 3]") &&
               says(e, "rank 1 called all_reduce with float32 [3, 3]");
    });
}

// Replicas that differ (rank 1's layer is wider): DDP's constructor names the first tensor
// that differs and what each rank has, on every rank, instead of broadcasting into it.
BOOST_AUTO_TEST_CASE(ddp_of_replicas_that_differ_names_the_tensor_and_both_ranks) {
    dist::init_process_group();
    int rank = dist::get_rank();
    auto net = std::make_shared<nn::Sequential>(
        nn::sequential(nn::Linear(4, 4), nn::ReLU(), nn::Linear(4, 3 + 2 * rank)));
    BOOST_CHECK_EXCEPTION(nn::DistributedDataParallel ddp(net), Error, [](const Error& e) {
        return says(e, "DistributedDataParallel: the replicas differ at '0.2.weight'") &&
               says(e, "rank 0 called broadcast with float32 [3, 4]") &&
               says(e, "rank 1 called broadcast with float32 [5, 4]");
    });
}

BOOST_AUTO_TEST_CASE(a_rank_that_exits_early_makes_the_others_raise_within_the_timeout) {
    dist::init_process_group();
    if (dist::get_rank() == 1) {
        dist::destroy_process_group();
        _exit(0);  // leaves without a word, as a crashed or finished rank would
    }
    auto start = std::chrono::steady_clock::now();
    Tensor t = ones({4});
    BOOST_CHECK_EXCEPTION(dist::all_reduce(t), Error, [](const Error& e) {
        return says(e, "did not complete within 3 s") && says(e, "a rank died");
    });
    BOOST_CHECK_LT(seconds_since(start), 3.0 + 5.0);
}

BOOST_AUTO_TEST_SUITE_END()

// The watchdog of collectives the host does not wait for (dist/watchdog.h; NCCL's
// wait_on_stream, DDP on GPUs): an entry that completes is dropped, one still pending at its
// deadline is reported once, within a period of it; destroying the watchdog stops its thread.
BOOST_AUTO_TEST_SUITE(dist_watchdog)

BOOST_AUTO_TEST_CASE(a_pending_collective_is_reported_at_its_deadline_a_finished_one_dropped) {
    using Clock = dist::detail::Watchdog::Clock;
    std::atomic<bool> finished{false};
    std::atomic<int> late{0}, early{0};
    auto start = Clock::now();
    std::atomic<double> reported_after{-1};
    {
        dist::detail::Watchdog dog(std::chrono::milliseconds(10));
        dog.watch([&] { return finished.load(); }, start + std::chrono::milliseconds(200),
                  [&] { ++early; });
        dog.watch([] { return false; }, start + std::chrono::milliseconds(200),
                  [&] {
                      reported_after = seconds_since(start);
                      ++late;
                  });
        BOOST_CHECK_EQUAL(dog.watching(), 2u);
        finished = true;
        while (seconds_since(start) < 5 && (late == 0 || dog.watching() > 0))
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        BOOST_CHECK_EQUAL(dog.watching(), 0u);
    }
    BOOST_CHECK_EQUAL(early.load(), 0);
    BOOST_CHECK_EQUAL(late.load(), 1);
    BOOST_CHECK_GE(reported_after.load(), 0.2);
    BOOST_CHECK_LT(reported_after.load(), 2.0);
}

BOOST_AUTO_TEST_CASE(a_watchdog_destroyed_with_entries_left_reports_none) {
    std::atomic<int> reported{0};
    {
        dist::detail::Watchdog dog(std::chrono::milliseconds(10));
        dog.watch([] { return false; },
                  dist::detail::Watchdog::Clock::now() + std::chrono::hours(1),
                  [&] { ++reported; });
    }
    BOOST_CHECK_EQUAL(reported.load(), 0);
}

BOOST_AUTO_TEST_SUITE_END()
