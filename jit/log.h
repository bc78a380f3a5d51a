// JIT logging: KILN_LOGS=graphs,guards,breaks,recompiles,compile prints those events as they
// happen (to stderr); KILN_DEBUG_DIR=<dir> dumps every compiled graph (text and DOT) to files.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace kiln {

// True when `category` is listed in KILN_LOGS ("all" enables every category).
bool log_enabled(std::string_view category);
// Prints `[kiln:category] text` to stderr when the category is enabled.
void log_event(std::string_view category, const std::string& text);
// Re-reads KILN_LOGS (tests set it with setenv, then call this).
void log_reload();

// Where compiled functions' first calls spend their time, summed over the process. With
// KILN_LOGS=compile the totals are printed at exit (stage_totals_text):
//   tracing    recording fn (it runs eagerly meanwhile) and building the joint graph: a
//              first call's time less what the backends took and the compiled code's runs
//   planning   the inductor's lower/fuse/schedule/emit (codegen/pipeline.cpp)
//   compiling  the C++ compiler and NVRTC (wall time; builds in the background may overlap)
//   loading    kernel cache checks and reads, dlopen, cuModuleLoadData
//   first_run  the first call of each compiled graph
enum class Stage { tracing, planning, compiling, loading, first_run };
inline constexpr int kStageCount = 5;
const char* stage_name(Stage stage);
void add_stage_time(Stage stage, double seconds);
struct StageTotals {
    double seconds[kStageCount] = {};
    int64_t events[kStageCount] = {};  // how many times each stage ran
    double waited_seconds = 0;         // calls waiting for background builds (add_build_wait)
};
// Totals since start (or the last reset), NVRTC's compiles and CUDA module loads included.
StageTotals stage_totals();
void reset_stage_totals();  // for tests
// Seconds of planning, compiling, loading, first runs and build waits added so far by this
// thread, NVRTC's and CUDA module loads' included: a first call's time less the growth of
// this is its tracing, a compiled graph's first call less it is its first run.
double accounted_stage_seconds();
// A call waited this long for a background build (codegen::launch): no stage of its own (the
// build's compiler time is "compiling"), shown beside the totals.
void add_build_wait(double seconds);
// "first calls, per stage: tracing 1.234 s (2), planning ..., total 4.567 s".
std::string stage_totals_text();

namespace jit {
// The directory of KILN_DEBUG_DIR, or "" when unset.
std::string debug_dir();
// Writes `text` to KILN_DEBUG_DIR/<name> when the directory is set.
void debug_dump(const std::string& name, const std::string& text);
}  // namespace jit

}  // namespace kiln
