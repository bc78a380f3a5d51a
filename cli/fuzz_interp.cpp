// libFuzzer target for the kiln script interpreter: any script must give a result or a
// Python-style exception, never a crash, a hang, unbounded memory or a sanitizer report.
// The first byte picks the mode: even, the rest is the script as written (seeded with the
// golden, bad and malformed corpora of tests/cli); odd, the rest is a choice stream for a
// generator of the language's constructs, biased to the values that broke it before
// (INT64_MIN, 10**100000, nan, deep nests, cycles, huge repetitions, compile()).
// Two drivers share the target: libFuzzer's (clang++ -fsanitize=fuzzer, where clang can
// compile kiln's C++20) and a standalone one (KILN_FUZZ_STANDALONE, any compiler, with
// ASan): it forks one child per script, mutates the corpus or generates from random
// bytes, and saves each input whose child crashed, was killed or hung.
// Built by `make fuzz_interp` (cmake/fuzz_interp.cmake).
#include <signal.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <vector>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>

#include "cli/interp/interp.h"
#include "cli/interp/limits.h"
#include "jit/cache.h"

namespace {

// ---- the generator: bytes in, a script out

class Gen {
   public:
    Gen(const uint8_t* data, size_t size) : data_(data), size_(size) {}

    std::string script() {
        std::string out;
        int statements = 1 + pick(8);
        for (int i = 0; i < statements; ++i) out += statement(0);
        return out;
    }

   private:
    const uint8_t* data_;
    size_t size_, at_ = 0;

    int pick(int n) { return at_ < size_ ? data_[at_++] % n : 0; }
    template <size_t N>
    const char* one_of(const char* const (&options)[N]) { return options[pick(int(N))]; }
    std::string indent(int depth) { return std::string(size_t(4 * depth), ' '); }

    std::string var() {
        static const char* const names[] = {"a", "b", "c", "x", "lst", "d", "s", "t", "f", "opt"};
        return one_of(names);
    }
    std::string literal() {
        static const char* const values[] = {
            "0", "1", "-1", "2", "7", "9223372036854775807", "(-9223372036854775807 - 1)", "9007199254740993", "2**62",
            "10**100000", "0.5", "-0.0", "1e308", "float('nan')", "float('inf')", "float('-inf')", "True", "False",
            "None", "'ab'", "''", "'\\x00'", "[]", "[1, 2, 3]", "[[1, 2], [3, 4]]", "{}", "{'k': 1}", "()", "(1,)",
            "ones(2, 3)", "randn(3)", "zeros(0)", "arange(6)", "tensor([[1, 2], [3, 4]])", "tensor(1.5)", "ones(2, requires_grad=True)",
            "torch.float64", "range(5)", "'%s'", "-9223372036854775807",
        };
        return one_of(values);
    }
    std::string expr(int depth) {
        if (depth > 4) return pick(2) ? literal() : var();
        switch (pick(14)) {
            case 0: case 1: return literal();
            case 2: case 3: return var();
            case 4: {
                static const char* const ops[] = {"+", "-", "*", "/", "//", "%", "**", "@", "==", "<", "!=", ">=", "in", "is", "and", "or"};
                return "(" + expr(depth + 1) + " " + one_of(ops) + " " + expr(depth + 1) + ")";
            }
            case 5: {
                static const char* const unary[] = {"-", "+", "not "};
                return std::string("(") + one_of(unary) + expr(depth + 1) + ")";
            }
            case 6: {
                static const char* const fns[] = {"len", "str", "repr", "int", "float", "bool", "list", "tuple", "range", "abs",
                                                  "round", "sum", "max", "min", "enumerate", "zip", "type", "tensor", "print",
                                                  "exp", "relu", "softmax", "cat", "compile", "explain(f)"};
                std::string call = std::string(one_of(fns)) + "(" + expr(depth + 1);
                if (pick(3) == 0) call += ", " + expr(depth + 1);
                return call + ")";
            }
            case 7: {
                static const char* const methods[] = {"append", "keys", "items", "get", "sum", "reshape", "item", "tolist", "t",
                                                      "view", "mean", "backward", "size", "shape", "cos", "unsqueeze"};
                std::string m = one_of(methods);
                if (m == "shape") return expr(depth + 1) + ".shape";
                return expr(depth + 1) + "." + m + "(" + (pick(2) ? expr(depth + 1) : "") + ")";
            }
            case 8: return expr(depth + 1) + "[" + expr(depth + 1) + "]";
            case 9: {
                static const char* const bounds[] = {"", "0", "-1", "2", "9223372036854775807", "(-9223372036854775807 - 1)", "10**18"};
                return expr(depth + 1) + "[" + one_of(bounds) + ":" + one_of(bounds) + ":" + (pick(2) ? one_of(bounds) : "1") + "]";
            }
            case 10: return "[" + expr(depth + 1) + ", " + expr(depth + 1) + "]";
            case 11: return expr(depth + 1) + " * " + (pick(2) ? "10**11" : expr(depth + 1));
            case 12: return "(" + expr(depth + 1) + " if " + expr(depth + 1) + " else " + expr(depth + 1) + ")";
            default: return "{" + expr(depth + 1) + ": " + expr(depth + 1) + "}";
        }
    }
    std::string statement(int depth) {
        std::string in = indent(depth);
        if (depth > 2) return in + var() + " = " + expr(0) + "\n";
        switch (pick(12)) {
            case 0: case 1: case 2: return in + var() + " = " + expr(0) + "\n";
            case 3: return in + var() + " += " + expr(0) + "\n";
            case 4: return in + expr(0) + "\n";
            case 5: return in + "if " + expr(0) + ":\n" + statement(depth + 1) + (pick(2) ? in + "else:\n" + statement(depth + 1) : "");
            case 6: return in + "for i in range(" + std::to_string(pick(4) ? pick(20) : 100000) + "):\n" + statement(depth + 1);
            case 7:  // a def, its call, and a compiled call (eager backends: no C++ compiler per input)
                return in + "def f(p, q=1):\n" + statement(depth + 1) + in + "    return " + expr(0) + "\n" + in + "opt = compile(f, backend='" +
                       (pick(2) ? "eager" : "aot_eager") + "')\n" + in + "r = opt(" + expr(0) + ")\n";
            case 8: return in + "lst = []\n" + in + "for i in range(" + std::to_string(pick(2) ? 3 : 50000) + "):\n" + in + "    lst = [lst]\n";
            case 9: return in + var() + "[" + expr(0) + "] = " + expr(0) + "\n";
            case 10: return in + "lst = [1]\n" + in + "lst.append(lst)\n" + in + "s = str(lst)\n";
            default: return in + "n = 0\n" + in + "while n < " + std::to_string(pick(50)) + ":\n" + in + "    n = n + 1\n" + statement(depth + 1);
        }
    }
};

// ---- a watchdog: a script still running after kBudget gets Ctrl-C (KeyboardInterrupt),
// which also fuzzes the interrupt path. A hang inside one C++ call is what remains, and
// libFuzzer's -timeout reports it.

constexpr auto kBudget = std::chrono::milliseconds(1500);
std::mutex g_mu;
std::condition_variable g_cv;
uint64_t g_run = 0;  // which run is going; 0 when none
std::chrono::steady_clock::time_point g_started;

[[maybe_unused]] void watchdog() {  // libFuzzer's driver only
    std::unique_lock lock(g_mu);
    while (true) {
        uint64_t run = g_run;
        if (run == 0) {
            g_cv.wait(lock);
            continue;
        }
        if (g_cv.wait_until(lock, g_started + kBudget, [&] { return g_run != run; })) continue;
        kiln::interp::g_interrupted.store(true);
        g_cv.wait(lock, [&] { return g_run != run; });
    }
}

}  // namespace

#ifndef KILN_FUZZ_STANDALONE
extern "C" int LLVMFuzzerInitialize(int*, char***) {
    setenv("KILN_SCRIPT_MEMORY_LIMIT", "64M", 1);  // far below libFuzzer's -rss_limit_mb
    std::thread(watchdog).detach();
    return 0;
}
#endif

// The script an input stands for: the bytes after the mode byte, or what they generate.
static std::string script_of(const uint8_t* data, size_t size) {
    return data[0] % 2 == 0 ? std::string(reinterpret_cast<const char*>(data + 1), size - 1) : Gen(data + 1, size - 1).script();
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    std::string source = script_of(data, size);
    static uint64_t runs = 0;
    {
        std::lock_guard lock(g_mu);
        g_run = ++runs;
        g_started = std::chrono::steady_clock::now();
    }
    g_cv.notify_all();
    {
        std::ostringstream out;
        kiln::interp::Interp in(out);
        in.default_backend = "eager";
        kiln::jit::reset();
        try {
            in.run_source(source, "fuzz.ks");
        } catch (const kiln::Error&) {  // SyntaxError, ScriptError: the expected outcomes
        }
    }
    {
        std::lock_guard lock(g_mu);
        g_run = 0;
    }
    g_cv.notify_all();
    kiln::interp::g_interrupted.store(false);
    kiln::jit::reset();
    return 0;
}

#ifdef KILN_FUZZ_STANDALONE
// ---- the standalone driver: fuzz_interp [-max_total_time=S] [-timeout=S] [-artifact_prefix=DIR/] CORPUS_DIR...
// Reads the corpus directories, never writes them: a crashing or hanging input is saved as
// <prefix>crash-N.bin (the input) and <prefix>crash-N.ks (the script it ran), by default in
// fuzz_interp_artifacts/ beside the binary (the build tree).
namespace {

std::string default_artifact_prefix() {
    std::error_code ec;
    std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    std::filesystem::path dir = (ec ? std::filesystem::current_path() : exe.parent_path()) / "fuzz_interp_artifacts";
    std::filesystem::create_directories(dir, ec);
    return dir.string() + "/";
}

std::vector<std::string> load_corpus(const std::vector<std::string>& dirs) {
    std::vector<std::string> corpus;
    for (const std::string& d : dirs)
        for (const auto& f : std::filesystem::directory_iterator(d)) {
            std::ifstream in(f.path(), std::ios::binary);
            std::stringstream text;
            text << in.rdbuf();
            corpus.push_back(text.str());
        }
    return corpus;
}

// One input: a mutated corpus script (mode byte even) or generator bytes (odd).
std::string make_input(std::mt19937_64& rng, const std::vector<std::string>& corpus) {
    std::string input;
    if (corpus.empty() || rng() % 2) {
        input.push_back(char(1));
        for (int i = 0, n = 16 + int(rng() % 240); i < n; ++i) input.push_back(char(rng()));
        return input;
    }
    std::string text = corpus[rng() % corpus.size()];
    for (int i = 0, n = int(rng() % 4); i < n && !text.empty(); ++i) {
        size_t at = rng() % text.size();
        switch (rng() % 4) {
            case 0: text[at] = char(rng()); break;                                      // flip a byte
            case 1: text.erase(at, rng() % 8); break;                                   // cut
            case 2: text.insert(at, corpus[rng() % corpus.size()].substr(0, rng() % 64)); break;  // splice
            default: text.insert(at, std::string(1 + rng() % 3, "0123456789+*([-"[rng() % 15])); break;
        }
    }
    return char(0) + text;
}

extern "C" void on_alarm(int) { kiln::interp::g_interrupted.store(true); }

}  // namespace

// A single allocation past 3 GiB fails (std::bad_alloc: MemoryError) instead of being
// reported as an ASan error: the memory limit under test is kiln script's own.
extern "C" const char* __asan_default_options() { return "max_allocation_size_mb=3072:allocator_may_return_null=1"; }

int main(int argc, char** argv) {
    int max_total_time = 60, timeout = 10;
    std::string prefix;
    std::vector<std::string> dirs;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a.rfind("-max_total_time=", 0) == 0) max_total_time = std::atoi(a.c_str() + 16);
        else if (a.rfind("-timeout=", 0) == 0) timeout = std::atoi(a.c_str() + 9);
        else if (a.rfind("-artifact_prefix=", 0) == 0) prefix = a.substr(17);
        else if (a[0] != '-') dirs.push_back(a);
    }
    if (prefix.empty()) prefix = default_artifact_prefix();
    setenv("KILN_SCRIPT_MEMORY_LIMIT", "64M", 1);
    // Corpus scripts that ask for backend="inductor" run the C++ compiler, which Ctrl-C does
    // not stop: bound it well inside -timeout (then the graph is interpreted), and keep the
    // kernels in the build tree so each child reuses what an earlier one compiled.
    setenv("KILN_COMPILE_TIMEOUT_S", std::to_string(std::max(1, timeout / 3)).c_str(), 0);
    setenv("KILN_CACHE_DIR", (prefix + "kernel-cache").c_str(), 0);
    std::vector<std::string> corpus = load_corpus(dirs);
    std::mt19937_64 rng(std::random_device{}());
    auto end = std::chrono::steady_clock::now() + std::chrono::seconds(max_total_time);
    long executions = 0, crashes = 0, hangs = 0;
    while (std::chrono::steady_clock::now() < end) {
        std::string input = make_input(rng, corpus);
        std::cout << std::flush;
        pid_t pid = fork();
        if (pid == 0) {
            signal(SIGALRM, on_alarm);  // the script's budget: then Ctrl-C, as a user would
            itimerval budget{{0, 0}, {1, 500000}};
            setitimer(ITIMER_REAL, &budget, nullptr);
            LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(input.data()), input.size());
            _exit(0);
        }
        int status = 0;
        auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout);
        bool hung = false;
        while (waitpid(pid, &status, WNOHANG) == 0) {
            if (std::chrono::steady_clock::now() > deadline) {
                kill(pid, SIGKILL);
                waitpid(pid, &status, 0);
                hung = true;
                break;
            }
            usleep(200);
        }
        ++executions;
        if (hung || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            (hung ? hangs : crashes)++;
            std::string name = prefix + (hung ? "hang-" : "crash-") + std::to_string(executions);
            std::ofstream(name + ".bin", std::ios::binary) << input;
            std::ofstream(name + ".ks", std::ios::binary) << script_of(reinterpret_cast<const uint8_t*>(input.data()), input.size());
            std::cout << (hung ? "HANG" : "CRASH") << " (status " << status << "): saved " << name << ".bin and .ks\n";
        }
    }
    std::cout << "fuzz_interp: " << executions << " executions, " << crashes << " crashes, " << hangs << " hangs in "
              << max_total_time << " s\n";
    return crashes || hangs ? 1 : 0;
}
#endif
