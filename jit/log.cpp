// KILN_LOGS parsing and KILN_DEBUG_DIR dumps.
#include "jit/log.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <set>
#include <shared_mutex>

#include "tensor/cuda_runtime.h"

namespace kiln {
namespace {

struct LogConfig {
    std::shared_mutex mu;
    std::set<std::string, std::less<>> enabled;
    bool all = false;
    bool loaded = false;
};
LogConfig& config() {
    static LogConfig c;
    return c;
}

void load_locked(LogConfig& c) {
    c.enabled.clear();
    c.all = false;
    const char* env = std::getenv("KILN_LOGS");
    std::string list = env ? env : "";
    size_t start = 0;
    while (start <= list.size()) {
        size_t comma = list.find(',', start);
        std::string item = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        if (!item.empty() && item[0] == '+') item.erase(0, 1);  // PyTorch's "+dynamo" spelling
        if (item == "all") c.all = true;
        if (!item.empty()) c.enabled.insert(item);
        if (comma == std::string::npos) break;
        start = comma + 1;
    }
    c.loaded = true;
}

}  // namespace

bool log_enabled(std::string_view category) {
    LogConfig& c = config();
    {
        std::shared_lock lock(c.mu);
        if (c.loaded) return c.all || c.enabled.count(category) > 0;
    }
    std::unique_lock lock(c.mu);
    if (!c.loaded) load_locked(c);
    return c.all || c.enabled.count(category) > 0;
}

void log_event(std::string_view category, const std::string& text) {
    if (!log_enabled(category)) return;
    static std::mutex print_mu;  // one event per line even from many threads
    std::lock_guard lock(print_mu);
    std::cerr << "[kiln:" << category << "] " << text << (text.ends_with('\n') ? "" : "\n");
}

void log_reload() {
    std::unique_lock lock(config().mu);
    load_locked(config());
}

namespace {

struct StageClock {
    std::mutex mu;
    StageTotals totals;
    cuda::detail::CompileStats cuda_base;  // CUDA's own counters at the last reset
    bool report_registered = false;
};
StageClock& stage_clock() {
    static StageClock* clock = new StageClock;  // leaked: background builds may add at exit
    return *clock;
}

void print_stage_totals() { log_event("compile", stage_totals_text()); }

// Planning, compiling, loading, first runs and waits for background builds added so far by
// this thread: what of a first call (on this thread) was not tracing.
thread_local double t_accounted_seconds = 0;

}  // namespace

const char* stage_name(Stage stage) {
    static const char* const names[kStageCount] = {"tracing", "planning", "compiling", "loading",
                                                   "first run"};
    return names[int(stage)];
}

void add_stage_time(Stage stage, double seconds) {
    if (stage != Stage::tracing) t_accounted_seconds += seconds;
    StageClock& c = stage_clock();
    std::lock_guard lock(c.mu);
    c.totals.seconds[int(stage)] += seconds;
    c.totals.events[int(stage)]++;
    if (!c.report_registered && log_enabled("compile")) {
        c.report_registered = true;
        std::atexit(print_stage_totals);
    }
}

void add_build_wait(double seconds) {
    t_accounted_seconds += seconds;
    StageClock& c = stage_clock();
    std::lock_guard lock(c.mu);
    c.totals.waited_seconds += seconds;
}

StageTotals stage_totals() {
    StageClock& c = stage_clock();
    std::lock_guard lock(c.mu);
    StageTotals t = c.totals;
    cuda::detail::CompileStats now = cuda::detail::compile_stats();
    t.seconds[int(Stage::compiling)] += now.nvrtc_seconds - c.cuda_base.nvrtc_seconds;
    t.events[int(Stage::compiling)] += now.nvrtc_compiles - c.cuda_base.nvrtc_compiles;
    t.seconds[int(Stage::loading)] += now.load_seconds - c.cuda_base.load_seconds;
    t.events[int(Stage::loading)] += now.module_loads - c.cuda_base.module_loads;
    return t;
}

double accounted_stage_seconds() {
    cuda::detail::CompileStats cuda = cuda::detail::compile_stats();
    return t_accounted_seconds + cuda.nvrtc_seconds + cuda.load_seconds;
}

void reset_stage_totals() {
    StageClock& c = stage_clock();
    std::lock_guard lock(c.mu);
    c.totals = StageTotals{};
    c.cuda_base = cuda::detail::compile_stats();
}

std::string stage_totals_text() {
    StageTotals t = stage_totals();
    std::string text = "first calls, per stage:";
    double total = 0;
    for (int k = 0; k < kStageCount; ++k) {
        char part[96];
        std::snprintf(part, sizeof part, "%s %s %.3f s (%lld)", k ? "," : "", stage_name(Stage(k)),
                      t.seconds[k], static_cast<long long>(t.events[k]));
        text += part;
        total += t.seconds[k];
    }
    char end[160];
    std::snprintf(
        end, sizeof end,
        "; total %.3f s (compiles may overlap); first calls waited %.3f s for background builds",
        total, t.waited_seconds);
    return text + end;
}

namespace jit {

std::string debug_dir() {
    const char* env = std::getenv("KILN_DEBUG_DIR");
    return env ? env : "";
}

void debug_dump(const std::string& name, const std::string& text) {
    std::string dir = debug_dir();
    if (dir.empty()) return;
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    std::ofstream(std::filesystem::path(dir) / name) << text;
}

}  // namespace jit
}  // namespace kiln
