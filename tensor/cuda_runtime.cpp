// The CUDA driver API, NVRTC and cuBLAS through dlopen, the caching device allocator, and
// NVRTC compilation of kernel source (tensor/cuda_runtime.h says why no header is used).
#include "tensor/cuda_runtime.h"

#include <dlfcn.h>

#include <algorithm>
#include <map>
#include <atomic>
#include <mutex>
#include <sstream>

#include "tensor/cuda.h"
#include "tensor/error.h"
#include "tensor/ops.h"

namespace kiln::cuda {
namespace detail {
namespace {

// --- the C signatures kiln uses (cuda.h, nvrtc.h, cublas_api.h)
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
using nvrtcResult = int;
using nvrtcProgram = void*;
using cublasStatus_t = int;
using cublasHandle_t = void*;
constexpr int kAttrComputeMajor = 75, kAttrComputeMinor = 76, kAttrSmCount = 16;

struct Driver {
    CUresult (*cuInit)(unsigned);
    CUresult (*cuDeviceGetCount)(int*);
    CUresult (*cuDeviceGet)(CUdevice*, int);
    CUresult (*cuDeviceGetName)(char*, int, CUdevice);
    CUresult (*cuDeviceGetAttribute)(int*, int, CUdevice);
    CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice);
    CUresult (*cuCtxSetCurrent)(CUcontext);
    CUresult (*cuCtxGetCurrent)(CUcontext*);
    CUresult (*cuStreamCreate)(CUstream*, unsigned);
    CUresult (*cuStreamSynchronize)(CUstream);
    CUresult (*cuMemAlloc)(CUdeviceptr*, size_t);
    CUresult (*cuMemFree)(CUdeviceptr);
    CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr, const void*, size_t, CUstream);
    CUresult (*cuMemcpyDtoHAsync)(void*, CUdeviceptr, size_t, CUstream);
    CUresult (*cuMemcpyDtoDAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
    CUresult (*cuMemsetD8Async)(CUdeviceptr, unsigned char, size_t, CUstream);
    CUresult (*cuMemsetD32Async)(CUdeviceptr, unsigned, size_t, CUstream);
    CUresult (*cuModuleLoadData)(CUmodule*, const void*);
    CUresult (*cuModuleGetFunction)(CUfunction*, CUmodule, const char*);
    CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                               CUstream, void**, void**);
    CUresult (*cuGetErrorString)(CUresult, const char**);
    CUresult (*cuFuncGetAttribute)(int*, int, CUfunction);
    CUresult (*cuStreamBeginCapture)(CUstream, int);
    CUresult (*cuStreamEndCapture)(CUstream, CUgraph*);
    CUresult (*cuGraphInstantiate)(CUgraphExec*, CUgraph, unsigned long long);
    CUresult (*cuGraphLaunch)(CUgraphExec, CUstream);
    CUresult (*cuGraphExecDestroy)(CUgraphExec);
    CUresult (*cuGraphDestroy)(CUgraph);
    CUresult (*cuEventCreate)(CUevent*, unsigned);
    CUresult (*cuEventRecord)(CUevent, CUstream);
    CUresult (*cuEventSynchronize)(CUevent);
    CUresult (*cuEventElapsedTime)(float*, CUevent, CUevent);
    CUresult (*cuEventDestroy)(CUevent);
};
struct Nvrtc {
    nvrtcResult (*nvrtcCreateProgram)(nvrtcProgram*, const char*, const char*, int, const char* const*,
                                      const char* const*);
    nvrtcResult (*nvrtcCompileProgram)(nvrtcProgram, int, const char* const*);
    nvrtcResult (*nvrtcGetCUBINSize)(nvrtcProgram, size_t*);
    nvrtcResult (*nvrtcGetCUBIN)(nvrtcProgram, char*);
    nvrtcResult (*nvrtcGetPTXSize)(nvrtcProgram, size_t*);
    nvrtcResult (*nvrtcGetPTX)(nvrtcProgram, char*);
    nvrtcResult (*nvrtcGetProgramLogSize)(nvrtcProgram, size_t*);
    nvrtcResult (*nvrtcGetProgramLog)(nvrtcProgram, char*);
    nvrtcResult (*nvrtcDestroyProgram)(nvrtcProgram*);
    const char* (*nvrtcGetErrorString)(nvrtcResult);
    nvrtcResult (*nvrtcVersion)(int*, int*);
    // Optional (CUDA 11.2+): the sm_XX this NVRTC can assemble for; null if absent.
    nvrtcResult (*nvrtcGetNumSupportedArchs)(int*);
    nvrtcResult (*nvrtcGetSupportedArchs)(int*);
};
struct Cublas {
    cublasStatus_t (*cublasCreate_v2)(cublasHandle_t*);
    cublasStatus_t (*cublasSetStream_v2)(cublasHandle_t, CUstream);
    cublasStatus_t (*cublasSgemmStridedBatched)(cublasHandle_t, int, int, int, int, int, const float*, const float*,
                                                int, long long, const float*, int, long long, const float*, float*,
                                                int, long long, int);
    cublasStatus_t (*cublasDgemmStridedBatched)(cublasHandle_t, int, int, int, int, int, const double*,
                                                const double*, int, long long, const double*, int, long long,
                                                const double*, double*, int, long long, int);
};

// Opens the first of `names` that loads; null and the loader's messages otherwise.
void* open_first(std::initializer_list<const char*> names, std::string& why) {
    for (const char* n : names) {
        if (void* h = dlopen(n, RTLD_NOW | RTLD_LOCAL)) return h;
        why += std::string(why.empty() ? "" : "; ") + dlerror();
    }
    return nullptr;
}
template <class F>
bool bind(void* lib, F& fn, const char* symbol, std::string& why) {
    fn = reinterpret_cast<F>(dlsym(lib, symbol));
    if (!fn) why = std::string("symbol ") + symbol + " missing";
    return fn != nullptr;
}

// Everything opened once, on first use. `error` says why CUDA is unusable ("" when usable).
// NVRTC alone: all a compile needs (no driver, no GPU), so compile-only tests run anywhere
// the toolkit is installed. `error` says why it cannot load ("" when it can).
struct NvrtcLibrary {
    Nvrtc rtc{};
    std::string error;
    NvrtcLibrary() {
        std::string why;
        void* lib = open_first({"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so",
                                "/usr/local/cuda/lib64/libnvrtc.so.13", "/usr/local/cuda/lib64/libnvrtc.so"},
                               why);
        if (!lib) {
            error = "NVRTC (libnvrtc.so, the CUDA Toolkit's run-time compiler) not found: " + why;
            return;
        }
        bool ok = bind(lib, rtc.nvrtcCreateProgram, "nvrtcCreateProgram", why) &&
                  bind(lib, rtc.nvrtcCompileProgram, "nvrtcCompileProgram", why) &&
                  bind(lib, rtc.nvrtcGetCUBINSize, "nvrtcGetCUBINSize", why) &&
                  bind(lib, rtc.nvrtcGetCUBIN, "nvrtcGetCUBIN", why) &&
                  bind(lib, rtc.nvrtcGetPTXSize, "nvrtcGetPTXSize", why) &&
                  bind(lib, rtc.nvrtcGetPTX, "nvrtcGetPTX", why) &&
                  bind(lib, rtc.nvrtcGetProgramLogSize, "nvrtcGetProgramLogSize", why) &&
                  bind(lib, rtc.nvrtcGetProgramLog, "nvrtcGetProgramLog", why) &&
                  bind(lib, rtc.nvrtcDestroyProgram, "nvrtcDestroyProgram", why) &&
                  bind(lib, rtc.nvrtcGetErrorString, "nvrtcGetErrorString", why) &&
                  bind(lib, rtc.nvrtcVersion, "nvrtcVersion", why);
        if (!ok) error = "libnvrtc: " + why;
        std::string optional;
        if (ok && bind(lib, rtc.nvrtcGetNumSupportedArchs, "nvrtcGetNumSupportedArchs", optional) &&
            bind(lib, rtc.nvrtcGetSupportedArchs, "nvrtcGetSupportedArchs", optional)) {
            int count = 0;
            if (rtc.nvrtcGetNumSupportedArchs(&count) == 0 && count > 0) {
                supported_archs.resize(size_t(count));
                if (rtc.nvrtcGetSupportedArchs(supported_archs.data()) != 0) supported_archs.clear();
            }
        }
    }
    std::vector<int> supported_archs;  // ascending, e.g. {75, 80, ..., 120}; empty: unknown
};
NvrtcLibrary& nvrtc_library() {
    static NvrtcLibrary n;
    return n;
}

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
    // write them) instead of going to the free lists.
    std::vector<std::pair<CUdeviceptr, size_t>>* capture_held = nullptr;
    Graph* capturing = nullptr;  // the graph under capture, for its random draws

    Runtime() { error = open(); }
    std::string open() {
        std::string why;
        void* lib = open_first({"libcuda.so.1"}, why);
        if (!lib) return "libcuda.so.1 (the NVIDIA driver) not found: " + why;
#define KILN_BIND(field, symbol) \
    if (!bind(lib, cu.field, symbol, why)) return "libcuda.so.1: " + why;
        KILN_BIND(cuInit, "cuInit")
        KILN_BIND(cuDeviceGetCount, "cuDeviceGetCount")
        KILN_BIND(cuDeviceGet, "cuDeviceGet")
        KILN_BIND(cuDeviceGetName, "cuDeviceGetName")
        KILN_BIND(cuDeviceGetAttribute, "cuDeviceGetAttribute")
        KILN_BIND(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain")
        KILN_BIND(cuCtxSetCurrent, "cuCtxSetCurrent")
        KILN_BIND(cuCtxGetCurrent, "cuCtxGetCurrent")
        KILN_BIND(cuStreamCreate, "cuStreamCreate")
        KILN_BIND(cuStreamSynchronize, "cuStreamSynchronize")
        KILN_BIND(cuMemAlloc, "cuMemAlloc_v2")
        KILN_BIND(cuMemFree, "cuMemFree_v2")
        KILN_BIND(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2")
        KILN_BIND(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2")
        KILN_BIND(cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2")
        KILN_BIND(cuMemsetD8Async, "cuMemsetD8Async")
        KILN_BIND(cuMemsetD32Async, "cuMemsetD32Async")
        KILN_BIND(cuModuleLoadData, "cuModuleLoadData")
        KILN_BIND(cuModuleGetFunction, "cuModuleGetFunction")
        KILN_BIND(cuLaunchKernel, "cuLaunchKernel")
        KILN_BIND(cuGetErrorString, "cuGetErrorString")
        KILN_BIND(cuFuncGetAttribute, "cuFuncGetAttribute")
        KILN_BIND(cuStreamBeginCapture, "cuStreamBeginCapture_v2")
        KILN_BIND(cuStreamEndCapture, "cuStreamEndCapture")
        KILN_BIND(cuGraphInstantiate, "cuGraphInstantiateWithFlags")
        KILN_BIND(cuGraphLaunch, "cuGraphLaunch")
        KILN_BIND(cuGraphExecDestroy, "cuGraphExecDestroy")
        KILN_BIND(cuGraphDestroy, "cuGraphDestroy")
        KILN_BIND(cuEventCreate, "cuEventCreate")
        KILN_BIND(cuEventRecord, "cuEventRecord")
        KILN_BIND(cuEventSynchronize, "cuEventSynchronize")
        KILN_BIND(cuEventElapsedTime, "cuEventElapsedTime")
        KILN_BIND(cuEventDestroy, "cuEventDestroy_v2")
#undef KILN_BIND
        if (CUresult r = cu.cuInit(0)) return "cuInit failed (" + cu_error(r) + ")";
        if (cu.cuDeviceGetCount(&devices) || devices == 0) return "the driver reports no CUDA device";
        if (!nvrtc_library().error.empty()) return nvrtc_library().error;
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
        void* lib = open_first({"libcublas.so.13", "libcublas.so.12", "libcublas.so",
                                "/usr/local/cuda/lib64/libcublas.so.13", "/usr/local/cuda/lib64/libcublas.so"},
                               why);
        if (!lib) return "cuBLAS (libcublas.so) not found: " + why;
        if (!bind(lib, blas.cublasCreate_v2, "cublasCreate_v2", why) ||
            !bind(lib, blas.cublasSetStream_v2, "cublasSetStream_v2", why) ||
            !bind(lib, blas.cublasSgemmStridedBatched, "cublasSgemmStridedBatched", why) ||
            !bind(lib, blas.cublasDgemmStridedBatched, "cublasDgemmStridedBatched", why))
            return "libcublas: " + why;
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
    if (!list.empty()) {
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
    return reinterpret_cast<void*>(p);
}

void release(void* p, size_t block) {
    Runtime& r = runtime();
    std::lock_guard lock(r.mu);
    if (r.capture_held) {
        r.capture_held->push_back({reinterpret_cast<CUdeviceptr>(p), block});
        r.allocated -= block;
        return;
    }
    r.free_blocks[block].push_back(reinterpret_cast<CUdeviceptr>(p));
    r.allocated -= block;
    r.cached += block;
}

namespace {
std::atomic<int64_t> g_issued{0};  // kernels, cuBLAS calls, copies and memsets put on the stream
}
int64_t operations_issued() { return g_issued.load(std::memory_order_relaxed); }

void* open_library(std::initializer_list<const char*> names, std::string& why) {
    return open_first(names, why);
}
void* library_symbol(void* lib, const char* symbol, std::string& why) {
    void* fn = dlsym(lib, symbol);
    if (!fn) why = std::string("symbol ") + symbol + " missing";
    return fn;
}
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

void copy_bytes(void* dst, bool dst_dev, const void* src, bool src_dev, size_t bytes) {
    if (bytes == 0) return;
    Runtime& r = live("copy");
    g_issued.fetch_add(1, std::memory_order_relaxed);
    auto d = reinterpret_cast<CUdeviceptr>(dst);
    auto s = reinterpret_cast<CUdeviceptr>(src);
    if (dst_dev && src_dev) return check(r.cu.cuMemcpyDtoDAsync(d, s, bytes, r.stream), "device to device copy");
    if (dst_dev) {
        check(r.cu.cuMemcpyHtoDAsync(d, src, bytes, r.stream), "host to device copy");
        return check(r.cu.cuStreamSynchronize(r.stream), "host to device copy");  // the host buffer may go
    }
    check(r.cu.cuMemcpyDtoHAsync(dst, s, bytes, r.stream), "device to host copy");
    check(r.cu.cuStreamSynchronize(r.stream), "device to host copy");
}

void memset_zero(void* p, size_t bytes) {
    if (bytes == 0) return;
    Runtime& r = live("memset");
    g_issued.fetch_add(1, std::memory_order_relaxed);
    check(r.cu.cuMemsetD8Async(reinterpret_cast<CUdeviceptr>(p), 0, bytes, r.stream), "memset");
}

std::string nvrtc_unavailable_reason() { return nvrtc_library().error; }

namespace {
struct CubinCache {
    std::mutex mu;
    CubinStore store;
    std::atomic<int64_t> compiles{0}, disk_hits{0};
};
CubinCache& cubin_cache() {
    static CubinCache* c = new CubinCache;  // leaked: used until exit
    return *c;
}
}  // namespace

void set_cubin_store(CubinStore store) {
    std::lock_guard lock(cubin_cache().mu);
    cubin_cache().store = std::move(store);
}

CompileStats compile_stats() { return {cubin_cache().compiles.load(), cubin_cache().disk_hits.load()}; }

// The options every kernel compiles with (after --gpu-architecture); part of the cache key.
constexpr const char* kNvrtcOptions[] = {"--std=c++17", "-default-device"};

NvrtcTarget nvrtc_target(int arch) {
    const std::vector<int>& known = nvrtc_library().supported_archs;
    if (known.empty() || std::find(known.begin(), known.end(), arch) != known.end() || arch < known.front())
        return {"sm_" + std::to_string(arch), false};
    // A device newer than this NVRTC: PTX for the newest architecture it knows, which the
    // driver compiles for the device when the module loads (PTX runs forward, cubins do not).
    int newest = *std::max_element(known.begin(), known.end());
    if (arch > newest) return {"compute_" + std::to_string(newest), true};
    return {"sm_" + std::to_string(arch), false};  // an unlisted gap: let NVRTC say why
}

std::string nvrtc_version() {
    NvrtcLibrary& lib = nvrtc_library();
    KILN_CHECK(lib.error.empty(), "NVRTC: ", lib.error);
    int major = 0, minor = 0;
    lib.rtc.nvrtcVersion(&major, &minor);
    return std::to_string(major) + "." + std::to_string(minor);
}

std::string cubin_cache_key(const std::string& source, const std::string& name, const NvrtcTarget& target) {
    std::string options;
    for (const char* option : kNvrtcOptions) options += std::string(" ") + option;
    return "kiln-cubin-v2 nvrtc " + nvrtc_version() + " --gpu-architecture=" + target.arch + options + " " +
           (target.ptx ? "ptx" : "cubin") + " " + name + "\n" + source;
}

static std::string compile_with_nvrtc(const std::string& source, const std::string& name, const NvrtcTarget& target);

std::string compile_cubin(const std::string& source, const std::string& name, int arch, bool ptx_only) {
    NvrtcLibrary& lib = nvrtc_library();
    KILN_CHECK(lib.error.empty(), "compiling CUDA kernel ", name, ": ", lib.error);
    if (ptx_only) {  // compile-only tests: never cached
        ++cubin_cache().compiles;
        return compile_with_nvrtc(source, name, {"compute_" + std::to_string(arch), true});
    }
    NvrtcTarget target = nvrtc_target(arch);
    CubinStore store;
    {
        std::lock_guard lock(cubin_cache().mu);
        store = cubin_cache().store;
    }
    std::string key;
    if (store.load) {  // what decides the bytes: the compiler, the target, the options, the text
        key = cubin_cache_key(source, name, target);
        if (std::optional<std::string> cached = store.load(key)) {
            ++cubin_cache().disk_hits;
            return *cached;
        }
    }
    std::string binary = compile_with_nvrtc(source, name, target);
    ++cubin_cache().compiles;
    if (!key.empty() && store.save) store.save(key, binary);
    return binary;
}

static std::string compile_with_nvrtc(const std::string& source, const std::string& name, const NvrtcTarget& target) {
    NvrtcLibrary& lib = nvrtc_library();
    const Nvrtc& rtc = lib.rtc;
    nvrtcProgram prog = nullptr;
    KILN_CHECK(rtc.nvrtcCreateProgram(&prog, source.c_str(), "kiln_kernel.cu", 0, nullptr, nullptr) == 0,
               "NVRTC: cannot create a program for kernel ", name);
    std::string arch_flag = "--gpu-architecture=" + target.arch;
    std::vector<const char*> opts{arch_flag.c_str()};
    for (const char* option : kNvrtcOptions) opts.push_back(option);
    nvrtcResult res = rtc.nvrtcCompileProgram(prog, int(opts.size()), opts.data());
    size_t log_size = 0;
    rtc.nvrtcGetProgramLogSize(prog, &log_size);
    std::string log(log_size, '\0');
    if (log_size) rtc.nvrtcGetProgramLog(prog, log.data());
    if (res != 0) {
        rtc.nvrtcDestroyProgram(&prog);
        fail("NVRTC could not compile kernel ", name, " for ", target.arch, ": ", rtc.nvrtcGetErrorString(res), "\n", log,
             "\nsource:\n", source);
    }
    size_t size = 0;
    (target.ptx ? rtc.nvrtcGetPTXSize : rtc.nvrtcGetCUBINSize)(prog, &size);
    std::string binary(size, '\0');  // PTX's size counts its terminating NUL, which cuModuleLoadData needs
    (target.ptx ? rtc.nvrtcGetPTX : rtc.nvrtcGetCUBIN)(prog, binary.data());
    rtc.nvrtcDestroyProgram(&prog);
    return binary;
}

void* kernel(const std::string& source, const std::string& name) {
    Runtime& r = live("kernel compile");
    std::lock_guard lock(r.mu);
    CUmodule& module = r.modules[source];
    if (!module) {
        std::string cubin;
        try {
            cubin = compile_cubin(source, name, r.arch);
        } catch (...) {
            r.modules.erase(source);
            throw;
        }
        CUresult loaded = r.cu.cuModuleLoadData(&module, cubin.data());
        if (loaded != 0) r.modules.erase(source);
        check(loaded, "loading a compiled kernel (cuModuleLoadData)");
    }
    CUfunction fn = nullptr;
    check(r.cu.cuModuleGetFunction(&fn, module, name.c_str()), "finding a compiled kernel");
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
    check(r.cu.cuStreamSynchronize(r.stream), "synchronize");
}

}  // namespace detail

Graph::~Graph() {
    detail::Runtime* live = detail::live_quietly();
    if (!live) return;
    detail::Runtime& r = *live;
    if (random_state_) r.cu.cuMemFree(random_state_);
    if (exec_) r.cu.cuGraphExecDestroy(exec_);
    if (graph_) r.cu.cuGraphDestroy(graph_);
    std::lock_guard lock(r.mu);
    for (const auto& [p, block] : held_) {
        r.free_blocks[block].push_back(p);
        r.cached += block;
    }
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
    }
    constexpr int kRelaxed = 2;  // CU_STREAM_CAPTURE_MODE_RELAXED: the allocator may call cuMemAlloc
    detail::check(r.cu.cuStreamBeginCapture(r.stream, kRelaxed), "cuStreamBeginCapture");
    std::string failure;
    try {
        work();
    } catch (const Error& e) {
        failure = e.what();
    }
    void* graph = nullptr;
    int ended = r.cu.cuStreamEndCapture(r.stream, &graph);
    {
        std::lock_guard lock(r.mu);
        r.capture_held = nullptr;
        r.capturing = nullptr;
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
}

namespace detail {
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
    detail::check(r.cu.cuEventSynchronize(end.event_), "cuEventSynchronize");
    float ms = 0;
    detail::check(r.cu.cuEventElapsedTime(&ms, event_, end.event_), "cuEventElapsedTime");
    return ms;
}

namespace detail {

}  // namespace detail

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
