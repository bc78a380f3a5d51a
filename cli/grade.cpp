// `kiln grade N` (cli/grade.h): builds the assignment beside kiln, then runs assignments/grader.
#include "cli/grade.h"

#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "assignments/grader/grader.h"

namespace kiln::cli {

void add_grade_command(CLI::App& app, GradeCommand& grade) {
    grade.command = app.add_subcommand(
        "grade", "build and grade course assignment N, a score per task (as make assignment A=N)");
    grade.command->add_option("assignment", grade.assignment, "the assignment's number")
        ->required();
    grade.command->add_flag("--solution", grade.solution, "grade the reference solution");
    grade.command->add_flag("--expect-fail", grade.expect_fail,
                            "pass only if every task fails (CI's check of the stubs)");
    grade.command->add_flag("--held-out", grade.held_out,
                            "instructor mode: add the held-out tests, drawn from the seed "
                            "KILN_HELDOUT_SEED or a new one (needs a checkout with "
                            "assignments/heldout/, which the student release lacks)");
    grade.command->add_option("--json", grade.json,
                              "also write Gradescope's results.json (points from the manifest)");
}

int run_grade(const GradeCommand& grade) {
    auto dir = std::filesystem::canonical("/proc/self/exe").parent_path();
    std::string flavour = grade.held_out   ? (grade.solution ? "heldout_solution" : "heldout")
                          : grade.solution ? "solution"
                                           : "student";
    auto binary = assignments::assignment_binary(dir, grade.assignment, flavour);
    // In a CMake build folder, bring the binary up to date first, as `make assignment` does.
    if (std::filesystem::exists(dir / "CMakeCache.txt")) {
        std::string build =
            "cmake --build '" + dir.string() + "' --target " + binary.filename().string();
        if (std::system(build.c_str()) != 0) {
            std::cerr << "kiln grade: building " << binary.filename().string() << " failed\n";
            return 2;
        }
    }
    if (!std::getenv("KILN_CACHE_DIR")) setenv("KILN_CACHE_DIR", (dir / "kernel-cache").c_str(), 0);
    assignments::GradeOptions options{.assignment = grade.assignment,
                                      .binary = binary,
                                      .expect_fail = grade.expect_fail,
                                      .held_out = grade.held_out,
                                      .json_path = grade.json};
    return assignments::grade(options, std::cout);
}

}  // namespace kiln::cli
