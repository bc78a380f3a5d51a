// The CUDA driver API and cuBLAS through dlopen (tensor/cuda_runtime.h says why no header is
// used): the caching device allocator, copies, loading and launching kernels (compiled by
// tensor/cuda_nvrtc.cpp), GEMM, CUDA graphs and events.
#include "tensor/cuda_runtime.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <sstream>
#include <unordered_map>

#include "jit/log.h"
#include "tensor/cuda.h"
#include "tensor/error.h"
#include "tensor/ops.h"
#include "tensor/symbol_table.h"

namespace kiln::cuda {
namespace detail {
namespace {

// --- the C signatures kiln uses (cuda.h, cublas_api.h)
using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = void*;
using CUmodule = void*;
using CUfunction = void*;
using CUstream = void*;
using CUevent = void*;
using CUgraph = void*;
using CUgraphExec = void*;
using cublasStatus_t = int;
using cublasHandle_t = void*;
constexpr int kAttrComputeMajor = 75, kAttrComputeMinor = 76, kAttrSmCount = 16;

// The driver entry points kiln calls, as a table (tensor/symbol_table.h); a few are bound
// under their versioned names.
#define KILN_DRIVER_SYMBOLS(X)                                                                     \
    X(cuInit, "cuInit", CUresult (*)(unsigned))                                                    \
    X(cuDeviceGetCount, "cuDeviceGetCount", CUresult (*)(int*))                                    \
    X(cuDeviceGet, "cuDeviceGet", CUresult (*)(CUdevice*, int))                                    \
    X(cuDeviceGetName, "cuDeviceGetName", CUresult (*)(char*, int, CUdevice))                      \
    X(cuDeviceGetAttribute, "cuDeviceGetAttribute", CUresult (*)(int*, int, CUdevice))             \
    X(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", CUresult (*)(CUcontext*, CUdevice))    \
    X(cuCtxSetCurrent, "cuCtxSetCurrent", CUresult (*)(CUcontext))                                 \
    X(cuCtxGetCurrent, "cuCtxGetCurrent", CUresult (*)(CUcontext*))                                \
    X(cuStreamCreate, "cuStreamCreate", CUresult (*)(CUstream*, unsigned))                         \
    X(cuStreamSynchronize, "cuStreamSynchronize", CUresult (*)(CUstream))                          \
    X(cuMemAlloc, "cuMemAlloc_v2", CUresult (*)(CUdeviceptr*, size_t))                             \
    X(cuMemFree, "cuMemFree_v2", CUresult (*)(CUdeviceptr))                                        \
    X(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2",                                                   \
      CUresult (*)(CUdeviceptr, const void*, size_t, CUstream))                                    \
    X(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2",                                                   \
      CUresult (*)(void*, CUdeviceptr, size_t, CUstream))                                          \
    X(cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2",                                                   \
      CUresult (*)(CUdeviceptr, CUdeviceptr, size_t, CUstream))                                    \
    X(cuMemsetD8Async, "cuMemsetD8Async",                                                          \
      CUresult (*)(CUdeviceptr, unsigned char, size_t, CUstream))                                  \
    X(cuMemsetD32Async, "cuMemsetD32Async", CUresult (*)(CUdeviceptr, unsigned, size_t, CUstream)) \
    X(cuModuleLoadData, "cuModuleLoadData", CUresult (*)(CUmodule*, const void*))                  \
    X(cuModuleGetFunction, "cuModuleGetFunction",                                                  \
      CUresult (*)(CUfunction*, CUmodule, const char*))                                            \
    X(cuLaunchKernel, "cuLaunchKernel",                                                            \
      CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,         \
                   unsigned, CUstream, void**, void**))                                            \
    X(cuGetErrorString, "cuGetErrorString", CUresult (*)(CUresult, const char**))                  \
    X(cuFuncGetAttribute, "cuFuncGetAttribute", CUresult (*)(int*, int, CUfunction))               \
    X(cuStreamBeginCapture, "cuStreamBeginCapture_v2", CUresult (*)(CUstream, int))                \
    X(cuStreamEndCapture, "cuStreamEndCapture", CUresult (*)(CUstream, CUgraph*))                  \
    X(cuGraphInstantiate, "cuGraphInstantiateWithFlags",                                           \
      CUresult (*)(CUgraphExec*, CUgraph, unsigned long long))                                     \
    X(cuGraphLaunch, "cuGraphLaunch", CUresult (*)(CUgraphExec, CUstream))                         \
    X(cuGraphExecDestroy, "cuGraphExecDestroy", CUresult (*)(CUgraphExec))                         \
    X(cuGraphDestroy, "cuGraphDestroy", CUresult (*)(CUgraph))                                     \
    X(cuEventCreate, "cuEventCreate", CUresult (*)(CUevent*, unsigned))                            \
    X(cuEventRecord, "cuEventRecord", CUresult (*)(CUevent, CUstream))                             \
    X(cuEventSynchronize, "cuEventSynchronize", CUresult (*)(CUevent))                             \
    X(cuEventElapsedTime, "cuEventElapsedTime", CUresult (*)(float*, CUevent, CUevent))            \
    X(cuEventDestroy, "cuEventDestroy_v2", CUresult (*)(CUevent))
struct Driver {
    KILN_DRIVER_SYMBOLS(KILN_SYMBOL_FIELD)
    void bind(const LibrarySymbols& symbols) { KILN_DRIVER_SYMBOLS(KILN_SYMBOL_BIND) }
};

// cuBLAS's, bound when a matmul first needs the library.
#define KILN_CUBLAS_SYMBOLS(X)                                                                     \
    X(cublasCreate_v2, "cublasCreate_v2", cublasStatus_t (*)(cublasHandle_t*))                     \
    X(cublasSetStream_v2, "cublasSetStream_v2", cublasStatus_t (*)(cublasHandle_t, CUstream))      \
    X(cublasSgemmStridedBatched, "cublasSgemmStridedBatched",                                      \
      cublasStatus_t (*)(cublasHandle_t, int, int, int, int, int, const float*, const float*, int, \
                         long long, const float*, int, long long, const float*, float*, int,       \
                         long long, int))                                                          \
    X(cublasDgemmStridedBatched, "cublasDgemmStridedBatched",                                      \
      cublasStatus_t (*)(cublasHandle_t, int, int, int, int, int, const double*, const double*,    \
                         int, long long, const double*, int, long long, const double*, double*,    \
                         int, long long, int))
struct Cublas {
    KILN_CUBLAS_SYMBOLS(KILN_SYMBOL_FIELD)
    void bind(const LibrarySymbols& symbols) { KILN_CUBLAS_SYMBOLS(KILN_SYMBOL_BIND) }
};

// Everything opened once, on first use. `error` says why CUDA is unusable ("" when usable).
struct Runtime {
    Driver cu{};
    Cublas blas{};
    cublasHandle_t blas_handle = nullptr;
    CUstream stream = nullptr;
    // cuda:0's primary context, made current in each thread that uses the device.
    CUcontext context = nullptr;
    CUdevice device = 0;
    int devices = 0, arch = 0, sms = 1;
    std::string name, error, blas_error;
    std::once_flag blas_once;
    std::mutex mu;  // the allocator's free lists and the kernel map
    std::map<size_t, std::vector<CUdeviceptr>> free_blocks;
    size_t allocated = 0, cached = 0;
    std::map<std::string, CUmodule> modules;
    // While a CUDA graph is captured, blocks given back are kept for the graph (its replays
    // write them) instead of going to the free lists, and allocations take them first.
    std::map<size_t, std::vector<CUdeviceptr>>* capture_held = nullptr;
    Graph* capturing = nullptr;  // the graph under capture, for its random draws
    uint64_t capture_id = 0, captures = 0;
    // Blocks allocated during a capture that a tensor still holds: given back, each goes to
    // its graph's held blocks (the graph's replays still write it).
    std::unordered_map<CUdeviceptr, std::map<size_t, std::vector<CUdeviceptr>>*> graph_owned;

    Runtime() { error = open(); }
    std::string open() {
        std::string why;
        void* lib = open_library({"libcuda.so.1"}, why);
        if (!lib) return "libcuda.so.1 (the NVIDIA driver) not found: " + why;
        try {
            cu.bind(LibrarySymbols(lib, "libcuda.so.1"));
        } catch (const Error& e) {
            return e.what();
        }
        if (CUresult r = cu.cuInit(0)) return "cuInit failed (" + cu_error(r) + ")";
        if (cu.cuDeviceGetCount(&devices) || devices == 0) return "the driver reports no CUDA device";
        if (std::string nvrtc = nvrtc_unavailable_reason(); !nvrtc.empty()) return nvrtc;
        int major = 0, minor = 0;
        char buf[256] = {};
        if (CUresult r = cu.cuDeviceGet(&device, 0)) return "cuDeviceGet(0) failed (" + cu_error(r) + ")";
        if (CUresult r = cu.cuDevicePrimaryCtxRetain(&context, device))
            return "no context on cuda:0 (" + cu_error(r) + ")";
        if (CUresult r = cu.cuCtxSetCurrent(context))
            return "cuCtxSetCurrent failed (" + cu_error(r) + ")";
        cu.cuDeviceGetAttribute(&major, kAttrComputeMajor, device);
        cu.cuDeviceGetAttribute(&minor, kAttrComputeMinor, device);
        cu.cuDeviceGetAttribute(&sms, kAttrSmCount, device);
        cu.cuDeviceGetName(buf, sizeof buf - 1, device);
        arch = major * 10 + minor;
        name = buf;
        if (CUresult r = cu.cuStreamCreate(&stream, 0)) return "cuStreamCreate failed (" + cu_error(r) + ")";
        return "";
    }
    std::string cu_error(CUresult r) {
        const char* s = nullptr;
        if (cu.cuGetErrorString) cu.cuGetErrorString(r, &s);
        return (s ? std::string(s) : "CUDA error") + ", code " + std::to_string(r);
    }
    // A driver call acts on the calling thread's current context, and a thread starts with
    // none: every thread that touches the device makes cuda:0's context current first, or the
    // call fails with "invalid device context" (201). Checked per call: user code may switch
    // contexts between kiln's calls.
    CUresult make_current() {
        CUcontext now = nullptr;
        if (cu.cuCtxGetCurrent(&now) == 0 && now == context) return 0;
        return cu.cuCtxSetCurrent(context);
    }
    // cuBLAS only when a matmul needs it: the rest of CUDA works without the library.
    void open_blas() {
        std::call_once(blas_once, [this] { blas_error = load_blas(); });
    }
    std::string load_blas() {
        std::string why;
        void* lib = open_library(
            {"libcublas.so.13", "libcublas.so.12", "libcublas.so",
             "/usr/local/cuda/lib64/libcublas.so.13", "/usr/local/cuda/lib64/libcublas.so"},
            why);
        if (!lib) return "cuBLAS (libcublas.so) not found: " + why;
        try {
            blas.bind(LibrarySymbols(lib, "libcublas"));
        } catch (const Error& e) {
            return e.what();
        }
        if (cublasStatus_t s = blas.cublasCreate_v2(&blas_handle))
            return "cublasCreate failed (status " + std::to_string(s) + ")";
        blas.cublasSetStream_v2(blas_handle, stream);
        return "";
    }
};

Runtime& runtime() {
    static Runtime r;
    return r;
}
// The runtime, once CUDA is known to be usable, with its context current in this thread.
Runtime& live(const char* op) {
    require(op);
    Runtime& r = runtime();
    CUresult made = r.make_current();
    KILN_CHECK(made == 0, op,
               ": cannot make cuda:0's context current in this thread (cuCtxSetCurrent: ",
               r.cu_error(made), ")");
    return r;
}
// For destructors and clean-up: the context current if CUDA is usable, never a throw.
Runtime* live_quietly() {
    Runtime& r = runtime();
    if (!r.error.empty() || r.make_current() != 0) return nullptr;
    return &r;
}
void check(CUresult r, const char* what) {
    KILN_CHECK(r == 0, "CUDA: ", what, " failed (", runtime().cu_error(r), ")");
}
constexpr CUresult kOutOfMemory = 2;  // CUDA_ERROR_OUT_OF_MEMORY

// Size classes: powers of two from 512 bytes, then multiples of 2 MiB.
size_t size_class(size_t bytes) {
    if (bytes <= 512) return 512;
    if (bytes >= (size_t(2) << 20)) return (bytes + (size_t(2) << 20) - 1) / (size_t(2) << 20) * (size_t(2) << 20);
    size_t c = 512;
    while (c < bytes) c *= 2;
    return c;
}

}  // namespace

void require(const char* op) {
    const std::string& why = runtime().error;
    KILN_CHECK(why.empty(), op, ": CUDA is not available: ", why,
               " (kiln::cuda::is_available() is false; keep tensors on the CPU)");
}

void* allocate(size_t bytes, size_t& block) {
    Runtime& r = live("cuda allocate");
    block = size_class(bytes);
    std::lock_guard lock(r.mu);
    auto& list = r.free_blocks[block];
    CUdeviceptr p = 0;
    if (r.capture_held) {  // a block this capture gave back first (stream order keeps it safe)
        auto& mine = (*r.capture_held)[block];
        if (!mine.empty()) {
            p = mine.back();
            mine.pop_back();
        }
    }
    if (p) {
    } else if (!list.empty()) {
        p = list.back();
        list.pop_back();
        r.cached -= block;
    } else if (CUresult first = r.cu.cuMemAlloc(&p, block)) {
        // Only a lack of memory is worth giving the cache back for; any other failure is
        // reported as what it is.
        KILN_CHECK(first == kOutOfMemory, "CUDA: cannot allocate ", bytes,
                   " bytes on cuda:0: cuMemAlloc failed (", r.cu_error(first), ")");
        for (auto& [size, ptrs] : r.free_blocks)  // give the cache back and try once more
            for (CUdeviceptr q : ptrs) r.cu.cuMemFree(q);
        r.free_blocks.clear();
        r.cached = 0;
        CUresult again = r.cu.cuMemAlloc(&p, block);
        KILN_CHECK(again == 0,
                   again == kOutOfMemory ? "CUDA out of memory" : "CUDA: cuMemAlloc failed",
                   ": cannot allocate ", bytes, " bytes (", r.allocated, " bytes held by tensors; ",
                   r.cu_error(again), ")");
    }
    r.allocated += block;
    if (r.capture_held) r.graph_owned[p] = r.capture_held;
    return reinterpret_cast<void*>(p);
}

void release(void* p, size_t block) {
    Runtime& r = runtime();
    std::lock_guard lock(r.mu);
    auto q = reinterpret_cast<CUdeviceptr>(p);
    r.allocated -= block;
    if (auto owned = r.graph_owned.find(q); owned != r.graph_owned.end()) {
        (*owned->second)[block].push_back(q);  // a block a graph's replays write: still its
        r.graph_owned.erase(owned);
        return;
    }
    if (r.capture_held) {
        (*r.capture_held)[block].push_back(q);
        return;
    }
    r.free_blocks[block].push_back(q);
    r.cached += block;
}

namespace {
std::atomic<int64_t> g_issued{0};  // kernels, cuBLAS calls, copies and memsets put on the stream
std::atomic<int64_t> g_host_waits{0};

// The host stops until kiln's stream has run everything queued on it (KILN_LOGS=sync names
// each wait, as torch.cuda.set_sync_debug_mode("warn") does).
std::atomic<void (*)()> g_after_host_wait{nullptr};
thread_local bool t_in_after_wait = false;

void wait_for_stream(Runtime& r, const char* why) {
    g_host_waits.fetch_add(1, std::memory_order_relaxed);
    if (log_enabled("sync")) log_event("sync", std::string("the host waits for the GPU: ") + why);
    check(r.cu.cuStreamSynchronize(r.stream), why);
    void (*after)() = g_after_host_wait.load();
    if (after && !t_in_after_wait) {  // its own reads wait too: no second round from them
        t_in_after_wait = true;
        struct Leave { ~Leave() { t_in_after_wait = false; } } leave;
        after();
    }
}
}  // namespace
void set_after_host_wait(void (*check)()) { g_after_host_wait = check; }

int64_t operations_issued() { return g_issued.load(std::memory_order_relaxed); }
int64_t host_waits() { return g_host_waits.load(std::memory_order_relaxed); }

void* library_stream(const char* op) {
    Runtime& r = live(op);
    g_issued.fetch_add(1, std::memory_order_relaxed);
    return r.stream;
}
bool capturing() {
    Runtime& r = runtime();
    std::lock_guard lock(r.mu);
    return r.capture_held != nullptr;
}
uint64_t capture_id() {
    Runtime& r = runtime();
    std::lock_guard lock(r.mu);
    return r.capture_id;
}

namespace {
thread_local std::vector<const char*> t_ops;  // OpScope's stack

// What cannot be captured raises before the driver sees it, naming the work and the ops that
// issued it: the capture ends cleanly (nothing captured runs) and the process goes on.
void refuse_in_capture(Runtime& r, const char* work, const char* hint) {
    bool now = false;
    {
        std::lock_guard lock(r.mu);
        now = r.capture_held != nullptr;
    }
    if (!now) return;
    std::string ops = current_ops();
    fail(work, ops.empty() ? std::string() : " in op `" + ops + "`",
         " cannot be captured into a CUDA graph: ", hint);
}
}  // namespace

OpScope::OpScope(const char* op) { t_ops.push_back(op); }
OpScope::~OpScope() { t_ops.pop_back(); }
std::string current_ops() {
    std::string out;
    for (const char* op : t_ops) out += (out.empty() ? "" : " > ") + std::string(op);
    return out;
}

void copy_bytes(void* dst, bool dst_dev, const void* src, bool src_dev, size_t bytes) {
    if (bytes == 0) return;
    Runtime& r = live("copy");
    g_issued.fetch_add(1, std::memory_order_relaxed);
    auto d = reinterpret_cast<CUdeviceptr>(dst);
    auto s = reinterpret_cast<CUdeviceptr>(src);
    if (dst_dev && src_dev) return check(r.cu.cuMemcpyDtoDAsync(d, s, bytes, r.stream), "device to device copy");
    if (dst_dev)
        refuse_in_capture(
            r,
            "a copy from host memory to the GPU (a CPU tensor moved to CUDA, or a CPU value an op "
            "reads)",
            "a replay would copy this call's bytes again, not the values of its own call; make the "
            "tensor on the GPU, or copy_ it into a CUDA tensor the step reads before the step");
    else
        refuse_in_capture(
            r,
            "a read of a CUDA tensor's values on the host (item(), cpu(), to_vector(), printing, a "
            "condition on a tensor)",
            "the host would need a result the GPU only computes when the graph is replayed; "
            "return the tensor from the step and read it after the call");
    // From pageable host memory (kiln never pins it) the driver stages the bytes before the
    // call returns, so the host buffer may go at once; the host does not wait for the stream.
    if (dst_dev) return check(r.cu.cuMemcpyHtoDAsync(d, src, bytes, r.stream), "host to device copy");
    check(r.cu.cuMemcpyDtoHAsync(dst, s, bytes, r.stream), "device to host copy");
    wait_for_stream(r, "a device to host copy (a read of a CUDA tensor's values)");
}

void memset_zero(void* p, size_t bytes) {
    if (bytes == 0) return;
    Runtime& r = live("memset");
    g_issued.fetch_add(1, std::memory_order_relaxed);
    check(r.cu.cuMemsetD8Async(reinterpret_cast<CUdeviceptr>(p), 0, bytes, r.stream), "memset");
}

void load_modules(const std::vector<NvrtcProgram>& programs) {
    Runtime& r = live("kernel compile");
    std::vector<NvrtcProgram> missing;
    {
        std::lock_guard lock(r.mu);
        for (const NvrtcProgram& p : programs)
            if (!r.modules.count(p.source)) missing.push_back(p);
    }
    if (missing.empty()) return;
    std::vector<std::string> binaries = compile_cubins(missing, r.arch);
    std::lock_guard lock(r.mu);
    for (size_t i = 0; i < missing.size(); ++i) {
        if (r.modules.count(missing[i].source)) continue;  // another thread loaded it meanwhile
        CUmodule module = nullptr;
        auto start = std::chrono::steady_clock::now();
        CUresult loaded = r.cu.cuModuleLoadData(&module, binaries[i].data());
        count_module_load(std::chrono::steady_clock::now() - start);
        check(loaded, "loading a compiled kernel (cuModuleLoadData)");
        r.modules[missing[i].source] = module;
    }
}

void* kernel(const std::string& source, const std::string& name) {
    Runtime& r = live("kernel compile");
    std::unique_lock lock(r.mu);
    auto module = r.modules.find(source);
    if (module == r.modules.end()) {
        lock.unlock();
        load_modules({{source, name}});
        lock.lock();
        module = r.modules.find(source);
    }
    CUfunction fn = nullptr;
    check(r.cu.cuModuleGetFunction(&fn, module->second, name.c_str()), "finding a compiled kernel");
    return fn;
}

int multiprocessor_count() { return live("launch").sms; }

int max_threads_per_block(void* fn) {
    Runtime& r = live("launch");
    int n = 0;
    constexpr int kAttrMaxThreadsPerBlock = 0;  // CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK
    check(r.cu.cuFuncGetAttribute(&n, kAttrMaxThreadsPerBlock, static_cast<CUfunction>(fn)), "cuFuncGetAttribute");
    return n;
}

void launch(void* fn, int64_t n, void** args) {
    if (n <= 0) return;
    Runtime& r = live("launch");
    int64_t blocks = std::min<int64_t>((n + 255) / 256, int64_t(r.sms) * 8);
    launch_grid(fn, unsigned(std::max<int64_t>(blocks, 1)), 256, 0, args);
}

void launch_grid(void* fn, unsigned grid, unsigned block, size_t shared_bytes, void** args) {
    Runtime& r = live("launch");
    g_issued.fetch_add(1, std::memory_order_relaxed);
    check(r.cu.cuLaunchKernel(fn, grid, 1, 1, block, 1, 1, unsigned(shared_bytes), r.stream, args, nullptr),
          "kernel launch");
}

void gemm(bool f64, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const void* a, int64_t lda, int64_t sa,
          const void* b, int64_t ldb, int64_t sb, void* c, int64_t ldc, int64_t sc, int64_t batch) {
    Runtime& r = live("matmul");
    r.open_blas();
    g_issued.fetch_add(1, std::memory_order_relaxed);
    KILN_CHECK(r.blas_error.empty(), "matmul on CUDA: ", r.blas_error);
    KILN_CHECK(m < (int64_t(1) << 31) && n < (int64_t(1) << 31) && k < (int64_t(1) << 31) && batch < (int64_t(1) << 31),
               "matmul on CUDA: sizes ", m, "x", k, " @ ", k, "x", n, " (batch ", batch, ") pass cuBLAS's int range");
    // cuBLAS is column-major: row-major C = A B is column-major C^T = B^T A^T, so the
    // operands swap places and m, n swap roles.
    int opa = ta ? 1 : 0, opb = tb ? 1 : 0;
    cublasStatus_t s;
    if (f64) {
        const double one = 1, zero = 0;
        s = r.blas.cublasDgemmStridedBatched(r.blas_handle, opb, opa, int(n), int(m), int(k), &one,
                                             static_cast<const double*>(b), int(ldb), sb,
                                             static_cast<const double*>(a), int(lda), sa, &zero,
                                             static_cast<double*>(c), int(ldc), sc, int(batch));
    } else {
        const float one = 1, zero = 0;
        s = r.blas.cublasSgemmStridedBatched(r.blas_handle, opb, opa, int(n), int(m), int(k), &one,
                                             static_cast<const float*>(b), int(ldb), sb,
                                             static_cast<const float*>(a), int(lda), sa, &zero,
                                             static_cast<float*>(c), int(ldc), sc, int(batch));
    }
    KILN_CHECK(s == 0, "matmul on CUDA: cuBLAS gemm failed (status ", s, ") for ", m, "x", k, " @ ", k, "x", n);
}

void synchronize() {
    Runtime& r = live("synchronize");
    refuse_in_capture(r, "cuda::synchronize()",
                      "the host cannot wait for work that is only being recorded");
    wait_for_stream(r, "synchronize");
}

}  // namespace detail

Graph::~Graph() {
    detail::Runtime* live = detail::live_quietly();
    if (!live) return;
    detail::Runtime& r = *live;
    if (random_state_) r.cu.cuMemFree(random_state_);
    if (exec_) r.cu.cuGraphExecDestroy(exec_);
    if (graph_) r.cu.cuGraphDestroy(graph_);
    std::vector<std::pair<const void*, std::function<void()>>> hooks;
    {
        std::lock_guard lock(r.mu);
        for (auto& [block, ptrs] : held_)
            for (detail::CUdeviceptr p : ptrs) {
                r.free_blocks[block].push_back(p);
                r.cached += block;
            }
        held_.clear();
        for (auto it = r.graph_owned.begin(); it != r.graph_owned.end();)  // plain blocks again
            it = it->second == &held_ ? r.graph_owned.erase(it) : std::next(it);
        hooks.swap(after_replay_);
    }
    // The hooks may hold tensors: they go after the lock is released (release() takes it).
}

void Graph::capture(const std::function<void()>& work) {
    detail::Runtime& r = detail::live("CUDA graph capture");
    KILN_CHECK(!exec_, "CUDA graph: already captured");
    detail::synchronize();
    if (!random_state_) detail::check(r.cu.cuMemAlloc(&random_state_, 2 * sizeof(uint64_t)), "cuMemAlloc (graph random state)");
    {
        std::lock_guard lock(r.mu);
        KILN_CHECK(!r.capture_held, "CUDA graph: a capture is already under way");
        r.capture_held = &held_;
        r.capturing = this;
        r.capture_id = ++r.captures;
    }
    constexpr int kRelaxed = 2;  // CU_STREAM_CAPTURE_MODE_RELAXED: the allocator may call cuMemAlloc
    int began = r.cu.cuStreamBeginCapture(r.stream, kRelaxed);
    std::string failure;
    try {
        detail::check(began, "cuStreamBeginCapture");
        work();
    } catch (const std::exception& e) {  // a kiln::Error, or bad_alloc: the capture ends either way
        failure = e.what();
    }
    void* graph = nullptr;
    int ended = began == 0 ? r.cu.cuStreamEndCapture(r.stream, &graph) : 0;
    {
        std::lock_guard lock(r.mu);
        r.capture_held = nullptr;
        r.capturing = nullptr;
        r.capture_id = 0;
    }
    graph_ = graph;
    KILN_CHECK(failure.empty(), "CUDA graph capture failed: ", failure);
    detail::check(ended, "cuStreamEndCapture");
    detail::check(r.cu.cuGraphInstantiate(&exec_, graph_, 0), "cuGraphInstantiate");
}

void Graph::replay() {
    detail::Runtime& r = detail::live("CUDA graph replay");
    KILN_CHECK(exec_, "CUDA graph: nothing captured");
    if (random_draws_) {  // this replay's draws: (seed, offset) written where its kernels read them
        RngState at = reserve_random(random_draws_);
        unsigned words[4] = {unsigned(at.seed), unsigned(at.seed >> 32), unsigned(at.offset), unsigned(at.offset >> 32)};
        for (int i = 0; i < 4; ++i)
            detail::check(r.cu.cuMemsetD32Async(random_state_ + 4 * i, words[i], 1, r.stream), "cuMemsetD32Async");
    }
    detail::check(r.cu.cuGraphLaunch(exec_, r.stream), "cuGraphLaunch");
    detail::g_issued.fetch_add(1, std::memory_order_relaxed);
    for (const auto& [key, after] : after_replay_) after();
}

namespace detail {
void on_each_replay(const void* key, std::function<void()> after) {
    Runtime& r = runtime();
    std::lock_guard lock(r.mu);
    Graph* g = r.capturing;
    if (!g) return;
    for (const auto& hook : g->after_replay_)
        if (hook.first == key) return;
    g->after_replay_.emplace_back(key, std::move(after));
}

RandomDraws reserve_random_draws(uint64_t count) {
    Runtime& r = runtime();
    {
        std::lock_guard lock(r.mu);
        if (Graph* g = r.capturing) {  // draws relative to the replay's offset, read from the device
            RandomDraws d{0, g->random_draws_, reinterpret_cast<const void*>(g->random_state_)};
            g->random_draws_ += count;
            return d;
        }
    }
    RngState at = reserve_random(count);
    return {at.seed, at.offset, nullptr};
}
}  // namespace detail

Event::Event() {
    detail::Runtime& r = detail::live("cuda::Event");
    detail::check(r.cu.cuEventCreate(&event_, 0), "cuEventCreate");
}
Event::~Event() {
    if (detail::Runtime* r = event_ ? detail::live_quietly() : nullptr)
        r->cu.cuEventDestroy(event_);
}
void Event::record() {
    detail::Runtime& r = detail::live("cuda::Event::record");
    detail::check(r.cu.cuEventRecord(event_, r.stream), "cuEventRecord");
}
float Event::elapsed_ms(const Event& end) const {
    detail::Runtime& r = detail::live("cuda::Event::elapsed_ms");
    detail::refuse_in_capture(r, "cuda::Event::elapsed_ms",
                              "the host cannot wait for work that is only being recorded");
    detail::check(r.cu.cuEventSynchronize(end.event_), "cuEventSynchronize");
    float ms = 0;
    detail::check(r.cu.cuEventElapsedTime(&ms, event_, end.event_), "cuEventElapsedTime");
    return ms;
}

bool is_available() { return detail::runtime().error.empty(); }
std::string unavailable_reason() { return detail::runtime().error; }
int device_count() { return is_available() ? detail::runtime().devices : 0; }
std::string device_name(int index) {
    detail::require("device_name");
    KILN_CHECK(index == 0, "device_name: kiln uses cuda:0 only, got index ", index);
    return detail::runtime().name + ", sm_" + std::to_string(detail::runtime().arch);
}
std::pair<int, int> device_capability(int index) {
    detail::require("get_device_capability");
    KILN_CHECK(index == 0, "get_device_capability: kiln uses cuda:0 only, got index ", index);
    return {detail::runtime().arch / 10, detail::runtime().arch % 10};
}
void synchronize() { detail::synchronize(); }
size_t memory_allocated() { return is_available() ? detail::runtime().allocated : 0; }
size_t memory_cached() { return is_available() ? detail::runtime().cached : 0; }
void empty_cache() {
    if (!is_available()) return;
    detail::Runtime& r = detail::live("empty_cache");
    r.cu.cuStreamSynchronize(r.stream);
    std::lock_guard lock(r.mu);
    for (auto& [size, ptrs] : r.free_blocks)
        for (detail::CUdeviceptr p : ptrs) r.cu.cuMemFree(p);
    r.free_blocks.clear();
    r.cached = 0;
}

}  // namespace kiln::cuda
