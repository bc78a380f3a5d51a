// KILN_LOGS parsing and KILN_DEBUG_DIR dumps.
#include "jit/log.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <set>
#include <shared_mutex>

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
