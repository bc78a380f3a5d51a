// CPU codegen toolchain: generated C++ source -> shared object (system compiler, on-disk
// cache, optional precompiled header) -> loaded with dlopen. See docs/codegen-toolchain.md.
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace kiln::codegen {

// One loaded shared object; dlclose()d when the last owner lets go.
class CompiledLibrary {
   public:
    // Throws kiln::Error (with dlerror's text) if the object cannot be loaded.
    CompiledLibrary(std::filesystem::path so_path, std::filesystem::path source_path);
    ~CompiledLibrary();
    CompiledLibrary(const CompiledLibrary&) = delete;
    CompiledLibrary& operator=(const CompiledLibrary&) = delete;

    // Address of an exported (extern "C") symbol; throws kiln::Error naming it if missing.
    void* symbol(const std::string& name) const;
    // The same, or nullptr if this library has no such symbol.
    void* find_symbol(const std::string& name) const;
    const std::filesystem::path& so_path() const { return so_path_; }
    // The generated source, kept in the cache beside the .so so errors and dumps can cite it.
    const std::filesystem::path& source_path() const { return source_path_; }

   private:
    void* handle_ = nullptr;  // from dlopen
    std::filesystem::path so_path_;
    std::filesystem::path source_path_;
};

struct BuildOptions {
    // -I directories. Generated kernels #include "tensor/pointwise_math.h", so the kiln
    // source root must be here (the build passes it to the library as KILN_SOURCE_DIR).
    std::vector<std::string> include_dirs;
    std::vector<std::string> extra_flags;  // after the defaults: kKernelOptFlags -march=native -std=c++20 -fPIC
    bool use_pch = true;                   // -include the precompiled kiln_pch header
};

// A generated source whose first lines hold this line includes only light headers (the lean
// prelude, codegen/emit_cpp_prelude.h): it compiles without the precompiled header, whose
// loading would cost more than parsing it, and with -fno-math-errno (so a sqrt of a vector
// is one instruction; errno is never read by kernels, and no result changes).
inline constexpr const char* kLeanKernelMarker = "// kiln: lean kernel (no precompiled header)\n";
bool is_lean_kernel(const std::string& source);

// Compiles source with $CXX (else `c++`), or reuses it from this process or the disk cache.
// Throws kiln::Error if the compiler is missing, if the source does not compile (the
// message holds the first ~40 lines of compiler output and the path of the kept source),
// or if the compiler runs past $KILN_COMPILE_TIMEOUT_S seconds (it is killed, with the
// processes it started, and not run again by this process).
std::shared_ptr<CompiledLibrary> build_library(const std::string& source,
                                               const BuildOptions& options);

// build_library for each source, each on its own thread (so the compilers of a graph's
// units run at once, compile_jobs() at a time); the libraries in the sources' order. Throws
// the first source's error if any failed, after every build has finished.
std::vector<std::shared_ptr<CompiledLibrary>> build_libraries(const std::vector<std::string>& sources,
                                                              const BuildOptions& options);

// The optimization flags of every kernel compile: -O2's passes with -O3's inliner. Kernels
// are written with explicit SIMD batches, so -O3's extra passes (loop versioning, peeling,
// unswitching, distribution, the vectorizer's dynamic cost model on scalar tails) cost 30-45%
// more compiler time on large units and made no kernel faster; -O2's own inliner, though,
// leaves tensor/fast_math.h's exp, erf, sin and cos as calls (through the PLT), which made
// GELU and exp chains 13-42% slower, so its limits are -O3's (`gcc -Q --help=params -O3`).
// KILN_CXXFLAGS=-O3 overrides the level (the last -O wins). docs/perf.md, "Cold first calls".
inline constexpr const char* kKernelOptFlags[] = {
    "-O2", "--param=max-inline-insns-single=200", "--param=max-inline-insns-auto=30",
    "--param=early-inlining-insns=14", "--param=inline-heuristics-hint-percent=600",
    "--param=inline-min-speedup=15"};

// How many compiler processes may run at once in this process: $KILN_COMPILE_JOBS (read on
// every compile; an integer in [1, 1024], else kiln::Error), default the machine's hardware
// threads. The CPU backend also splits a graph's kernels over at most this many units.
size_t compile_jobs();

// Whether $CXX (else `c++`) runs; probed once per compiler name, so callers can check it
// cheaply and fall back to eager with a one-time warning. False from the moment a compile
// of that compiler timed out ($KILN_COMPILE_TIMEOUT_S): the process stops waiting on it.
bool compiler_available();
// First line of `$CXX --version` (part of every cache key); throws kiln::Error if missing.
std::string compiler_version();

struct ToolchainStats {
    int64_t compiler_calls = 0;    // kernel and PCH compiles; `--version` probes don't count
    int64_t disk_hits = 0;         // loaded from the disk cache without compiling
    int64_t memory_hits = 0;       // already loaded in this process
    int64_t rebuilds_corrupt = 0;  // corrupt or foreign entries deleted (then rebuilt)
    int64_t pch_builds = 0;        // attempts to build a precompiled header
    int64_t pch_failures = 0;      // PCHs given up (failed to build, or the compiler refused
                                   // them); kernels then compile without
    int64_t compiler_timeouts = 0; // compiles killed after $KILN_COMPILE_TIMEOUT_S (default 300)
    double compile_seconds_total = 0;  // wall time spent in the compiler
};
ToolchainStats toolchain_stats();  // totals since process start; tests compare differences

// Forgets what this process has loaded and verified, as if it had just started: the next
// build_library goes to the disk cache (libraries unload once nobody else holds them). For tests.
void toolchain_forget_loaded();

}  // namespace kiln::codegen
