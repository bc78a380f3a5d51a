// The caching allocator: size classes, best-fit reuse of freed blocks, least recently freed
// blocks given back to the OS first. See docs/architecture.md (its bullet on buffers and the caching pool).
#include "tensor/storage.h"

#include <malloc.h>
#include <sys/mman.h>
#include <sys/sysinfo.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <list>
#include <map>
#include <mutex>
#include <string_view>

#include "tensor/cuda_runtime.h"
#include "tensor/error.h"

namespace kiln {
namespace {

constexpr size_t kAlign = 64;
constexpr size_t kMaxCachedBytes = size_t(4) << 30;
// Blocks this big are mapped from the OS one by one, so that freeing one returns its pages
// (malloc keeps freed memory of its heap resident).
constexpr size_t kMapBytes = size_t(1) << 20;
// The cache may hold this much even when little is live: small programs keep their blocks.
constexpr size_t kMinCachedBytes = size_t(64) << 20;

// Small blocks round to 64 B; larger ones to 1/8 of their power of two, so waste stays < 12.5%.
size_t size_class(size_t bytes) {
    if (bytes <= 4096) return (bytes + kAlign - 1) / kAlign * kAlign;
    size_t p = 4096;
    while (p * 2 <= bytes) p *= 2;
    size_t step = p / 8;
    return (bytes + step - 1) / step * step;
}

// A cached block may serve a request up to a quarter smaller than itself: a step whose
// sizes shift a little reuses what the last step freed instead of growing the cache.
size_t largest_reusable(size_t block) { return block + block / 4; }

// Blocks this big start on a 2 MiB boundary and ask for transparent huge pages (madvise; most
// kernels give them to madvised memory only): the first touch of fresh memory then faults
// once per 2 MiB instead of once per 4 KiB. Measured on the 2-core machine: 45 MB of fresh
// pages written in 7-11 ms instead of 22-29 (docs/perf.md, "First calls").
constexpr size_t kHugeBytes = size_t(2) << 20;

void* map_block(size_t block) {
    bool huge = block >= kHugeBytes && pool_huge_pages_enabled();
    size_t span = huge ? block + kHugeBytes : block;  // room to slide to a 2 MiB boundary
    void* p = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return nullptr;
    if (!huge) return p;
    // Keep [start, start + block) and unmap the rest (block is a multiple of the page size).
    auto* raw = static_cast<char*>(p);
    auto* start = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(raw) + kHugeBytes - 1) &
                                          ~uintptr_t(kHugeBytes - 1));
    if (start > raw) munmap(raw, size_t(start - raw));
    if (size_t tail = size_t(raw + span - (start + block))) munmap(start + block, tail);
    madvise(start, block, MADV_HUGEPAGE);  // a kernel without THP says no: small pages then
    return start;
}

void* os_allocate(size_t block) {
    if (block < kMapBytes) return std::aligned_alloc(kAlign, block);
    return map_block(block);
}
void os_free(void* p, size_t block) {
    if (block < kMapBytes) std::free(p);
    else munmap(p, block);
}

struct Pool {
    struct Block {
        void* data;
        size_t bytes;
    };
    std::mutex mu;
    std::list<Block> free_blocks;  // least recently freed first
    std::multimap<size_t, std::list<Block>::iterator> by_size;
    PoolStats stats;

    // A cached block of at least `block` bytes, or null; `block` becomes the size held.
    void* take(size_t& block) {
        std::lock_guard lock(mu);
        auto it = by_size.lower_bound(block);
        if (it != by_size.end() && it->first <= largest_reusable(block)) {
            Block b = *it->second;
            free_blocks.erase(it->second);
            by_size.erase(it);
            stats.cached_bytes -= b.bytes;
            stats.live_bytes += b.bytes;
            stats.peak_live_bytes = std::max(stats.peak_live_bytes, stats.live_bytes);
            ++stats.hits;
            block = b.bytes;
            return b.data;
        }
        // A miss goes to the OS. Before it does, the cache gives back its least recently freed
        // blocks while it holds more than is live: what the last steps left and this one does
        // not reuse (the first call's tracing, sizes that changed) does not stay resident.
        while (!free_blocks.empty() && stats.cached_bytes + block > std::max(stats.live_bytes, kMinCachedBytes)) evict_oldest();
        stats.live_bytes += block;
        stats.peak_live_bytes = std::max(stats.peak_live_bytes, stats.live_bytes);
        ++stats.misses;
        return nullptr;
    }
    void give(void* p, size_t block) {
        std::lock_guard lock(mu);
        stats.live_bytes -= block;
        if (stats.cached_bytes + block > kMaxCachedBytes) {
            os_free(p, block);
            return;
        }
        free_blocks.push_back({p, block});
        by_size.emplace(block, std::prev(free_blocks.end()));
        stats.cached_bytes += block;
    }
    void evict_oldest() {  // the caller holds mu
        Block b = free_blocks.front();
        auto [first, last] = by_size.equal_range(b.bytes);
        for (auto it = first; it != last; ++it)
            if (it->second == free_blocks.begin()) {
                by_size.erase(it);
                break;
            }
        free_blocks.pop_front();
        stats.cached_bytes -= b.bytes;
        os_free(b.data, b.bytes);
    }
    void release() {
        std::lock_guard lock(mu);
        while (!free_blocks.empty()) evict_oldest();
        malloc_trim(0);  // and what malloc's heap holds freed, small blocks included
    }
    ~Pool() { release(); }
};

// RAM plus swap: a bigger request cannot succeed, and asking anyway is not harmless (the
// sanitizers' allocator aborts the process instead of returning null).
size_t memory_bytes() {
    struct sysinfo info {};
    if (sysinfo(&info) != 0) return SIZE_MAX;
    return (size_t(info.totalram) + size_t(info.totalswap)) * info.mem_unit;
}

Pool& pool() {
    static Pool* p = new Pool();  // leaked on purpose: storages may die during static destruction
    return *p;
}

}  // namespace

bool pool_huge_pages_enabled() {
    static const bool on = [] {
        const char* e = std::getenv("KILN_HUGE_PAGES");
        std::string_view v = e ? e : "";
        KILN_CHECK(v.empty() || v == "0" || v == "1", "KILN_HUGE_PAGES: expected 0 or 1, got '", v,
                   "'");
        return v != "0";
    }();
    return on;
}

Storage::~Storage() {
    if (owned && data && device.type == DeviceType::cpu) pool().give(data, block_bytes);
    if (owned && data && device.type == DeviceType::cuda) cuda::detail::release(data, block_bytes);
}

std::shared_ptr<Storage> storage_allocate(size_t bytes, Device device) {
    if (device.type == DeviceType::cuda) {  // the caching device allocator (tensor/cuda_runtime.cpp)
        auto s = std::make_shared<Storage>();
        s->bytes = bytes;
        s->device = device;
        s->data = cuda::detail::allocate(bytes == 0 ? 1 : bytes, s->block_bytes);
        return s;
    }
    static const size_t machine_bytes = memory_bytes();  // once: a syscall per allocation is not free
    KILN_CHECK(bytes <= machine_bytes, "storage_allocate: cannot allocate ", bytes, " bytes: this machine has ",
               machine_bytes, " bytes of memory (RAM and swap)");
    auto s = std::make_shared<Storage>();
    s->bytes = bytes;
    s->block_bytes = size_class(bytes == 0 ? 1 : bytes);
    s->data = pool().take(s->block_bytes);
    if (!s->data) {
        s->data = os_allocate(s->block_bytes);
        if (!s->data) {
            std::lock_guard lock(pool().mu);
            pool().stats.live_bytes -= s->block_bytes;
        }
        KILN_CHECK(s->data, "storage_allocate: out of memory allocating ", bytes, " bytes");
    }
    s->device = device;
    return s;
}

PoolStats pool_stats() {
    std::lock_guard lock(pool().mu);
    return pool().stats;
}
void pool_release_cached() { pool().release(); }
void pool_reset_peak() {
    std::lock_guard lock(pool().mu);
    pool().stats.peak_live_bytes = pool().stats.live_bytes;
}

}  // namespace kiln
