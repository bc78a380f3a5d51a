// assignment_grader [--solution | --expect-fail] N: grades assignment N's test binary,
// found beside this executable (make assignment A=N runs it; so does `kiln grade N`).
#include <cstdlib>
#include <iostream>
#include <string>

#include "assignments/grader/grader.h"

int main(int argc, char** argv) {
    using namespace kiln::assignments;
    GradeOptions options;
    bool solution = false;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--solution")
            solution = true;
        else if (a == "--expect-fail")
            options.expect_fail = true;
        else
            options.assignment = std::atoi(a.c_str());
    }
    if (options.assignment <= 0) {
        std::cerr << "usage: assignment_grader [--solution | --expect-fail] N\n";
        return 2;
    }
    auto dir = std::filesystem::canonical("/proc/self/exe").parent_path();
    options.binary = assignment_binary(dir, options.assignment, solution);
    if (!std::getenv("KILN_CACHE_DIR")) setenv("KILN_CACHE_DIR", (dir / "kernel-cache").c_str(), 0);
    return grade(options, std::cout);
}
