// Docs that stay true: every name a doc gives a reader must exist in this tree, and no
// user-facing text points at an issue tracker the reader cannot see.
//
// Read: the Markdown of docs/, README.md, tutorials/README.md and assignments/README.md.
// Checked names: repository paths (tensor/ops.def, tests/gpu/run.sh, script/NN_name.kn ...),
// lessons ("lesson 07", tutorial_07_..., tutorial.07_... CTest names), `make` targets,
// KILN_* environment variables (read somewhere in the code), test binaries (test_jit ...),
// and qualified functions (`jit::explain`, `codegen::last_compiled()`).
// Issue numbers ("issue 13", "#13") must not appear in doc headings, lessons, their scripts
// and expected outputs, or string literals of the library and the REPL (error messages,
// program output); nor "DESIGN.md §N", which cites a file no clone has.
//
// Each finding names the file, the line and the name, so a failure says what to fix.
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

const fs::path kRoot = KILN_SOURCE_DIR;  // CMake defines it for every target linking kiln

std::string read(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::ostringstream os;
    os << in.rdbuf();
    return os.str();
}

std::vector<std::string> lines_of(const std::string& text) {
    std::vector<std::string> out;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) out.push_back(line);
    return out;
}

std::vector<fs::path> user_docs() {
    std::vector<fs::path> docs;
    for (const auto& e : fs::directory_iterator(kRoot / "docs"))
        if (e.path().extension() == ".md") docs.push_back(e.path());
    for (const char* p : {"README.md", "tutorials/README.md", "assignments/README.md"})
        if (fs::exists(kRoot / p)) docs.push_back(kRoot / p);
    std::sort(docs.begin(), docs.end());
    return docs;
}

// Source files: where functions are declared and environment variables read.
const std::string& all_code() {
    static const std::string code = [] {
        std::string all;
        for (const char* dir :
             {"tensor", "autograd", "dist", "nn", "optim", "jit", "codegen", "cli", "models",
              "tests", "bench", "tutorials", "cmake", "assignments"})
            for (const auto& e : fs::recursive_directory_iterator(kRoot / dir)) {
                std::string ext = e.path().extension().string();
                if (e.path().parent_path() == kRoot / "tests/docs")
                    continue;  // this file names fakes
                if (e.is_regular_file() &&
                    (ext == ".cpp" || ext == ".h" || ext == ".def" || ext == ".cmake" ||
                     ext == ".sh" || ext == ".py" || ext == ".kn"))
                    all += read(e.path());
            }
        for (const char* f : {"CMakeLists.txt", "Makefile", "kiln.h"}) all += read(kRoot / f);
        return all;
    }();
    return code;
}

std::set<std::string> make_targets() {
    std::set<std::string> targets;
    std::regex rule(R"(^([A-Za-z0-9_.-]+)\s*:)");
    for (const std::string& line : lines_of(read(kRoot / "Makefile"))) {
        std::smatch m;
        if (std::regex_search(line, m, rule)) targets.insert(m[1]);
        if (line.rfind(".PHONY:", 0) == 0) {
            std::istringstream words(line.substr(7));
            for (std::string w; words >> w;) targets.insert(w);
        }
    }
    return targets;
}

bool lesson_exists(const std::string& number) {
    for (const auto& e : fs::directory_iterator(kRoot / "tutorials"))
        if (e.path().extension() == ".cpp" &&
            e.path().filename().string().rfind(number + "_", 0) == 0)
            return true;
    return false;
}

struct Finding {
    std::string where, what;
};
std::string report(const std::vector<Finding>& found) {
    std::string s;
    for (const Finding& f : found) s += "\n  " + f.where + ": " + f.what;
    return s;
}

// The names a doc line gives, checked against the tree. `doc` is relative to kRoot.
void check_line(const fs::path& doc, int number, const std::string& line,
                const std::set<std::string>& targets, std::vector<Finding>& found) {
    const std::string where = doc.string() + ":" + std::to_string(number);
    const fs::path doc_dir = (kRoot / doc).parent_path();
    // Paths: a token with a known top-level folder (or a path beside the doc, for
    // tutorials/README.md's script/ and expected/), and a file extension or trailing slash.
    static const std::regex path_re(
        R"((?:^|[\s`(\[|"'])((?:\.\./)?(?:tensor|autograd|nn|optim|jit|codegen|cli|models|tests|bench|tutorials|docs|cmake|assignments|script|expected|standalone|shared)/[A-Za-z0-9_./-]*[A-Za-z0-9_/]))");
    for (auto it = std::sregex_iterator(line.begin(), line.end(), path_re);
         it != std::sregex_iterator(); ++it) {
        std::string p = (*it)[1];
        // Placeholders a reader fills in: NN_name, aN, <folder>.
        if (p.find("NN") != std::string::npos || p.find("aN/") != std::string::npos || p.find("/aN_") != std::string::npos)
            continue;
        if (size_t both = p.find(".h/."); both != std::string::npos)
            p = p.substr(0, both + 2);                       // x.h/.cpp
        while (!p.empty() && p.back() == '.') p.pop_back();  // a sentence's full stop
        // A path or the start of names (tensor/kernels_*, bench/aot_memory for its .cpp).
        auto exists_at = [&](const fs::path& base) {
            fs::path full = base / p;
            if (fs::exists(full)) return true;
            if (!fs::is_directory(full.parent_path())) return false;
            for (const auto& e : fs::directory_iterator(full.parent_path()))
                if (e.path().filename().string().rfind(full.filename().string(), 0) == 0)
                    return true;
            return false;
        };
        if (!exists_at(kRoot) && !exists_at(doc_dir))
            found.push_back({where, "no such path: " + p});
    }
    // Absolute paths of the machine the docs were written on: no clone has them.
    if (line.find("/work/") != std::string::npos)
        found.push_back({where, "a path outside the repository (/work/...)"});
    // Lessons by number: "lesson 07", "lessons 07 and 08", tutorial_07_..., tutorial.07_...
    static const std::regex lesson_re(R"((?:[Ll]essons? |tutorial[_.](?:script\.)?)(\d\d)\b)");
    for (auto it = std::sregex_iterator(line.begin(), line.end(), lesson_re);
         it != std::sregex_iterator(); ++it)
        if (!lesson_exists((*it)[1]))
            found.push_back({where, "no lesson " + std::string((*it)[1])});
    static const std::regex lesson_name_re(R"(\btutorial[_.](?:script\.)?(\d\d_[a-z_]+))");
    for (auto it = std::sregex_iterator(line.begin(), line.end(), lesson_name_re);
         it != std::sregex_iterator(); ++it)
        if (!fs::exists(kRoot / "tutorials" / (std::string((*it)[1]) + ".cpp")) &&
            !fs::exists(kRoot / "tutorials/script" / (std::string((*it)[1]) + ".kn")))
            found.push_back({where, "no lesson named " + std::string((*it)[1])});
    // make targets, as a reader would type them: `make X`.
    static const std::regex make_re(R"(`make ([a-z][a-z0-9_-]*))");
    for (auto it = std::sregex_iterator(line.begin(), line.end(), make_re);
         it != std::sregex_iterator(); ++it)
        if (!targets.count((*it)[1]))
            found.push_back({where, "no make target " + std::string((*it)[1])});
    // Environment variables kiln reads.
    static const std::regex env_re(R"(\bKILN_[A-Z0-9_]*[A-Z0-9]\b)");
    for (auto it = std::sregex_iterator(line.begin(), line.end(), env_re);
         it != std::sregex_iterator(); ++it) {
        std::string var = (*it)[0];
        const std::string& code = all_code();
        bool read = code.find("\"" + var + "\"") != std::string::npos ||
                    code.find(var + "=") != std::string::npos ||
                    code.find("ENV{" + var + "}") != std::string::npos ||
                    code.find("$" + var) != std::string::npos ||
                    code.find("${" + var + "}") != std::string::npos ||
                    code.find("${" + var + ":-") != std::string::npos;
        // KILN_CHECK(...), KILN_UNARY(...): macros of the code, not variables; so is a hook
        // the code tests with #ifdef (KILN_MATH_EXTRA in tensor/math_functions.def).
        bool macro = (line.compare(size_t(it->position() + it->length()), 1, "(") == 0 &&
                      code.find("define " + var) != std::string::npos) ||
                     code.find("#ifdef " + var + "\n") != std::string::npos;
        if (!read && !macro && code.find(var + "(") == std::string::npos)
            found.push_back({where, "no variable " + var + " in the code"});
    }
    // Test binaries: test_<folder> is built from tests/<folder>/.
    static const std::regex binary_re(R"((?:build/|`)test_([a-z]+)\b(?![._]))");
    for (auto it = std::sregex_iterator(line.begin(), line.end(), binary_re);
         it != std::sregex_iterator(); ++it)
        if (!fs::is_directory(kRoot / "tests" / std::string((*it)[1])))
            found.push_back({where, "no test binary test_" + std::string((*it)[1])});
    // Flags of kiln's programs: `tutorial_NN_name --flag`, `bench_name --flag`: the program's
    // source must read the flag.
    static const std::regex flag_re(
        R"(\b(tutorial|bench)_([a-z0-9_]+)((?: [^`|;]*?)?) (--[a-z][a-z-]*))");
    for (auto it = std::sregex_iterator(line.begin(), line.end(), flag_re);
         it != std::sregex_iterator(); ++it) {
        fs::path src = kRoot / (std::string((*it)[1]) == "tutorial" ? "tutorials" : "bench") /
                       (std::string((*it)[2]) + ".cpp");
        std::string flag = (*it)[4];
        if (!fs::exists(src))
            found.push_back(
                {where, "no program " + std::string((*it)[1]) + "_" + std::string((*it)[2])});
        else if (read(src).find("\"" + flag) == std::string::npos)
            found.push_back({where, src.filename().string() + " reads no flag " + flag});
    }
    // Test cases by name (a code span of a snake_case name with at least four words): a
    // BOOST_AUTO_TEST_CASE or BOOST_FIXTURE_TEST_CASE of that name, or a suite/case path.
    static const std::regex case_re(R"(`(?:[a-z0-9_]+/)?([a-z0-9]+(?:_[a-z0-9]+){3,})`)");
    for (auto it = std::sregex_iterator(line.begin(), line.end(), case_re);
         it != std::sregex_iterator(); ++it) {
        std::string name = (*it)[1];
        const std::string& code = all_code();
        // A planted cheat (tests/assignments/cheats/aN_NAME.cpp) and its CTest entry
        // assignment_N_cheat_NAME (cmake/tests.cmake names them after the file).
        static const std::regex cheat_re(R"(assignment_(\d)_cheat_([a-z0-9_]+?)(?:_\d)?)");
        std::smatch m;
        std::string cheat = std::regex_match(name, m, cheat_re) ? "a" + m[1].str() + "_" + m[2].str() : name;
        if (fs::exists(kRoot / "tests/assignments/cheats" / (cheat + ".cpp"))) continue;
        if (code.find("TEST_CASE(" + name) == std::string::npos &&
            code.find(name) == std::string::npos)
            found.push_back({where, "no test case or name " + name});
    }
    // Qualified functions in code spans: `jit::explain(...)`, `codegen::last_compiled()`.
    static const std::regex fn_re(
        R"(`(?:kiln::)?(?:jit|codegen|cuda|nn|optim|autograd|models)::(?:[a-z_]+::)?([a-z_][a-z0-9_]*)\()");
    for (auto it = std::sregex_iterator(line.begin(), line.end(), fn_re);
         it != std::sregex_iterator(); ++it) {
        std::string name = (*it)[1];
        if (all_code().find(name + "(") == std::string::npos)
            found.push_back({where, "no function " + name});
    }
}

// "issue 13", "Issue #13", "issues 13 and 14", "#13" (not "#include", not a Markdown anchor).
const std::regex& issue_re() {
    static const std::regex re(R"((\b[Ii]ssues? #?\d+)|((?:^|[\s(])#\d+\b))");
    return re;
}
const std::regex& design_section_re() {
    static const std::regex re(R"(DESIGN\.md §)");
    return re;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(docs)

BOOST_AUTO_TEST_CASE(docs_name_only_what_exists) {
    std::set<std::string> targets = make_targets();
    BOOST_REQUIRE(targets.count("test") && targets.count("demo"));  // the Makefile was read
    std::vector<Finding> found;
    for (const fs::path& doc : user_docs()) {
        fs::path rel = fs::relative(doc, kRoot);
        std::vector<std::string> lines = lines_of(read(doc));
        bool in_code_block = false;
        for (size_t i = 0; i < lines.size(); ++i) {
            if (lines[i].rfind("```", 0) == 0) in_code_block = !in_code_block;
            check_line(rel, int(i + 1), lines[i], targets, found);
            if (std::regex_search(lines[i], design_section_re()))
                found.push_back({rel.string() + ":" + std::to_string(i + 1),
                                 "cites DESIGN.md by section (no clone has it)"});
            if (!in_code_block && lines[i].rfind("#", 0) == 0 &&
                std::regex_search(lines[i], issue_re()))
                found.push_back({rel.string() + ":" + std::to_string(i + 1),
                                 "issue number in a heading: " + lines[i]});
        }
    }
    BOOST_TEST(found.empty(), "docs name what does not exist:" << report(found));
}

BOOST_AUTO_TEST_CASE(user_facing_text_has_no_issue_numbers) {
    std::vector<Finding> found;
    auto scan = [&](const fs::path& p, bool literals_only) {
        std::vector<std::string> lines = lines_of(read(p));
        for (size_t i = 0; i < lines.size(); ++i) {
            std::string text = lines[i];
            if (literals_only) {  // the string literals of a C++ line: what a user sees
                std::string lits;
                static const std::regex lit(R"x("(?:[^"\\]|\\.)*")x");
                for (auto it = std::sregex_iterator(text.begin(), text.end(), lit);
                     it != std::sregex_iterator(); ++it)
                    lits += it->str() + " ";
                text = lits;
            }
            if (std::regex_search(text, issue_re()))
                found.push_back(
                    {fs::relative(p, kRoot).string() + ":" + std::to_string(i + 1), lines[i]});
        }
    };
    // Lessons, their scripts and expected outputs: the whole text (comments are lesson text).
    for (const auto& e : fs::recursive_directory_iterator(kRoot / "tutorials"))
        if (e.is_regular_file() && e.path().filename() != "README.md") scan(e.path(), false);
    // The library and the REPL: string literals (error messages, printed output).
    for (const char* dir : {"tensor", "autograd", "nn", "optim", "jit", "codegen", "cli", "models"})
        for (const auto& e : fs::recursive_directory_iterator(kRoot / dir))
            if (e.is_regular_file() &&
                (e.path().extension() == ".cpp" || e.path().extension() == ".h"))
                scan(e.path(), true);
    BOOST_TEST(found.empty(), "user-facing text names an issue number:" << report(found));
}

// The other way round: every KILN_* variable the library or the REPL reads has its row in
// docs/env.md (a switch nobody can find is not a switch).
BOOST_AUTO_TEST_CASE(every_variable_the_library_reads_has_a_row_in_env_md) {
    const std::string env_md = read(kRoot / "docs/env.md");
    std::regex getenv_call(R"re(getenv\("(KILN_[A-Z0-9_]+)"\))re");
    std::set<std::string> missing;
    size_t read_count = 0;
    for (const char* dir :
         {"tensor", "autograd", "dist", "nn", "optim", "jit", "codegen", "cli", "models"})
        for (const auto& e : fs::recursive_directory_iterator(kRoot / dir)) {
            if (!e.is_regular_file() ||
                (e.path().extension() != ".cpp" && e.path().extension() != ".h"))
                continue;
            std::string text = read(e.path());
            for (std::sregex_iterator it(text.begin(), text.end(), getenv_call), end; it != end;
                 ++it) {
                ++read_count;
                if (env_md.find("| `" + (*it)[1].str() + "` |") == std::string::npos)
                    missing.insert((*it)[1].str() + " (" + fs::relative(e.path(), kRoot).string() +
                                   ")");
            }
        }
    BOOST_TEST(read_count > 30u,
               "found only " << read_count << " getenv calls: is the scan broken?");
    std::string list;
    for (const std::string& m : missing) list += "\n  " + m;
    BOOST_TEST(missing.empty(), "read in the code, no row in docs/env.md:" << list);
}

// The checker itself: each rule fires on a line that breaks it.
BOOST_AUTO_TEST_CASE(the_checker_finds_what_it_should) {
    std::set<std::string> targets = make_targets();
    auto findings = [&](const std::string& line) {
        std::vector<Finding> found;
        check_line("docs/x.md", 1, line, targets, found);
        return found.size();
    };
    BOOST_TEST(findings("see `tensor/ops.def` and tests/gpu/run.sh") == 0u);
    BOOST_TEST(findings("see `tensor/no_such_file.cpp`") == 1u);
    BOOST_TEST(findings("lesson 07 and tutorial.09_real_models") == 0u);
    BOOST_TEST(findings("lesson 42") == 1u);
    BOOST_TEST(findings("run `make demo`") == 0u);
    BOOST_TEST(findings("run `make no-such-target`") == 1u);
    BOOST_TEST(findings("set KILN_CONV_FUSE=0") == 0u);
    BOOST_TEST(findings("set KILN_NO_SUCH_VARIABLE=1") == 1u);
    BOOST_TEST(findings("`./test_jit` and `test_nosuchfolder`") == 1u);
    BOOST_TEST(findings("`codegen::last_compiled()` and `jit::no_such_function()`") == 1u);
    BOOST_TEST(findings("the seeds (/work/shared/seeds)") == 1u);
    BOOST_TEST(
        findings(
            "`build/tutorial_08_speedups --iters 3` and `build/tutorial_09_real_models --full`") ==
        0u);
    BOOST_TEST(findings("`build/tutorial_08_speedups --no-such-flag`") == 1u);
    BOOST_TEST(findings("the test `reduce_overhead_replays_cuda_graphs_like_the_default_mode`") ==
               0u);
    BOOST_TEST(findings("the test `a_test_case_that_was_never_written`") == 1u);
    BOOST_TEST(std::regex_search("## Models (issue 14)", issue_re()));
    BOOST_TEST(std::regex_search("see #13", issue_re()));
    BOOST_TEST(!std::regex_search("#include <x>", issue_re()));
    BOOST_TEST(!std::regex_search("the issue's targets", issue_re()));
}

BOOST_AUTO_TEST_SUITE_END()
