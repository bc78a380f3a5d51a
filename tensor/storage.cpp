// The caching allocator: size classes, a free list per class, a cap on cached bytes.
#include "tensor/storage.h"

#include <sys/sysinfo.h>

#include <cstdlib>
#include <map>
#include <algorithm>
#include <mutex>
#include <vector>

#include "tensor/cuda_runtime.h"
#include "tensor/error.h"

namespace kiln {
namespace {

constexpr size_t kAlign = 64;
constexpr size_t kMaxCachedBytes = size_t(4) << 30;

// Small blocks round to 64 B; larger ones to 1/8 of their power of two, so waste stays < 12.5%.
size_t size_class(size_t bytes) {
    if (bytes <= 4096) return (bytes + kAlign - 1) / kAlign * kAlign;
    size_t p = 4096;
    while (p * 2 <= bytes) p *= 2;
    size_t step = p / 8;
    return (bytes + step - 1) / step * step;
}

struct Pool {
    std::mutex mu;
    std::map<size_t, std::vector<void*>> free_blocks;
    PoolStats stats;

    void* take(size_t block) {  // the caller holds `block` bytes from here on, cached or fresh
        std::lock_guard lock(mu);
        stats.live_bytes += block;
        stats.peak_live_bytes = std::max(stats.peak_live_bytes, stats.live_bytes);
        auto it = free_blocks.find(block);
        if (it != free_blocks.end() && !it->second.empty()) {
            void* p = it->second.back();
            it->second.pop_back();
            stats.cached_bytes -= block;
            ++stats.hits;
            return p;
        }
        ++stats.misses;
        return nullptr;
    }
    void give(void* p, size_t block) {
        std::lock_guard lock(mu);
        stats.live_bytes -= block;
        if (stats.cached_bytes + block > kMaxCachedBytes) {
            std::free(p);
            return;
        }
        free_blocks[block].push_back(p);
        stats.cached_bytes += block;
    }
    void release() {
        std::lock_guard lock(mu);
        for (auto& [size, list] : free_blocks)
            for (void* p : list) std::free(p);
        free_blocks.clear();
        stats.cached_bytes = 0;
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
        s->data = std::aligned_alloc(kAlign, s->block_bytes);
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
