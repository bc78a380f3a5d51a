// The caching allocator behind every tensor (tensor/storage.cpp): freed blocks are reused
// (best fit, up to a quarter bigger), the cache is capped, a miss gives back the oldest
// blocks while the cache holds more than is live, pool_release_cached empties it and
// returns big blocks' pages to the OS, and blocks of 2 MiB or more ask for huge pages.
#include <boost/test/unit_test.hpp>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

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
    kiln::pool_release_cached();  // fresh blocks: a cached one may be up to a quarter bigger
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

BOOST_AUTO_TEST_CASE(a_freed_block_up_to_a_quarter_bigger_is_reused_a_bigger_one_is_not) {
    kiln::pool_release_cached();
    void* freed = nullptr;
    { kiln::Tensor t = kiln::empty({1000000}); freed = t.raw_data(); }  // 4 MB, cached
    {
        kiln::Tensor smaller = kiln::empty({850000});  // 3.4 MB: within a quarter
        BOOST_TEST(smaller.raw_data() == freed);
        BOOST_TEST(smaller.impl()->storage->block_bytes >= 4000000u);
    }
    kiln::Tensor much_smaller = kiln::empty({500000});  // 2 MB: half the block, a fresh one
    BOOST_TEST(much_smaller.raw_data() != freed);
    BOOST_TEST(much_smaller.impl()->storage->block_bytes < 2000000u * 9 / 8 + 64);
    kiln::Tensor bigger = kiln::empty({1100000});  // bigger than the block: never reused
    BOOST_TEST(bigger.raw_data() != freed);
}

BOOST_AUTO_TEST_CASE(a_miss_gives_back_the_oldest_blocks_while_more_is_cached_than_live) {
    kiln::pool_release_cached();
    // 200 MB of 20 MB blocks freed (a traced first call's leftovers), never touched again.
    { std::vector<kiln::Tensor> old; for (int i = 0; i < 10; ++i) old.push_back(kiln::empty({5 << 20})); }
    BOOST_TEST(pool_stats().cached_bytes >= 200u << 20);
    const size_t live = pool_stats().live_bytes;
    // A request none of them fits: the pool gives back old blocks until what it caches is no
    // more than what is live (or its 64 MB floor) before it asks the OS for a new one.
    kiln::Tensor other = kiln::empty({1 << 20});  // 4 MB
    BOOST_TEST(pool_stats().cached_bytes <= std::max<size_t>(live + (4u << 20), 64u << 20));
    // Hits give nothing back: a step that reuses its blocks keeps them.
    { std::vector<kiln::Tensor> again; for (int i = 0; i < 3; ++i) again.push_back(kiln::empty({5 << 20})); }
    const size_t cached = pool_stats().cached_bytes;
    { kiln::Tensor hit = kiln::empty({5 << 20}); }
    BOOST_TEST(pool_stats().cached_bytes == cached);
}

size_t resident_bytes() {
    std::ifstream statm("/proc/self/statm");
    size_t pages = 0, resident = 0;
    statm >> pages >> resident;
    return resident * 4096;
}

BOOST_AUTO_TEST_CASE(release_cached_returns_big_blocks_pages_to_the_os) {
    kiln::pool_release_cached();
    const size_t before = resident_bytes();
    {  // 256 MB in 8 MB blocks (malloc would keep blocks of this size in its heap), written, then cached
        std::vector<kiln::Tensor> blocks;
        for (int i = 0; i < 32; ++i) blocks.push_back(kiln::ones({2 << 20}));
    }
    BOOST_TEST(resident_bytes() >= before + (200u << 20));
    kiln::pool_release_cached();
    BOOST_TEST(resident_bytes() < before + (50u << 20), "resident " << (resident_bytes() >> 20) << " MB, before " << (before >> 20) << " MB");
}

// The THPeligible line /proc/self/smaps gives the mapping that holds `p` (-1: none found).
int thp_eligible(const void* p) {
    std::ifstream smaps("/proc/self/smaps");
    auto at = reinterpret_cast<uintptr_t>(p);
    bool inside = false;
    for (std::string line; std::getline(smaps, line);) {
        uintptr_t lo = 0, hi = 0;
        char dash = 0;
        std::istringstream head(line);
        if (head >> std::hex >> lo >> dash >> hi && dash == '-') inside = lo <= at && at < hi;
        if (inside && line.rfind("THPeligible:", 0) == 0) return std::stoi(line.substr(12));
    }
    return -1;
}

// A fresh page costs a fault per 4 KiB; a first call writing tens of MB of new buffers (a
// model's weights reordered for oneDNN) spends most of its time there. Blocks of 2 MiB and
// more start on a 2 MiB boundary and are madvised for transparent huge pages, so that where
// the kernel has THP ("madvise" or "always") such a block faults once per 2 MiB.
BOOST_AUTO_TEST_CASE(blocks_of_2_mib_and_more_are_aligned_and_eligible_for_huge_pages) {
    if (!kiln::pool_huge_pages_enabled()) {
        BOOST_TEST_MESSAGE("KILN_HUGE_PAGES=0: big blocks are mapped plainly, nothing to check");
        return;
    }
    std::ifstream thp("/sys/kernel/mm/transparent_hugepage/enabled");
    std::string modes((std::istreambuf_iterator<char>(thp)), std::istreambuf_iterator<char>());
    bool kernel_thp =
        modes.find("[always]") != std::string::npos || modes.find("[madvise]") != std::string::npos;
    if (!kernel_thp)
        BOOST_TEST_MESSAGE("no transparent huge pages here ('" << modes << "'): alignment only");
    for (int64_t mib : {2, 3, 5, 9}) {  // 9 MiB: a ResNet-18 layer4 weight
        kiln::Tensor t = kiln::empty({mib << 18});
        auto at = reinterpret_cast<uintptr_t>(t.raw_data());
        BOOST_TEST(at % (uintptr_t(2) << 20) == 0u, mib << " MiB block at " << std::hex << at);
        if (kernel_thp) BOOST_TEST(thp_eligible(t.raw_data()) == 1, mib << " MiB block");
    }
}

BOOST_AUTO_TEST_SUITE_END()
