// The caching allocator behind every tensor (tensor/storage.cpp): freed blocks are reused,
// the cache is capped, and pool_release_cached empties it.
#include <boost/test/unit_test.hpp>

#include "kiln.h"

using kiln::pool_stats;

BOOST_AUTO_TEST_SUITE(pool)

BOOST_AUTO_TEST_CASE(same_size_alloc_free_hits_the_cache) {
    kiln::pool_release_cached();
    const size_t hits_before = pool_stats().hits;
    void* first = nullptr;
    for (int i = 0; i < 20; ++i) {
        kiln::Tensor t = kiln::empty({12345});  // freed at the end of each iteration
        if (i == 0) first = t.raw_data();
        BOOST_TEST(t.raw_data() == first);  // the same block, every time
    }
    BOOST_TEST(pool_stats().hits - hits_before >= 19u);
    // One block cached: the repeated allocation does not grow the cache.
    BOOST_TEST(pool_stats().cached_bytes >= 12345u * 4);
    BOOST_TEST(pool_stats().cached_bytes < 12345u * 4 * 9 / 8 + 64);
}

BOOST_AUTO_TEST_CASE(size_classes_waste_less_than_an_eighth) {
    for (size_t bytes : {1u, 100u, 4096u, 4097u, 100000u, 3u << 20}) {
        auto s = kiln::storage_allocate(bytes);
        BOOST_TEST(s->block_bytes >= bytes);
        BOOST_TEST(s->block_bytes <= bytes + std::max<size_t>(64, bytes / 8), bytes << " bytes got a " << s->block_bytes << "-byte block");
    }
}

BOOST_AUTO_TEST_CASE(release_cached_returns_everything) {
    { kiln::Tensor a = kiln::empty({1000}), b = kiln::empty({70000}); }
    BOOST_TEST(pool_stats().cached_bytes > 0u);
    kiln::pool_release_cached();
    BOOST_TEST(pool_stats().cached_bytes == 0u);
    const size_t misses = pool_stats().misses;
    kiln::Tensor c = kiln::empty({1000});
    BOOST_TEST(pool_stats().misses == misses + 1);  // nothing left to reuse
}

BOOST_AUTO_TEST_CASE(cached_bytes_are_capped) {
    // Five 1 GiB blocks, never touched (so never backed by RAM), freed together: the pool keeps
    // at most its 4 GiB cap (kMaxCachedBytes in tensor/storage.cpp) and frees the rest.
    constexpr size_t kGiB = size_t(1) << 30, kCap = 4 * kGiB;
    kiln::pool_release_cached();
    {
        std::vector<kiln::Tensor> blocks;
        for (int i = 0; i < 5; ++i) blocks.push_back(kiln::empty({int64_t(kGiB / 4)}));
    }
    BOOST_TEST(pool_stats().cached_bytes <= kCap);
    BOOST_TEST(pool_stats().cached_bytes >= 3 * kGiB);
    kiln::pool_release_cached();
    BOOST_TEST(pool_stats().cached_bytes == 0u);
}

BOOST_AUTO_TEST_SUITE_END()
