// `kiln grade N`: builds course assignment N's test binary beside the kiln executable (in a
// CMake build folder) and grades it (assignments/README.md): a score per task, as
// `make assignment A=N` prints.
#pragma once
#include <CLI/CLI.hpp>
#include <string>

namespace kiln::cli {

struct GradeCommand {
    CLI::App* command = nullptr;
    int assignment = 0;
    bool solution = false;     // grade the reference solution instead of the student's file
    bool expect_fail = false;  // CI's check that the stubs fail every task
    bool held_out = false;     // instructor mode: public and held-out tests (not in the release)
    std::string json;          // also write Gradescope's results.json to this file
};
void add_grade_command(CLI::App& app, GradeCommand& grade);
int run_grade(const GradeCommand& grade);

}  // namespace kiln::cli
