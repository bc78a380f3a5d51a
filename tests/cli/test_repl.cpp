// The REPL driven through stdin by the built `kiln` binary: a multi-line def, an error,
// then continued use of an earlier variable; and the :commands.
#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

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

// A running `kiln` with its stdin and its output (stdout and stderr together, or a pty).
struct Child {
    pid_t pid = -1;
    int in = -1, out = -1;
    std::string seen;

    // Reads until `want` has appeared (or 20 s pass: a failure, not a timing comparison).
    bool read_until(const std::string& want) {
        auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
        while (seen.find(want) == std::string::npos) {
            if (std::chrono::steady_clock::now() > deadline) return false;
            pollfd p{out, POLLIN, 0};
            if (poll(&p, 1, 100) <= 0) continue;
            char buf[4096];
            ssize_t n = read(out, buf, sizeof buf);
            if (n <= 0) return seen.find(want) != std::string::npos;
            seen.append(buf, size_t(n));
        }
        return true;
    }
    void write_text(const std::string& text) const { BOOST_REQUIRE(write(in, text.data(), text.size()) == ssize_t(text.size())); }
    // Waits for the exit; the raw wait status.
    int wait_status() {
        if (in >= 0) close(in), in = -1;
        read_until("\x01never");  // drain to the end
        int status = 0;
        waitpid(pid, &status, 0);
        return status;
    }
};

Child spawn_with_pipes(const std::string& args) {
    int to[2], from[2];
    BOOST_REQUIRE(pipe(to) == 0 && pipe(from) == 0);
    Child c;
    c.pid = fork();
    BOOST_REQUIRE(c.pid >= 0);
    if (c.pid == 0) {
        dup2(to[0], 0), dup2(from[1], 1), dup2(from[1], 2);
        close(to[1]), close(from[0]);
        execl("/bin/sh", "sh", "-c", (std::string("exec ") + KILN_CLI_BINARY + " " + args).c_str(), (char*)nullptr);
        _exit(127);
    }
    close(to[0]), close(from[1]);
    c.in = to[1], c.out = from[0];
    return c;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(repl)

BOOST_AUTO_TEST_CASE(ctrl_c_ends_kiln_run_with_keyboard_interrupt) {
    std::ofstream("/tmp/kiln_ctrl_c_test.ks") << "x = 0\nprint('looping', flush=True)\nwhile True:\n    x = x + 1\n";
    Child c = spawn_with_pipes("run /tmp/kiln_ctrl_c_test.ks");
    BOOST_REQUIRE_MESSAGE(c.read_until("looping\n"), c.seen);
    kill(c.pid, SIGINT);
    int status = c.wait_status();
    BOOST_TEST(WIFEXITED(status), "kiln died by a signal: " << status);  // not killed by SIGINT
    BOOST_TEST(WEXITSTATUS(status) == 130);
    // The traceback names the loop: its header or its body, wherever the flag was seen.
    BOOST_TEST((c.seen.find("line 3") != std::string::npos || c.seen.find("line 4") != std::string::npos), c.seen);
    BOOST_TEST(c.seen.find("\nKeyboardInterrupt\n") != std::string::npos, c.seen);
}

BOOST_AUTO_TEST_CASE(ctrl_c_interrupts_a_statement_and_the_session_goes_on) {
    Child c = spawn_with_pipes("");
    c.write_text("x = 5\nprint('looping', flush=True)\nwhile True:\n    pass\n\n");
    BOOST_REQUIRE_MESSAGE(c.read_until("looping\n"), c.seen);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // into the loop
    kill(c.pid, SIGINT);
    BOOST_REQUIRE_MESSAGE(c.read_until("KeyboardInterrupt\n"), c.seen);
    c.write_text("print(x + 1)\n");
    BOOST_REQUIRE_MESSAGE(c.read_until("6\n"), c.seen);
    int status = c.wait_status();
    BOOST_TEST((WIFEXITED(status) && WEXITSTATUS(status) == 0), c.seen);
}

BOOST_AUTO_TEST_CASE(ctrl_c_at_the_prompt_clears_the_line) {
    // Through a pseudo-terminal, so the REPL runs readline and the tty turns ^C into SIGINT.
    Child c;
    int master = -1;
    c.pid = forkpty(&master, nullptr, nullptr, nullptr);
    BOOST_REQUIRE(c.pid >= 0);
    if (c.pid == 0) {
        setenv("TERM", "dumb", 1);
        execl(KILN_CLI_BINARY, KILN_CLI_BINARY, (char*)nullptr);
        _exit(127);
    }
    c.in = c.out = master;
    BOOST_REQUIRE_MESSAGE(c.read_until(">>> "), c.seen);
    c.write_text("x = 7\n");
    BOOST_REQUIRE_MESSAGE(c.read_until("x = 7\r\n>>> "), c.seen);
    c.write_text("y = 1 +");  // half a line, then Ctrl-C
    BOOST_REQUIRE_MESSAGE(c.read_until("y = 1 +"), c.seen);
    c.write_text("\x03");
    BOOST_REQUIRE_MESSAGE(c.read_until("KeyboardInterrupt"), c.seen);
    BOOST_REQUIRE_MESSAGE(c.read_until("KeyboardInterrupt\r\n>>> "), c.seen);
    c.write_text("print(x * 6)\n");
    BOOST_REQUIRE_MESSAGE(c.read_until("42\r\n"), c.seen);
    c.write_text(":quit\n");
    int status = 0;
    waitpid(c.pid, &status, 0);
    close(master);
    BOOST_TEST((WIFEXITED(status) && WEXITSTATUS(status) == 0), c.seen);
}

// `kiln` on a pseudo-terminal (so readline runs), with KILN_HISTORY set to `history`.
Child spawn_on_pty(const std::string& history, int& master) {
    Child c;
    c.pid = forkpty(&master, nullptr, nullptr, nullptr);
    BOOST_REQUIRE(c.pid >= 0);
    if (c.pid == 0) {
        setenv("TERM", "dumb", 1);
        setenv("KILN_HISTORY", history.c_str(), 1);
        execl(KILN_CLI_BINARY, KILN_CLI_BINARY, (char*)nullptr);
        _exit(127);
    }
    c.in = c.out = master;
    return c;
}

BOOST_AUTO_TEST_CASE(history_survives_the_session_and_tab_completes_dotted_names) {
    std::string history = "/tmp/kiln_history_test_" + std::to_string(getpid());
    std::remove(history.c_str());
    {
        int master = -1;
        Child c = spawn_on_pty(history, master);
        BOOST_REQUIRE_MESSAGE(c.read_until(">>> "), c.seen);
        c.write_text("secret_value = 6 * 7\n");
        BOOST_REQUIRE_MESSAGE(c.read_until("secret_value = 6 * 7\r\n>>> "), c.seen);
        c.write_text("\x04");  // Ctrl-D: so the last line in the history is the one above
        int status = 0;
        waitpid(c.pid, &status, 0);
        close(master);
    }
    std::ifstream saved(history);
    std::string text((std::istreambuf_iterator<char>(saved)), std::istreambuf_iterator<char>());
    BOOST_TEST(text.find("secret_value = 6 * 7") != std::string::npos, text);
    {
        int master = -1;
        Child c = spawn_on_pty(history, master);
        BOOST_REQUIRE_MESSAGE(c.read_until(">>> "), c.seen);
        c.write_text("\x10\n");  // Ctrl-P: the previous session's line, run again
        c.write_text("print(secret_value)\n");
        BOOST_REQUIRE_MESSAGE(c.read_until("42\r\n"), c.seen);
        c.write_text("import torch\n");
        c.write_text("torch.nn.fun\t");  // -> torch.nn.functional
        BOOST_REQUIRE_MESSAGE(c.read_until("torch.nn.functional"), c.seen);
        c.write_text(".relu(torch.tensor([-1.0, 2.0]))\n");
        BOOST_REQUIRE_MESSAGE(c.read_until("tensor([0., 2.])"), c.seen);
        c.write_text("x = torch.ones(2)\n");
        c.write_text("x.resh\t");  // a tensor's method
        BOOST_REQUIRE_MESSAGE(c.read_until("x.reshape"), c.seen);
        c.write_text("(2, 1).shape\n");
        BOOST_REQUIRE_MESSAGE(c.read_until("torch.Size([2, 1])"), c.seen);
        c.write_text(":quit\n");
        int status = 0;
        waitpid(c.pid, &status, 0);
        close(master);
        BOOST_TEST((WIFEXITED(status) && WEXITSTATUS(status) == 0), c.seen);
    }
    std::remove(history.c_str());
}

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

// A :command without the argument it needs (or with one it does not take) says what it
// does, and the :graph family lists the compiled functions it can show (issue 30 item 2).
BOOST_AUTO_TEST_CASE(commands_without_their_argument_say_what_they_do) {
    std::string out = run_kiln(
        ":graph\n"
        "def foo(x):\n"
        "    return x.sin()\n"
        "\n"
        "opt_foo = compile(foo)\n"
        "r = opt_foo(ones(3))\n"
        ":graph\n"
        ":guards\n"
        ":code 1 +\n"
        ":graph opt_fo\n"
        ":time\n"
        ":explain\n"
        ":reset now\n"
        "print(r.shape)\n",
        "--backend eager");
    BOOST_TEST(out.find("NameError: name '' is not defined") == std::string::npos, out);
    for (const char* want :
         {"usage: :graph f    the graphs of compiled f, one line per node\n"
          "no compiled functions yet: make one with opt = torch.compile(f) and call it\n",
          "usage: :graph f    the graphs of compiled f, one line per node\ncompiled functions: "
          "opt_foo\n",
          "usage: :guards f    the guards of each entry of compiled f\ncompiled functions: "
          "opt_foo\n",
          "usage: :code f    what the backend generated for compiled f\ncompiled functions: "
          "opt_foo\n",
          "NameError: name 'opt_fo' is not defined; compiled functions: opt_foo\n",
          "usage: :time expr    evaluate expr and report the wall time\n",
          "usage: :explain f(args)    graph count, graph breaks with reasons, guards\n",
          "usage: :reset    forget every variable and compiled cache\ntorch.Size([3])\n"})
        BOOST_TEST(out.find(want) != std::string::npos, "missing: " << want << "\n" << out);
}

BOOST_AUTO_TEST_CASE(version_and_run) {
    BOOST_TEST(run_kiln("", "--version").find("kiln 0.1.0") != std::string::npos);
    std::ofstream("/tmp/kiln_run_test.ks") << "import torch\nprint(torch.ones(2).sum())\n";
    BOOST_TEST(run_kiln("", "run /tmp/kiln_run_test.ks") == "tensor(2.)\n");
    std::ofstream("/tmp/kiln_explain_test.ks") << "def f(x):\n    if x.sum() > 0:\n        return x\n    return -x\nf(ones(2))\n";
    std::string out = run_kiln("", "explain /tmp/kiln_explain_test.ks f");
    BOOST_TEST(out.find("Graph Break Count: 1") != std::string::npos, out);
}

// :report writes the HTML report of the session's compiled functions (cli/report/report.h)
// from the compile log the REPL opens at start (jit/trace_log.h).
BOOST_AUTO_TEST_CASE(report_command_writes_the_sessions_report) {
    std::string out_dir = "/tmp/kiln_repl_report_test_" + std::to_string(getpid());
    std::string out = run_kiln(
        "def scaled(x):\n"
        "    return x * 2 + 1\n"
        "\n"
        "opt_scaled = compile(scaled)\n"
        "r = opt_scaled(ones(4))\n"
        ":report " +
            out_dir + "\n",
        "--backend eager");
#if __has_include("jit/trace_log.h")
    BOOST_TEST(out.find("report of this session's compiled functions: ") != std::string::npos, out);
    BOOST_TEST(out.find("open " + out_dir + "/index.html") != std::string::npos, out);
    std::ifstream index(out_dir + "/index.html");
    std::stringstream html;
    html << index.rdbuf();
    BOOST_TEST(html.str().find("scaled") != std::string::npos,
               "the index names the compiled function");
    BOOST_TEST(html.str().find("graph_") != std::string::npos, "and links its graph's page");
#else
    BOOST_TEST(
        out.find(":report: this build has no compile log (jit/trace_log.h)") != std::string::npos,
        out);
#endif
    std::filesystem::remove_all(out_dir);
}

// `kiln report DIR -o OUT` writes the site; a folder without a log is an error naming it.
BOOST_AUTO_TEST_CASE(report_subcommand_writes_the_site_or_names_the_bad_folder) {
    std::string out_dir = "/tmp/kiln_report_cli_test_" + std::to_string(getpid());
    std::string out = run_kiln(
        "", "report " + std::string(KILN_SOURCE_DIR) + "/tests/report/traces/basic -o " + out_dir);
    BOOST_TEST(out == "kiln report: wrote 7 files; open " + out_dir + "/index.html\n", out);
    BOOST_TEST(std::filesystem::exists(out_dir + "/graph_1.html"));
    std::filesystem::remove_all(out_dir);
    out = run_kiln("", "report /nonexistent/kiln-trace");
    BOOST_TEST(out.find("kiln report: no trace folder /nonexistent/kiln-trace") == 0u, out);
}

BOOST_AUTO_TEST_SUITE_END()
