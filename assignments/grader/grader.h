// The assignments' grader: runs a Boost.Test binary one test case at a time, groups the
// cases by task (suites named task_N_K), checks each task's code for calls the manifest
// forbids (manifest.h, calls.h) and prints a score per task (assignments/README.md).
#pragma once
#include <filesystem>
#include <iosfwd>
#include <string>
#include <vector>

namespace kiln::assignments {

struct GradeOptions {
    int assignment = 0;            // N of assignments/aN
    std::filesystem::path binary;  // assignment_N_<flavour>; BINARY.grading lies beside it
    bool expect_fail = false;      // CI's check of the stubs: every task must fail
    bool held_out = false;         // the binary has the held-out tests (instructor mode)
    std::string json_path;         // also write Gradescope's results.json here
    // CI's check of a planted cheat: pass only when this task fails with this message.
    std::string expect_cheat_task, expect_cheat_message;
};

// Prints the table to `out`. Returns 0 when every task passes (expect_fail: when every
// task has a failing test and no test crashed; expect_cheat_task: when that task fails
// naming the message), else 1; 2 when the binary, its manifest or its objects can't be read.
int grade(const GradeOptions& options, std::ostream& out);

// One task's line of Gradescope's results.json.
struct TaskResult {
    std::string name;  // "task 4.3"
    double score = 0, max_score = 0;
    std::string output;  // tests passed, and why it fails
    bool passed = false;
};
// Gradescope's results.json: {"score", "output", "tests": [{"name", "score", "max_score",
// "output", "visibility"}]}.
void write_results_json(const std::vector<TaskResult>& tasks, const std::string& output,
                        const std::string& visibility, std::ostream& out);

// The test binary of assignment N beside `dir` (the build folder): flavour "student",
// "solution", "heldout", "heldout_solution" or a planted cheat's "cheat_NAME".
std::filesystem::path assignment_binary(const std::filesystem::path& dir, int assignment,
                                        const std::string& flavour);

}  // namespace kiln::assignments
