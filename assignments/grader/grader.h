// The assignments' grader: runs a Boost.Test binary one test case at a time, groups the
// cases by task (suites named task_N_K) and prints a score per task (assignments/README.md).
#pragma once
#include <filesystem>
#include <iosfwd>

namespace kiln::assignments {

struct GradeOptions {
    int assignment = 0;            // N of assignments/aN
    std::filesystem::path binary;  // assignment_N_student or assignment_N_solution
    bool expect_fail = false;      // CI's check of the stubs: every task must fail
};

// Prints the table to `out`. Returns 0 when every task passes (expect_fail: when every
// task has a failing test and no test crashed), else 1; 2 when the binary can't be run.
int grade(const GradeOptions& options, std::ostream& out);

// The test binary of assignment N beside `dir` (the build folder): student or solution.
std::filesystem::path assignment_binary(const std::filesystem::path& dir, int assignment,
                                        bool solution);

}  // namespace kiln::assignments
