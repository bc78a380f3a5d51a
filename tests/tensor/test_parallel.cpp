// tensor/parallel.h: how parallel_for splits a loop over the thread pool.
#include <algorithm>
#include <atomic>
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "tensor/parallel.h"

using namespace kiln;

namespace {

// Restores the thread count a test changed.
struct Threads {
    explicit Threads(int n) { set_num_threads(n); }
    ~Threads() { set_num_threads(0); }
};

std::vector<std::pair<int64_t, int64_t>> ranges_of(int64_t n, int64_t grain) {
    std::mutex mu;
    std::vector<std::pair<int64_t, int64_t>> ranges;
    parallel_for(n, grain, [&](int64_t b, int64_t e) {
        std::lock_guard lock(mu);
        ranges.emplace_back(b, e);
    });
    std::sort(ranges.begin(), ranges.end());
    return ranges;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(parallel)

BOOST_AUTO_TEST_CASE(ranges_cover_the_loop_once_and_long_ones_start_at_multiples_of_16) {
    Threads two(2);
    BOOST_TEST_REQUIRE(num_threads() == 2, "the pool needs 2 threads (hardware concurrency)");
    for (int64_t n : {int64_t(1), int64_t(65535), int64_t(65536), int64_t(100003), int64_t(1000003),
                      int64_t(4096)})
        for (int64_t grain : {int64_t(1), int64_t(32), kParallelGrain})
            BOOST_TEST_CONTEXT("n " << n << ", grain " << grain) {
                auto ranges = ranges_of(n, grain);
                int64_t next = 0;
                for (auto [b, e] : ranges) {
                    BOOST_TEST(b == next);
                    BOOST_TEST(e > b);
                    if (e - b >= 1024 && b > 0) BOOST_TEST(b % 16 == 0);
                    next = e;
                }
                BOOST_TEST(next == n);
                BOOST_TEST(ranges.size() <= 8u);
            }
    // 2 threads, 1000003 elements: 8 ranges of 125008, not 2 of 500002 (a vector tail each)
    BOOST_TEST(ranges_of(1000003, kParallelGrain).size() == 8u);
}

// The range that starts first waits until the other threads have done 3/4 of the loop (or
// 3 s): they can only if a thread's share is split into ranges that anyone free takes. With one
// range per thread the other thread had half the loop, and the first one waited out the 3 s.
BOOST_AUTO_TEST_CASE(a_late_thread_leaves_its_ranges_to_the_others) {
    Threads two(2);
    BOOST_TEST_REQUIRE(num_threads() == 2, "the pool needs 2 threads (hardware concurrency)");
    const int64_t n = 8 * kParallelGrain;
    std::atomic<bool> first{true}, timed_out{false};
    std::atomic<int64_t> done_by_others{0};
    parallel_for(n, kParallelGrain, [&](int64_t b, int64_t e) {
        if (!first.exchange(false)) {
            done_by_others += e - b;
            return;
        }
        auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(3);
        while (done_by_others.load() < n * 3 / 4)
            if (std::chrono::steady_clock::now() > give_up)
                return void(timed_out = true);
            else
                std::this_thread::yield();
    });
    BOOST_TEST(!timed_out.load());
    BOOST_TEST(done_by_others.load() == n - n / 8);
}

BOOST_AUTO_TEST_SUITE_END()
