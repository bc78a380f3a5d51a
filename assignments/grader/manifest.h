// An assignment's manifest (assignments/aN/manifest.txt): its tasks, their points, the
// student functions that make up each task, and the kiln functions each task must not call
// (kiln's own implementation of what the task asks for), each with the reason.
#pragma once
#include <string>
#include <vector>

#include "assignments/grader/calls.h"

namespace kiln::assignments {

struct ManifestTask {
    std::string id;                      // "4.3"
    double points = 0;                   // Gradescope's max_score
    std::vector<std::string> functions;  // "student::partition"; a class covers its members
};

struct ForbiddenCall {
    std::vector<std::string> tasks;  // "4.3", or "*" for every task
    std::string function;            // "kiln::jit::aot::partition"; a class covers its members
    std::string why;                 // "task 4.3 asks you to write the partition; ..."
};

struct Manifest {
    std::string path;
    std::vector<ManifestTask> tasks;
    std::vector<ForbiddenCall> forbidden;
    // Functions kiln's own headers refer to from every file's static initializer (an inline
    // variable that registers a backend): such a reference is the header's, not the task's.
    std::vector<std::string> header_initializers;
    const ManifestTask* task(const std::string& id) const;
};

// Reads a manifest; throws std::runtime_error naming the file and line of a bad entry.
//   task ID POINTS FUNCTION...
//   forbid ID[,ID...]|* FUNCTION : WHY
//   header-initializer FUNCTION : WHERE
Manifest load_manifest(const std::string& path);

// The forbidden calls task `id`'s code makes, one line each: "calls F (via CHAIN): WHY".
// A task whose functions the objects don't define gets one line saying so.
std::vector<std::string> forbidden_calls(const Manifest& manifest, const CallGraph& calls,
                                         const std::string& id);

}  // namespace kiln::assignments
