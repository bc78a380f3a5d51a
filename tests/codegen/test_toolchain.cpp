// Tests for codegen/toolchain and codegen/disk_cache: compile, cache (memory and disk),
// corruption recovery, unsafe directories, missing compiler, compile errors, the PCH.
#include <sys/stat.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "codegen/disk_cache.h"
#include "codegen/toolchain.h"
#include "tensor/error.h"

namespace fs = std::filesystem;
using namespace kiln::codegen;

namespace {

const fs::path kSourceDir = KILN_SOURCE_DIR;  // CMake defines it for every target linking kiln

const std::string kAnswerSource = "extern \"C\" int kiln_answer() { return 42; }\n";

BuildOptions options_without_pch() {
    BuildOptions options;
    options.include_dirs = {kSourceDir.string()};
    options.use_pch = false;  // the PCH costs a few seconds per fresh cache dir
    return options;
}

int call_answer(const std::shared_ptr<CompiledLibrary>& library) {
    auto answer = reinterpret_cast<int (*)()>(library->symbol("kiln_answer"));
    return answer();
}

// Each test gets its own empty cache directory and a process with nothing loaded.
struct FreshCache {
    fs::path dir;
    std::optional<std::string> saved_cxx;
    FreshCache() {
        char pattern[] = "/tmp/kiln-toolchain-test-XXXXXX";
        BOOST_REQUIRE(mkdtemp(pattern) != nullptr);
        dir = pattern;
        setenv("KILN_CACHE_DIR", dir.c_str(), 1);
        if (const char* cxx = std::getenv("CXX")) saved_cxx = cxx;
        toolchain_forget_loaded();
    }
    ~FreshCache() {
        toolchain_forget_loaded();
        if (saved_cxx) setenv("CXX", saved_cxx->c_str(), 1);
        else unsetenv("CXX");
        fs::permissions(dir, fs::perms::owner_all);
        fs::remove_all(dir);
        unsetenv("KILN_CACHE_DIR");
    }
};

bool message_contains(const kiln::Error& error, const std::string& part) {
    return std::string(error.what()).find(part) != std::string::npos;
}

}  // namespace

BOOST_FIXTURE_TEST_CASE(builds_and_calls_a_function, FreshCache) {
    ToolchainStats before = toolchain_stats();
    auto library = build_library(kAnswerSource, options_without_pch());
    BOOST_TEST(call_answer(library) == 42);
    BOOST_TEST(toolchain_stats().compiler_calls - before.compiler_calls == 1);
    BOOST_TEST(fs::exists(library->source_path()));
    BOOST_TEST(library->so_path().parent_path() == dir);
    BOOST_TEST(fs::exists(cache_meta_path(library->so_path())));
}

BOOST_FIXTURE_TEST_CASE(same_source_twice_is_a_memory_hit, FreshCache) {
    auto first = build_library(kAnswerSource, options_without_pch());
    ToolchainStats before = toolchain_stats();
    auto second = build_library(kAnswerSource, options_without_pch());
    BOOST_TEST(second.get() == first.get());
    BOOST_TEST(toolchain_stats().compiler_calls == before.compiler_calls);
    BOOST_TEST(toolchain_stats().memory_hits - before.memory_hits == 1);
}

BOOST_FIXTURE_TEST_CASE(new_process_loads_from_disk, FreshCache) {
    build_library(kAnswerSource, options_without_pch());
    toolchain_forget_loaded();  // as if a new process started
    ToolchainStats before = toolchain_stats();
    auto library = build_library(kAnswerSource, options_without_pch());
    BOOST_TEST(call_answer(library) == 42);
    BOOST_TEST(toolchain_stats().compiler_calls == before.compiler_calls);
    BOOST_TEST(toolchain_stats().disk_hits - before.disk_hits == 1);
}

// Each way an entry can go bad: it is deleted and rebuilt, never loaded.
BOOST_FIXTURE_TEST_CASE(damaged_entry_is_rebuilt_not_loaded, FreshCache) {
    std::vector<std::pair<std::string, std::function<void(const fs::path&)>>> damages = {
        {"bytes overwritten",
         [](const fs::path& so) {
             // The tail (section headers) is never read by dlopen, so only the hash sees it.
             std::fstream file(so, std::ios::in | std::ios::out | std::ios::binary);
             file.seekp(static_cast<std::streamoff>(fs::file_size(so)) - 16);
             file << "not the compiler";
         }},
        {"meta missing", [](const fs::path& so) { fs::remove(cache_meta_path(so)); }},
        {"group writable",
         [](const fs::path& so) {
             fs::permissions(so, fs::perms::group_write, fs::perm_options::add);
         }},
    };
    for (const auto& [name, damage] : damages) {
        BOOST_TEST_CONTEXT(name) {
            fs::path so_path = build_library(kAnswerSource, options_without_pch())->so_path();
            toolchain_forget_loaded();  // unmapped before we scribble on the file
            damage(so_path);
            ToolchainStats before = toolchain_stats();
            auto library = build_library(kAnswerSource, options_without_pch());
            BOOST_TEST(call_answer(library) == 42);
            BOOST_TEST(toolchain_stats().rebuilds_corrupt - before.rebuilds_corrupt == 1);
            BOOST_TEST(toolchain_stats().compiler_calls - before.compiler_calls == 1);
            BOOST_TEST(toolchain_stats().disk_hits == before.disk_hits);
            BOOST_TEST(cache_entry_valid(so_path));
            toolchain_forget_loaded();
        }
    }
}

BOOST_FIXTURE_TEST_CASE(threads_building_one_source_share_one_library, FreshCache) {
    const std::string source = "extern \"C\" int kiln_threaded() { return 7; }\n";
    std::shared_ptr<CompiledLibrary> libraries[2];
    std::thread first([&] { libraries[0] = build_library(source, options_without_pch()); });
    std::thread second([&] { libraries[1] = build_library(source, options_without_pch()); });
    first.join();
    second.join();
    BOOST_REQUIRE(libraries[0] && libraries[1]);
    BOOST_TEST(libraries[0].get() == libraries[1].get());
    BOOST_TEST(cache_entry_valid(libraries[0]->so_path()));
}

BOOST_FIXTURE_TEST_CASE(cache_dir_follows_xdg_then_home, FreshCache) {
    std::optional<std::string> saved_xdg, saved_home;
    if (const char* xdg = std::getenv("XDG_CACHE_HOME")) saved_xdg = xdg;
    if (const char* home = std::getenv("HOME")) saved_home = home;
    unsetenv("KILN_CACHE_DIR");
    setenv("XDG_CACHE_HOME", (dir / "xdg").c_str(), 1);
    BOOST_TEST(cache_dir() == dir / "xdg" / "kiln");
    unsetenv("XDG_CACHE_HOME");
    setenv("HOME", (dir / "home").c_str(), 1);
    BOOST_TEST(cache_dir() == dir / "home" / ".cache" / "kiln");
    if (saved_xdg) setenv("XDG_CACHE_HOME", saved_xdg->c_str(), 1);
    if (saved_home) setenv("HOME", saved_home->c_str(), 1);
    else unsetenv("HOME");
}

BOOST_FIXTURE_TEST_CASE(cache_dir_is_created_private, FreshCache) {
    fs::path nested = dir / "a" / "kiln";
    setenv("KILN_CACHE_DIR", nested.c_str(), 1);
    BOOST_TEST(cache_dir() == nested);
    struct stat st {};
    BOOST_REQUIRE(stat(nested.c_str(), &st) == 0);
    BOOST_TEST((st.st_mode & 0777) == 0700u);
}

BOOST_FIXTURE_TEST_CASE(world_writable_cache_dir_is_refused, FreshCache) {
    fs::path shared = dir / "shared";
    fs::create_directory(shared);
    fs::permissions(shared, fs::perms::all);  // 0777
    setenv("KILN_CACHE_DIR", shared.c_str(), 1);
    BOOST_CHECK_EXCEPTION(build_library(kAnswerSource, options_without_pch()), kiln::Error,
                          [&](const kiln::Error& error) {
                              return message_contains(error, shared.string()) &&
                                     message_contains(error, "0777") &&
                                     message_contains(error, "chmod 700");
                          });
}

BOOST_FIXTURE_TEST_CASE(missing_compiler_is_a_clear_error, FreshCache) {
    setenv("CXX", "/nonexistent", 1);
    BOOST_TEST(!compiler_available());
    BOOST_CHECK_EXCEPTION(build_library(kAnswerSource, options_without_pch()), kiln::Error,
                          [](const kiln::Error& error) {
                              return message_contains(error, "'/nonexistent' not found");
                          });
}

BOOST_FIXTURE_TEST_CASE(syntax_error_reports_compiler_output_and_source, FreshCache) {
    const std::string broken = "extern \"C\" int kiln_broken() { return 42 }\n";
    ToolchainStats before = toolchain_stats();
    BOOST_CHECK_EXCEPTION(build_library(broken, options_without_pch()), kiln::Error,
                          [&](const kiln::Error& error) {
                              // gcc quotes with ‘’ or '' depending on locale
                              return message_contains(error, "error: expected") &&
                                     message_contains(error, dir.string()) &&
                                     message_contains(error, ".cpp");
                          });
    BOOST_TEST(toolchain_stats().compiler_calls - before.compiler_calls == 1);
}

BOOST_FIXTURE_TEST_CASE(missing_symbol_is_named, FreshCache) {
    auto library = build_library(kAnswerSource, options_without_pch());
    BOOST_CHECK_EXCEPTION(library->symbol("kiln_question"), kiln::Error,
                          [](const kiln::Error& error) {
                              return message_contains(error, "'kiln_question'");
                          });
}

// The vocabulary generated kernels use: kiln_math on xsimd batches, through the PCH.
const std::string kMaximumSource = R"(#include "tensor/pointwise_math.h"
extern "C" void kiln_maximum(const float* a, const float* b, float* out, long n) {
    using batch = xsimd::batch<float>;
    long i = 0;
    for (; i + long(batch::size) <= n; i += batch::size)
        kiln_math::maximum(batch::load_unaligned(a + i), batch::load_unaligned(b + i))
            .store_unaligned(out + i);
    for (; i < n; ++i) out[i] = kiln_math::maximum(a[i], b[i]);
}
)";

BOOST_FIXTURE_TEST_CASE(xsimd_kernel_compiles_with_pch, FreshCache) {
    BuildOptions options = options_without_pch();
    options.use_pch = true;
    ToolchainStats before = toolchain_stats();
    auto library = build_library(kMaximumSource, options);
    ToolchainStats after = toolchain_stats();
    BOOST_TEST(after.pch_builds - before.pch_builds == 1);
    BOOST_TEST(after.pch_failures == before.pch_failures);
    BOOST_TEST(after.compiler_calls - before.compiler_calls == 2);  // PCH, then kernel

    auto maximum = reinterpret_cast<void (*)(const float*, const float*, float*, long)>(
        library->symbol("kiln_maximum"));
    const long n = 37;  // not a multiple of any batch width: exercises the scalar tail
    float a[n], b[n], out[n];
    for (long i = 0; i < n; ++i) a[i] = float(i), b[i] = float(n - i);
    a[3] = NAN;
    maximum(a, b, out, n);
    for (long i = 0; i < n; ++i) {
        if (i == 3) BOOST_TEST(std::isnan(out[i]));
        else BOOST_TEST(out[i] == std::max(a[i], b[i]));
    }

    // A second kernel reuses the PCH already on disk.
    build_library(kAnswerSource, options);
    BOOST_TEST(toolchain_stats().pch_builds == after.pch_builds);

    // A damaged PCH is found when a new process first needs it, and rebuilt.
    fs::path gch;
    for (const auto& entry : fs::directory_iterator(dir))
        if (entry.path().extension() == ".gch") gch = entry.path();
    BOOST_REQUIRE(!gch.empty());
    toolchain_forget_loaded();
    fs::resize_file(gch, fs::file_size(gch) / 2);
    ToolchainStats before_damage = toolchain_stats();
    auto third = build_library("extern \"C\" int kiln_third() { return 3; }\n", options);
    BOOST_TEST(reinterpret_cast<int (*)()>(third->symbol("kiln_third"))() == 3);
    BOOST_TEST(toolchain_stats().rebuilds_corrupt - before_damage.rebuilds_corrupt == 1);
    BOOST_TEST(toolchain_stats().pch_builds - before_damage.pch_builds == 1);
    BOOST_TEST(cache_entry_valid(gch));
}
