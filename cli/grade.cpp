// `kiln grade N` (cli/grade.h): the grader of assignments/grader, found binaries beside kiln.
#include "cli/grade.h"

#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "assignments/grader/grader.h"

namespace kiln::cli {

void add_grade_command(CLI::App& app, GradeCommand& grade) {
    grade.command = app.add_subcommand(
        "grade", "grade course assignment N (build it first: make assignment A=N)");
    grade.command->add_option("assignment", grade.assignment, "the assignment's number")
        ->required();
    grade.command->add_flag("--solution", grade.solution, "grade the reference solution");
    grade.command->add_flag("--expect-fail", grade.expect_fail,
                            "pass only if every task fails (CI's check of the stubs)");
}

int run_grade(const GradeCommand& grade) {
    auto dir = std::filesystem::canonical("/proc/self/exe").parent_path();
    if (!std::getenv("KILN_CACHE_DIR")) setenv("KILN_CACHE_DIR", (dir / "kernel-cache").c_str(), 0);
    assignments::GradeOptions options{
        .assignment = grade.assignment,
        .binary = assignments::assignment_binary(dir, grade.assignment, grade.solution),
        .expect_fail = grade.expect_fail};
    return assignments::grade(options, std::cout);
}

}  // namespace kiln::cli
