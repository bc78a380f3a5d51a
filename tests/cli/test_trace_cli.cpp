// `kiln run --trace DIR script` (docs/trace.md): the log of a script's compiles, with the
// script's lines on the recorded nodes and the break; a directory it can't make is an error.
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "tests/json_reader.h"

namespace {

namespace fs = std::filesystem;

struct Ran {
    int status = -1;
    std::string output;
};

Ran run_kiln(const std::string& args) {
    std::string cmd = std::string(KILN_CLI_BINARY) + " " + args + " 2>&1";
    FILE* pipe = popen(cmd.c_str(), "r");
    BOOST_REQUIRE(pipe);
    Ran r;
    char buf[4096];
    while (size_t n = fread(buf, 1, sizeof buf, pipe)) r.output.append(buf, n);
    r.status = pclose(pipe);
    return r;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(cli_trace)

BOOST_AUTO_TEST_CASE(kiln_run_trace_writes_the_log_with_script_lines) {
    fs::path dir = fs::temp_directory_path() / ("kiln-cli-trace-" + std::to_string(getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    fs::path script = dir / "bar.kn";
    std::ofstream(script) << "def bar(a, b):\n"
                             "    x = a / (abs(a) + 1)\n"
                             "    if b.sum() < 0:\n"
                             "        b = b * -1\n"
                             "    return x * b\n"
                             "f = compile(bar, backend=\"eager\")\n"
                             "print(f(randn(10), randn(10)).shape)\n";
    fs::path logs = dir / "logs";
    Ran r = run_kiln("run --trace " + logs.string() + " " + script.string());
    BOOST_TEST(r.status == 0, r.output);
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(logs)) files.push_back(e.path());
    BOOST_REQUIRE(files.size() == 1u);
    std::ifstream in(files[0]);
    std::vector<kiln_test::Json> log;
    for (std::string line; std::getline(in, line);) log.push_back(kiln_test::parse_json(line));
    BOOST_REQUIRE(log.size() > 2u);
    BOOST_TEST(log.front()["ev"].s() == "trace_start");
    BOOST_TEST(log.back()["ev"].s() == "trace_end");
    int graphs = 0, breaks = 0;
    for (const kiln_test::Json& e : log) {
        if (e["ev"].s() == "graph" && ++graphs == 1) {
            // abs is the first op, on the script's line 2
            const kiln_test::Json& abs_node = e["nodes"][2];
            BOOST_TEST(abs_node["op"].s() == "abs");
            BOOST_TEST(abs_node["line"].s().find("bar.kn:2") != std::string::npos,
                       abs_node["line"].s());
        }
        if (e["ev"].s() == "break") {
            ++breaks;
            BOOST_TEST(e["line"].s().find("bar.kn:3") != std::string::npos, e["line"].s());
        }
    }
    BOOST_TEST(graphs == 2);
    BOOST_TEST(breaks == 1);
    fs::remove_all(dir);
}

// A size read as a number under dynamic shapes pins its symbol: the pin and its guard name
// the script's line, not the interpreter's.
BOOST_AUTO_TEST_CASE(a_pinned_size_carries_the_script_line) {
    fs::path dir = fs::temp_directory_path() / ("kiln-cli-trace-pin-" + std::to_string(getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    std::ofstream(dir / "pin.kn") << "def f(x):\n"
                                     "    n = x.shape[0]\n"
                                     "    return x * n\n"
                                     "g = compile(f, backend=\"eager\")\n"
                                     "g(randn(10))\n"
                                     "print(g(randn(8)).shape)\n";
    Ran r = run_kiln("run --trace " + (dir / "logs").string() + " " + (dir / "pin.kn").string());
    BOOST_TEST(r.status == 0, r.output);
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(dir / "logs")) files.push_back(e.path());
    BOOST_REQUIRE(files.size() == 1u);
    std::ifstream in(files[0]);
    int pins = 0, pin_guards = 0, recompiles = 0;
    for (std::string line; std::getline(in, line);) {
        kiln_test::Json e = kiln_test::parse_json(line);
        if (e["ev"].s() == "pin") {
            ++pins;
            BOOST_TEST(e["symbol"].s() == "s0");
            BOOST_TEST(e["value"].n() == 8);
            BOOST_TEST(e["line"].s().find("pin.kn:2") != std::string::npos, e["line"].s());
        }
        if (e["ev"].s() == "recompile") {
            ++recompiles;
            BOOST_TEST(e["guard"].s() == "x.size(0) == 10");
        }
        if (e["ev"].s() == "guards")
            for (const kiln_test::Json& g : e["guards"].items)
                if (g["kind"].s() == "pin") {
                    ++pin_guards;
                    BOOST_TEST(g["line"].s().find("pin.kn:2") != std::string::npos, g["line"].s());
                }
    }
    BOOST_TEST(pins == 1);
    BOOST_TEST(pin_guards == 1);
    BOOST_TEST(recompiles == 1);
    fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(kiln_run_trace_into_a_file_path_fails_clearly) {
    fs::path dir = fs::temp_directory_path() / ("kiln-cli-trace-bad-" + std::to_string(getpid()));
    fs::create_directories(dir);
    std::ofstream(dir / "a_file") << "x";
    std::ofstream(dir / "ok.kn") << "print(1)\n";
    std::string bad = (dir / "a_file" / "logs").string();
    Ran r = run_kiln("run --trace " + bad + " " + (dir / "ok.kn").string());
    BOOST_TEST(WEXITSTATUS(r.status) == 2, r.output);
    BOOST_TEST(r.output.find("can't create the trace directory '" + bad + "'") != std::string::npos,
               r.output);
    fs::remove_all(dir);
}

BOOST_AUTO_TEST_SUITE_END()
