// The compile log's shared state, internal to jit/trace_log.cpp (the file, counters) and
// jit/trace_events.cpp (the events of jit/). Include jit/trace_log.h instead.
#pragma once
#include <sys/types.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "jit/trace_log.h"

namespace kiln::jit::trace_log {

// Per compiled function, since the log started.
struct FnStats {
    int number = 0;  // 0, 1, 2 ... in order of first call
    std::string name;
    int64_t calls = 0, hits = 0, records = 0, recompiles = 0, replays = 0, reruns = 0, eager = 0,
            eager_fallbacks = 0;
    std::map<int, std::string> backend_choice;  // backend graph id -> choice
};

struct State {
    std::mutex mu;
    FILE* file = nullptr;
    std::string path;
    int64_t seq = 0;
    int logs_started = 0;  // by process `pid`: its second log in one directory gets a suffix
    pid_t pid = 0;
    std::chrono::steady_clock::time_point start;
    std::map<const void*, FnStats> fns;
    std::vector<FnStats> retired;  // functions whose core died and whose address came back
    std::map<uint64_t, const void*> fn_of_graph;  // graph uid -> compiled function
    std::map<std::tuple<const void*, int, int>, std::string>
        pin_lines;  // (fn, entry, symbol) -> script line
};
State& state();
// Writes one line (the caller holds s.mu); nothing when no log is open.
void emit_locked(State& s, std::string_view ev, const Json& fields);
// The function's stats, or null before its first call in this log (the caller holds s.mu).
FnStats* fn_locked(State& s, const void* fn);

}  // namespace kiln::jit::trace_log
