// plan_gemm / gemm_rows: the BLAS calls behind matmul (tensor/gemm.h).
#include "tensor/gemm.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "jit/log.h"
#include "tensor/blas_library.h"
#include "tensor/kernels.h"
#include "tensor/onednn_signals.h"
#include "tensor/parallel.h"

#ifdef KILN_HAVE_DNNL
#include <dnnl.h>
#include <omp.h>

#include <dnnl.hpp>
#include <list>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "tensor/storage.h"
#endif

namespace kiln {

bool gemm_layout(int64_t r, int64_t c, int64_t s0, int64_t s1, GemmOperand& g) {
    if (s1 == 1 && s0 >= std::max<int64_t>(c, 1)) return g = {false, s0}, true;
    if (s0 == 1 && s1 >= std::max<int64_t>(r, 1)) return g = {true, s1}, true;
    return false;
}

namespace {

// Element offset of batch `idx` (row-major over p.batch) in t.
int64_t batch_offset(const GemmPlan& p, const Tensor& t, int64_t idx) {
    int64_t off = t.offset();
    for (int64_t d = int64_t(p.batch.size()) - 1; d >= 0; --d) {
        off += (idx % p.batch[d]) * t.strides()[d];
        idx /= p.batch[d];
    }
    return off;
}

// One matrix b shared by every batch, and a's batches' rows evenly spaced (a contiguous
// [B, T, E] or a view of one): the whole batch is one GEMM of batches * M rows, which BLAS
// runs far better than `batches` small ones.
bool can_fold_batch(const GemmPlan& p) {
    if (p.batch.empty() || p.ga.trans) return false;
    int64_t want = p.M * p.ga.ld;
    for (int64_t d = int64_t(p.batch.size()) - 1; d >= 0; --d) {
        if (p.b.strides()[d] != 0 && p.batch[d] != 1) return false;
        if (p.a.strides()[d] != want && p.batch[d] != 1) return false;
        want *= p.batch[d];
    }
    return true;
}

// GEMMs of fewer multiply-adds (M * N * K) stay on OpenBLAS: below 64^3 its call costs
// 0.03-3 us against oneDNN's 0.4-4 us (4x3x2 to 64x64x64, 1 thread). Above, oneDNN's sgemm
// was faster on 9 of GPT's 11 GEMM shapes on this machine's AVX-512 Xeon, by up to 27%,
// within 1% on one and 10% slower on one (docs/perf-models.md, "GPT's GEMMs through oneDNN").
constexpr int64_t kOneDnnMinWork = int64_t(1) << 19;

#ifdef KILN_HAVE_DNNL
// ---- choosing by measurement
//
// Which library runs a shape faster depends on the CPU. On the AVX-512 Xeon these libraries
// were first measured on, oneDNN's dnnl_sgemm matched or beat OpenBLAS on GPT's shapes, and
// its packed weights (below) beat both; on an AVX2 EPYC (Zen 3) oneDNN took twice OpenBLAS's
// time on the weight gradients (a^T @ b: 15.4 against 8.1 ms at 1024x256x1024) and the packed
// primitive made GPT's inference 15% slower (docs/perf-models.md, "GEMMs on an AVX2 EPYC").
// So where KILN_GEMM is auto, a float32 GEMM of at least kOneDnnMinWork multiply-adds is timed
// on both libraries the first time its shape (sizes, transposes, strides, kiln's thread count)
// is planned, on the call's own operands into a scratch output, one untimed and one timed run
// each, and that shape keeps the faster for the process; packing is chosen the same way
// (find_packed_b). Shapes of fake tensors (shape-only tracing) are not measured.
struct ChoiceKey {
    int64_t M, N, K, lda, ldb;
    bool ta, tb, packed;
    int threads;
    auto operator<=>(const ChoiceKey&) const = default;
};
struct Choices {
    std::mutex mu;
    std::map<ChoiceKey, bool> first_faster;  // the first candidate won
};
Choices& choices() {
    static Choices* c = new Choices;  // leaked: a matmul may run while statics are destroyed
    return *c;
}
ChoiceKey choice_key(const GemmPlan& p, bool packed) {
    return {p.M, p.N, p.K, p.ga.ld, p.gb.ld, p.ga.trans, p.gb.trans, packed, num_threads()};
}
bool measurable(const GemmPlan& p) {
    for (const Tensor* t : {&p.a, &p.b}) {
        const std::shared_ptr<Storage>& st = t->impl()->storage;
        if (!st || st->fake || st->device != cpu || !st->data) return false;
    }
    return !in_parallel_for();
}
// ms of call 0 of `q` into `scratch`, after one untimed run (a library's first call of a
// shape may generate its kernel).
double time_call(const GemmPlan& q, float* scratch) {
    sync_blas_threads();
    gemm_rows(q, 0, 0, q.M, scratch);
    auto t0 = std::chrono::steady_clock::now();
    gemm_rows(q, 0, 0, q.M, scratch);
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}
// Whether `first` runs the plan's shape faster than `second`, measured once per key.
bool first_faster(const GemmPlan& first, const GemmPlan& second, const ChoiceKey& key,
                  const char* first_name, const char* second_name) {
    Choices& c = choices();
    {
        std::lock_guard lock(c.mu);
        if (auto it = c.first_faster.find(key); it != c.first_faster.end()) return it->second;
    }
    Tensor scratch = empty({std::max<int64_t>(first.M * first.N, 1)}, DType::float32);
    float* out = static_cast<float*>(scratch.raw_data());
    double a = time_call(first, out), b = time_call(second, out);
    bool won = a <= b;
    if (log_enabled("gemm"))
        log_event("gemm", "matmul " + std::to_string(key.M) + "x" + std::to_string(key.N) + "x" +
                              std::to_string(key.K) + (key.ta ? " (a^T)" : "") +
                              (key.tb ? " (b^T)" : "") + " at " + std::to_string(key.threads) +
                              " thread(s): " + first_name + " " + std::to_string(a) + " ms, " +
                              second_name + " " + std::to_string(b) + " ms -> " +
                              (won ? first_name : second_name));
    std::lock_guard lock(c.mu);
    return c.first_faster.emplace(key, won).first->second;
}

// Whether `key` was measured and its first candidate lost.
bool measured_slower(const ChoiceKey& key) {
    Choices& c = choices();
    std::lock_guard lock(c.mu);
    auto it = c.first_faster.find(key);
    return it != c.first_faster.end() && !it->second;
}
#endif

GemmLibrary choose_library(const GemmPlan& p) {
    const char* env = std::getenv("KILN_GEMM");
    std::string_view want = env ? env : "";
    KILN_CHECK(want.empty() || want == "auto" || want == "openblas" || want == "onednn",
               "matmul: KILN_GEMM must be auto, openblas or onednn, got '", want, "'");
    if (want == "openblas" || p.a.dtype() != DType::float32) return GemmLibrary::blas;
#ifdef KILN_HAVE_DNNL
    if (want == "onednn") return GemmLibrary::onednn;
    if (p.M * p.N * p.K < kOneDnnMinWork) return GemmLibrary::blas;
    if (!measurable(p)) return GemmLibrary::onednn;
    GemmPlan onednn = p, blas = p;
    onednn.library = GemmLibrary::onednn, blas.library = GemmLibrary::blas;
    return first_faster(onednn, blas, choice_key(p, false), "oneDNN", "OpenBLAS")
               ? GemmLibrary::onednn
               : GemmLibrary::blas;
#else
    KILN_CHECK(want != "onednn",
               "matmul: KILN_GEMM=onednn, but this kiln was built without oneDNN");
    return GemmLibrary::blas;
#endif
}

#ifdef KILN_HAVE_DNNL
// ---- b packed once (GemmPlan::packed_b)
//
// dnnl_sgemm packs b into its kernel's layout on every call, and kiln calls it once per part:
// per block of rows of a fused epilogue (codegen/cpu_epilogue.cpp) and per thread, so GPT's
// [256, 1024] weight was packed 8 times per GEMM at 2 threads. oneDNN's matmul primitive
// (brgemm) takes b already in its layout: one pack, kept, serves every part of every call.
// Measured per GEMM on this machine (1 thread, alternating calls, weights packed once), in
// 128-row parts: 1024x256x256 0.90 -> 0.82 ms, 1024x1024x256 3.72 -> 3.38, 1024x256x1024
// 3.89 -> 3.36; whole: 0.85 -> 0.80, 3.33 -> 3.34, 3.72 -> 3.36 (docs/perf-models.md, "GPT
// inference at 1 and 2 threads").
//
// What is packed: b of a plan with one GEMM of 64 rows or more (a batch folded into M counts)
// and a's rows plain, whose storage (kiln-owned, so every in-place write bumps its version) was
// multiplied at the same version and layout before: a weight over repeated calls. A training step's
// weights change version every step and stay on dnnl_sgemm; so do activations (new storages).
struct PackKey {
    const Storage* storage;
    int64_t offset, K, N, ld;
    bool trans;
    auto operator<=>(const PackKey&) const = default;
};

dnnl::engine& pack_engine() {
    static dnnl::engine e(dnnl::engine::kind::cpu, 0);
    return e;
}

// b as oneDNN's [K, N] (row-major b, or b^T's storage read transposed).
dnnl::memory::desc plain_b_desc(const GemmPlan& p) {
    using dnnl::memory;
    return memory::desc({p.K, p.N}, memory::data_type::f32,
                        p.gb.trans ? memory::dims{1, p.gb.ld} : memory::dims{p.gb.ld, 1});
}

// A matmul primitive for `rows` x N x K parts with a's and c's leading dimensions, made
// for one OpenMP thread (the caller has set it), with its own scratchpad per call: Debian's
// oneDNN shares the library scratchpad between primitives (tensor/kernels_conv_dnnl.cpp,
// run_prim), and kiln's threads run parts at once.
struct PackPrim {
    dnnl::matmul prim;
    dnnl::memory::desc a, b, c;
    size_t scratch_bytes = 0;
};
const PackPrim& pack_prim(int64_t rows, int64_t N, int64_t K, int64_t lda, int64_t ldc) {
    using dnnl::memory;
    static std::mutex mu;
    static std::map<std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t>,
                    std::unique_ptr<PackPrim>>
        cache;
    std::lock_guard lock(mu);
    auto& slot = cache[{rows, N, K, lda, ldc}];
    if (!slot) {
        auto f32 = memory::data_type::f32;
        memory::desc a({rows, K}, f32, memory::dims{lda, 1}),
            c({rows, N}, f32, memory::dims{ldc, 1});
        memory::desc any({K, N}, f32, memory::format_tag::any);
        dnnl::primitive_attr attr;
        attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
        dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, any, c), attr, pack_engine());
        slot = std::make_unique<PackPrim>(
            PackPrim{dnnl::matmul(pd), a, pd.weights_desc(), c, pd.scratchpad_desc().get_size()});
    }
    return *slot;
}

}  // namespace

struct detail::PackedWeights {
    dnnl::memory::desc desc;  // b in the layout of the primitive made for the plan's M rows
    dnnl::memory memory;      // over buffer
    Tensor buffer;            // a block of kiln's pool
};

namespace {

struct PackEntry {
    std::weak_ptr<Storage> storage;  // expired: freed (its address may serve another storage)
    uint64_t version = 0;
    std::shared_ptr<const detail::PackedWeights> packed;  // null: seen once at this version
};
struct PackCache {
    std::mutex mu;
    std::list<std::pair<PackKey, PackEntry>> lru;  // most recently used first
    size_t bytes = 0;
    int64_t hits = 0, packs = 0;
    std::atomic<int64_t> packed_parts{0};
};
PackCache& pack_cache() {
    static PackCache* c = new PackCache;  // leaked: a matmul may run while statics are destroyed
    return *c;
}
constexpr size_t kPackCacheBytes = size_t(512) << 20;
// A GEMM of fewer rows reads b about once whatever its layout, and its packed copy would only
// add b's size to the memory held (a backward's g @ W^T for a batch of 4 rows:
// memory/leaves_take_gradients_nothing_else_holds_and_copy_the_others).
constexpr int64_t kPackMinRows = 64;
constexpr size_t kPackCacheEntries = 4096;

// KILN_GEMM_PACK: 0 never, 1 always (where a plan qualifies), unset or auto: where measured
// faster for the shape (choosing by measurement, above).
enum class Packing { never, always, measured };
Packing packing_mode() {
    const char* e = std::getenv("KILN_GEMM_PACK");
    std::string_view v = e ? e : "";
    KILN_CHECK(v.empty() || v == "0" || v == "1" || v == "auto",
               "matmul: KILN_GEMM_PACK must be 0, 1 or auto, got '", v, "'");
    return v == "0" ? Packing::never : v == "1" ? Packing::always : Packing::measured;
}

std::shared_ptr<const detail::PackedWeights> pack(const GemmPlan& p, const float* b) {
    if (omp_get_max_threads() != 1) omp_set_num_threads(1);
    const PackPrim& prim = pack_prim(p.M, p.N, p.K, p.ga.ld, std::max<int64_t>(p.N, 1));
    auto w = std::make_shared<detail::PackedWeights>();
    w->desc = prim.b;
    w->buffer = empty({int64_t((prim.b.get_size() + 3) / 4)}, DType::float32);
    w->memory = dnnl::memory(prim.b, pack_engine(), w->buffer.raw_data());
    dnnl::memory plain(plain_b_desc(p), pack_engine(), const_cast<float*>(b));
    dnnl::stream stream(pack_engine());
    detail::OneDnnSignalsBlocked no_handler_inside_onednn;  // tensor/onednn_signals.h
    dnnl::reorder(plain, w->memory).execute(stream, plain, w->memory);
    stream.wait();
    return w;
}

// The plan's b, packed, where it was seen before at this version (and packed now if not yet).
std::shared_ptr<const detail::PackedWeights> find_packed_b(const GemmPlan& p) {
    const std::shared_ptr<Storage>& storage = p.b.impl()->storage;
    if (p.batches != 1 || p.ga.trans || p.M < kPackMinRows || p.N < 1 || p.K < 1 || !storage ||
        !storage->owned || storage->fake || storage->device != cpu)
        return nullptr;
    Packing mode = packing_mode();
    if (mode == Packing::never) return nullptr;
    const float* b = static_cast<const float*>(storage->data) + batch_offset(p, p.b, 0);
    PackKey key{storage.get(), b - static_cast<const float*>(storage->data), p.K, p.N, p.gb.ld,
                p.gb.trans};
    PackCache& c = pack_cache();
    std::unique_lock lock(c.mu);
    auto it = c.lru.begin();
    for (; it != c.lru.end(); ++it)
        if (it->first == key) break;
    auto held = it == c.lru.end() ? nullptr : it->second.storage.lock();
    if (it == c.lru.end() || held.get() != storage.get() ||
        it->second.version != storage->version) {
        if (it != c.lru.end()) {  // stale: another version, or a freed storage's address
            if (it->second.packed) c.bytes -= it->second.packed->desc.get_size();
            c.lru.erase(it);
        }
        c.lru.emplace_front(key, PackEntry{storage, storage->version, nullptr});
        // Bounded: entries of freed storages go first, then the least recently used.
        for (auto e = c.lru.begin(); e != c.lru.end();)
            if (e->second.storage.expired()) {
                if (e->second.packed) c.bytes -= e->second.packed->desc.get_size();
                e = c.lru.erase(e);
            } else {
                ++e;
            }
        while (c.lru.size() > kPackCacheEntries || c.bytes > kPackCacheBytes) {
            if (c.lru.back().second.packed) c.bytes -= c.lru.back().second.packed->desc.get_size();
            c.lru.pop_back();
        }
        return nullptr;
    }
    c.lru.splice(c.lru.begin(), c.lru, it);
    if (!it->second.packed) {
        // Packed under the lock: two threads planning the same b pack it once.
        if (mode == Packing::measured && measured_slower(choice_key(p, true))) return nullptr;
        auto packed = pack(p, b);
        if (mode == Packing::measured && measurable(p)) {
            GemmPlan with = p, without = p;
            with.packed_b = packed;
            if (!first_faster(with, without, choice_key(p, true), "packed b", "plain b"))
                return nullptr;  // this shape runs faster unpacked: the entry stays unpacked
        }
        it->second.packed = std::move(packed);
        c.bytes += it->second.packed->desc.get_size();
        ++c.packs;
    }
    ++c.hits;
    return it->second.packed;
}

// rows x N on the packed b through the primitive; false (nothing run) where the primitive
// made for these rows wants b in another layout than the one packed.
bool packed_part(const GemmPlan& p, int64_t rows, const float* a, float* c, int64_t ldc) {
    const PackPrim& prim = pack_prim(rows, p.N, p.K, p.ga.ld, ldc);
    if (!(prim.b == p.packed_b->desc)) return false;
    static thread_local dnnl::stream stream(pack_engine());
    static thread_local std::vector<char> scratch;
    if (scratch.size() < prim.scratch_bytes) scratch.resize(prim.scratch_bytes);
    dnnl::memory am(prim.a, pack_engine(), const_cast<float*>(a)), cm(prim.c, pack_engine(), c);
    dnnl::memory sm({{int64_t(prim.scratch_bytes)}, dnnl::memory::data_type::u8, {1}},
                    pack_engine(), scratch.data());
    prim.prim.execute(stream, {{DNNL_ARG_SRC, am},
                               {DNNL_ARG_WEIGHTS, p.packed_b->memory},
                               {DNNL_ARG_DST, cm},
                               {DNNL_ARG_SCRATCHPAD, sm}});
    stream.wait();
    pack_cache().packed_parts.fetch_add(1, std::memory_order_relaxed);
    return true;
}

// One dnnl_sgemm (row-major) on the calling thread alone. OpenMP's thread count belongs to the
// calling thread (as for the convolutions, tensor/kernels_conv_dnnl.cpp), so each GEMM part
// sets 1: kiln's pool, not an OpenMP team, runs a GEMM's parts (onednn_gemm), so no OpenMP
// worker is left spinning beside kiln's threads after a GEMM, whatever OMP_WAIT_POLICY says.
// Set on every call where it differs, not once per thread: a convolution on the same thread
// sets it back to kiln's count.
thread_local int t_gemm_threads = 0;  // detail::onednn_gemm_threads
void onednn_part(const GemmPlan& p, int64_t m, int64_t n, const float* a, const float* b, float* c,
                 int64_t ldc) {
    if (omp_get_max_threads() != 1) omp_set_num_threads(1);
    t_gemm_threads = omp_get_max_threads();
    detail::OneDnnSignalsBlocked no_handler_inside_onednn;  // tensor/onednn_signals.h
    if (p.packed_b && n == p.N && packed_part(p, m, a, c, ldc)) return;
    dnnl_status_t status = dnnl_sgemm(p.ga.trans ? 'T' : 'N', p.gb.trans ? 'T' : 'N', m, n, p.K,
                                      1.f, a, p.ga.ld, b, p.gb.ld, 0.f, c, ldc);
    KILN_CHECK(status == dnnl_success, "matmul: oneDNN's dnnl_sgemm failed (status ", int(status),
               ") for ", m, "x", p.K, " @ ", p.K, "x", n);
}

// rows x N of the plan's GEMM on kiln's threads: one part per thread, split along the rows
// when N <= rows (each part packs b, K x N, again), else along the columns (each packs a).
// Inside a parallel_for (a batch of GEMMs, one per thread) or for a small GEMM, one part.
void onednn_gemm(const GemmPlan& p, int64_t rows, const float* a, const float* b, float* c,
                 int64_t ldc) {
    int threads = in_parallel_for() ? 1 : num_threads();
    if (threads <= 1 || rows * p.N * p.K < 2 * kOneDnnMinWork) {
        onednn_part(p, rows, p.N, a, b, c, ldc);
    } else if (p.N <= rows || p.packed_b) {
        // A packed b is read whole, by parts of rows; none packs it again, so the parts are
        // small (parallel_for's 4 per thread, at least 64 rows), taken by whichever thread is
        // free: a thread held back by another process delays the GEMM by one part, not half.
        int64_t row_stride = p.ga.trans ? 1 : p.ga.ld;
        int64_t grain = p.packed_b ? std::min<int64_t>(64, rows) : rows / threads;
        parallel_for(rows, std::max<int64_t>(1, grain), [&](int64_t i0, int64_t i1) {
            onednn_part(p, i1 - i0, p.N, a + i0 * row_stride, b, c + i0 * ldc, ldc);
        });
    } else {
        int64_t col_stride = p.gb.trans ? p.gb.ld : 1;
        parallel_for(p.N, std::max<int64_t>(1, p.N / threads), [&](int64_t j0, int64_t j1) {
            onednn_part(p, rows, j1 - j0, a, b + j0 * col_stride, c + j0, ldc);
        });
    }
}
#endif

std::atomic<bool> g_profile{false};
std::atomic<int64_t> g_profile_calls{0}, g_profile_ns{0};

}  // namespace

void gemm_profile(bool on) {
    g_profile_calls = 0, g_profile_ns = 0;
    g_profile = on;
}
GemmProfile gemm_profile_counts() { return {g_profile_calls.load(), g_profile_ns.load()}; }

int detail::onednn_gemm_threads() {
#ifdef KILN_HAVE_DNNL
    return t_gemm_threads;
#else
    return 0;
#endif
}

detail::GemmPackStats detail::gemm_pack_stats() {
#ifdef KILN_HAVE_DNNL
    PackCache& c = pack_cache();
    std::lock_guard lock(c.mu);
    return {c.hits, c.packs, c.packed_parts.load(), int64_t(c.lru.size())};
#else
    return {};
#endif
}

int64_t detail::gemm_choices() {
#ifdef KILN_HAVE_DNNL
    Choices& c = choices();
    std::lock_guard lock(c.mu);
    return int64_t(c.first_faster.size());
#else
    return 0;
#endif
}

void detail::gemm_pack_clear() {
#ifdef KILN_HAVE_DNNL
    PackCache& c = pack_cache();
    std::lock_guard lock(c.mu);
    c.lru.clear();
    c.bytes = 0;
#endif
}

const char* gemm_library_name(GemmLibrary lib) {
    return lib == GemmLibrary::onednn ? "onednn" : "openblas";
}

bool gemm_single_threaded_calls(const GemmPlan& p) {
    return p.library == GemmLibrary::onednn || set_blas_threads(1);
}

GemmPlan plan_gemm(const Tensor& in_a, const Tensor& in_b) {
    Tensor a = in_a.detach(), b = in_b.detach();
    KILN_CHECK(a.dim() >= 1 && b.dim() >= 1, "matmul: both arguments need at least 1 dim, got ",
               a.shape(), " and ", b.shape());
    KILN_CHECK(a.dtype() == b.dtype() && is_floating(a.dtype()),
               "matmul: expected two float32 or two float64 tensors, got ", a.dtype(), " and ",
               b.dtype());
    bool a_vec = a.dim() == 1, b_vec = b.dim() == 1;
    if (a_vec) a = a.unsqueeze(0);
    if (b_vec) b = b.unsqueeze(1);
    GemmPlan p;
    p.M = a.size(-2), p.K = a.size(-1), p.N = b.size(-1);
    KILN_CHECK(b.size(-2) == p.K, "matmul: shapes ", in_a.shape(), " and ", in_b.shape(),
               " cannot be multiplied (", p.K, " vs ", b.size(-2), ")");
    p.batch = broadcast_shapes(Shape(a.shape().begin(), a.shape().end() - 2),
                               Shape(b.shape().begin(), b.shape().end() - 2), "matmul");
    Shape ea = p.batch, eb = p.batch;
    ea.insert(ea.end(), {p.M, p.K});
    eb.insert(eb.end(), {p.K, p.N});
    p.a = a.expand(ea);
    p.b = b.expand(eb);
    if (!gemm_layout(p.M, p.K, p.a.strides()[p.a.dim() - 2], p.a.strides()[p.a.dim() - 1], p.ga))
        p.a = materialize(p.a), gemm_layout(p.M, p.K, p.K, 1, p.ga);
    if (!gemm_layout(p.K, p.N, p.b.strides()[p.b.dim() - 2], p.b.strides()[p.b.dim() - 1], p.gb))
        p.b = materialize(p.b), gemm_layout(p.K, p.N, p.N, 1, p.gb);
    p.batches = shape_numel(p.batch);
    p.full_shape = p.batch;
    p.full_shape.insert(p.full_shape.end(), {p.M, p.N});
    p.out_shape = p.full_shape;
    if (a_vec) p.out_shape.erase(p.out_shape.end() - 2);
    if (b_vec) p.out_shape.erase(p.out_shape.end() - 1);
    if (can_fold_batch(p)) p.M *= p.batches, p.batches = 1;
    p.library = choose_library(p);
#ifdef KILN_HAVE_DNNL
    if (p.library == GemmLibrary::onednn) p.packed_b = find_packed_b(p);
#endif
    return p;
}

void gemm_rows(const GemmPlan& p, int64_t call, int64_t r0, int64_t r1, void* out) {
    int64_t rows = r1 - r0, ldc = std::max<int64_t>(p.N, 1);
    if (rows <= 0) return;
    // The first call's offsets stand for the folded batch (can_fold_batch).
    int64_t oa = batch_offset(p, p.a, call) + r0 * (p.ga.trans ? 1 : p.ga.ld),
            ob = batch_offset(p, p.b, call);
    int64_t oc = (call * p.M + r0) * p.N;
    auto ta = p.ga.trans ? CblasTrans : CblasNoTrans, tb = p.gb.trans ? CblasTrans : CblasNoTrans;
    size_t elem = dtype_bytes(p.a.dtype());
    if (p.K == 0) {  // nothing to sum: zeros, whatever BLAS does with k = 0
        std::memset(static_cast<char*>(out) + oc * elem, 0, size_t(rows * p.N) * elem);
        return;
    }
    bool profile = g_profile.load(std::memory_order_relaxed);
    auto t0 = profile ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    if (p.library == GemmLibrary::onednn) {
#ifdef KILN_HAVE_DNNL
        onednn_gemm(p, rows, static_cast<const float*>(p.a.impl()->storage->data) + oa,
                    static_cast<const float*>(p.b.impl()->storage->data) + ob,
                    static_cast<float*>(out) + oc, ldc);
#endif
    } else if (p.a.dtype() == DType::float32) {
        const float* pa = static_cast<const float*>(p.a.impl()->storage->data) + oa;
        const float* pb = static_cast<const float*>(p.b.impl()->storage->data) + ob;
        blas().sgemm(CblasRowMajor, ta, tb, rows, p.N, p.K, 1.f, pa, p.ga.ld, pb, p.gb.ld, 0.f,
                     static_cast<float*>(out) + oc, ldc);
    } else {
        const double* pa = static_cast<const double*>(p.a.impl()->storage->data) + oa;
        const double* pb = static_cast<const double*>(p.b.impl()->storage->data) + ob;
        blas().dgemm(CblasRowMajor, ta, tb, rows, p.N, p.K, 1.0, pa, p.ga.ld, pb, p.gb.ld, 0.0,
                     static_cast<double*>(out) + oc, ldc);
    }
    if (profile) {
        g_profile_calls.fetch_add(1, std::memory_order_relaxed);
        g_profile_ns.fetch_add(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now() - t0)
                                   .count(),
                               std::memory_order_relaxed);
    }
}

}  // namespace kiln
