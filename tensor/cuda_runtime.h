// Internal to tensor/: the CUDA driver API, NVRTC and cuBLAS, opened with dlopen on first
// use, and the pieces the CUDA eager kernels (kernels_cuda.cpp) are built from: the caching
// device allocator, copies, compiling CUDA C++ source with NVRTC, launching and GEMM.
//
// No CUDA header is included anywhere: the few driver/NVRTC/cuBLAS entry points kiln calls
// are declared here with their C signatures, so kiln builds on machines without the
// toolkit and starts on machines without a driver (tensor/cuda.h).
#pragma once
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace kiln::cuda::detail {

// Raises a kiln::Error naming `op` and what is missing when CUDA cannot be used.
void require(const char* op);

// Device memory from the caching allocator; `block` is the size class actually held.
void* allocate(size_t bytes, size_t& block);
void release(void* p, size_t block);

// Copies `bytes` between host and device memory (either direction, or device to device),
// ordered on kiln's stream; a copy to the host returns when the bytes are there.
void copy_bytes(void* dst, bool dst_on_device, const void* src, bool src_on_device, size_t bytes);
void memset_zero(void* p, size_t bytes);

// NVRTC alone (no driver or GPU needed): `source` compiled to a cubin for sm_`arch` (or only
// to PTX for compute_`arch`: the C++ front end without the assembler, for compile-only
// tests); a compile error raises with NVRTC's log and the source. Why NVRTC cannot load, or "".
std::string compile_cubin(const std::string& source, const std::string& name, int arch, bool ptx_only = false);
// A translation unit for NVRTC; `name` is a kernel it defines (the cache key and errors name it).
struct NvrtcProgram {
    std::string source, name;
};
// compile_cubin for several programs at once: NVRTC compiles one program on one thread, so a
// large graph's kernels, split over programs, compile on one thread per core. Binaries in
// the order of `programs`; the first program that fails raises, after all have finished.
std::vector<std::string> compile_cubins(const std::vector<NvrtcProgram>& programs, int arch,
                                        bool ptx_only = false);
// What a kernel for sm_`arch` is compiled to: a cubin for sm_`arch` where this NVRTC can
// assemble for it (nvrtcGetSupportedArchs), else PTX for the newest compute_XX it knows,
// which the driver compiles for the device when the module loads.
struct NvrtcTarget {
    std::string arch;  // "sm_90" or "compute_120"
    bool ptx = false;
};
NvrtcTarget nvrtc_target(int arch);
std::string nvrtc_version();  // "13.0"; throws kiln::Error if NVRTC cannot load
// The disk cache key of a kernel: NVRTC's version, the target, NVRTC's options, the kernel's
// name and its source (everything that decides the bytes).
std::string cubin_cache_key(const std::string& source, const std::string& name,
                            const NvrtcTarget& target);

// Where cubins persist between processes: `load(key)` returns a stored cubin or nothing,
// `save(key, bytes)` stores one; the key holds everything that decides the bytes (NVRTC's
// version, the sm_XX, the kernel's name and source). codegen/ registers kiln's per-user disk
// cache (codegen/cuda_cache.cpp); without a store every process compiles again.
struct CubinStore {
    std::function<std::optional<std::string>(const std::string& key)> load;
    std::function<void(const std::string& key, const std::string& bytes)> save;
};
void set_cubin_store(CubinStore store);
struct CompileStats {
    int64_t nvrtc_compiles = 0;  // cubins and PTX built by NVRTC in this process
    int64_t disk_hits = 0;       // cubins loaded from the store instead
    int64_t module_loads = 0;    // cuModuleLoadData calls
    double nvrtc_seconds = 0;    // wall time in NVRTC
    double load_seconds = 0;     // wall time reading the store and in cuModuleLoadData
};
CompileStats compile_stats();
// kernel() counts each cuModuleLoadData and its time here, into compile_stats().
void count_module_load(std::chrono::steady_clock::duration took);
std::string nvrtc_unavailable_reason();

// The kernel `name` of CUDA C++ `source`, compiled by NVRTC for this device once per
// process (a map keyed by the source text). Compile errors raise with NVRTC's log.
void* kernel(const std::string& source, const std::string& name);
// Compiles those of `programs` not loaded yet (at once: compile_cubins) and loads each as a
// module, so that kernel(program.source, ...) finds it. NVRTC runs outside the runtime's
// lock: the allocator and loaded kernels stay usable meanwhile.
void load_modules(const std::vector<NvrtcProgram>& programs);
// Launches `fn` over `n` work items (grid-stride loops: at most a few blocks per SM), or
// with an explicit grid; `args` are pointers to the kernel's arguments, in order.
void launch(void* fn, int64_t n, void** args);
int multiprocessor_count();  // of cuda:0
// The most threads a block of kernel `fn` can have (its registers per thread decide).
int max_threads_per_block(void* fn);
void launch_grid(void* fn, unsigned grid, unsigned block, size_t shared_bytes, void** args);

// Row-major C[batch] = op(A[batch]) @ op(B[batch]), as cblas_?gemm with CblasRowMajor.
void gemm(bool f64, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const void* a, int64_t lda,
          int64_t stride_a, const void* b, int64_t ldb, int64_t stride_b, void* c, int64_t ldc, int64_t stride_c,
          int64_t batch);

void synchronize();

// Every library kiln opens at run time (the driver, NVRTC, cuBLAS; cuDNN: tensor/cudnn.cpp;
// cublasLt: tensor/cublaslt.cpp; NCCL: dist/backend_nccl.cpp), in tensor/cuda_library.cpp.
// The first of `names` that dlopen loads (null, and the loader's messages appended to `why`,
// when none does).
void* open_library(std::initializer_list<const char*> names, std::string& why);
// The entry points of one opened library, bound by name into its table of function pointers.
// A library that did not open (null) or a symbol it lacks raises a kiln::Error naming the
// library, the symbol and the file it was looked up in; a loader that reports instead of
// throwing keeps the message as its reason.
class LibrarySymbols {
   public:
    // `library`: the name errors give it ("libcuda.so.1", or the path it was opened from).
    LibrarySymbols(void* lib, std::string library);
    template <class F>
    void bind(F& fn, const char* symbol) const {
        fn = reinterpret_cast<F>(find(symbol));
    }
    // For an entry point only some versions have: false (and `fn` null) when it is absent.
    template <class F>
    bool bind_optional(F& fn, const char* symbol) const {
        fn = reinterpret_cast<F>(find_optional(symbol));
        return fn != nullptr;
    }
    void* find(const char* symbol) const;              // raises when missing
    void* find_optional(const char* symbol) const;     // null when missing
    const std::string& file() const { return file_; }  // the file the loader opened

   private:
    void* lib_;
    std::string library_, file_;
};
// kiln's stream (a CUstream, which is a cudaStream_t) with cuda:0's context current in this
// thread, for one library call about to be put on it (counted in operations_issued()).
void* library_stream(const char* op);
// Whether a CUDA graph is being captured now: work that must run at once (an algorithm
// search that times kernels) waits for a call outside the capture.
bool capturing();
// The ops whose CUDA work is being issued on this thread, outermost first (dispatch opens one
// per op with a CUDA input or output): work that cannot be captured names them
// ("arange > to_device"). `op` must outlive the scope (the op table's names do).
class OpScope {
   public:
    explicit OpScope(const char* op);
    ~OpScope();
    OpScope(const OpScope&) = delete;
    OpScope& operator=(const OpScope&) = delete;
};
std::string current_ops();  // "" outside any op
// Which capture is under way: a number new for each capture, 0 when none is.
uint64_t capture_id();
// While a graph is captured: `after` runs on the host after each replay of that graph (once
// per `key`: a second call with the same key keeps the first). NCCL watches each replay's
// collectives with it; the index kernels hand their captured range flags to the next host
// wait. Outside a capture it does nothing.
void on_each_replay(const void* key, std::function<void()> after);
// How many operations (kernel launches, cuBLAS calls, copies, memsets) kiln has put on its
// stream so far: benchmarks divide host time per call by it.
int64_t operations_issued();
// How many times the host has waited for kiln's stream (a read of a CUDA tensor's values,
// synchronize()); KILN_LOGS=sync prints each wait with its cause.
int64_t host_waits();
// Runs `check` after each host wait, once the stream is idle (the index kernels' deferred
// range checks: tensor/kernels_cuda_index.cpp); it may raise, and the wait's caller sees it.
void set_after_host_wait(void (*check)());

// The draws of one random kernel of `count` elements: element i uses (seed, offset + i).
// Outside a capture these come from the global generator. While a Graph is captured,
// graph_state points at the graph's device copy of (seed, offset), which each replay fills
// with fresh draws, and `offset` is relative to it: a replay never repeats its numbers.
struct RandomDraws {
    uint64_t seed = 0, offset = 0;
    const void* graph_state = nullptr;
};
RandomDraws reserve_random_draws(uint64_t count);

}  // namespace kiln::cuda::detail

namespace kiln::cuda {

// A CUDA graph: the kernels, copies and cuBLAS calls `work` issues on kiln's stream,
// captured once and replayed with one launch. Every block the capture allocates or gives
// back stays the graph's (its replays write it) until the graph is destroyed: a tensor made
// during the capture and dropped later gives its block back to the graph, not to other
// tensors (PyTorch's private memory pool). Within the capture, a block given back is taken
// again by later allocations, as eager code on one stream does. Work that must wait for the
// GPU (copies to or from host memory, item(), synchronize()) cannot be captured: capture()
// raises naming it, nothing captured runs, and the graph stays empty.
class Graph {
   public:
    Graph() = default;
    ~Graph();
    Graph(const Graph&) = delete;
    Graph& operator=(const Graph&) = delete;
    void capture(const std::function<void()>& work);
    void replay();

   private:
    friend detail::RandomDraws detail::reserve_random_draws(uint64_t);
    friend void detail::on_each_replay(const void*, std::function<void()>);
    void* graph_ = nullptr;
    void* exec_ = nullptr;
    unsigned long long random_state_ = 0;  // device memory: (seed, offset) of this replay's draws
    uint64_t random_draws_ = 0;            // draws one replay makes
    // Blocks the graph's replays write that no tensor holds, by size class: those given back
    // during the capture (later allocations of the same capture take them again, in stream
    // order) and those allocated during it that a tensor gave back later. Back to the
    // allocator's free lists when the graph is destroyed.
    std::map<size_t, std::vector<unsigned long long>> held_;
    std::vector<std::pair<const void*, std::function<void()>>> after_replay_;
};

}  // namespace kiln::cuda
