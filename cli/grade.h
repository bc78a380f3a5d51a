// `kiln grade N`: builds course assignment N's test binary beside the kiln executable (in a
// CMake build folder) and grades it (assignments/README.md): a score per task, as
// `make assignment A=N` prints.
#pragma once
#include <CLI/CLI.hpp>

namespace kiln::cli {

struct GradeCommand {
    CLI::App* command = nullptr;
    int assignment = 0;
    bool solution = false;     // grade the reference solution instead of the student's file
    bool expect_fail = false;  // CI's check that the stubs fail every task
};
void add_grade_command(CLI::App& app, GradeCommand& grade);
int run_grade(const GradeCommand& grade);

}  // namespace kiln::cli
