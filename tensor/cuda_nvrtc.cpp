// NVRTC, opened with dlopen on first use: CUDA C++ source compiled to a cubin for the
// device's sm_XX (or to PTX), with the cubins kept in a store between processes
// (tensor/cuda_runtime.h). Needs no driver and no GPU, so compile-only tests run anywhere
// the toolkit is installed; loading the module and launching stay in cuda_runtime.cpp.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <mutex>
#include <thread>

#include "tensor/cuda_runtime.h"
#include "tensor/error.h"
#include "tensor/symbol_table.h"

namespace kiln::cuda::detail {
namespace {

// --- the C signatures kiln uses (nvrtc.h)
using nvrtcResult = int;
using nvrtcProgram = void*;

// The entry points every NVRTC has, as a table (tensor/symbol_table.h).
#define KILN_NVRTC_SYMBOLS(X)                                                                   \
    X(nvrtcCreateProgram, "nvrtcCreateProgram",                                                 \
      nvrtcResult (*)(nvrtcProgram*, const char*, const char*, int, const char* const*,         \
                      const char* const*))                                                      \
    X(nvrtcCompileProgram, "nvrtcCompileProgram",                                               \
      nvrtcResult (*)(nvrtcProgram, int, const char* const*))                                   \
    X(nvrtcGetCUBINSize, "nvrtcGetCUBINSize", nvrtcResult (*)(nvrtcProgram, size_t*))           \
    X(nvrtcGetCUBIN, "nvrtcGetCUBIN", nvrtcResult (*)(nvrtcProgram, char*))                     \
    X(nvrtcGetPTXSize, "nvrtcGetPTXSize", nvrtcResult (*)(nvrtcProgram, size_t*))               \
    X(nvrtcGetPTX, "nvrtcGetPTX", nvrtcResult (*)(nvrtcProgram, char*))                         \
    X(nvrtcGetProgramLogSize, "nvrtcGetProgramLogSize", nvrtcResult (*)(nvrtcProgram, size_t*)) \
    X(nvrtcGetProgramLog, "nvrtcGetProgramLog", nvrtcResult (*)(nvrtcProgram, char*))           \
    X(nvrtcDestroyProgram, "nvrtcDestroyProgram", nvrtcResult (*)(nvrtcProgram*))               \
    X(nvrtcGetErrorString, "nvrtcGetErrorString", const char* (*)(nvrtcResult))                 \
    X(nvrtcVersion, "nvrtcVersion", nvrtcResult (*)(int*, int*))
struct Nvrtc {
    KILN_NVRTC_SYMBOLS(KILN_SYMBOL_FIELD)
    // Optional (CUDA 11.2+): the sm_XX this NVRTC can assemble for; null if absent.
    nvrtcResult (*nvrtcGetNumSupportedArchs)(int*);
    nvrtcResult (*nvrtcGetSupportedArchs)(int*);
    void bind(const LibrarySymbols& symbols) { KILN_NVRTC_SYMBOLS(KILN_SYMBOL_BIND) }
};

// NVRTC alone: all a compile needs (no driver, no GPU), so compile-only tests run anywhere
// the toolkit is installed. `error` says why it cannot load ("" when it can).
struct NvrtcLibrary {
    Nvrtc rtc{};
    std::string error;
    NvrtcLibrary() {
        std::string why;
        void* lib = open_library(
            {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so",
             "/usr/local/cuda/lib64/libnvrtc.so.13", "/usr/local/cuda/lib64/libnvrtc.so"},
            why);
        if (!lib) {
            error = "NVRTC (libnvrtc.so, the CUDA Toolkit's run-time compiler) not found: " + why;
            return;
        }
        try {
            LibrarySymbols symbols(lib, "libnvrtc");
            rtc.bind(symbols);
            if (symbols.bind_optional(rtc.nvrtcGetNumSupportedArchs, "nvrtcGetNumSupportedArchs") &&
                symbols.bind_optional(rtc.nvrtcGetSupportedArchs, "nvrtcGetSupportedArchs"))
                read_supported_archs();
        } catch (const Error& e) {
            error = e.what();
        }
    }
    void read_supported_archs() {
        int count = 0;
        if (rtc.nvrtcGetNumSupportedArchs(&count) != 0 || count <= 0) return;
        supported_archs.resize(size_t(count));
        if (rtc.nvrtcGetSupportedArchs(supported_archs.data()) != 0) supported_archs.clear();
    }
    std::vector<int> supported_archs;  // ascending, e.g. {75, 80, ..., 120}; empty: unknown
};
NvrtcLibrary& nvrtc_library() {
    static NvrtcLibrary n;
    return n;
}

}  // namespace

std::string nvrtc_unavailable_reason() { return nvrtc_library().error; }

namespace {
struct CubinCache {
    std::mutex mu;
    CubinStore store;
    std::atomic<int64_t> compiles{0}, disk_hits{0}, module_loads{0}, nvrtc_ns{0}, load_ns{0};
};
int64_t nanoseconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() -
                                                                start)
        .count();
}
CubinCache& cubin_cache() {
    static CubinCache* c = new CubinCache;  // leaked: used until exit
    return *c;
}
}  // namespace

void set_cubin_store(CubinStore store) {
    std::lock_guard lock(cubin_cache().mu);
    cubin_cache().store = std::move(store);
}

CompileStats compile_stats() {
    CubinCache& c = cubin_cache();
    return {c.compiles.load(), c.disk_hits.load(), c.module_loads.load(),
            double(c.nvrtc_ns.load()) * 1e-9, double(c.load_ns.load()) * 1e-9};
}

void count_module_load(std::chrono::steady_clock::duration took) {
    ++cubin_cache().module_loads;
    cubin_cache().load_ns += std::chrono::duration_cast<std::chrono::nanoseconds>(took).count();
}

// The options every kernel compiles with (after --gpu-architecture); part of the cache key.
constexpr const char* kNvrtcOptions[] = {"--std=c++17", "-default-device"};

NvrtcTarget nvrtc_target(int arch) {
    const std::vector<int>& known = nvrtc_library().supported_archs;
    if (known.empty() || std::find(known.begin(), known.end(), arch) != known.end() ||
        arch < known.front())
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

std::string cubin_cache_key(const std::string& source, const std::string& name,
                            const NvrtcTarget& target) {
    std::string options;
    for (const char* option : kNvrtcOptions) options += std::string(" ") + option;
    return "kiln-cubin-v2 nvrtc " + nvrtc_version() + " --gpu-architecture=" + target.arch +
           options + " " + (target.ptx ? "ptx" : "cubin") + " " + name + "\n" + source;
}

static std::string compile_with_nvrtc(const std::string& source, const std::string& name,
                                      const NvrtcTarget& target);

namespace {
// One program's way through the store and NVRTC, and the time each took (nanoseconds).
struct ProgramBuild {
    std::string binary;
    bool compiled = false;
    int64_t load_ns = 0, nvrtc_ns = 0;
};

ProgramBuild build_program(const NvrtcProgram& program, const NvrtcTarget& target,
                           const CubinStore& store) {
    ProgramBuild b;
    auto start = std::chrono::steady_clock::now();
    std::string key;
    if (store.load) {  // what decides the bytes: the compiler, the target, the options, the text
        key = cubin_cache_key(program.source, program.name, target);
        std::optional<std::string> cached = store.load(key);
        b.load_ns = nanoseconds_since(start);
        if (cached) {
            b.binary = std::move(*cached);
            return b;
        }
    }
    start = std::chrono::steady_clock::now();
    b.binary = compile_with_nvrtc(program.source, program.name, target);
    b.compiled = true;
    b.nvrtc_ns = nanoseconds_since(start);
    if (!key.empty() && store.save) store.save(key, b.binary);
    return b;
}

// Counts a batch into compile_stats() (a program that failed is no compile). Programs built
// at once overlap, so the batch's wall time is counted once, shared between loading and
// compiling as the programs' own times are (KILN_LOGS=compile's stage totals are wall times).
void count_batch(const std::vector<ProgramBuild>& builds,
                 const std::vector<std::exception_ptr>& errors, int64_t wall_ns) {
    CubinCache& c = cubin_cache();
    int64_t load_ns = 0, nvrtc_ns = 0;
    for (size_t i = 0; i < builds.size(); ++i) {
        const ProgramBuild& b = builds[i];
        if (errors[i]) continue;
        ++(b.compiled ? c.compiles : c.disk_hits);
        load_ns += b.load_ns, nvrtc_ns += b.nvrtc_ns;
    }
    if (load_ns + nvrtc_ns == 0) return;
    int64_t load_share = int64_t(double(wall_ns) * double(load_ns) / double(load_ns + nvrtc_ns));
    c.load_ns += load_share;
    c.nvrtc_ns += wall_ns - load_share;
}
}  // namespace

std::vector<std::string> compile_cubins(const std::vector<NvrtcProgram>& programs, int arch,
                                        bool ptx_only) {
    NvrtcLibrary& lib = nvrtc_library();
    KILN_CHECK(lib.error.empty(), "compiling CUDA kernel ",
               programs.empty() ? "" : programs.front().name, ": ", lib.error);
    // PTX (compile-only tests) is never cached.
    NvrtcTarget target =
        ptx_only ? NvrtcTarget{"compute_" + std::to_string(arch), true} : nvrtc_target(arch);
    CubinStore store;
    if (!ptx_only) {
        std::lock_guard lock(cubin_cache().mu);
        store = cubin_cache().store;
    }
    auto start = std::chrono::steady_clock::now();
    std::vector<ProgramBuild> builds(programs.size());
    std::vector<std::exception_ptr> errors(programs.size());
    std::atomic<size_t> next{0};
    auto work = [&] {  // takes the next program until none is left
        for (size_t i = next++; i < programs.size(); i = next++) {
            try {
                builds[i] = build_program(programs[i], target, store);
            } catch (...) {
                errors[i] = std::current_exception();
            }
        }
    };
    // NVRTC compiles one program on one thread, and several programs at once (it is
    // thread-safe per program): one worker per core, this thread one of them.
    size_t workers =
        std::min<size_t>(programs.size(), std::max(1u, std::thread::hardware_concurrency()));
    std::vector<std::thread> threads;
    for (size_t t = 1; t < workers; ++t) threads.emplace_back(work);
    work();
    for (std::thread& t : threads) t.join();
    count_batch(builds, errors, nanoseconds_since(start));
    for (const std::exception_ptr& e : errors)
        if (e) std::rethrow_exception(e);
    std::vector<std::string> binaries;
    for (ProgramBuild& b : builds) binaries.push_back(std::move(b.binary));
    return binaries;
}

std::string compile_cubin(const std::string& source, const std::string& name, int arch,
                          bool ptx_only) {
    return compile_cubins({{source, name}}, arch, ptx_only).front();
}

static std::string compile_with_nvrtc(const std::string& source, const std::string& name,
                                      const NvrtcTarget& target) {
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
        fail("NVRTC could not compile kernel ", name, " for ", target.arch, ": ",
             rtc.nvrtcGetErrorString(res), "\n", log, "\nsource:\n", source);
    }
    size_t size = 0;
    (target.ptx ? rtc.nvrtcGetPTXSize : rtc.nvrtcGetCUBINSize)(prog, &size);
    std::string binary(
        size, '\0');  // PTX's size counts its terminating NUL, which cuModuleLoadData needs
    (target.ptx ? rtc.nvrtcGetPTX : rtc.nvrtcGetCUBIN)(prog, binary.data());
    rtc.nvrtcDestroyProgram(&prog);
    return binary;
}

}  // namespace kiln::cuda::detail
