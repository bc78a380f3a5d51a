// Ctrl-C as hostile input to kiln script (issue 10): a KeyboardInterrupt that a script can
// catch, raised inside loops, compiled functions and deep recursion, after which the same
// interpreter (the REPL session) still works: its variables, its recursion limit, compile().
// Ctrl-C is simulated as the SIGINT handler does it, by setting g_interrupted from another
// thread once the script is inside its loop.
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <sstream>
#include <string>
#include <thread>

#include "cli/interp/limits.h"
#include "script_run.h"

using namespace kiln;
using namespace kiln::interp;

namespace {

// Runs `source` in `in`, pressing Ctrl-C once after `delay` (the script's loops run far
// longer than that); returns what it printed plus "Kind: message" of an uncaught exception.
std::string run_interrupted(Interp& in, std::ostringstream& out, const std::string& source,
                            std::chrono::milliseconds delay = std::chrono::milliseconds(300)) {
    out.str("");
    std::atomic<bool> finished{false};
    std::thread ctrl_c([&] {
        auto until = std::chrono::steady_clock::now() + delay;
        while (!finished.load() && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(5));
        if (!finished.load()) g_interrupted.store(true);
    });
    try {
        in.run_source(source, "<stdin>");
    } catch (const ScriptError& e) {
        out << e.kind() << ": " << e.message() << "\n";
    }
    finished.store(true);
    ctrl_c.join();
    g_interrupted.store(false);  // a press that came after the script ended: the REPL drops it
    return out.str();
}

// A loop long enough to be interrupted (minutes), short enough to end if Ctrl-C is lost.
const std::string kLongLoop = "while n < 10**9:\n";

}  // namespace

BOOST_AUTO_TEST_SUITE(script_interrupt)

BOOST_AUTO_TEST_CASE(a_script_catches_keyboard_interrupt_and_goes_on) {
    std::ostringstream out;
    Interp in(out);
    in.default_backend = "eager";
    std::string got = run_interrupted(in, out,
                                      "n = 0\ntry:\n    " + kLongLoop + "        n = n + 1\nexcept KeyboardInterrupt:\n"
                                      "    print('caught', n > 0)\nprint('after')\n");
    BOOST_TEST(got == "caught True\nafter\n");
}

BOOST_AUTO_TEST_CASE(inside_a_compiled_function_then_compile_still_works) {
    std::ostringstream out;
    Interp in(out);
    in.default_backend = "eager";
    in.run_source("def spin(x):\n    n = 0\n    y = x * 2\n    " + kLongLoop + "        n = n + 1\n    return y\n"
                  "def double(x):\n    return x * 2\n",
                  "<stdin>");
    for (const char* backend : {"eager", "aot_eager"}) {
        BOOST_TEST_CONTEXT(backend) {
            std::string opt = std::string("opt = compile(spin, backend='") + backend + "')\n";
            BOOST_TEST(run_interrupted(in, out, opt + "r = opt(ones(3))\n") == "KeyboardInterrupt: \n");
            std::string after = run_interrupted(in, out,
                                                std::string("d = compile(double, backend='") + backend +
                                                    "')\nprint(d(ones(2)).tolist(), d(ones(2)).tolist())\n",
                                                std::chrono::minutes(10));
            BOOST_TEST(after == "[2.0, 2.0] [2.0, 2.0]\n");
        }
    }
}

BOOST_AUTO_TEST_CASE(deep_in_recursion_leaves_the_recursion_limit_intact) {
    std::ostringstream out;
    Interp in(out);
    in.default_backend = "eager";
    std::string depth = std::to_string(script_run::kLegalDepth);  // 900 (150 under ASan)
    std::string got = run_interrupted(in, out,
                                      "def down(k):\n    if k == 0:\n        n = 0\n        " + kLongLoop +
                                          "            n = n + 1\n        return 0\n    return down(k - 1)\ndown(" + depth + " - 10)\n");
    BOOST_TEST(got == "KeyboardInterrupt: \n");
    // The frames unwound: a recursion as deep as ever still fits under the limit.
    std::string deep = run_interrupted(in, out, "def f(n):\n    if n == 0:\n        return 0\n    return 1 + f(n - 1)\nprint(f(" + depth + "))\n",
                                       std::chrono::minutes(10));
    BOOST_TEST(deep == depth + "\n");
}

BOOST_AUTO_TEST_CASE(while_building_a_deep_structure_then_the_variables_survive) {
    std::ostringstream out;
    Interp in(out);
    in.default_backend = "eager";
    in.run_source("keep = [1, 2, 3]\nw = ones(2)\n", "<stdin>");
    std::string got = run_interrupted(in, out, "a = []\nn = 0\n" + kLongLoop + "    a = [a, n]\n    n = n + 1\n");
    BOOST_TEST(got == "KeyboardInterrupt: \n");
    std::string after = run_interrupted(in, out, "print(keep, w.tolist(), n > 0, len(a))\na = 0\nprint('freed')\n",
                                        std::chrono::minutes(10));
    BOOST_TEST(after == "[1, 2, 3] [1.0, 1.0] True 2\nfreed\n");
}

BOOST_AUTO_TEST_SUITE_END()
