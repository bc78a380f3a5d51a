// The cache of weights in oneDNN's layouts (tensor/conv_weight_cache.h). Without it every
// convolution reordered its weights from OIHW on every call: about a fifth of ResNet-18's
// oneDNN time at 224x224 (docs/perf-models.md).
#ifdef KILN_HAVE_DNNL
#include "tensor/conv_weight_cache.h"

#include <atomic>
#include <cstdlib>
#include <list>
#include <map>
#include <mutex>
#include <string_view>

#include "tensor/ops.h"
#include "tensor/storage.h"

namespace kiln::detail {
namespace {

struct Entry {
    std::weak_ptr<Storage> storage;  // expired: that buffer was freed (its address may be reused)
    uint64_t version = 0;
    dnnl::memory::desc want;
    ConvWeights reordered;
    size_t bytes = 0;
};
using Key = std::pair<const Storage*, int64_t>;  // storage, byte offset of the weight in it

struct Cache {
    std::mutex mu;
    std::list<std::pair<Key, Entry>> lru;  // most recently used first
    size_t bytes = 0;
    std::atomic<int64_t> hits{0}, misses{0};
};
Cache& cache() {
    static Cache* c = new Cache;  // leaked: a conv may run while statics are destroyed
    return *c;
}

bool alive(const Entry& e, const Storage* s) {
    auto held = e.storage.lock();
    return held && held.get() == s;
}

// Drops entries of freed storages, then the least recently used until `incoming` fits.
void make_room(Cache& c, size_t incoming) {
    for (auto it = c.lru.begin(); it != c.lru.end();)
        if (!alive(it->second, it->first.first)) {
            c.bytes -= it->second.bytes;
            it = c.lru.erase(it);
        } else {
            ++it;
        }
    while (!c.lru.empty() && c.bytes + incoming > conv_weight_cache_limit_bytes) {
        c.bytes -= c.lru.back().second.bytes;
        c.lru.pop_back();
    }
}

}  // namespace

bool conv_weight_cache_enabled() {
    const char* e = std::getenv("KILN_CONV_CACHE");
    std::string_view v = e ? e : "";
    KILN_CHECK(v.empty() || v == "0" || v == "1", "KILN_CONV_CACHE: expected 0 or 1, got '", v,
               "'");
    return v != "0";
}

ConvWeights conv_cached_weights(const Tensor& w, const dnnl::memory::desc& want,
                                const dnnl::engine& engine,
                                const std::function<void(dnnl::memory& into)>& reorder) {
    Cache& c = cache();
    const std::shared_ptr<Storage>& storage = w.impl()->storage;
    Key key{storage.get(),
            static_cast<const char*>(w.raw_data()) - static_cast<const char*>(storage->data)};
    uint64_t version = storage->version;
    if (conv_weight_cache_enabled()) {
        std::lock_guard lock(c.mu);
        for (auto it = c.lru.begin(); it != c.lru.end(); ++it)
            if (it->first == key && it->second.want == want && it->second.version == version &&
                alive(it->second, key.first)) {
                c.lru.splice(c.lru.begin(), c.lru, it);
                ++c.hits;
                return it->second.reordered;
            }
    }
    ++c.misses;
    size_t bytes = want.get_size();
    Tensor buffer = empty({int64_t((bytes + 3) / 4)}, DType::float32);
    ConvWeights into{dnnl::memory(want, engine, buffer.raw_data()), buffer};
    reorder(into.memory);
    if (!conv_weight_cache_enabled()) return into;
    std::lock_guard lock(c.mu);
    // One entry per weight and layout: the stale one (an older version) goes.
    for (auto it = c.lru.begin(); it != c.lru.end(); ++it)
        if (it->first == key && it->second.want == want) {
            c.bytes -= it->second.bytes;
            c.lru.erase(it);
            break;
        }
    make_room(c, bytes);
    if (bytes > conv_weight_cache_limit_bytes) return into;
    c.lru.emplace_front(key, Entry{storage, version, want, into, bytes});
    c.bytes += bytes;
    return into;
}

ConvWeightCacheStats conv_weight_cache_stats() {
    Cache& c = cache();
    std::lock_guard lock(c.mu);
    return {c.hits.load(), c.misses.load(), int64_t(c.lru.size()), int64_t(c.bytes)};
}

void conv_weight_cache_clear() {
    Cache& c = cache();
    std::lock_guard lock(c.mu);
    c.lru.clear();
    c.bytes = 0;
}

}  // namespace kiln::detail
#else
#include "tensor/ops.h"

namespace kiln::detail {  // built without oneDNN: nothing is ever cached
ConvWeightCacheStats conv_weight_cache_stats() { return {}; }
void conv_weight_cache_clear() {}
}  // namespace kiln::detail
#endif
