// The inductor's part of the structured compile log (jit/trace_log.h, docs/trace.md): each
// pipeline stage's output and time, the schedule, and the generated source with its
// provenance map (graph node -> kernel -> generated lines), read off the source and the
// schedule (the emitters name each statement after its node).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "codegen/schedule.h"

namespace kiln::codegen {

// One node's generated lines: 1-based, inclusive [first, last] ranges of the source.
struct Provenance {
    int node = -1;  // the value id: the index of the node in the graph handed to the backend
    std::string kernel;
    std::vector<std::pair<int, int>> lines;
};
// For every node of every generated kernel of `s` (and the inputs it loads), the lines of
// `source` that compute, load or store it, inside that kernel's functions.
std::vector<Provenance> provenance(const Schedule& s, const std::string& source);

// Events ("stage", "schedule", "source"); `uid` is the jit Graph's uid, `id` the inductor's N.
void trace_stage(uint64_t uid, int id, const std::string& stage, double ms,
                 const std::string& text);
void trace_schedule(uint64_t uid, int id, const Schedule& s,
                    const std::vector<std::string>& conv_notes);
void trace_source(uint64_t uid, int id, const Schedule& s, const std::string& source, bool cuda);

}  // namespace kiln::codegen
