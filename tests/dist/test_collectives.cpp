// dist's collectives on CPU tensors, run by every rank of a group (CTest starts them through
// `kiln launch --nproc 2`; alone, they check a world of one). Values depend on the rank, so a
// collective that moved nothing fails.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <thread>

#include "dist/dist.h"
#include "tensor/ops.h"
#include "tensor/parallel.h"

using namespace kiln;

namespace {
void join() {
    if (!dist::is_initialized()) dist::init_process_group();
}
// The tensor rank r contributes: r + 1 + i at element i.
Tensor of_rank(int r, int64_t n, DType dtype = float32) {
    return (arange(0, double(n)) + double(r + 1)).to(dtype);
}
}  // namespace

BOOST_AUTO_TEST_SUITE(dist_collectives)

// `kiln launch --nproc N` shares the host's cores among its ranks, as torchrun sets
// OMP_NUM_THREADS: each rank's pool (and OpenMP's) gets cores / N threads, at least one.
BOOST_AUTO_TEST_CASE(launched_ranks_share_the_cores) {
    join();
    const char* local = std::getenv("LOCAL_WORLD_SIZE");
    int ranks_here = local ? std::atoi(local) : 1;
    const char* chosen = std::getenv("KILN_LAUNCH_THREADS");  // unset: the user's KILN_NUM_THREADS
    if (ranks_here < 2) return;  // alone: nothing is shared
    if (!chosen) {  // the launcher keeps a count the user set
        BOOST_TEST(std::getenv("KILN_NUM_THREADS") != nullptr);
        return;
    }
    unsigned cores = std::max(1u, std::thread::hardware_concurrency());
    int per_rank = int(std::max(1u, cores / unsigned(ranks_here)));
    BOOST_TEST(std::atoi(chosen) == per_rank);
    BOOST_TEST(num_threads() == per_rank);
}

BOOST_AUTO_TEST_CASE(all_reduce_sum_avg_max_match_a_sum_over_ranks) {
    join();
    int rank = dist::get_rank(), world = dist::get_world_size();
    for (DType dt : {DType::float32, DType::float64, DType::int64}) {
        Tensor t = of_rank(rank, 5, dt);
        dist::all_reduce(t, dist::ReduceOp::sum);
        Tensor expected = zeros({5}, {.dtype = dt});
        for (int r = 0; r < world; ++r) expected = expected + of_rank(r, 5, dt);
        BOOST_CHECK(allclose(t.to(float64), expected.to(float64)));
    }
    Tensor avg = of_rank(rank, 7);
    dist::all_reduce(avg, dist::ReduceOp::avg);
    BOOST_CHECK(allclose(avg, of_rank(0, 7) + (world - 1) / 2.0));
    Tensor mx = of_rank(rank, 3);
    dist::all_reduce(mx, dist::ReduceOp::max);
    BOOST_CHECK(allclose(mx, of_rank(world - 1, 3)));
}

BOOST_AUTO_TEST_CASE(broadcast_copies_the_source_ranks_values) {
    join();
    int world = dist::get_world_size();
    for (int src = 0; src < world; ++src) {
        Tensor t = of_rank(dist::get_rank(), 4).reshape({2, 2}).contiguous();
        dist::broadcast(t, src);
        BOOST_CHECK(allclose(t, of_rank(src, 4).reshape({2, 2})));
    }
}

BOOST_AUTO_TEST_CASE(all_gather_stacks_every_ranks_tensor) {
    join();
    int world = dist::get_world_size();
    Tensor all = dist::all_gather(of_rank(dist::get_rank(), 6).reshape({2, 3}));
    BOOST_REQUIRE(all.shape() == (Shape{world, 2, 3}));
    for (int r = 0; r < world; ++r) BOOST_CHECK(allclose(all[r], of_rank(r, 6).reshape({2, 3})));
}

BOOST_AUTO_TEST_CASE(reduce_scatter_keeps_this_ranks_rows_of_the_sum) {
    join();
    int rank = dist::get_rank(), world = dist::get_world_size();
    Tensor mine = of_rank(rank, 2 * world * 3).reshape({2 * world, 3});
    Tensor part = dist::reduce_scatter(mine, dist::ReduceOp::sum);
    Tensor sum = zeros({2 * world, 3});
    for (int r = 0; r < world; ++r) sum = sum + of_rank(r, 2 * world * 3).reshape({2 * world, 3});
    BOOST_REQUIRE(part.shape() == (Shape{2, 3}));
    BOOST_CHECK(allclose(part, sum.slice(0, 2 * rank, 2 * rank + 2)));
}

BOOST_AUTO_TEST_CASE(async_all_reduce_completes_on_wait_and_barrier_returns) {
    join();
    Tensor t = ones({1000});
    auto work = dist::all_reduce_async(t, dist::ReduceOp::sum);
    work->wait();
    BOOST_CHECK(allclose(t, full({1000}, double(dist::get_world_size()))));
    dist::barrier();
}

BOOST_AUTO_TEST_CASE(bad_arguments_raise_before_any_rank_waits) {
    join();
    Tensor strided = ones({4, 4}).t().slice(0, 0, 4, 2);
    BOOST_CHECK_EXCEPTION(dist::all_reduce(strided), Error, [](const Error& e) {
        return std::string(e.what()).find("contiguous") != std::string::npos;
    });
    BOOST_CHECK_EXCEPTION(dist::all_reduce(arange(0, 3).to(DType::int64), dist::ReduceOp::avg),
                          Error, [](const Error& e) {
                              return std::string(e.what()).find("avg needs a floating") !=
                                     std::string::npos;
                          });
    BOOST_CHECK_THROW(dist::broadcast(ones({2}), dist::get_world_size()), Error);
    BOOST_CHECK_THROW(dist::reduce_scatter(full({}, 1.0)), Error);  // no dim 0 to split
}

BOOST_AUTO_TEST_SUITE_END()
