// The grader (grader.h): one process per test case, so a crash fails one case, not the task.
#include "assignments/grader/grader.h"

#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iomanip>
#include <map>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

namespace kiln::assignments {
namespace {

constexpr int kCaseTimeoutS = 300;  // per test case

struct RunResult {
    int status = 0;      // exit status, or -1 when the process died on a signal
    std::string output;  // stdout and stderr together
};

std::string shell_quote(const std::string& s) {
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
}

RunResult run(const std::string& command) {
    RunResult r;
    FILE* pipe = popen((command + " 2>&1").c_str(), "r");
    if (!pipe) return {-1, "popen failed"};
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) r.output.append(buf, n);
    int st = pclose(pipe);
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return r;
}

// Boost.Test's --list_content: a suite per unindented line, its cases indented below it.
std::map<std::string, std::vector<std::string>> list_cases(const std::string& listing) {
    std::map<std::string, std::vector<std::string>> suites;
    std::istringstream in(listing);
    std::string line, suite;
    while (std::getline(in, line)) {
        size_t indent = line.find_first_not_of(' ');
        if (indent == std::string::npos) continue;
        std::string name = line.substr(indent);
        while (!name.empty() && (name.back() == '*' || name.back() == ' ')) name.pop_back();
        if (indent == 0) {
            suite = name;
            suites[suite];
        } else if (!suite.empty()) {
            suites[suite].push_back(name);
        }
    }
    return suites;
}

// The lines of a failed case's log worth showing a student: its errors, not the banner.
std::string failure_lines(const std::string& log) {
    std::istringstream in(log);
    std::string line, out;
    int kept = 0;
    while (std::getline(in, line) && kept < 4)
        if (line.find("error") != std::string::npos || line.find("TODO") != std::string::npos) {
            out += "      " + line.substr(0, 200) + "\n";
            ++kept;
        }
    return out;
}

std::string task_label(const std::string& suite) {  // task_2_3 -> 2.3
    std::string s = suite.substr(5);
    for (char& c : s)
        if (c == '_') c = '.';
    return s;
}

// One test case in its own process. `timeout` ends a case that hangs (a loop in student code).
RunResult run_case(const std::string& bin, const std::string& suite, const std::string& c) {
    return run("timeout " + std::to_string(kCaseTimeoutS) + " " + bin + " --run_test=" + suite +
               "/" + c +
               " --log_level=error --report_level=no --catch_system_errors=no --color_output=no");
}

struct TaskScore {
    int passed = 0, total = 0,
        crashes = 0;  // crashes: cases that neither passed nor failed a check
    std::string why;  // the failed cases and their first errors
};

TaskScore run_task(const std::string& bin, const std::string& suite,
                   const std::vector<std::string>& cases) {
    TaskScore score;
    score.total = int(cases.size());
    for (const std::string& c : cases) {
        RunResult r = run_case(bin, suite, c);
        if (r.status == 0) {
            ++score.passed;
            continue;
        }
        // 201: Boost.Test's "a test failed" (a check or an exception); 124: timeout's.
        score.crashes += r.status != 201;
        std::string note = r.status == 201 ? "" : r.status == 124 ? "  (timed out)" : "  (crashed)";
        score.why += "    " + c + note + "\n" + failure_lines(r.output);
    }
    return score;
}

// A report suite's printed lines (those indented by two spaces), or why there are none.
std::string run_report(const std::string& bin, const std::string& suite,
                       const std::vector<std::string>& cases) {
    std::string out;
    for (const std::string& c : cases) {
        RunResult r = run_case(bin, suite, c);
        std::istringstream lines(r.output);
        std::string line;
        while (std::getline(lines, line))
            if (line.rfind("  ", 0) == 0) out += line + "\n";
        if (r.status != 0) out += "  " + suite + "/" + c + ": not available until the tasks pass\n";
    }
    return out;
}

}  // namespace

std::filesystem::path assignment_binary(const std::filesystem::path& dir, int assignment,
                                        bool solution) {
    return dir /
           ("assignment_" + std::to_string(assignment) + (solution ? "_solution" : "_student"));
}

int grade(const GradeOptions& options, std::ostream& out) {
    std::string bin = shell_quote(options.binary.string());
    RunResult listing = run(bin + " --list_content");
    if (listing.status != 0) {
        out << "grade: cannot run " << options.binary
            << " (build it first: make assignment A=" << options.assignment << ")\n"
            << listing.output;
        return 2;
    }
    auto suites = list_cases(listing.output);
    auto start = std::chrono::steady_clock::now();
    out << "assignment " << options.assignment << ": " << options.binary.filename().string()
        << (options.expect_fail ? "  (stubs: every task must fail)" : "") << "\n";
    out << std::left << std::setw(8) << "task" << std::setw(10) << "tests"
        << "result\n";
    int tasks = 0, tasks_passed = 0, tests = 0, tests_passed = 0, crashes = 0;
    std::string reports;
    for (const auto& [suite, cases] : suites) {
        if (suite.rfind("report_", 0) == 0) reports += run_report(bin, suite, cases);
        if (suite.rfind("task_", 0) != 0) continue;
        TaskScore score = run_task(bin, suite, cases);
        bool pass = score.passed == score.total && score.total > 0;
        ++tasks, tasks_passed += pass, tests += score.total, tests_passed += score.passed;
        crashes += score.crashes;
        std::string passed = std::to_string(score.passed) + "/" + std::to_string(score.total);
        out << std::setw(8) << task_label(suite) << std::setw(10) << passed
            << (pass ? "PASS" : "FAIL") << "\n";
        if (!options.expect_fail) out << score.why;
    }
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    out << "total: " << tasks_passed << "/" << tasks << " tasks, " << tests_passed << "/" << tests
        << " tests (" << std::fixed << std::setprecision(1) << seconds << " s)\n";
    if (!reports.empty()) out << "reports (not graded):\n" << reports;
    if (tasks == 0) return 2;
    if (options.expect_fail) {
        bool ok = tasks_passed == 0 && crashes == 0;
        out << (ok ? "stubs: every task fails, as it must\n"
                   : "stubs: a task passes (or crashes) without its code: its tests don't check "
                     "it\n");
        return ok ? 0 : 1;
    }
    return tasks_passed == tasks ? 0 : 1;
}

}  // namespace kiln::assignments
