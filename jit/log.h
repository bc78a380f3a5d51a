// JIT logging: KILN_LOGS=graphs,guards,breaks,recompiles prints those events as they happen
// (to stderr); KILN_DEBUG_DIR=<dir> dumps every compiled graph (text and DOT) to files.
#pragma once
#include <string>
#include <string_view>

namespace kiln {

// True when `category` is listed in KILN_LOGS ("all" enables every category).
bool log_enabled(std::string_view category);
// Prints `[kiln:category] text` to stderr when the category is enabled.
void log_event(std::string_view category, const std::string& text);
// Re-reads KILN_LOGS (tests set it with setenv, then call this).
void log_reload();

namespace jit {
// The directory of KILN_DEBUG_DIR, or "" when unset.
std::string debug_dir();
// Writes `text` to KILN_DEBUG_DIR/<name> when the directory is set.
void debug_dump(const std::string& name, const std::string& text);
}  // namespace jit

}  // namespace kiln
