// Opening the BLAS at run time (tensor/blas_library.h): OpenBLAS's core fits the CPU unless the
// user chose one, nothing loads OpenBLAS before kiln does, a missing library is a clear error.
// Each check runs this test binary again as a child process, since a process loads BLAS once.
#include <signal.h>
#include <sys/time.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "kiln.h"
#include "tensor/blas_library.h"

using namespace kiln;

namespace {

// The CPU's level read from /proc/cpuinfo's flags, apart from kiln's own cpuid checks.
VectorLevel cpuinfo_level() {
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind("flags", 0) != 0) continue;
        std::istringstream words(line.substr(line.find(':') + 1));
        std::set<std::string> flags;
        for (std::string w; words >> w;) flags.insert(w);
        auto has = [&](std::initializer_list<const char*> names) {
            for (const char* n : names)
                if (!flags.count(n)) return false;
            return true;
        };
        if (has({"avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl"}))
            return VectorLevel::avx512;
        if (has({"avx2", "fma"})) return VectorLevel::avx2;
        return VectorLevel::baseline;
    }
    BOOST_FAIL("no flags line in /proc/cpuinfo");
    return VectorLevel::baseline;
}

struct Child {
    int status = -1;
    std::string output;  // stdout and stderr
};

// This binary again, running `test_case`, with `env` (a shell prefix such as "env -u X Y=1").
Child run_child(const std::string& env, const std::string& test_case) {
    std::string cmd = env + " /proc/" + std::to_string(getpid()) + "/exe --run_test=" + test_case +
                      " --log_level=error --report_level=short 2>&1";
    Child c;
    FILE* pipe = popen(cmd.c_str(), "r");
    BOOST_REQUIRE(pipe);
    char buffer[512];
    while (fgets(buffer, sizeof buffer, pipe)) c.output += buffer;
    c.status = pclose(pipe);
    return c;
}

// The core named by KILN_LOGS=blas's line "[kiln:blas] OpenBLAS core NAME (...", and how many
// such lines the child printed.
std::string logged_core(const std::string& output, int& lines) {
    lines = 0;
    std::string core;
    for (size_t at = output.find("[kiln:blas] "); at != std::string::npos;
         at = output.find("[kiln:blas] ", at + 1)) {
        ++lines;
        std::string head = "[kiln:blas] OpenBLAS core ";
        if (output.compare(at, head.size(), head) != 0) continue;
        size_t start = at + head.size();
        core = output.substr(start, output.find(' ', start) - start);
    }
    return core;
}

// Runs the matmul-against-loops tests in a child with KILN_LOGS=blas and `env`: they pass, and
// the child logs one core, which is returned.
std::string child_core(const std::string& env) {
    Child c = run_child("env " + env + " KILN_LOGS=blas",
                        "matmul/matmul_matches_naive_loops:matmul_runs_blas_on_kilns_thread_count");
    BOOST_TEST(c.status == 0, c.output);
    BOOST_TEST(c.output.find("  2 test cases out of ") != std::string::npos, c.output);
    int lines = 0;
    std::string core = logged_core(c.output, lines);
    BOOST_TEST(lines == 1, "one [kiln:blas] line per process:\n" << c.output);
    BOOST_TEST(!core.empty(), "the BLAS is not OpenBLAS, so kiln chose no core:\n" << c.output);
    return core;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(blas_library)

BOOST_AUTO_TEST_CASE(cpu_level_agrees_with_proc_cpuinfo) {
    BOOST_TEST(std::string(vector_level_name(cpu_vector_level())) ==
               vector_level_name(cpuinfo_level()));
}

BOOST_AUTO_TEST_CASE(openblas_core_names_map_to_their_vector_level) {
    auto level = [](std::string_view core) {
        return std::string(vector_level_name(openblas_core_level(core)));
    };
    BOOST_TEST(level("SkylakeX") == "AVX-512");
    BOOST_TEST(level("COOPERLAKE") == "AVX-512");  // any case
    BOOST_TEST(level("Haswell") == "AVX2+FMA");
    BOOST_TEST(level("Prescott") == "no AVX2");
    BOOST_TEST(level("SkylakeXL") == "no AVX2");  // whole names only
}

// The VM this was written on is an AVX-512 Xeon that Debian's OpenBLAS 0.3.21 does not know:
// by itself it runs Prescott kernels (4x slower GPT inference, docs/perf-models.md).
BOOST_AUTO_TEST_CASE(the_core_fits_the_cpu_when_openblas_coretype_is_unset) {
    std::string core = child_core("-u OPENBLAS_CORETYPE");
    VectorLevel cpu = cpuinfo_level();
    BOOST_TEST(int(openblas_core_level(core)) >= int(cpu),
               "core " << core << " on a CPU with " << vector_level_name(cpu));
    if (cpu != VectorLevel::baseline) BOOST_TEST(core != "Prescott");
}

BOOST_AUTO_TEST_CASE(the_users_openblas_coretype_is_kept) {
    // Haswell where kiln would pick SkylakeX; Prescott (SSE3, any x86-64) elsewhere.
    std::string want = cpuinfo_level() == VectorLevel::avx512 ? "Haswell" : "Prescott";
    std::string core = child_core("OPENBLAS_CORETYPE=" + want);
    BOOST_TEST(core == want);
}

// A process that loaded OpenBLAS before kiln (linked it, or LD_PRELOAD) has it with the core it
// picked: kiln keeps that library and says so, rather than closing what others hold.
BOOST_AUTO_TEST_CASE(a_blas_the_process_loaded_first_keeps_its_core) {
    std::string file = std::filesystem::canonical(blas().file).string();
    Child c = run_child("env -u OPENBLAS_CORETYPE LD_PRELOAD=" + file + " KILN_LOGS=blas",
                        "matmul/matmul_matches_naive_loops");
    BOOST_TEST(c.status == 0, c.output);
    BOOST_TEST((c.output.find("the process loaded it before kiln") != std::string::npos ||
                c.output.find("which fits the CPU") != std::string::npos),
               c.output);
}

// The files mapped into this process (/proc/self/maps), by real path.
std::set<std::string> mapped_files() {
    std::ifstream maps("/proc/self/maps");
    std::set<std::string> files;
    for (std::string line; std::getline(maps, line);)
        if (size_t slash = line.find('/'); slash != std::string::npos)
            files.insert(line.substr(slash));
    return files;
}

// Run as a child by the next tests: whether the BLAS file was mapped into the process before
// and after the first matmul, or the error that matmul raised.
BOOST_AUTO_TEST_CASE(child_process_helper) {
    if (!std::getenv("KILN_BLAS_CHILD")) return;  // only meaningful as the child
    auto f = compile([](Tensor x) { return sin(x) + 1.0; });
    BOOST_TEST(allclose(f(ones({64})), sin(ones({64})) + 1.0));  // a generated kernel loaded
    std::set<std::string> before = mapped_files();
    int kernels = 0;  // generated kernel libraries: <16 hex digits>.so in the kernel cache
    for (const std::string& file : before)
        kernels += std::regex_match(std::filesystem::path(file).filename().string(),
                                    std::regex("[0-9a-f]{16}\\.so"));
    std::cout << "kernels_mapped=" << kernels << "\n";
    try {
        Tensor a = ones({4, 3}), b = ones({3, 2});
        std::cout << "sum=" << matmul(a, b).sum().item<float>() << "\n";
    } catch (const Error& e) {
        std::cout << "error: " << e.what() << "\n";
        return;
    }
    std::string file = std::filesystem::canonical(blas().file).string();
    std::cout << "blas=" << file << " mapped_before=" << before.count(file)
              << " mapped_after=" << mapped_files().count(file) << "\n";
    const char* env = std::getenv("OPENBLAS_THREAD_TIMEOUT");
    std::cout << "thread_timeout=" << blas().thread_timeout
              << " env_after=" << (env ? env : "unset") << "\n";
}

// Neither the program's libraries (kiln's, oneDNN's, MPI's DT_NEEDED) nor a generated kernel's
// load the BLAS before the first matmul: it would pick its core before kiln could choose.
BOOST_AUTO_TEST_CASE(nothing_loads_blas_before_the_first_matmul) {
    Child c = run_child("env KILN_BLAS_CHILD=1", "blas_library/child_process_helper");
    BOOST_TEST(c.status == 0, c.output);
    BOOST_TEST(c.output.find("sum=24") != std::string::npos, c.output);  // 4 x 2 entries of 3
    BOOST_TEST((c.output.find("kernels_mapped=") != std::string::npos &&
                c.output.find("kernels_mapped=0") == std::string::npos),
               c.output);
    BOOST_TEST(c.output.find(" mapped_before=0 mapped_after=1") != std::string::npos, c.output);
}

// OpenBLAS's idle threads sleep at once (OPENBLAS_THREAD_TIMEOUT=4 for kiln's load) instead of
// spinning beside kiln's threads between GEMMs; the user's value is kept, and the variable is
// the user's again after the load.
BOOST_AUTO_TEST_CASE(openblas_threads_sleep_when_idle_unless_the_user_says) {
    if (blas().thread_timeout < 0) {
        BOOST_TEST_MESSAGE("not OpenBLAS (" << blas().file << "): no idle timeout to check");
        return;
    }
    Child c = run_child("env -u OPENBLAS_THREAD_TIMEOUT KILN_BLAS_CHILD=1",
                        "blas_library/child_process_helper");
    BOOST_TEST(c.status == 0, c.output);
    BOOST_TEST(c.output.find("thread_timeout=4 env_after=unset") != std::string::npos, c.output);
    Child user = run_child("env OPENBLAS_THREAD_TIMEOUT=12 KILN_BLAS_CHILD=1",
                           "blas_library/child_process_helper");
    BOOST_TEST(user.status == 0, user.output);
    BOOST_TEST(user.output.find("thread_timeout=12 env_after=12") != std::string::npos,
               user.output);
}

BOOST_AUTO_TEST_CASE(a_missing_library_is_an_error_naming_it) {
    Child c = run_child("env KILN_BLAS_CHILD=1 KILN_BLAS_LIB=/nonexistent/libopenblas.so.0",
                        "blas_library/child_process_helper");
    BOOST_TEST(c.status == 0, c.output);
    BOOST_TEST(c.output.find("error: matmul: no BLAS library could be opened") != std::string::npos,
               c.output);
    BOOST_TEST(c.output.find("/nonexistent/libopenblas.so.0") != std::string::npos, c.output);
    BOOST_TEST(c.output.find("KILN_BLAS_LIB") != std::string::npos, c.output);
}

// oneDNN 2.6's JIT GEMM kernels point rsp at a heap buffer: a signal handler that ran on that
// thread meanwhile wrote its frame into the heap, and the process aborted in a later free()
// (tensor/onednn_signals.h; the REPL's Ctrl-C handler, a SIGPROF profiler). A SIGPROF every
// 100 us of CPU time over GEMMs of GPT's shapes in all three transposes: the process lives,
// the handler ran, and the products equal the reference ones.
namespace {
volatile sig_atomic_t g_prof_hits = 0;
void on_prof(int) { g_prof_hits = g_prof_hits + 1; }
}  // namespace

BOOST_AUTO_TEST_CASE(gemms_survive_a_signal_handler_running_meanwhile) {
    struct sigaction sa{}, old_sa{};
    sa.sa_handler = on_prof;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGPROF, &sa, &old_sa);
    itimerval every{{0, 100}, {0, 100}}, off{}, old_timer{};
    setitimer(ITIMER_PROF, &every, &old_timer);
    manual_seed(4);
    Tensor w = randn({768, 256}), x = randn({512, 256}), g = randn({512, 768});
    Tensor y, gx, gw;
    for (int i = 0; i < 40; ++i) {
        y = matmul(x, w.t());
        gx = matmul(g, w);
        gw = matmul(g.t(), x);
    }
    setitimer(ITIMER_PROF, &off, nullptr);
    sigaction(SIGPROF, &old_sa, nullptr);
    BOOST_TEST(g_prof_hits > 0);
    Tensor xd = x.to(DType::float64), wd = w.to(DType::float64), gd = g.to(DType::float64);
    BOOST_TEST(allclose(y, matmul(xd, wd.t()).to(DType::float32), 1e-4, 1e-4));
    BOOST_TEST(allclose(gw, matmul(gd.t(), xd).to(DType::float32), 1e-4, 1e-3));
}

BOOST_AUTO_TEST_SUITE_END()
