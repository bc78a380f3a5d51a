// NVRTC's compiled kernels kept between processes (tensor/cuda_nvrtc.cpp): the disk cache of
// cubins (a second compile loads the file, a damaged entry is compiled again, PTX is never
// cached), its key, PTX for a device newer than NVRTC, and programs compiled at once
// (compile_cubins). Compile-only: NVRTC and no GPU.
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "codegen/inductor.h"
#include "tensor/cuda_runtime.h"
#include "tensor/error.h"
#include "tests/cuda/needs_gpu.h"
#include "tests/scoped_env.h"

using namespace kiln;

namespace {
bool have_nvrtc() { return kiln_test::have_nvrtc("cuda nvrtc"); }

// Waits for the background builds of earlier tests first (an AOT backward half builds while
// its forward runs), so that none compiles into this scope's counts or cache.
struct NoBackgroundBuilds {
    NoBackgroundBuilds() { codegen::wait_for_async_compiles(); }
};

// KILN_CACHE_DIR set to a folder of this process's own for one scope, removed at its end.
struct ScopedCacheDir {
    NoBackgroundBuilds quiet;
    std::filesystem::path dir;
    kiln_test::ScopedEnv env;
    explicit ScopedCacheDir(const std::string& name)
        : dir(std::filesystem::temp_directory_path() / (name + "-" + std::to_string(::getpid()))),
          env("KILN_CACHE_DIR", dir.string()) {}
    ~ScopedCacheDir() {
        std::error_code ec;
        std::filesystem::remove_all(dir, ec);
    }
};
}  // namespace

BOOST_AUTO_TEST_SUITE(cuda_nvrtc)

// NVRTC's cubins persist in the per-user kernel cache: a second compile of the same source
// for the same sm_XX loads the file; a damaged entry is compiled again; PTX is not cached.
BOOST_AUTO_TEST_CASE(cubins_are_kept_in_the_disk_cache) {
    if (!have_nvrtc()) return;
    namespace fs = std::filesystem;
    ScopedCacheDir cache("kiln-cubin-cache");
    const fs::path& dir = cache.dir;
    std::string source = "extern \"C\" __global__ void k(float* p) { p[threadIdx.x] *= 2.0f; }  // " + dir.string() + "\n";
    auto before = cuda::detail::compile_stats();
    std::string first = cuda::detail::compile_cubin(source, "k", 90);
    auto after_first = cuda::detail::compile_stats();
    BOOST_TEST(after_first.nvrtc_compiles == before.nvrtc_compiles + 1);
    std::string second = cuda::detail::compile_cubin(source, "k", 90);
    auto after_second = cuda::detail::compile_stats();
    BOOST_TEST(second == first);
    BOOST_TEST(after_second.nvrtc_compiles == after_first.nvrtc_compiles);  // from the disk
    BOOST_TEST(after_second.disk_hits == after_first.disk_hits + 1);
    (void)cuda::detail::compile_cubin(source, "k", 80);  // another architecture: another entry
    BOOST_TEST(cuda::detail::compile_stats().nvrtc_compiles == after_second.nvrtc_compiles + 1);
    int cubins = 0;
    for (const auto& e : fs::directory_iterator(dir))
        if (e.path().extension() == ".cubin") {
            ++cubins;
            std::ofstream(e.path(), std::ios::trunc) << "garbage";  // damaged: must not be loaded
        }
    BOOST_TEST(cubins == 2);
    auto before_damaged = cuda::detail::compile_stats();
    BOOST_TEST(cuda::detail::compile_cubin(source, "k", 90) == first);
    BOOST_TEST(cuda::detail::compile_stats().nvrtc_compiles == before_damaged.nvrtc_compiles + 1);
    // PTX (the compile-only tests) is never cached.
    auto before_ptx = cuda::detail::compile_stats();
    (void)cuda::detail::compile_cubin(source, "k", 90, /*ptx_only=*/true);
    (void)cuda::detail::compile_cubin(source, "k", 90, /*ptx_only=*/true);
    BOOST_TEST(cuda::detail::compile_stats().nvrtc_compiles == before_ptx.nvrtc_compiles + 2);
}

// The cache layer with an explicit sm_90 (no GPU): the bytes read back from the disk entry are
// exactly NVRTC's; a truncated entry (its .meta left as it was) and one with a flipped byte
// are both detected, deleted and compiled again; the key names NVRTC's version, the target
// and the options.
BOOST_AUTO_TEST_CASE(cubin_cache_round_trip_and_damage_on_disk) {
    if (!have_nvrtc()) return;
    namespace fs = std::filesystem;
    ScopedCacheDir cache("kiln-cubin-damage");
    const fs::path& dir = cache.dir;
    std::string source =
        "extern \"C\" __global__ void k(float* p) { p[threadIdx.x] += 1.0f; }  // " + dir.string() +
        "\n";
    cuda::detail::NvrtcTarget target = cuda::detail::nvrtc_target(90);
    BOOST_TEST(target.arch == "sm_90");
    BOOST_TEST(!target.ptx);
    std::string key = cuda::detail::cubin_cache_key(source, "k", target);
    BOOST_TEST(key.find("nvrtc " + cuda::detail::nvrtc_version()) != std::string::npos);
    BOOST_TEST(key.find("--gpu-architecture=sm_90") != std::string::npos);
    BOOST_TEST(key.find("--std=c++17") != std::string::npos);
    std::string first = cuda::detail::compile_cubin(source, "k", 90);
    BOOST_TEST(first.compare(0, 4,
                             "\x7f"
                             "ELF") == 0);  // a cubin is an ELF image
    std::vector<fs::path> cubins;
    for (const auto& e : fs::directory_iterator(dir))
        if (e.path().extension() == ".cubin") cubins.push_back(e.path());
    BOOST_TEST_REQUIRE(cubins.size() == 1u);
    std::ifstream in(cubins[0], std::ios::binary);
    std::string on_disk((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    BOOST_TEST((on_disk == first));
    auto damage_then_expect_recompile = [&](const char* how, auto damage) {
        BOOST_TEST_CONTEXT(how) {
            damage(cubins[0]);
            auto before = cuda::detail::compile_stats();
            BOOST_TEST((cuda::detail::compile_cubin(source, "k", 90) == first));
            auto after = cuda::detail::compile_stats();
            BOOST_TEST(after.nvrtc_compiles ==
                       before.nvrtc_compiles + 1);  // not loaded: compiled again
            BOOST_TEST(after.disk_hits == before.disk_hits);
            BOOST_TEST((cuda::detail::compile_cubin(source, "k", 90) ==
                        first));  // and the rewritten entry loads
            BOOST_TEST(cuda::detail::compile_stats().disk_hits == after.disk_hits + 1);
        }
    };
    damage_then_expect_recompile(
        "truncated", [&](const fs::path& path) { fs::resize_file(path, first.size() / 2); });
    damage_then_expect_recompile("one byte flipped", [&](const fs::path& path) {
        std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
        file.seekp(std::streamoff(first.size() / 3));
        char byte = first[first.size() / 3];
        file.put(char(byte ^ 0x5a));
    });
}

// A device newer than every architecture NVRTC can assemble for gets PTX for the newest one
// it knows (the driver finishes it at load), cached on disk like a cubin.
BOOST_AUTO_TEST_CASE(devices_newer_than_nvrtc_get_cached_ptx) {
    if (!have_nvrtc()) return;
    namespace fs = std::filesystem;
    ScopedCacheDir cache("kiln-cubin-future");
    const fs::path& dir = cache.dir;
    constexpr int kFuture = 9990;  // sm_9990: no NVRTC knows it
    cuda::detail::NvrtcTarget target = cuda::detail::nvrtc_target(kFuture);
    BOOST_TEST(target.ptx);
    BOOST_TEST(target.arch.rfind("compute_", 0) == 0);
    std::string source =
        "extern \"C\" __global__ void k(float* p) { p[threadIdx.x] *= 3.0f; }  // " + dir.string() +
        "\n";
    auto before = cuda::detail::compile_stats();
    std::string ptx = cuda::detail::compile_cubin(source, "k", kFuture);
    BOOST_TEST(ptx.find(".target sm_" + target.arch.substr(8)) != std::string::npos);
    BOOST_TEST((cuda::detail::compile_cubin(source, "k", kFuture) == ptx));
    auto after = cuda::detail::compile_stats();
    BOOST_TEST(after.nvrtc_compiles == before.nvrtc_compiles + 1);
    BOOST_TEST(after.disk_hits == before.disk_hits + 1);
}

// Programs compiled at once (compile_cubins: a graph's kernels split over NVRTC programs) are
// cached one entry each: a second compile loads all of them, a damaged entry is compiled
// again alone; overlapping compiles count their wall time once in compile_stats (the
// stage totals of KILN_LOGS=compile); a program that fails raises naming it.
BOOST_AUTO_TEST_CASE(programs_compiled_at_once_keep_one_cache_entry_each) {
    if (!have_nvrtc()) return;
    namespace fs = std::filesystem;
    ScopedCacheDir cache("kiln-cubin-programs");
    std::vector<cuda::detail::NvrtcProgram> programs;
    for (int i = 0; i < 3; ++i) {
        std::string name = "k" + std::to_string(i);
        programs.push_back({"extern \"C\" __global__ void " + name +
                                "(float* p) { p[threadIdx.x] += " + std::to_string(i) +
                                ".0f; }  // " + cache.dir.string() + "\n",
                            name});
    }
    auto before = cuda::detail::compile_stats();
    auto start = std::chrono::steady_clock::now();
    std::vector<std::string> first = cuda::detail::compile_cubins(programs, 90);
    double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    auto after_first = cuda::detail::compile_stats();
    BOOST_TEST_REQUIRE(first.size() == 3u);
    for (const std::string& cubin : first)
        BOOST_TEST(cubin.compare(0, 4,
                                 "\x7f"
                                 "ELF") == 0);
    BOOST_TEST(after_first.nvrtc_compiles == before.nvrtc_compiles + 3);
    double counted_s = after_first.nvrtc_seconds + after_first.load_seconds - before.nvrtc_seconds -
                       before.load_seconds;
    BOOST_TEST(counted_s <= wall_s);  // not each thread's time added up
    std::vector<fs::path> entries;
    for (const auto& e : fs::directory_iterator(cache.dir))
        if (e.path().extension() == ".cubin") entries.push_back(e.path());
    BOOST_TEST_REQUIRE(entries.size() == 3u);
    BOOST_TEST((cuda::detail::compile_cubins(programs, 90) == first));
    auto after_second = cuda::detail::compile_stats();
    BOOST_TEST(after_second.nvrtc_compiles == after_first.nvrtc_compiles);  // all from the disk
    BOOST_TEST(after_second.disk_hits == after_first.disk_hits + 3);
    {  // one entry damaged: rejected, compiled again alone
        std::fstream file(entries[1], std::ios::in | std::ios::out | std::ios::binary);
        file.seekg(64);
        char byte = 0;
        file.get(byte);
        file.seekp(64);
        file.put(char(byte ^ 0x5a));
    }
    BOOST_TEST((cuda::detail::compile_cubins(programs, 90) == first));
    auto after_damage = cuda::detail::compile_stats();
    BOOST_TEST(after_damage.nvrtc_compiles == after_second.nvrtc_compiles + 1);
    BOOST_TEST(after_damage.disk_hits == after_second.disk_hits + 2);
    programs.push_back(
        {"extern \"C\" __global__ void broken(float* p) { p[0] = no_such_name; }\n", "broken"});
    BOOST_CHECK_EXCEPTION(cuda::detail::compile_cubins(programs, 90), Error, [](const Error& e) {
        return std::string(e.what()).find("could not compile kernel broken") != std::string::npos;
    });
}

BOOST_AUTO_TEST_SUITE_END()
