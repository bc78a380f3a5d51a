// The REPL driven through stdin by the built `kiln` binary: a multi-line def, an error,
// then continued use of an earlier variable; and the :commands.
#include <boost/test/unit_test.hpp>
#include <cstdio>
#include <fstream>
#include <string>

namespace {

// Feeds `input` to `kiln` on stdin and returns stdout and stderr together.
std::string run_kiln(const std::string& input, const std::string& args = "") {
    std::string path = "/tmp/kiln_repl_test_input.txt";
    std::ofstream(path) << input;
    std::string cmd = std::string(KILN_CLI_BINARY) + " " + args + " < " + path + " 2>&1";
    FILE* pipe = popen(cmd.c_str(), "r");
    BOOST_REQUIRE(pipe);
    std::string out;
    char buf[4096];
    while (size_t n = fread(buf, 1, sizeof buf, pipe)) out.append(buf, n);
    pclose(pipe);
    return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(repl)

BOOST_AUTO_TEST_CASE(multiline_def_error_then_earlier_variable) {
    std::string out = run_kiln(
        "x = randn(3, 4)\n"
        "def double(t):\n"
        "    y = t * 2\n"
        "    return y\n"
        "\n"
        "double(x).shape\n"
        "x @ x\n"
        "double(x).shape == x.shape\n"
        "len(x)\n");
    BOOST_TEST(out ==
               "torch.Size([3, 4])\n"
               "Traceback (most recent call last):\n"
               "  File \"<stdin>\", line 1, column 3\n"
               "    x @ x\n"
               "      ^\n"
               "RuntimeError: matmul: shapes [3, 4] and [3, 4] cannot be multiplied (4 vs 3)\n"
               "True\n"
               "3\n",
               out);
}

BOOST_AUTO_TEST_CASE(syntax_error_then_go_on) {
    std::string out = run_kiln("a = 1\nb = (a +\n)\nprint(a + 1)\n");
    BOOST_TEST(out.find("SyntaxError") != std::string::npos, out);
    BOOST_TEST(out.find("2\n") != std::string::npos, out);
}

BOOST_AUTO_TEST_CASE(commands) {
    std::string out = run_kiln(
        "def bar(a, b):\n"
        "    x = a / (abs(a) + 1)\n"
        "    if b.sum() < 0:\n"
        "        b = b * -1\n"
        "    return x * b\n"
        "\n"
        "opt = compile(bar)\n"
        "r = opt(ones(4), ones(4))\n"
        ":graph opt\n"
        ":guards opt\n"
        ":explain bar(ones(4), -ones(4))\n"
        ":time 1 + 1\n"
        ":backend eager\n"
        ":graph bar\n"
        ":nonsense\n"
        ":reset\n"
        "opt\n"
        ":quit\n"
        "print('not reached')\n",
        "--backend eager");
    for (const char* want : {"entry 1, graph 1", "placeholder", "a: float32[4] cpu", "Graph Count: 2", "Location: <stdin>:3 in bar",
                             "2\ntime: ", "compile() now uses backend eager", "bar is a function, not a compiled function",
                             "unknown command :nonsense", "NameError: name 'opt' is not defined"})
        BOOST_TEST(out.find(want) != std::string::npos, "missing: " << want << "\n" << out);
    BOOST_TEST(out.find("not reached") == std::string::npos);
}

BOOST_AUTO_TEST_CASE(version_and_run) {
    BOOST_TEST(run_kiln("", "--version").find("kiln 0.1.0") != std::string::npos);
    std::ofstream("/tmp/kiln_run_test.ks") << "import torch\nprint(torch.ones(2).sum())\n";
    BOOST_TEST(run_kiln("", "run /tmp/kiln_run_test.ks") == "tensor(2.)\n");
    std::ofstream("/tmp/kiln_explain_test.ks") << "def f(x):\n    if x.sum() > 0:\n        return x\n    return -x\nf(ones(2))\n";
    std::string out = run_kiln("", "explain /tmp/kiln_explain_test.ks f");
    BOOST_TEST(out.find("Graph Break Count: 1") != std::string::npos, out);
}

BOOST_AUTO_TEST_SUITE_END()
