// Storage: one buffer of bytes, recycled through a caching pool so that repeated
// same-size allocations don't pay the page-fault cost of fresh memory.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

#include "tensor/dtype.h"

namespace kiln {

struct Storage {
    void* data = nullptr;
    size_t bytes = 0;       // usable size requested
    size_t block_bytes = 0; // size class actually held
    Device device = cpu;
    bool owned = true;      // false: wraps user memory, never freed
    uint64_t version = 0;   // bumped by every in-place write (autograd checks saved tensors)
    bool fake = false;      // no buffer: a shape-only tracing value (jit/fake.h)
    Storage() = default;
    Storage(const Storage&) = delete;
    Storage& operator=(const Storage&) = delete;
    ~Storage();
};

std::shared_ptr<Storage> storage_allocate(size_t bytes, Device device = cpu);

struct PoolStats {
    size_t hits = 0, misses = 0;  // allocations served from cache / from the OS
    size_t cached_bytes = 0;      // bytes held for reuse
    size_t live_bytes = 0;        // CPU bytes held by live storages
    size_t peak_live_bytes = 0;   // the most live_bytes has been since pool_reset_peak()
};
PoolStats pool_stats();
void pool_release_cached();  // give every cached block back to the OS
void pool_reset_peak();      // peak_live_bytes = live_bytes
// Blocks of 2 MiB or more start on a 2 MiB boundary and are madvised for transparent huge
// pages (fewer page faults on first touch); KILN_HUGE_PAGES=0 (read once) maps them plainly.
bool pool_huge_pages_enabled();

}  // namespace kiln
