// Compiler time per CPU graph with an empty kernel cache (issue 27: "per CPU graph with an
// empty cache: compiler time <= 0.15 s"), for graphs whose math is exp, log, tanh, erf, sin,
// cos. Each workload is compiled and called once in a fresh cache; one line of JSON per
// workload: its translation units, how many got the lean prelude (codegen/prelude.h), the
// compiler's wall seconds. A warm-up graph first builds the precompiled header where units
// need it, so that no workload's time holds the PCH build. KILN_LEAN_PRELUDE=0 gives every
// unit the full prelude, for a before/after in one build; the compiler's CPU seconds come
// from wrapping it: CXX="/usr/bin/time -a -o times.txt -f %U:%S:%e c++".
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "codegen/toolchain.h"
#include "bench/cpu_workloads.h"
#include "kiln.h"

using namespace kiln;

namespace {

using namespace kiln_bench;
Tensor warm_up(Tensor x, Tensor) { return exp(x) + floor(x); }  // floor: a full-prelude unit

struct Workload {
    const char* name;
    Tensor (*fn)(Tensor, Tensor);
    bool rows;  // [64, 1024] instead of [65536]
};

// Units in `dir` and how many of them are lean.
std::pair<int, int> count_units(const std::filesystem::path& dir) {
    int units = 0, lean = 0;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
        if (entry.path().extension() != ".cpp") continue;
        std::ifstream in(entry.path());
        std::stringstream text;
        text << in.rdbuf();
        ++units;
        lean += codegen::is_lean_kernel(text.str());
    }
    return {units, lean};
}

}  // namespace

int main() {
    namespace fs = std::filesystem;
    fs::path root =
        fs::temp_directory_path() / ("kiln-first-compile-" + std::to_string(::getpid()));
    const std::vector<Workload> workloads = {
        {"sin_plus_cos", sin_cos, false},
        {"gelu_tanh", gelu_tanh, false},
        {"gelu_erf", gelu_erf, false},
        {"modified_sigmoid", modified_sigmoid, false},
        {"exp_chain", exp_chain, false},
        {"softmax_rows", softmax_rows, true},
        {"log_softmax_rows", log_softmax_rows, true},
        {"layernorm_rows", layernorm_rows, true},
    };
    fs::path pch_dir = root / "shared";  // the warm-up's cache: the PCH, reused by every workload
    fs::create_directories(pch_dir);
    setenv("KILN_CACHE_DIR", pch_dir.c_str(), 1);
    compile(warm_up)(randn({4096}), randn({4096}));
    std::fprintf(stderr, "first_compile: warm-up done\n");
    for (const Workload& w : workloads) {
        // A fresh cache for the kernels; the PCH is found through a hard link to the warm one.
        fs::path dir = root / w.name;
        fs::create_directories(dir);
        for (const auto& entry : fs::directory_iterator(pch_dir))
            if (entry.path().filename().string().starts_with("kiln_pch"))
                fs::create_hard_link(entry.path(), dir / entry.path().filename());
        setenv("KILN_CACHE_DIR", dir.c_str(), 1);
        jit::reset();
        codegen::toolchain_forget_loaded();
        Tensor x = w.rows ? randn({64, 1024}) : randn({65536}), y = randn_like(x);
        codegen::ToolchainStats before = codegen::toolchain_stats();
        std::fprintf(stderr, "first_compile: %s\n", w.name);
        compile(w.fn)(x, y);
        codegen::ToolchainStats after = codegen::toolchain_stats();
        auto [units, lean] = count_units(dir);
        std::printf(
            "{\"workload\": \"%s\", \"units\": %d, \"lean_units\": %d, \"compiler_calls\": %lld, "
            "\"pch_builds\": %lld, \"compile_wall_s\": %.3f}\n",
            w.name, units, lean, (long long)(after.compiler_calls - before.compiler_calls),
            (long long)(after.pch_builds - before.pch_builds),
            after.compile_seconds_total - before.compile_seconds_total);
        std::fflush(stdout);
    }
    fs::remove_all(root);
}
