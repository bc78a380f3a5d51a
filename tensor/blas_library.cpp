// Opening the BLAS at run time (tensor/blas_library.h): where the library is, and which of
// OpenBLAS's cores runs on this CPU. OpenBLAS reads OPENBLAS_CORETYPE once, in the constructor
// that runs when it is loaded, so the only way to choose its core is to load it after setting
// the variable; calling gotoblas_dynamic_init() again later does not switch it.
#include "tensor/blas_library.h"

#include <dlfcn.h>
#include <link.h>
#include <strings.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "jit/log.h"
#include "tensor/error.h"

#ifndef KILN_BLAS_LIBRARIES  // CMake's BLAS_LIBRARIES, shared libraries only, '|'-joined
#define KILN_BLAS_LIBRARIES ""
#endif

namespace kiln {

// OpenBLAS's cores (openblas_get_corename()) whose GEMM kernels use AVX2+FMA or AVX-512; the
// rest (Prescott, Nehalem, Sandybridge, ...) count as baseline.
struct OpenblasCore {
    const char* name;
    VectorLevel level;
};
constexpr OpenblasCore kOpenblasCores[] = {
    {"SkylakeX", VectorLevel::avx512},
    {"CooperLake", VectorLevel::avx512},
    {"SapphireRapids", VectorLevel::avx512},
    {"Haswell", VectorLevel::avx2},
    {"Zen", VectorLevel::avx2},
};

VectorLevel cpu_vector_level() {
#if defined(__x86_64__)
    __builtin_cpu_init();  // libgcc's checks include the OS saving the wide registers (XGETBV)
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512vl"))
        return VectorLevel::avx512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return VectorLevel::avx2;
#endif
    return VectorLevel::baseline;
}

VectorLevel openblas_core_level(std::string_view core) {
    for (const OpenblasCore& c : kOpenblasCores)
        if (core.size() == std::strlen(c.name) &&
            strncasecmp(core.data(), c.name, core.size()) == 0)
            return c.level;
    return VectorLevel::baseline;
}

const char* vector_level_name(VectorLevel level) {
    switch (level) {
        case VectorLevel::avx512:
            return "AVX-512";
        case VectorLevel::avx2:
            return "AVX2+FMA";
        case VectorLevel::baseline:
            break;
    }
    return "no AVX2";
}

namespace {

// Where to look, in order: KILN_BLAS_LIB alone when set, else CMake's find, then the sonames.
std::vector<std::string> blas_candidates() {
    if (const char* env = std::getenv("KILN_BLAS_LIB"); env && *env) return {env};
    std::vector<std::string> files;
    std::string_view compiled = KILN_BLAS_LIBRARIES;
    while (!compiled.empty()) {
        size_t bar = compiled.find('|');
        if (bar != 0) files.emplace_back(compiled.substr(0, bar));
        compiled.remove_prefix(bar == std::string_view::npos ? compiled.size() : bar + 1);
    }
    files.insert(files.end(), {"libopenblas.so.0", "libblas.so.3"});
    return files;
}

struct Opened {
    void* lib = nullptr;
    std::string name;            // as passed to dlopen, to open the same file again
    bool loaded_before = false;  // in the process before kiln opened it: its core is chosen
};

// The first candidate that opens with cblas_sgemm in it, its symbols kept local for now; each
// failure's reason is appended to `why`.
Opened open_first(const std::vector<std::string>& files, std::string& why) {
    for (const std::string& file : files) {
        void* before = dlopen(file.c_str(), RTLD_NOW | RTLD_NOLOAD);
        if (before) dlclose(before);
        void* lib = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
        if (!lib) {
            why += "\n  " + file + ": " + dlerror();
            continue;
        }
        if (dlsym(lib, "cblas_sgemm")) return {lib, file, before != nullptr};
        why += "\n  " + file + ": opened, but it has no cblas_sgemm";
        dlclose(lib);
    }
    return {};
}

std::string core_of(void* lib) {
    using CoreName = char* (*)();
    auto fn = reinterpret_cast<CoreName>(dlsym(lib, "openblas_get_corename"));
    return fn ? fn() : "";
}

std::string loaded_file(void* lib) {
    link_map* map = nullptr;
    if (dlinfo(lib, RTLD_DI_LINKMAP, &map) != 0 || !map || !map->l_name || !*map->l_name)
        return "(unknown file)";
    return map->l_name;
}

// OpenBLAS picked `first` (narrower than the CPU): close it and load it again with
// OPENBLAS_CORETYPE set for that load. The variable is unset again after, so the environment
// stays the user's. (setenv races with another thread's getenv; this runs once per process,
// at the first matmul, and kiln's worker threads read no variables while they run kernels.)
void reopen_with_core(Opened& o, VectorLevel cpu, std::string& chosen_by) {
    const char* want = cpu == VectorLevel::avx512 ? "SkylakeX" : "Haswell";
    std::string first = core_of(o.lib);
    dlclose(o.lib);
    if (void* still = dlopen(o.name.c_str(), RTLD_NOW | RTLD_NOLOAD)) {
        o.lib = still;
        chosen_by = "OpenBLAS's own choice: it picked " + first + " on a CPU with " +
                    vector_level_name(cpu) + " and stayed loaded after dlclose";
        return;
    }
    setenv("OPENBLAS_CORETYPE", want, 1);
    o.lib = dlopen(o.name.c_str(), RTLD_NOW | RTLD_LOCAL);
    unsetenv("OPENBLAS_CORETYPE");
    KILN_CHECK(o.lib, "matmul: ", o.name, " opened once, then failed to open again with ",
               "OPENBLAS_CORETYPE=", want, ": ", dlerror());
    chosen_by = "kiln's: OpenBLAS alone picked " + first + " on a CPU with " +
                vector_level_name(cpu) + ", so kiln loaded it with OPENBLAS_CORETYPE=" + want;
}

// OpenBLAS's idle worker threads spin for 2^OPENBLAS_THREAD_TIMEOUT cycles after each GEMM
// (default 28, about 0.1 s), calling sched_yield, before they sleep; the library reads the
// variable when it is loaded. Between two GEMMs kiln's own threads run the generated kernels,
// and with as many threads as cores the spinners take CPU from them: compiled GPT's training
// step at 2 threads on the 2-core machine spent about 20% of its CPU in sched_yield. Unless the
// user set it, kiln loads OpenBLAS with 4 (the minimum, 16 cycles), set for the loads only:
// its threads sleep at once and are woken for the next GEMM (GPT at 2 threads: training 282–301
// against 320–349 ms a step, inference 79–81 against 92–94; docs/perf-models.md, "Bool masks
// on AVX2, and OpenBLAS's spinning threads").
constexpr const char* kOpenblasThreadTimeout = "4";

struct ThreadTimeoutForLoads {
    bool set = std::getenv("OPENBLAS_THREAD_TIMEOUT") == nullptr;
    ThreadTimeoutForLoads() {
        if (set) setenv("OPENBLAS_THREAD_TIMEOUT", kOpenblasThreadTimeout, 1);
    }
    ~ThreadTimeoutForLoads() {
        if (set) unsetenv("OPENBLAS_THREAD_TIMEOUT");
    }
};

BlasLibrary load_blas() {
    std::string why;
    ThreadTimeoutForLoads timeout;  // as OPENBLAS_CORETYPE below: the environment stays the user's
    Opened o = open_first(blas_candidates(), why);
    KILN_CHECK(o.lib, "matmul: no BLAS library could be opened (kiln opens it at run time; ",
               "KILN_BLAS_LIB=/path/to/libopenblas.so.0 names one). Tried:", why);
    const char* user = std::getenv("OPENBLAS_CORETYPE");
    VectorLevel cpu = cpu_vector_level();
    std::string core = core_of(o.lib), chosen_by;
    if (core.empty())
        chosen_by = "not OpenBLAS (no openblas_get_corename), no core to choose";
    else if (user)
        chosen_by = std::string("the user's: OPENBLAS_CORETYPE=") + user;
    else if (openblas_core_level(core) >= cpu)
        chosen_by = std::string("OpenBLAS's own choice, which fits the CPU (") +
                    vector_level_name(cpu) + ")";
    else if (o.loaded_before)
        chosen_by = "OpenBLAS's own choice: the process loaded it before kiln (the CPU has " +
                    std::string(vector_level_name(cpu)) + ")";
    else
        reopen_with_core(o, cpu, chosen_by);
    // From now on global, as a linked BLAS was: dlsym(RTLD_DEFAULT, ...) and later libraries
    // find its symbols.
    dlopen(o.name.c_str(), RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD);

    BlasLibrary b;
    b.file = loaded_file(o.lib);
    b.core = core_of(o.lib);
    b.chosen_by = chosen_by;
    b.sgemm = reinterpret_cast<decltype(b.sgemm)>(dlsym(o.lib, "cblas_sgemm"));
    b.dgemm = reinterpret_cast<decltype(b.dgemm)>(dlsym(o.lib, "cblas_dgemm"));
    KILN_CHECK(b.dgemm, "matmul: ", b.file, " has cblas_sgemm but no cblas_dgemm");
    b.set_num_threads =
        reinterpret_cast<decltype(b.set_num_threads)>(dlsym(o.lib, "openblas_set_num_threads"));
    b.get_num_threads =
        reinterpret_cast<decltype(b.get_num_threads)>(dlsym(o.lib, "openblas_get_num_threads"));
    using ThreadTimeout = int (*)();
    if (auto read = reinterpret_cast<ThreadTimeout>(dlsym(o.lib, "openblas_thread_timeout"))) {
        int value = read();  // 0 where unset; blas_server.c then keeps its default, 2^28
        b.thread_timeout = value <= 0 ? 28 : std::clamp(value, 4, 30);
    }
    const char* whose = o.loaded_before ? "as the process loaded it before kiln"
                        : timeout.set   ? "kiln's OPENBLAS_THREAD_TIMEOUT"
                                        : "the user's OPENBLAS_THREAD_TIMEOUT";
    std::string idle = b.thread_timeout < 0
                           ? ""
                           : ", idle threads sleep after 2^" + std::to_string(b.thread_timeout) +
                                 " cycles (" + whose + ")";
    log_event("blas", b.core.empty() ? "BLAS " + b.file + ": " + b.chosen_by
                                     : "OpenBLAS core " + b.core + " (" + b.chosen_by + ") from " +
                                           b.file + idle);
    return b;
}

}  // namespace

const BlasLibrary& blas() {
    static const BlasLibrary library = load_blas();  // a throw leaves it to the next call
    return library;
}

}  // namespace kiln
