// Tests for codegen/toolchain and codegen/disk_cache: compile, cache (memory and disk),
// corruption recovery, unsafe directories, missing compiler, compile errors, the PCH.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <chrono>
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

// Kernels inline tensor/pointwise_math.h and the math_functions.def it includes: editing the
// .def (a math function added, docs/adding-an-op.md) must not reuse kernels built before.
BOOST_FIXTURE_TEST_CASE(editing_math_functions_def_rebuilds_kernels, FreshCache) {
    const fs::path root = dir / "source";
    fs::create_directories(root / "tensor");
    for (const char* name : {"pointwise_math.h", "fast_math.h", "math_functions.def"})
        fs::copy_file(kSourceDir / "tensor" / name, root / "tensor" / name);
    BuildOptions options = options_without_pch();
    options.include_dirs = {root.string()};
    ToolchainStats before = toolchain_stats();
    build_library(kMaximumSource, options);
    build_library(kMaximumSource, options);  // the same headers: loaded, not compiled
    BOOST_TEST(toolchain_stats().compiler_calls - before.compiler_calls == 1);
    std::ofstream(root / "tensor" / "math_functions.def", std::ios::app) << "// edited\n";
    build_library(kMaximumSource, options);
    BOOST_TEST(toolchain_stats().compiler_calls - before.compiler_calls == 2);
}

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

// ---- leftovers and stalls (issue 10: hostile input never crashes kiln)

namespace {

// A fake compiler: answers --version, otherwise starts a child that sleeps (as g++ starts
// cc1plus, which holds the output pipe), records the child's pid, and waits.
fs::path write_stalling_compiler(const fs::path& dir) {
    fs::path script = dir / "stalling-cxx.sh";
    std::ofstream(script) << "#!/bin/sh\n"
                             "case \"$*\" in *--version*) echo 'stalling-cxx 1.0'; exit 0;; esac\n"
                             "sleep 120 &\n"
                             "echo $! > '" << (dir / "child.pid").string() << "'\n"
                             "wait\n";
    fs::permissions(script, fs::perms::owner_all);
    return script;
}

// True once the process is gone (or a zombie waiting for init to reap it).
bool process_ended(pid_t pid) {
    for (int tries = 0; tries < 100; ++tries) {
        std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
        std::string text((std::istreambuf_iterator<char>(stat)), {});
        size_t paren = text.rfind(')');
        if (!stat || paren == std::string::npos || text.compare(paren + 2, 1, "Z") == 0) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
}

void set_mtime_seconds_ago(const fs::path& path, int64_t seconds) {
    fs::last_write_time(path, fs::file_time_type::clock::now() - std::chrono::seconds(seconds));
}

}  // namespace

BOOST_FIXTURE_TEST_CASE(stalled_compiler_is_killed_after_the_timeout, FreshCache) {
    setenv("CXX", write_stalling_compiler(dir).c_str(), 1);
    setenv("KILN_COMPILE_TIMEOUT_S", "1", 1);
    ToolchainStats before = toolchain_stats();
    BOOST_TEST(compiler_available());
    BOOST_CHECK_EXCEPTION(build_library(kAnswerSource, options_without_pch()), kiln::Error,
                          [](const kiln::Error& error) {
                              return message_contains(error, "did not finish within 1 s") &&
                                     message_contains(error, "KILN_COMPILE_TIMEOUT_S");
                          });
    unsetenv("KILN_COMPILE_TIMEOUT_S");
    BOOST_TEST(toolchain_stats().compiler_timeouts - before.compiler_timeouts == 1);
    BOOST_TEST(!compiler_available());  // callers now fall back without waiting again
    BOOST_CHECK_THROW(build_library(kAnswerSource, options_without_pch()), kiln::Error);
    BOOST_TEST(toolchain_stats().compiler_calls - before.compiler_calls == 1);
    std::ifstream pid_file(dir / "child.pid");
    pid_t child = 0;
    BOOST_REQUIRE(pid_file >> child);
    BOOST_TEST(process_ended(child));  // the compiler's own children die with it
    for (const auto& entry : fs::directory_iterator(dir))  // no temp output left behind
        BOOST_TEST(entry.path().filename().string().find(".tmp.") == std::string::npos, entry.path());
}

BOOST_FIXTURE_TEST_CASE(bad_timeout_setting_is_a_clear_error, FreshCache) {
    setenv("KILN_COMPILE_TIMEOUT_S", "soon", 1);
    BOOST_CHECK_EXCEPTION(build_library(kAnswerSource, options_without_pch()), kiln::Error,
                          [](const kiln::Error& error) { return message_contains(error, "KILN_COMPILE_TIMEOUT_S='soon'"); });
    unsetenv("KILN_COMPILE_TIMEOUT_S");
}

BOOST_FIXTURE_TEST_CASE(stale_temp_files_are_removed_when_the_cache_opens, FreshCache) {
    fs::path old_temp = dir / "kiln_pch-0123.h.gch.tmp.99999.00ab.0";
    fs::path new_temp = dir / "abcd.so.tmp.99999.00ab.1";
    fs::path old_entry = dir / "abcd.cpp";
    for (const fs::path& path : {old_temp, new_temp, old_entry}) std::ofstream(path) << "x";
    set_mtime_seconds_ago(old_temp, cache_stale_temp_seconds() + 60);
    set_mtime_seconds_ago(old_entry, cache_stale_temp_seconds() + 60);
    BOOST_TEST(cache_dir() == dir);
    BOOST_TEST(!fs::exists(old_temp));
    BOOST_TEST(fs::exists(new_temp));   // may belong to a compile still running
    BOOST_TEST(fs::exists(old_entry));  // not a temp file
}

BOOST_FIXTURE_TEST_CASE(directory_squatting_on_an_entry_is_replaced, FreshCache) {
    auto first = build_library(kAnswerSource, options_without_pch());
    fs::path so = first->so_path();
    first.reset();
    toolchain_forget_loaded();
    cache_entry_remove(so);
    fs::create_directories(so / "inside");  // a directory where the .so goes
    fs::create_directories(cache_meta_path(so));
    ToolchainStats before = toolchain_stats();
    auto library = build_library(kAnswerSource, options_without_pch());
    BOOST_TEST(call_answer(library) == 42);
    BOOST_TEST(fs::is_regular_file(so));
    BOOST_TEST(fs::is_regular_file(cache_meta_path(so)));
    BOOST_TEST(toolchain_stats().rebuilds_corrupt - before.rebuilds_corrupt == 1);
    BOOST_TEST(toolchain_stats().compiler_calls - before.compiler_calls == 1);
}

namespace {

// A compiler that notes how many of its kind are running as it starts (one line per run in
// `counts`), its words (in `argv`), waits 0.8 s, then runs c++.
fs::path write_counting_compiler(const fs::path& dir) {
    fs::path script = dir / "counting-cxx.sh";
    std::string d = dir.string();
    std::ofstream(script) << "#!/bin/sh\n"
                             "case \"$*\" in *--version*) exec c++ --version;; esac\n"
                             "mkdir '" << d << "/run.'$$\n"
                             "ls -d '" << d << "'/run.* | wc -l >> '" << d << "/counts'\n"
                             "echo \"$*\" >> '" << d << "/argv'\n"
                             "sleep 0.8\n"
                             "rmdir '" << d << "/run.'$$\n"
                             "exec c++ \"$@\"\n";
    fs::permissions(script, fs::perms::owner_all);
    return script;
}

// Sources that differ (so none is a cache hit), each with kiln_answer_<i>.
std::vector<std::string> answer_sources(int count, int base) {
    std::vector<std::string> sources;
    for (int i = 0; i < count; ++i)
        sources.push_back("extern \"C\" int kiln_answer_" + std::to_string(base + i) + "() { return " +
                          std::to_string(base + i) + "; }\n");
    return sources;
}

int most_at_once(const fs::path& counts) {
    std::ifstream in(counts);
    int most = 0;
    for (int n; in >> n;) most = std::max(most, n);
    return most;
}

struct ScopedEnv {
    std::string name;
    ScopedEnv(const std::string& n, const std::string& value) : name(n) { setenv(n.c_str(), value.c_str(), 1); }
    ~ScopedEnv() { unsetenv(name.c_str()); }
};

}  // namespace

// build_libraries: every source built and loaded, in order, with at most KILN_COMPILE_JOBS
// compilers running at once (one at a time with 1; two at once with 2).
BOOST_FIXTURE_TEST_CASE(build_libraries_runs_at_most_compile_jobs_compilers_at_once, FreshCache) {
    setenv("CXX", write_counting_compiler(dir).c_str(), 1);
    for (int jobs : {1, 2}) {
        BOOST_TEST_CONTEXT("KILN_COMPILE_JOBS=" << jobs) {
            ScopedEnv env("KILN_COMPILE_JOBS", std::to_string(jobs));
            fs::remove(dir / "counts");
            ToolchainStats before = toolchain_stats();
            std::vector<std::string> sources = answer_sources(3, 10 * jobs);
            auto libraries = build_libraries(sources, options_without_pch());
            BOOST_TEST(toolchain_stats().compiler_calls - before.compiler_calls == 3);
            BOOST_REQUIRE(libraries.size() == 3u);
            for (int i = 0; i < 3; ++i) {
                std::string name = "kiln_answer_" + std::to_string(10 * jobs + i);
                auto answer = reinterpret_cast<int (*)()>(libraries[i]->symbol(name));
                BOOST_TEST(answer() == 10 * jobs + i);
                BOOST_TEST(libraries[(i + 1) % 3]->find_symbol(name) == nullptr);
            }
            BOOST_TEST(most_at_once(dir / "counts") == jobs);
        }
    }
}

// Kernels compile with kKernelOptFlags (-O2 and -O3's inliner), before the user's
// KILN_CXXFLAGS, so KILN_CXXFLAGS=-O3 still gives -O3 (the last -O wins).
BOOST_FIXTURE_TEST_CASE(kernels_compile_at_O2_with_O3s_inliner_before_the_users_flags, FreshCache) {
    setenv("CXX", write_counting_compiler(dir).c_str(), 1);
    build_library(answer_sources(1, 30)[0], options_without_pch());
    {
        ScopedEnv flags("KILN_CXXFLAGS", "-O3");
        build_library(answer_sources(1, 31)[0], options_without_pch());
    }
    std::ifstream in(dir / "argv");
    std::string plain, with_flags;
    std::getline(in, plain);
    std::getline(in, with_flags);
    plain = " " + plain + " ", with_flags = " " + with_flags + " ";  // each word between spaces
    BOOST_TEST(plain.find(" -O2 ") != std::string::npos, plain);
    BOOST_TEST(plain.find("-O3") == std::string::npos, plain);
    BOOST_TEST(plain.find(" --param=max-inline-insns-single=200 ") != std::string::npos, plain);
    size_t o2 = with_flags.find(" -O2 "), o3 = with_flags.find(" -O3 ");
    BOOST_TEST((o2 != std::string::npos && o3 != std::string::npos && o2 < o3), with_flags);
}

BOOST_FIXTURE_TEST_CASE(bad_compile_jobs_setting_is_a_clear_error, FreshCache) {
    BOOST_TEST(compile_jobs() >= 1u);
    for (const char* bad : {"0", "-2", "two", "3x"}) {
        ScopedEnv env("KILN_COMPILE_JOBS", bad);
        BOOST_CHECK_EXCEPTION(build_library(answer_sources(1, 40)[0], options_without_pch()), kiln::Error,
                              [&](const kiln::Error& error) {
                                  return message_contains(error, "KILN_COMPILE_JOBS='" + std::string(bad) + "'");
                              });
    }
    ScopedEnv env("KILN_COMPILE_JOBS", "3");
    BOOST_TEST(compile_jobs() == 3u);
}
