// assignment_grader [--solution | --expect-fail | --held-out | --flavour F] [--json FILE]
//                   [--expect-cheat TASK MESSAGE] N
// grades assignment N's test binary, found beside this executable (make assignment A=N runs
// it; so does `kiln grade N`).
#include <cstdlib>
#include <iostream>
#include <string>

#include "assignments/grader/grader.h"

int main(int argc, char** argv) {
    using namespace kiln::assignments;
    GradeOptions options;
    std::string flavour = "student";
    bool solution = false;
    auto usage = [] {
        std::cerr
            << "usage: assignment_grader [--solution | --expect-fail | --held-out | --flavour "
               "F] [--json FILE] [--expect-cheat TASK MESSAGE] N\n";
        return 2;
    };
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        bool more = i + 1 < argc;
        if (a == "--solution")
            solution = true;
        else if (a == "--expect-fail")
            options.expect_fail = true;
        else if (a == "--held-out")
            options.held_out = true;
        else if (a == "--flavour" && more)
            flavour = argv[++i];
        else if (a == "--json" && more)
            options.json_path = argv[++i];
        else if (a == "--expect-cheat" && i + 2 < argc)
            options.expect_cheat_task = argv[++i], options.expect_cheat_message = argv[++i];
        else if (!a.empty() && a[0] != '-')
            options.assignment = std::atoi(a.c_str());
        else
            return usage();
    }
    if (options.assignment <= 0) return usage();
    if (options.held_out)
        flavour = solution ? "heldout_solution" : "heldout";
    else if (solution)
        flavour = "solution";
    auto dir = std::filesystem::canonical("/proc/self/exe").parent_path();
    options.binary = assignment_binary(dir, options.assignment, flavour);
    if (!std::getenv("KILN_CACHE_DIR")) setenv("KILN_CACHE_DIR", (dir / "kernel-cache").c_str(), 0);
    return grade(options, std::cout);
}
