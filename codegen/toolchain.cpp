// CPU codegen toolchain: hashes what determines a kernel's machine code into a cache key,
// then loads the shared object from this process, from the disk cache, or from a fresh
// compile (optionally against a precompiled header), in that order.
#include "codegen/toolchain.h"

#include <algorithm>
#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <thread>
#include <unordered_map>
#include <utility>

#include "jit/log.h"
#include "codegen/disk_cache.h"
#include "tensor/error.h"

extern char** environ;

namespace kiln::codegen {
namespace fs = std::filesystem;

namespace {

// Bump when the key recipe or the cache layout changes, so old entries are never reused.
constexpr const char* kCacheFormat = "kiln-codegen-v1";
constexpr int kErrorLines = 40;  // compiler output quoted in a compile error

// What every generated CPU kernel includes, parsed once into a .gch instead of per kernel
// (xsimd alone is most of a kernel's compile time).
constexpr const char* kPchText =
    "// kiln precompiled header: what generated CPU kernels include.\n"
    "#include <cmath>\n"
    "#include <cstdint>\n"
    "#include <thread>\n"
    "#include <vector>\n"
    "#include <xsimd/xsimd.hpp>\n"
    "#include \"tensor/pointwise_math.h\"\n";

// ---- running the compiler

struct ProcessResult {
    int spawn_errno = 0;  // nonzero: the program could not be started at all
    int exit_status = -1;
    bool timed_out = false;  // killed after compile_timeout_seconds()
    std::string output;  // stdout and stderr, interleaved as the program wrote them
};

// Reads until EOF or the deadline; false if the deadline came first.
bool read_all(int fd, std::string& output, std::chrono::steady_clock::time_point deadline) {
    char buffer[4096];
    for (;;) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) return false;
        pollfd p{fd, POLLIN, 0};
        int ready = ::poll(&p, 1, int(std::min<int64_t>(left.count(), 1000)));
        if (ready < 0 && errno != EINTR) return true;  // cannot wait: treat as the end
        if (ready <= 0) continue;
        ssize_t got = ::read(fd, buffer, sizeof buffer);
        if (got == 0) return true;
        if (got > 0) output.append(buffer, static_cast<size_t>(got));
        else if (errno != EINTR) return true;
    }
}

int wait_for(pid_t pid) {
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// posix_spawnp with an argv, not popen with a shell line, so paths need no quoting. The child
// leads its own process group, so a stalled compiler is killed with everything it started
// (g++ runs cc1plus and as, which hold our pipe open).
ProcessResult run_process(const std::vector<std::string>& argv, double timeout_seconds) {
    std::vector<char*> args;
    for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
    args.push_back(nullptr);
    int pipe_fds[2];
    if (pipe2(pipe_fds, O_CLOEXEC) != 0) fail("codegen: pipe failed: ", std::strerror(errno));
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 1);
    posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 2);
    posix_spawnattr_t attributes;
    posix_spawnattr_init(&attributes);
    posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&attributes, 0);
    ProcessResult result;
    pid_t pid = 0;
    result.spawn_errno = posix_spawnp(&pid, args[0], &actions, &attributes, args.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attributes);
    ::close(pipe_fds[1]);
    if (result.spawn_errno == 0) {
        auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_seconds);
        if (!read_all(pipe_fds[0], result.output, std::chrono::time_point_cast<std::chrono::steady_clock::duration>(deadline))) {
            result.timed_out = true;
            ::kill(-pid, SIGKILL);
        }
    }
    ::close(pipe_fds[0]);
    if (result.spawn_errno == 0) result.exit_status = wait_for(pid);
    return result;
}

// $KILN_COMPILE_TIMEOUT_S, read on every compile (tests switch it); default 300 s.
double compile_timeout_seconds() {
    const char* text = std::getenv("KILN_COMPILE_TIMEOUT_S");
    if (text == nullptr || *text == '\0') return 300;
    char* end = nullptr;
    double seconds = std::strtod(text, &end);
    KILN_CHECK(*end == '\0' && seconds > 0 && seconds <= 1e6, "codegen: KILN_COMPILE_TIMEOUT_S='", text,
               "' is not a number of seconds in (0, 1e6]");
    return seconds;
}

}  // namespace

size_t compile_jobs() {
    const char* text = std::getenv("KILN_COMPILE_JOBS");
    if (text == nullptr || *text == '\0') return std::max(1u, std::thread::hardware_concurrency());
    char* end = nullptr;
    long jobs = std::strtol(text, &end, 10);
    KILN_CHECK(*end == '\0' && jobs >= 1 && jobs <= 1024, "codegen: KILN_COMPILE_JOBS='", text,
               "' is not a number of compiler processes in [1, 1024]");
    return size_t(jobs);
}

namespace {

bool succeeded(const ProcessResult& result) {
    return result.spawn_errno == 0 && result.exit_status == 0 && !result.timed_out;
}

std::string first_lines(const std::string& text, int count) {
    std::istringstream in(text);
    std::string line, kept;
    int total = 0;
    for (; std::getline(in, line); ++total)
        if (total < count) kept += line + "\n";
    if (total > count) kept += "[... " + std::to_string(total - count) + " more lines]\n";
    return kept;
}

std::string join(const std::vector<std::string>& words, const std::string& separator) {
    std::string joined;
    for (const std::string& word : words) joined += (joined.empty() ? "" : separator) + word;
    return joined;
}

// $CXX may be a command line such as "ccache g++", as in make.
std::string compiler_command() {
    const char* cxx = std::getenv("CXX");
    return (cxx != nullptr && *cxx != '\0') ? cxx : "c++";
}

std::vector<std::string> split_words(const std::string& text) {
    std::istringstream in(text);
    std::vector<std::string> words;
    for (std::string word; in >> word;) words.push_back(word);
    return words;
}

// nullopt if the compiler cannot be run. Probed once per $CXX value, since tests switch it.
std::optional<std::string> cached_compiler_version(const std::string& cxx) {
    static std::mutex mutex;
    // Leaked: a background build may probe while the process exits (see codegen::launch).
    static auto& versions = *new std::unordered_map<std::string, std::optional<std::string>>;
    std::lock_guard lock(mutex);
    auto found = versions.find(cxx);
    if (found != versions.end()) return found->second;
    std::vector<std::string> argv = split_words(cxx);
    argv.push_back("--version");
    ProcessResult probe = run_process(argv, compile_timeout_seconds());
    if (!succeeded(probe)) return versions[cxx] = std::nullopt;
    return versions[cxx] = probe.output.substr(0, probe.output.find('\n'));
}

std::string require_compiler_version(const std::string& cxx) {
    std::optional<std::string> version = cached_compiler_version(cxx);
    if (!version) fail("codegen: C++ compiler '", cxx, "' not found (set CXX or install g++)");
    return *version;
}

// ---- process-wide state

struct ToolchainState {
    std::mutex mutex;  // guards stats and loaded
    ToolchainStats stats;
    // Held for the life of the process (not weak): callers may keep raw function pointers
    // into a library, which must not be unloaded under them.
    std::unordered_map<std::string, std::shared_ptr<CompiledLibrary>> loaded;  // key -> lib
    std::mutex pch_mutex;  // one PCH build at a time; others wait for it and reuse it
    std::set<std::string> pch_failed;    // PCH keys that failed once; not retried
    std::set<std::string> pch_verified;  // hashing a ~100 MB .gch once per process is enough
    std::string timed_out;  // a compiler that hung once is not run again by this process
};

// Leaked on purpose: kernels may still run during other objects' static destruction.
ToolchainState& state() {
    static ToolchainState* instance = new ToolchainState;
    return *instance;
}

template <class Update>
void update_stats(Update update) {
    std::lock_guard lock(state().mutex);
    update(state().stats);
}

std::string timed_out_compiler() {
    std::lock_guard lock(state().mutex);
    return state().timed_out;
}

// One of compile_jobs() places for a running compiler, held for its life. Waiters get places
// in the order they asked, so an AOT forward's units (asked for first) build before its
// backward's and its first call waits for them alone.
class CompilerSlot {
   public:
    CompilerSlot() {
        size_t jobs = compile_jobs();
        std::unique_lock lock(gate().mu);
        uint64_t ticket = gate().next_ticket++;
        gate().turn.wait(lock, [&] { return gate().serving == ticket && gate().running < jobs; });
        ++gate().serving;
        ++gate().running;
        gate().turn.notify_all();  // the next ticket may fit too
    }
    ~CompilerSlot() {
        std::lock_guard lock(gate().mu);
        --gate().running;
        gate().turn.notify_all();
    }
    CompilerSlot(const CompilerSlot&) = delete;
    CompilerSlot& operator=(const CompilerSlot&) = delete;

   private:
    struct Gate {
        std::mutex mu;
        std::condition_variable turn;
        uint64_t next_ticket = 0, serving = 0;
        size_t running = 0;
    };
    static Gate& gate() {
        static Gate* g = new Gate;  // leaked, like state(): a background build may outlive statics
        return *g;
    }
};

// A compiler that stalls (a hung NFS include, a wedged toolchain) must not block the caller:
// it is killed, and this process stops using it, so callers fall back to the interpreter.
ProcessResult run_compiler(const std::vector<std::string>& argv) {
    double timeout = compile_timeout_seconds();
    CompilerSlot slot;  // at most compile_jobs() compilers at once, first come first served
    auto start = std::chrono::steady_clock::now();
    ProcessResult result = run_process(argv, timeout);
    std::chrono::duration<double> seconds = std::chrono::steady_clock::now() - start;
    std::string output = argv.size() >= 2 && argv[argv.size() - 2] == "-o" ? fs::path(argv.back()).filename().string() : "?";
    output = output.substr(0, output.find(".tmp"));  // the name it is renamed to
    char line[160];
    std::snprintf(line, sizeof line, "the C++ compiler built %s in %.2f s", output.c_str(), seconds.count());
    log_event("compile", line);
    add_stage_time(Stage::compiling, seconds.count());
    update_stats([&](ToolchainStats& stats) {
        stats.compiler_calls++;
        stats.compile_seconds_total += seconds.count();
        stats.compiler_timeouts += result.timed_out;
    });
    if (result.timed_out) {
        {
            std::lock_guard lock(state().mutex);
            state().timed_out = compiler_command();
        }
        fail("codegen: the C++ compiler did not finish within ", timeout, " s and was killed (KILN_COMPILE_TIMEOUT_S ",
             "sets the limit); generated kernels are off for the rest of this process.\n  command: ", join(argv, " "));
    }
    return result;
}

// Deletes a temp file on every way out of a compile (a failed or killed compiler may leave
// part of one); after a successful publish the name is gone and unlink does nothing.
struct TempFile {
    fs::path path;
    ~TempFile() { ::unlink(path.c_str()); }
};

// ---- cache keys

// Kernels and the PCH inline tensor/pointwise_math.h and the tensor/fast_math.h and
// tensor/math_functions.def it includes, so editing any of them must change the key.
std::string header_fingerprint(const BuildOptions& options) {
    for (const std::string& dir : options.include_dirs)
        if (auto text = read_file(fs::path(dir) / "tensor" / "pointwise_math.h")) {
            std::string fast = read_file(fs::path(dir) / "tensor" / "fast_math.h").value_or("");
            std::string math =
                read_file(fs::path(dir) / "tensor" / "math_functions.def").value_or("");
            return hex64(fnv1a64(*text + fast + math));
        }
    return "";
}

struct BuildPlan {
    // $CXX's words, then the flags that kernel and PCH share (a PCH needs the same ones).
    std::vector<std::string> command;
    std::string key;  // names <key>.so / <key>.cpp / <key>.meta
    std::string pch_key;
};

BuildPlan make_plan(const std::string& source, const BuildOptions& options) {
    std::string cxx = compiler_command();
    KILN_CHECK(timed_out_compiler() != cxx, "codegen: C++ compiler '", cxx, "' timed out earlier in this process; not running it again");
    std::string version = require_compiler_version(cxx);
    BuildPlan plan;
    plan.command = split_words(cxx);
    plan.command.insert(plan.command.end(), std::begin(kKernelOptFlags), std::end(kKernelOptFlags));
    plan.command.insert(plan.command.end(), {"-march=native", "-std=c++20", "-fPIC"});
    for (const std::string& dir : options.include_dirs)
        plan.command.push_back("-I" + fs::absolute(dir).string());
    // Kernels include xsimd: the directories CMake found it in at configure time go along
    // (a conda or source install, a GPU host's packed dependencies), except the compiler's
    // own system directories, which it searches anyway.
    std::string deps = KILN_DEP_INCLUDE_DIRS;
    for (size_t start = 0; start < deps.size();) {
        size_t bar = std::min(deps.find('|', start), deps.size());
        std::string dir = deps.substr(start, bar - start);
        if (!dir.empty() && dir != "/usr/include" && dir != "/usr/local/include") plan.command.push_back("-I" + dir);
        start = bar + 1;
    }
    plan.command.insert(plan.command.end(), options.extra_flags.begin(),
                        options.extra_flags.end());
    // KILN_CXXFLAGS: the user's extra words for every kernel compile (-I/opt/xsimd/include).
    if (const char* user = std::getenv("KILN_CXXFLAGS"); user && *user)
        for (const std::string& word : split_words(user)) plan.command.push_back(word);
    std::string context = join({kCacheFormat, version, join(plan.command, " "),
                                cache_host_fingerprint(), header_fingerprint(options)},
                               std::string(1, '\0'));
    plan.key = hex64(fnv1a64(source + '\0' + context));
    plan.pch_key = hex64(fnv1a64(std::string(kPchText) + '\0' + context));
    return plan;
}

// ---- precompiled header

// Called with pch_mutex held. Kernels compile without the PCH from now on in this process.
void give_up_pch(const BuildPlan& plan, const ProcessResult& result) {
    state().pch_failed.insert(plan.pch_key);
    update_stats([](ToolchainStats& stats) { stats.pch_failures++; });
    static bool warned = false;  // guarded by pch_mutex
    if (std::exchange(warned, true)) return;
    std::cerr << "kiln: warning: codegen: the precompiled header failed; compiling kernels "
                 "without it (slower). Compiler said:\n"
              << first_lines(result.output, 10);
}

ProcessResult compile_pch(const BuildPlan& plan, const fs::path& header, const fs::path& gch) {
    TempFile temp{unique_temp_path(gch)};
    std::vector<std::string> argv = plan.command;
    argv.insert(argv.end(), {"-x", "c++-header", header.string(), "-o", temp.path.string()});
    update_stats([](ToolchainStats& stats) { stats.pch_builds++; });
    ProcessResult result = run_compiler(argv);
    if (succeeded(result)) cache_publish(temp.path, gch);
    return result;
}

// The header to -include (the compiler finds <header>.gch beside it), or nullopt: no PCH.
std::optional<fs::path> ensure_pch(const fs::path& dir, const BuildPlan& plan) {
    ToolchainState& s = state();
    std::lock_guard lock(s.pch_mutex);
    if (s.pch_failed.count(plan.pch_key) != 0) return std::nullopt;
    fs::path header = dir / ("kiln_pch-" + plan.pch_key + ".h");
    fs::path gch = header.string() + ".gch";
    if (s.pch_verified.count(gch.string()) != 0 && fs::exists(gch)) return header;
    CacheLock other_processes(header.string() + ".lock");
    // Rewrite the header only if wrong: clang rejects a PCH whose header's mtime changed.
    bool header_ok = read_file(header) == kPchText;
    if (!header_ok) write_file_atomic(header, kPchText);
    if (!header_ok || !cache_entry_valid(gch)) {
        if (fs::exists(cache_meta_path(gch))) {  // there was an entry, and it was bad
            cache_entry_remove(gch);
            update_stats([](ToolchainStats& stats) { stats.rebuilds_corrupt++; });
        }
        ProcessResult result = compile_pch(plan, header, gch);
        if (!succeeded(result)) {
            give_up_pch(plan, result);
            return std::nullopt;
        }
    }
    s.pch_verified.insert(gch.string());  // full path: tests switch KILN_CACHE_DIR
    return header;
}

// ---- kernels

[[noreturn]] void fail_compile(const ProcessResult& result, const fs::path& source,
                               const std::vector<std::string>& argv) {
    std::string status = result.spawn_errno != 0
                             ? std::string("could not start: ") + std::strerror(result.spawn_errno)
                             : "exit status " + std::to_string(result.exit_status);
    fail("codegen: C++ compile failed (", status, ")\n  source kept at: ", source.string(),
         "\n  command: ", join(argv, " "), "\n", first_lines(result.output, kErrorLines));
}

std::vector<std::string> kernel_command(const BuildPlan& plan, const std::optional<fs::path>& pch,
                                        const fs::path& source, const fs::path& output) {
    std::vector<std::string> argv = plan.command;
    if (pch) argv.insert(argv.end(), {"-include", pch->string()});
    argv.insert(argv.end(), {"-shared", source.string(), "-o", output.string()});
    return argv;
}

std::shared_ptr<CompiledLibrary> compile_library(const fs::path& dir, const BuildPlan& plan,
                                                 const std::string& source,
                                                 const BuildOptions& options) {
    fs::path source_path = dir / (plan.key + ".cpp");
    write_file_atomic(source_path, source);
    std::optional<fs::path> pch = options.use_pch ? ensure_pch(dir, plan) : std::nullopt;
    fs::path so_path = dir / (plan.key + ".so");
    TempFile temp_file{unique_temp_path(so_path)};
    const fs::path& temp = temp_file.path;
    std::vector<std::string> argv = kernel_command(plan, pch, source_path, temp);
    ProcessResult result = run_compiler(argv);
    if (pch && !succeeded(result) && result.output.find(".gch") != std::string::npos) {
        // The compiler refused the PCH itself (clang does once a header's mtime changes).
        std::unique_lock lock(state().pch_mutex);
        give_up_pch(plan, result);
        cache_entry_remove(pch->string() + ".gch");  // so the next process builds a fresh one
        lock.unlock();
        argv = kernel_command(plan, std::nullopt, source_path, temp);
        result = run_compiler(argv);
    }
    if (!succeeded(result)) fail_compile(result, source_path, argv);
    auto start = std::chrono::steady_clock::now();
    cache_publish(temp, so_path);
    auto library = std::make_shared<CompiledLibrary>(so_path, source_path);
    add_stage_time(Stage::loading,
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    return library;
}

// nullptr on a miss. A corrupt or foreign entry is deleted, never loaded.
std::shared_ptr<CompiledLibrary> load_from_disk(const fs::path& dir, const BuildPlan& plan) {
    fs::path so_path = dir / (plan.key + ".so");
    // A meta without its .so is a writer between its two renames: a miss, not corruption.
    std::error_code ignored;
    if (fs::symlink_status(so_path, ignored).type() == fs::file_type::not_found) return nullptr;
    if (cache_entry_valid(so_path)) {
        try {
            auto library = std::make_shared<CompiledLibrary>(so_path, dir / (plan.key + ".cpp"));
            update_stats([](ToolchainStats& stats) { stats.disk_hits++; });
            return library;
        } catch (const Error&) {
            // Bytes match the meta but dlopen refuses them: treat as corrupt and rebuild.
        }
    }
    cache_entry_remove(so_path);
    update_stats([](ToolchainStats& stats) { stats.rebuilds_corrupt++; });
    return nullptr;
}

std::shared_ptr<CompiledLibrary> find_loaded(const std::string& key) {
    std::lock_guard lock(state().mutex);
    auto found = state().loaded.find(key);
    if (found == state().loaded.end()) return nullptr;
    state().stats.memory_hits++;
    return found->second;
}

// If another thread loaded the same key meanwhile, everyone shares the first one.
std::shared_ptr<CompiledLibrary> remember_loaded(const std::string& key,
                                                 std::shared_ptr<CompiledLibrary> library) {
    std::lock_guard lock(state().mutex);
    return state().loaded.emplace(key, std::move(library)).first->second;
}

}  // namespace

CompiledLibrary::CompiledLibrary(fs::path so_path, fs::path source_path)
    : so_path_(std::move(so_path)), source_path_(std::move(source_path)) {
    handle_ = dlopen(so_path_.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle_ == nullptr) fail("codegen: cannot load '", so_path_.string(), "': ", dlerror());
}

CompiledLibrary::~CompiledLibrary() { dlclose(handle_); }

void* CompiledLibrary::symbol(const std::string& name) const {
    void* address = dlsym(handle_, name.c_str());
    if (address == nullptr)
        fail("codegen: symbol '", name, "' not found in ", so_path_.string(),
             " (is it declared extern \"C\"?); source: ", source_path_.string());
    return address;
}

void* CompiledLibrary::find_symbol(const std::string& name) const {
    return dlsym(handle_, name.c_str());
}

bool is_lean_kernel(const std::string& source) {
    size_t at = source.find(kLeanKernelMarker);
    return at != std::string::npos && at < 512;  // in the first lines, before any kernel
}

std::shared_ptr<CompiledLibrary> build_library(const std::string& source,
                                               const BuildOptions& requested) {
    BuildOptions options = requested;
    if (is_lean_kernel(source)) {
        options.use_pch = false;
        options.extra_flags.push_back("-fno-math-errno");
    }
    BuildPlan plan = make_plan(source, options);
    if (auto library = find_loaded(plan.key)) return library;
    fs::path dir = cache_dir();
    auto start = std::chrono::steady_clock::now();
    std::shared_ptr<CompiledLibrary> library = load_from_disk(dir, plan);
    if (library)
        add_stage_time(
            Stage::loading,
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    else
        library = compile_library(dir, plan, source, options);
    return remember_loaded(plan.key, std::move(library));
}

std::vector<std::shared_ptr<CompiledLibrary>> build_libraries(const std::vector<std::string>& sources,
                                                              const BuildOptions& options) {
    std::vector<std::shared_ptr<CompiledLibrary>> libraries(sources.size());
    std::vector<std::exception_ptr> errors(sources.size());
    auto build = [&](size_t i) {
        try {
            libraries[i] = build_library(sources[i], options);
        } catch (...) {
            errors[i] = std::current_exception();
        }
    };
    std::vector<std::thread> others;
    for (size_t i = 1; i < sources.size(); ++i) others.emplace_back(build, i);
    if (!sources.empty()) build(0);
    for (std::thread& t : others) t.join();
    for (const std::exception_ptr& error : errors)
        if (error) std::rethrow_exception(error);
    return libraries;
}

bool compiler_available() {
    std::string cxx = compiler_command();
    return timed_out_compiler() != cxx && cached_compiler_version(cxx).has_value();
}

std::string compiler_version() { return require_compiler_version(compiler_command()); }

ToolchainStats toolchain_stats() {
    std::lock_guard lock(state().mutex);
    return state().stats;
}

void toolchain_forget_loaded() {
    // Declared before the locks, so destroyed (dlclose) after they are released.
    std::unordered_map<std::string, std::shared_ptr<CompiledLibrary>> dropped;
    std::scoped_lock lock(state().mutex, state().pch_mutex);
    dropped.swap(state().loaded);
    state().pch_verified.clear();  // a new process would hash the PCH again
}

}  // namespace kiln::codegen
