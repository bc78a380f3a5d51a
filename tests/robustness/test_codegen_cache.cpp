// The kernel cache and the compiler as hostile input to compile(..., "inductor"): a stalled
// compiler, a directory squatting where a .so goes, a killed compile's temp files. Each
// must end in correct results (generated, or interpreted with one warning), never a hang
// or an eager fallback for good.
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
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
// floor has no lean form: its unit takes the full prelude, so the precompiled header too.
Tensor fused_with_pch(Tensor x, Tensor y) { return floor(x) * y + sin(y); }

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
    {
        CaptureStderr err;  // a new graph: the compiler is not run again, and nothing more is said
        auto g = compile(fused_other, {.backend = "inductor"});
        expect_same(g(x, y), fused_other(x, y), "another function");
        BOOST_TEST(err.count("kiln: warning") == 0, err.text.str());  // was "no C++ compiler found"
    }
    BOOST_TEST(codegen::last_compiled().why_interpreted == "the C++ compiler timed out earlier in this process");
    BOOST_TEST(codegen::toolchain_stats().compiler_calls - calls_before.compiler_calls == 1);
    BOOST_TEST(codegen::inductor_stats().calls_compiled == before.calls_compiled);
}

// Each cause is warned once, whatever the order: a missing compiler, then one that stalls,
// then the missing one again, then the stalled one again, each with new graphs (sync and
// async builds, forward and backward halves).
BOOST_FIXTURE_TEST_CASE(compiler_problems_are_warned_once_per_cause, FreshCacheDir) {
    fs::path script = dir / "stalling-cxx.sh";
    std::ofstream(script) << "#!/bin/sh\ncase \"$*\" in *--version*) echo 'stalling-cxx 1.0'; exit 0;; esac\nexec sleep 120\n";
    fs::permissions(script, fs::perms::owner_all);
    fs::path missing = dir / "no-such-cxx";
    setenv("KILN_COMPILE_TIMEOUT_S", "1", 1);
    Tensor x = randn({4, 8}), y = randn({4, 8});
    std::vector<std::function<Tensor(Tensor, Tensor)>> fns = {
        fused, fused_other, [](Tensor a, Tensor b) { return tanh(a) + b * b; }, [](Tensor a, Tensor b) { return sigmoid(a - b); },
        [](Tensor a, Tensor b) { return exp(a * 0.5) - b; }, [](Tensor a, Tensor b) { return relu(a) * cos(b); }};
    CaptureStderr err;
    size_t next = 0;
    auto run_some = [&](const fs::path& cxx, int count) {
        setenv("CXX", cxx.c_str(), 1);
        for (int i = 0; i < count; ++i, ++next) {
            auto f = compile(fns[next % fns.size()], {.backend = "inductor", .async_compile = next % 2 == 1});
            expect_same(f(x, y), fns[next % fns.size()](x, y), cxx.filename().string() + ", function " + std::to_string(next));
            codegen::wait_for_async_compiles();
            expect_same(f(x, y), fns[next % fns.size()](x, y), cxx.filename().string() + ", again");
        }
    };
    run_some(missing, 2);
    run_some(script, 3);
    run_some(missing, 2);
    run_some(script, 2);
    Tensor w = randn({4, 8}, {.requires_grad = true});
    auto trained = compile([](Tensor a, Tensor b) { return (sin(a) * b).sum(); }, {.backend = "inductor"});
    trained(w, y).backward();  // the backward half is a graph of its own
    BOOST_TEST(allclose(w.grad(), cos(w.detach()) * y, 1e-5, 1e-6));
    BOOST_TEST(err.count("kiln: warning") == 2, err.text.str());
    BOOST_TEST(err.count("no C++ compiler found") == 1, err.text.str());
    BOOST_TEST(err.count("did not finish within 1 s") == 1, err.text.str());
}

// A setting the toolchain cannot use was once swallowed: every graph interpreted, silently.
BOOST_FIXTURE_TEST_CASE(a_bad_compile_timeout_is_warned_once, FreshCacheDir) {
    Tensor x = randn({4, 8}), y = randn({4, 8});
    for (const char* bad : {"abc", "-1", "nan"}) {
        setenv("KILN_COMPILE_TIMEOUT_S", bad, 1);
        CaptureStderr err;
        auto f = compile(fused, {.backend = "inductor"});
        auto g = compile(fused_other, {.backend = "inductor"});
        expect_same(f(x, y), fused(x, y), bad);
        expect_same(g(x, y), fused_other(x, y), bad);
        BOOST_TEST(err.count("kiln: warning") == 1, err.text.str());
        BOOST_TEST(err.count(std::string("KILN_COMPILE_TIMEOUT_S='") + bad + "' is not a number of seconds") == 1, err.text.str());
        BOOST_TEST(codegen::last_compiled().why_interpreted.find("misconfigured") != std::string::npos);
    }
    unsetenv("KILN_COMPILE_TIMEOUT_S");  // fixed: generated kernels again
    codegen::InductorStats before = codegen::inductor_stats();
    auto h = compile(fused, {.backend = "inductor"});
    expect_same(h(x, y), fused(x, y), "after unsetting it");
    BOOST_TEST(codegen::inductor_stats().calls_compiled - before.calls_compiled == 1);
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

// A FIFO where a kernel, its meta file or the precompiled header's .h goes: opening one to
// read blocks until a writer comes, which would hang every later compile. They are treated
// as squatters: replaced, never read.
BOOST_FIXTURE_TEST_CASE(fifos_squatting_in_the_cache_do_not_block, FreshCacheDir) {
    Tensor x = randn({4, 8}), y = randn({4, 8});
    auto f = compile(fused_with_pch, {.backend = "inductor"});
    expect_same(f(x, y), fused_with_pch(x, y), "first process");
    std::vector<fs::path> squatted;
    for (const char* ext : {".so", ".meta", ".h"})
        for (const fs::path& path : cache_entries(dir, ext)) squatted.push_back(path);
    BOOST_REQUIRE(squatted.size() >= 3);
    for (const fs::path& path : squatted) {
        fs::remove(path);
        BOOST_REQUIRE(mkfifo(path.c_str(), 0600) == 0);
    }
    codegen::toolchain_forget_loaded();
    codegen::InductorStats before = codegen::inductor_stats();
    CaptureStderr err;
    auto again = compile(fused_with_pch, {.backend = "inductor"});
    expect_same(again(x, y), fused_with_pch(x, y), "after the FIFOs");
    BOOST_TEST(codegen::inductor_stats().calls_compiled - before.calls_compiled == 1);  // generated, not eager
    BOOST_TEST(err.count("kiln: warning") == 0, err.text.str());
    for (const fs::path& path : squatted) BOOST_TEST(fs::is_regular_file(path), path);
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
