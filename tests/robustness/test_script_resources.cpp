// kiln script's resources as hostile input (issue 10): repetition and tensors past the
// memory limit raise MemoryError/RuntimeError before allocating, deep structures raise
// RecursionError or are freed iteratively, NUL bytes survive into messages, and a session
// goes on after each error.
#include <boost/test/unit_test.hpp>

#include <string>
#include <utility>
#include <vector>

#include "script_run.h"

using namespace kiln;
using namespace kiln::interp;
using script_run::run;
using script_run::ScopedEnv;

BOOST_AUTO_TEST_SUITE(script_resources)

BOOST_AUTO_TEST_CASE(repetition_and_concatenation_are_bounded) {
    // Refused before allocating: these grew to 21 GB before the OOM killer came.
    std::string list = run("x = [0] * 10**11\n");
    BOOST_TEST(list.rfind("MemoryError: list repetition would need ", 0) == 0, list);
    BOOST_TEST(list.find("KILN_SCRIPT_MEMORY_LIMIT") != std::string::npos, list);
    BOOST_TEST(run("x = 'ab' * 10**11\n").rfind("MemoryError: str repetition would need 200000000000 bytes", 0) == 0);
    BOOST_TEST(run("print(len('' * 10**18), len([] * 10**18), 'ab' * -3)\n") == "0 0 \n");  // nothing to grow: instant
    ScopedEnv limit("KILN_SCRIPT_MEMORY_LIMIT", "64M");
    std::string doubling = run("s = 'x'\nl = [0]\nwhile True:\n    s = s + s\n    l = l + l\n");
    BOOST_TEST(doubling.rfind("MemoryError: ", 0) == 0, doubling);
    BOOST_TEST(doubling.find("more than kiln script's limit of 67108864 bytes") != std::string::npos, doubling);
}

BOOST_AUTO_TEST_CASE(huge_tensor_factories_raise_runtime_error) {
    std::string two = run("zeros(10**6, 10**6)\n");
    BOOST_TEST(two.rfind("RuntimeError: zeros(): a tensor of shape [1000000, 1000000] would need more than", 0) == 0, two);
    std::string wraps = run("ones(2**40, 2**40, 2**40)\n");  // the element count overflows 64 bits
    BOOST_TEST(wraps.rfind("RuntimeError: ones(): a tensor of shape [1099511627776, 1099511627776, 1099511627776]", 0) == 0, wraps);
    BOOST_TEST(run("x = zeros(2, 3)\nprint(x.shape)\n") == "torch.Size([2, 3])\n");
}

BOOST_AUTO_TEST_CASE(deep_nesting_raises_recursion_error) {
    const std::string deep = "a = []\nfor i in range(30000):\n    a = [a]\n";
    BOOST_TEST(run(deep + "s = str(a)\n") == "RecursionError: maximum recursion depth exceeded while getting the repr of an object\n");
    BOOST_TEST(run(deep + "t = tensor(a)\n") == "RecursionError: maximum recursion depth exceeded while converting nested lists to a tensor\n");
    BOOST_TEST(run(deep + "b = []\nfor i in range(30000):\n    b = [b]\nprint(a == a)\nprint(a == b)\n") ==
               "True\nRecursionError: maximum recursion depth exceeded in comparison\n");
    BOOST_TEST(run("def f(n):\n    return f(n + 1)\nf(0)\n") == "RecursionError: maximum recursion depth exceeded calling f()\n");
    // Python's limit: 1000 frames. A script that recurses 900 deep still runs (kLegalDepth).
    std::string depth = std::to_string(script_run::kLegalDepth);
    BOOST_TEST(run("def f(n):\n    if n == 0:\n        return 0\n    return 1 + f(n - 1)\nprint(f(" + depth + "))\n") == depth + "\n");
}

BOOST_AUTO_TEST_CASE(deep_structures_are_freed_without_recursion) {
    // 200,000 levels: freeing them recursively overflowed the stack at exit.
    BOOST_TEST(run("a = []\nfor i in range(200000):\n    a = [a]\nd = {}\nfor i in range(200000):\n    d = {'k': d}\nt = ()\n"
                   "for i in range(200000):\n    t = (t,)\na = 0\nprint('freed')\n") == "freed\n");
    BOOST_TEST(run("a = []\nfor i in range(200000):\n    a = [a]\n") == "");  // freed by ~Interp
}

BOOST_AUTO_TEST_CASE(cyclic_containers_print_like_python) {
    BOOST_TEST(run("a = [1]\na.append(a)\nprint(a)\nd = {}\nd['self'] = d\nprint(d)\nprint(a == a)\n") ==
               "[1, [...]]\n{'self': {...}}\nTrue\n");
}

BOOST_AUTO_TEST_CASE(long_operator_chains_parse_and_run) {
    // A chain of + is a loop in the parser, not nesting: 100,000 terms parse, run and free.
    std::string chain = "x = 1";
    for (int i = 1; i < 100000; ++i) chain += i % 2 ? " + 1" : " * 1";
    BOOST_TEST(run(chain + "\nprint(x)\n") == "50001\n");
    // Real nesting keeps its limit, as a SyntaxError.
    BOOST_TEST(run("x = " + std::string(300, '(') + "1" + std::string(300, ')') + "\n") ==
               "SyntaxError: too many nested parentheses\n");
    std::string unary = "x = " + std::string(1000, '-') + "1\n";
    BOOST_TEST(run(unary).rfind("SyntaxError: too deeply nested", 0) == 0);
}

BOOST_AUTO_TEST_CASE(nul_bytes_do_not_cut_the_message) {
    std::ostringstream out;
    Interp in(out);
    try {
        in.run_source(std::string("x = 1\0 + 2\n", 11), "bin.ks");
        BOOST_FAIL("expected a SyntaxError");
    } catch (const kiln::Error& e) {
        std::string what = e.what();  // read as a C string, as the REPL prints it
        BOOST_TEST(what == "  File \"bin.ks\", line 1, column 6\n"
                           "    x = 1\\0 + 2\n"
                           "         ^\n"
                           "SyntaxError: invalid character (byte 0x00): only ASCII is allowed outside strings and comments",
                   what);
    }
    try {
        in.run_source(std::string("d = {}\nd['a\0b']\n", 16), "bin.ks");
        BOOST_FAIL("expected a KeyError");
    } catch (const ScriptError& e) {
        std::string what = e.what();
        BOOST_TEST(what.find("KeyError: 'a\\x00b'") != std::string::npos, what);
    }
}

BOOST_AUTO_TEST_CASE(errors_leave_the_session_usable) {
    std::ostringstream out;
    Interp in(out);
    in.run_source("x = 41\n", "<stdin>");
    for (const char* hostile : {"y = [0] * 10**11\n", "y = 10**100000\n", "y = int(float('nan'))\n", "y = zeros(10**6, 10**6)\n"})
        BOOST_CHECK_THROW(in.run_source(hostile, "<stdin>"), ScriptError);
    in.run_source("print(x + 1)\n", "<stdin>");
    BOOST_TEST(out.str() == "42\n");
}

// fuzz_interp found these: compile() flattened its arguments recursively, so a deep or a
// cyclic list argument overflowed the C++ stack (ASan: stack-overflow in Flattener::add).
BOOST_AUTO_TEST_CASE(compiled_functions_refuse_deep_and_cyclic_arguments) {
    const std::string def = "def f(p, q=1):\n    return q\n";
    for (const char* backend : {"eager", "aot_eager"}) {
        std::string opt = def + "opt = compile(f, backend='" + backend + "')\n";
        BOOST_TEST(run(opt + "lst = []\nfor i in range(50000):\n    lst = [lst]\nr = opt(lst)\n") ==
                   "RecursionError: maximum recursion depth exceeded while flattening the arguments of a compiled function\n");
        BOOST_TEST(run(opt + "lst = [1]\nlst.append(lst)\nr = opt(lst)\n") ==
                   "RecursionError: maximum recursion depth exceeded while flattening the arguments of a compiled function\n");
        BOOST_TEST(run(opt + "d = {}\nd['self'] = d\nr = opt(ones(2), d)\n") ==
                   "RecursionError: maximum recursion depth exceeded while flattening the arguments of a compiled function\n");
        // Nesting that Python programs use still works, and the function still compiles after.
        BOOST_TEST(run(opt + "lst = [1]\nlst.append(lst)\ntry:\n    opt(lst)\nexcept RecursionError:\n    pass\n"
                             "nest = [ones(2)]\nfor i in range(50):\n    nest = [nest, ones(1)]\nprint(opt(nest, ones(3)).tolist())\n") ==
                   "[1.0, 1.0, 1.0]\n");
    }
}

// The second sweep: strings built by formatting and joining grew past the limit (each step
// doubling), and list repetition counted a str item as a handle although it is copied.
BOOST_AUTO_TEST_CASE(formatting_and_joining_are_bounded) {
    ScopedEnv limit("KILN_SCRIPT_MEMORY_LIMIT", "64M");
    const std::string grow = "s = 'x' * 1000\nfor i in range(40):\n";
    const std::string over = "would need 131072000 bytes, more than kiln script's limit of 67108864 bytes";
    for (const auto& [step, what] : std::vector<std::pair<std::string, std::string>>{
             {"    s = f'{s}{s}'\n", "MemoryError: f-string "},
             {"    s = '%s%s' % (s, s)\n", "MemoryError: str formatting "},
             {"    s = '{}{}'.format(s, s)\n", "MemoryError: str formatting "},
             {"    s = ''.join([s, s])\n", "MemoryError: str.join "}}) {
        std::string got = run(grow + step);
        BOOST_TEST(got.rfind(what + over, 0) == 0, got);
    }
    std::string copies = run("s = 'x' * 10**6\nl = [s] * 10**5\n");
    BOOST_TEST(copies.rfind("MemoryError: list repetition would need 100004", 0) == 0, copies);
    std::string concat = run("s = 'x' * 10**6\nl = [s] * 40\nl = l + l\n");
    BOOST_TEST(concat.rfind("MemoryError: list concatenation would need 8000", 0) == 0, concat);
    // Below the limit all of it works.
    BOOST_TEST(run("s = 'x' * 10**6\nl = [s] * 30\nt = '-'.join(l * 2)\nprint(len(t), len(l + l), f'{1}-{2:>3}', '%s|%r' % ('a', 'b'), '{}+{}'.format(1, 2))\n") ==
               "60000059 60 1-  2 a|'b' 1+2\n");
}

BOOST_AUTO_TEST_SUITE_END()
