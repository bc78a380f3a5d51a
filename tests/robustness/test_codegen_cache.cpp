// The kernel cache and the compiler as hostile input to compile(..., "inductor"): a stalled
// compiler, a directory squatting where a .so goes, a killed compile's temp files. Each
// must end in correct results (generated, or interpreted with one warning), never a hang
// or an eager fallback for good.
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "codegen/disk_cache.h"
#include "codegen/toolchain.h"
#include "hostile.h"

using namespace kiln;
using hostile::expect_same;
namespace fs = std::filesystem;

namespace {

// A private, empty KILN_CACHE_DIR for one test, removed afterwards.
struct FreshCacheDir {
    fs::path dir;
    std::optional<std::string> saved_cxx;
    FreshCacheDir() {
        char pattern[] = "/tmp/kiln-robust-cache-XXXXXX";
        BOOST_REQUIRE(mkdtemp(pattern) != nullptr);
        dir = pattern;
        setenv("KILN_CACHE_DIR", dir.c_str(), 1);
        if (const char* cxx = std::getenv("CXX")) saved_cxx = cxx;
        codegen::toolchain_forget_loaded();
    }
    ~FreshCacheDir() {
        codegen::toolchain_forget_loaded();
        if (saved_cxx) setenv("CXX", saved_cxx->c_str(), 1);
        else unsetenv("CXX");
        unsetenv("KILN_COMPILE_TIMEOUT_S");
        fs::remove_all(dir);
    }
};

// Collects what is written to std::cerr while in scope.
struct CaptureStderr {
    std::ostringstream text;
    std::streambuf* old = std::cerr.rdbuf(text.rdbuf());
    ~CaptureStderr() { std::cerr.rdbuf(old); }
    int count(const std::string& what) const {
        std::string s = text.str();
        int n = 0;
        for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
        return n;
    }
};

Tensor fused(Tensor x, Tensor y) { return exp(x) * y + sin(y); }
Tensor fused_other(Tensor x, Tensor y) { return cos(x) - y * 3.0; }

std::vector<fs::path> cache_entries(const fs::path& dir, const std::string& ext) {
    std::vector<fs::path> out;
    for (const auto& e : fs::directory_iterator(dir))
        if (e.path().extension() == ext) out.push_back(e.path());
    return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(kernel_cache)

BOOST_FIXTURE_TEST_CASE(stalled_compiler_falls_back_with_one_warning, FreshCacheDir) {
    fs::path script = dir / "stalling-cxx.sh";
    std::ofstream(script) << "#!/bin/sh\ncase \"$*\" in *--version*) echo 'stalling-cxx 1.0'; exit 0;; esac\nexec sleep 120\n";
    fs::permissions(script, fs::perms::owner_all);
    setenv("CXX", script.c_str(), 1);
    setenv("KILN_COMPILE_TIMEOUT_S", "1", 1);
    Tensor x = randn({4, 8}), y = randn({4, 8});
    codegen::InductorStats before = codegen::inductor_stats();
    codegen::ToolchainStats calls_before = codegen::toolchain_stats();
    {
        CaptureStderr err;
        auto f = compile(fused, {.backend = "inductor"});
        expect_same(f(x, y), fused(x, y), "first call");
        expect_same(f(x, y), fused(x, y), "second call");
        BOOST_TEST(err.count("kiln: warning") == 1, err.text.str());
        BOOST_TEST(err.count("did not finish within 1 s") == 1, err.text.str());
    }
    BOOST_TEST(codegen::toolchain_stats().compiler_timeouts - calls_before.compiler_timeouts == 1);
    BOOST_TEST(!codegen::compiler_available());
    auto g = compile(fused_other, {.backend = "inductor"});  // a new graph: the compiler is not run again
    expect_same(g(x, y), fused_other(x, y), "another function");
    BOOST_TEST(codegen::toolchain_stats().compiler_calls - calls_before.compiler_calls == 1);
    BOOST_TEST(codegen::inductor_stats().calls_compiled == before.calls_compiled);
}

BOOST_FIXTURE_TEST_CASE(directory_squatting_on_a_kernel_is_recovered, FreshCacheDir) {
    Tensor x = randn({4, 8}), y = randn({4, 8});
    auto f = compile(fused, {.backend = "inductor"});
    expect_same(f(x, y), fused(x, y), "first process");
    std::vector<fs::path> libraries = cache_entries(dir, ".so");
    BOOST_REQUIRE(!libraries.empty());
    for (const fs::path& so : libraries) {  // as if another tool had made directories there
        codegen::cache_entry_remove(so);
        fs::create_directories(so / "junk");
    }
    codegen::toolchain_forget_loaded();  // a new process, as far as the cache is concerned
    codegen::InductorStats before = codegen::inductor_stats();
    CaptureStderr err;
    auto again = compile(fused, {.backend = "inductor"});
    expect_same(again(x, y), fused(x, y), "after the squatting");
    BOOST_TEST(codegen::inductor_stats().calls_compiled - before.calls_compiled == 1);  // generated, not eager
    BOOST_TEST(err.count("kiln: warning") == 0, err.text.str());
    for (const fs::path& so : libraries) BOOST_TEST(fs::is_regular_file(so), so);
}

BOOST_FIXTURE_TEST_CASE(killed_compile_leftovers_are_cleaned, FreshCacheDir) {
    fs::path pch_litter = dir / "kiln_pch-feedface.h.gch.tmp.4242.00ff.0";
    std::ofstream(pch_litter) << std::string(4096, 'x');
    fs::last_write_time(pch_litter, fs::file_time_type::clock::now() - std::chrono::hours(2));
    Tensor x = randn({4, 8}), y = randn({4, 8});
    auto f = compile(fused, {.backend = "inductor"});
    expect_same(f(x, y), fused(x, y), "compiled");
    BOOST_TEST(!fs::exists(pch_litter));
    for (const auto& e : fs::directory_iterator(dir))
        BOOST_TEST(e.path().filename().string().find(".tmp.") == std::string::npos, e.path());
}

BOOST_AUTO_TEST_SUITE_END()
