// The grader (grader.h): one process per test case, so a crash fails one case, not the task.
#include "assignments/grader/grader.h"

#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <map>
#include <memory>
#include <ostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "assignments/grader/manifest.h"

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

std::string suite_of(const std::string& task) {  // 2.3 -> task_2_3
    std::string suite = "task_" + task;
    for (char& c : suite)
        if (c == '.') c = '_';
    return suite;
}

std::string task_label(const std::string& suite) {  // task_2_3 -> 2.3
    std::string s = suite.substr(5);
    for (char& c : s)
        if (c == '_') c = '.';
    return s;
}

// One test case in its own process. `timeout` ends a case that hangs (a loop in student code).
// Every Boost.Test option the verdict reads is on the command line, which overrides the
// environment: code that sets BOOST_TEST_RESULT_CODE=no (or BOOST_TEST_LOG_LEVEL) before
// main cannot turn a failed case into exit status 0.
RunResult run_case(const std::string& bin, const std::string& suite, const std::string& c) {
    return run("timeout " + std::to_string(kCaseTimeoutS) + " " + bin + " --run_test=" + suite +
               "/" + c +
               " --log_level=test_suite --report_level=no --result_code=yes "
               "--catch_system_errors=no --color_output=no --log_format=HRF --log_sink=stdout");
}

struct TaskScore {
    int passed = 0, total = 0, skipped = 0,
        crashes = 0;  // crashes: cases that neither passed nor failed a check
    std::string why;  // the failed cases and their first errors
};

// How one case ended. A pass needs Boost.Test's own word that the case ran to its end, so
// code that ends the process early with status 0 does not pass (the manifests forbid exit
// too); a case whose precondition failed (no GPU) is a skip, with its reason.
enum class CaseEnd { passed, skipped, failed, crashed, timed_out, cut_short };
CaseEnd case_end(const RunResult& r, const std::string& suite, const std::string& c) {
    if (r.status == 0) {
        if (r.output.find("Test case \"" + suite + "/" + c + "\" is skipped because") !=
            std::string::npos)
            return CaseEnd::skipped;
        return r.output.find("Leaving test case \"" + c + "\"") != std::string::npos
                   ? CaseEnd::passed
                   : CaseEnd::cut_short;
    }
    // 201: Boost.Test's "a test failed" (a check or an exception); 124: timeout's.
    return r.status == 201   ? CaseEnd::failed
           : r.status == 124 ? CaseEnd::timed_out
                             : CaseEnd::crashed;
}

std::string skip_reason(const std::string& log) {
    size_t at = log.find("SKIPPED (");
    if (at == std::string::npos) return "skipped";
    return log.substr(at, log.find('\n', at) - at);
}

// The device node of an NVIDIA GPU on this machine, or "" without one. A case that skips
// for want of a GPU on a machine that has one lost it inside the test process (student
// code can make the driver fail to load: file descriptors used up, memory limits), so
// there a skip fails. KILN_GRADER_GPU_DEVICE names another node (CI checks the rule with
// /dev/null on a machine without a GPU).
std::string gpu_device_node() {
    const char* env = std::getenv("KILN_GRADER_GPU_DEVICE");
    std::string node = env && *env ? env : "/dev/nvidia0";
    std::error_code ec;
    return std::filesystem::exists(node, ec) ? node : "";
}

TaskScore run_task(const std::string& bin, const std::string& suite,
                   const std::vector<std::string>& cases) {
    TaskScore score;
    score.total = int(cases.size());
    const std::string gpu = gpu_device_node();
    for (const std::string& c : cases) {
        RunResult r = run_case(bin, suite, c);
        CaseEnd end = case_end(r, suite, c);
        if (end == CaseEnd::passed) {
            ++score.passed;
            continue;
        }
        if (end == CaseEnd::skipped && !gpu.empty()) {
            score.why += "    " + c + "  (skipped on a machine with a GPU, " + gpu +
                         ": the test process lost it; " + skip_reason(r.output) + ")\n";
            continue;
        }
        if (end == CaseEnd::skipped) {
            ++score.skipped;
            score.why += "    " + c + ": " + skip_reason(r.output) + "\n";
            continue;
        }
        score.crashes += end != CaseEnd::failed;
        std::string note = end == CaseEnd::failed      ? ""
                           : end == CaseEnd::timed_out ? "  (timed out)"
                           : end == CaseEnd::cut_short
                               ? "  (ended with status 0 before the test case finished: the "
                                 "process was ended early)"
                               : "  (crashed)";
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
                                        const std::string& flavour) {
    return dir / ("assignment_" + std::to_string(assignment) + "_" + flavour);
}

namespace {

// What CMake wrote beside the binary (assignments.cmake): the manifest and the object files.
struct GradingFiles {
    std::string manifest, student;
    std::vector<std::string> others;
};
GradingFiles read_grading_file(const std::filesystem::path& path) {
    std::ifstream in(path);
    if (!in)
        throw std::runtime_error("grader: no " + path.string() +
                                 " (CMake writes it beside the binary: rebuild)");
    GradingFiles g;
    std::string kind, value;
    while (in >> kind >> std::ws && std::getline(in, value)) {
        if (kind == "manifest") g.manifest = value;
        if (kind == "student") g.student = value;
        if (kind == "object") g.others.push_back(value);
    }
    if (g.manifest.empty() || g.student.empty())
        throw std::runtime_error("grader: " + path.string() +
                                 " names no manifest or student object");
    return g;
}

std::string json_string(const std::string& s) {
    std::string out = "\"";
    for (unsigned char c : s) {
        if (c == '"' || c == '\\') {
            out += '\\';
            out += char(c);
        } else if (c == '\n') {
            out += "\\n";
        } else if (c < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", c);
            out += buf;
        } else {
            out += char(c);
        }
    }
    return out + "\"";
}

}  // namespace

void write_results_json(const std::vector<TaskResult>& tasks, const std::string& output,
                        const std::string& visibility, std::ostream& out) {
    double score = 0;
    for (const TaskResult& t : tasks) score += t.score;
    out << "{\n  \"score\": " << score << ",\n  \"output\": " << json_string(output)
        << ",\n  \"tests\": [";
    for (size_t i = 0; i < tasks.size(); ++i) {
        const TaskResult& t = tasks[i];
        out << (i ? "," : "") << "\n    {\"name\": " << json_string(t.name)
            << ", \"score\": " << t.score << ", \"max_score\": " << t.max_score
            << ", \"output\": " << json_string(t.output)
            << ", \"visibility\": " << json_string(visibility) << "}";
    }
    out << "\n  ]\n}\n";
}

namespace {

// One task's row of the table, and what the totals need from it.
struct TaskRow {
    TaskResult result;
    bool skipped = false;  // every case skipped (a GPU task without a GPU)
    int tests = 0, tests_passed = 0, crashes = 0;
};

TaskRow grade_task(const std::string& bin, const std::vector<std::string>& cases,
                   const Manifest& manifest, const CallGraph& calls, const ManifestTask& task,
                   const GradeOptions& options, std::ostream& out) {
    TaskScore score = run_task(bin, suite_of(task.id), cases);
    std::vector<std::string> forbidden = forbidden_calls(manifest, calls, task.id);
    for (const std::string& f : forbidden) score.why += "    forbidden: " + f + "\n";
    // A task passes when every case that ran passed (cases that need a GPU skip on a
    // machine without one); a task whose every case skipped is SKIP, not a pass.
    bool skip = score.skipped == score.total && forbidden.empty();
    bool pass =
        score.passed + score.skipped == score.total && score.passed > 0 && forbidden.empty();
    std::string passed = std::to_string(score.passed) + "/" + std::to_string(score.total);
    out << std::setw(8) << task.id << std::setw(10) << passed
        << (pass   ? "PASS"
            : skip ? "SKIP"
                   : "FAIL")
        << (score.skipped && !skip ? "  (" + std::to_string(score.skipped) + " skipped)" : "")
        << "\n";
    if (!options.expect_fail) out << score.why;
    TaskRow row;
    row.result = {"task " + task.id, pass ? task.points : 0, task.points,
                  passed + " tests pass" + (score.why.empty() ? "" : "\n" + score.why), pass};
    row.skipped = skip;
    row.tests = score.total, row.tests_passed = score.passed, row.crashes = score.crashes;
    return row;
}

// The exit status: CI's checks of a planted cheat or of the stubs, or all tasks passing.
int verdict(const GradeOptions& options, const std::vector<TaskRow>& rows, std::ostream& out) {
    int passed = 0, skipped = 0, crashes = 0;
    for (const TaskRow& r : rows)
        passed += r.result.passed, skipped += r.skipped, crashes += r.crashes;
    if (!options.expect_cheat_task.empty()) {
        const std::string& task = options.expect_cheat_task;
        const std::string& message = options.expect_cheat_message;
        for (const TaskRow& r : rows)
            if (r.result.name == "task " + task) {
                bool caught =
                    !r.result.passed && r.result.output.find(message) != std::string::npos;
                out << "cheat: task " << task
                    << (caught ? " fails, naming \"" + message + "\"\n"
                               : " does not fail naming \"" + message +
                                     "\": the grader let a cheat through\n");
                return caught ? 0 : 1;
            }
        out << "cheat: no task " << task << "\n";
        return 2;
    }
    if (options.expect_fail) {
        bool ok = passed == 0 && crashes == 0;
        out << (ok ? "stubs: every task fails, as it must\n"
                   : "stubs: a task passes (or crashes) without its code: its tests don't check "
                     "it\n");
        return ok ? 0 : 1;
    }
    return passed + skipped == int(rows.size()) ? 0 : 1;
}

// "held-out tests, seed S ...", choosing S when the instructor did not.
std::string held_out_seed_line(const GradeOptions& options) {
    if (!options.held_out) return "";
    if (!std::getenv("KILN_HELDOUT_SEED")) {
        auto now = std::chrono::system_clock::now().time_since_epoch().count();
        setenv("KILN_HELDOUT_SEED", std::to_string(now % 1000000007).c_str(), 0);
    }
    std::string seed = std::getenv("KILN_HELDOUT_SEED");
    return "held-out tests, seed " + seed + " (KILN_HELDOUT_SEED=" + seed +
           " grades the same tests again)\n";
}

}  // namespace

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
    std::filesystem::path grading_path = options.binary;
    grading_path += ".grading";
    Manifest manifest;
    std::unique_ptr<CallGraph> calls;
    try {
        GradingFiles files = read_grading_file(grading_path);
        manifest = load_manifest(files.manifest);
        calls = std::make_unique<CallGraph>(files.student, files.others);
        for (const auto& [suite, cases] : suites)
            if (suite.rfind("task_", 0) == 0 && !manifest.task(task_label(suite)))
                throw std::runtime_error("grade: " + manifest.path + " has no task " +
                                         task_label(suite));
        for (const ManifestTask& task : manifest.tasks)
            if (!suites.count(suite_of(task.id)))
                throw std::runtime_error("grade: " + manifest.path + " lists task " + task.id +
                                         ", which the binary has no tests for");
    } catch (const std::exception& e) {
        out << e.what() << "\n";
        return 2;
    }
    auto start = std::chrono::steady_clock::now();
    std::string seed_line = held_out_seed_line(options);
    out << "assignment " << options.assignment << ": " << options.binary.filename().string()
        << (options.expect_fail ? "  (stubs: every task must fail)" : "") << "\n"
        << seed_line << std::left << std::setw(8) << "task" << std::setw(10) << "tests"
        << "result\n";
    std::vector<TaskRow> rows;
    int tests = 0, tests_passed = 0, tasks_passed = 0, tasks_skipped = 0;
    for (const ManifestTask& task : manifest.tasks) {
        rows.push_back(
            grade_task(bin, suites.at(suite_of(task.id)), manifest, *calls, task, options, out));
        tests += rows.back().tests, tests_passed += rows.back().tests_passed;
        tasks_passed += rows.back().result.passed, tasks_skipped += rows.back().skipped;
    }
    std::string reports;
    for (const auto& [suite, cases] : suites)
        if (suite.rfind("report_", 0) == 0) reports += run_report(bin, suite, cases);
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::ostringstream total;
    total << "total: " << tasks_passed << "/" << rows.size() << " tasks, " << tests_passed << "/"
          << tests << " tests";
    if (tasks_skipped) total << ", " << tasks_skipped << " task(s) skipped";
    total << " (" << std::fixed << std::setprecision(1) << seconds << " s)\n";
    out << total.str();
    if (!reports.empty()) out << "reports (not graded):\n" << reports;
    if (!options.json_path.empty()) {
        std::vector<TaskResult> results;
        for (const TaskRow& r : rows) results.push_back(r.result);
        std::ofstream json(options.json_path);
        write_results_json(results, seed_line + total.str() + reports,
                           options.held_out ? "after_published" : "visible", json);
        if (!json) {
            out << "grade: cannot write " << options.json_path << "\n";
            return 2;
        }
    }
    return verdict(options, rows, out);
}

}  // namespace kiln::assignments
