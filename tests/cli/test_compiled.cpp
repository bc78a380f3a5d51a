// compile() of script functions is sound (issue 9, item 9): a compiled function prints,
// returns and mutates exactly what the eager function does, call after call, when the
// globals it reads are rebound and when it has side effects on lists, dicts, attributes.
// Each script runs twice, with `opt = compile(f, backend=B)` and with `opt = f`, for the
// backends eager, aot_eager and inductor, and the outputs must be equal.
#include <boost/test/unit_test.hpp>
#include <sstream>

#include "cli/interp/interp.h"
#include "jit/cache.h"

using namespace kiln;
using namespace kiln::interp;

namespace {

std::string run(const std::string& source) {
    std::ostringstream out;
    Interp in(out);
    jit::reset();
    try {
        in.run_source(source, "compiled.ks");
    } catch (const kiln::Error& e) {
        out << e.what() << "\n";
    }
    return out.str();
}

// `body` defines f and calls `opt` several times; OPT is replaced by how opt is made.
void check_like_eager(const std::string& body, const std::string& expected) {
    auto with = [&](const std::string& opt) {
        std::string src = body;
        src.replace(src.find("OPT"), 3, opt);
        return run(src);
    };
    std::string eager = with("f");
    BOOST_TEST(eager == expected);
    for (const char* backend : {"eager", "aot_eager", "inductor"}) {
        BOOST_TEST_CONTEXT("backend " << backend) {
            std::string compiled = with(std::string("compile(f, backend='") + backend + "')");
            BOOST_TEST(compiled == eager);
        }
    }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(compiled)

BOOST_AUTO_TEST_CASE(rebinding_a_global_tensor_is_seen) {
    check_like_eager(
        "w = ones(3)\n"
        "def f(x):\n"
        "    return x * w\n"
        "opt = OPT\n"
        "print(opt(ones(3)).tolist())\n"
        "w = full((3,), 2.0)\n"
        "print(opt(ones(3)).tolist())\n"
        "w = arange(3.0)\n"
        "print(opt(ones(3)).tolist())\n",
        "[1.0, 1.0, 1.0]\n[2.0, 2.0, 2.0]\n[0.0, 1.0, 2.0]\n");
}

BOOST_AUTO_TEST_CASE(rebinding_a_global_scalar_is_seen) {
    check_like_eager(
        "scale = 2\n"
        "def helper(x):\n"
        "    return x + offset\n"
        "offset = 10.0\n"
        "def f(x):\n"
        "    return helper(x * scale)\n"
        "opt = OPT\n"
        "print(opt(ones(2)).tolist())\n"
        "scale = 3\n"
        "print(opt(ones(2)).tolist())\n"
        "offset = -1.0\n"
        "print(opt(ones(2)).tolist())\n",
        "[12.0, 12.0]\n[13.0, 13.0]\n[2.0, 2.0]\n");
}

BOOST_AUTO_TEST_CASE(list_append_happens_on_every_call) {
    check_like_eager(
        "log = []\n"
        "def f(x):\n"
        "    log.append(1)\n"
        "    return x + 1\n"
        "opt = OPT\n"
        "for i in range(3):\n"
        "    y = opt(ones(2))\n"
        "print(len(log), y.tolist())\n",
        "3 [2.0, 2.0]\n");
}

BOOST_AUTO_TEST_CASE(dict_writes_happen_on_every_call) {
    check_like_eager(
        "stats = {}\n"
        "def f(x):\n"
        "    stats['calls'] = stats.get('calls', 0) + 1\n"
        "    return x * 2\n"
        "opt = OPT\n"
        "for i in range(3):\n"
        "    y = opt(ones(2))\n"
        "print(stats, y.tolist())\n",
        "{'calls': 3} [2.0, 2.0]\n");
}

BOOST_AUTO_TEST_CASE(attribute_writes_happen_on_every_call) {
    check_like_eager(
        "p = ones(2, requires_grad=True)\n"
        "def f(x):\n"
        "    p.grad = x * 1\n"
        "    return x + 1\n"
        "opt = OPT\n"
        "y = opt(ones(2))\n"
        "print(p.grad.tolist())\n"
        "y = opt(full((2,), 5.0))\n"
        "print(p.grad.tolist())\n",
        "[1.0, 1.0]\n[5.0, 5.0]\n");
}

BOOST_AUTO_TEST_CASE(a_global_counter_counts_every_call) {
    check_like_eager(
        "counter = [0]\n"
        "def f(x):\n"
        "    counter[0] += 1\n"
        "    return x + 1\n"
        "opt = OPT\n"
        "for i in range(3):\n"
        "    print(opt(zeros(2)).tolist())\n"
        "print(counter)\n",
        "[1.0, 1.0]\n[1.0, 1.0]\n[1.0, 1.0]\n[3]\n");
}

// Known bug, in the tracer (jit/), not the interpreter: a re-run entry replays its graph
// against the ops the host code issues, and a scalar that changed between calls (here the
// counter) is reported as "f is not deterministic" instead of recording a new branch.
// Three failures, one per backend, until the tracer treats it as a guard failure.
BOOST_AUTO_TEST_CASE(a_counter_fed_into_a_tensor_op) {
    check_like_eager(
        "counter = [0]\n"
        "def f(x):\n"
        "    counter[0] += 1\n"
        "    return x + counter[0]\n"
        "opt = OPT\n"
        "for i in range(3):\n"
        "    print(opt(zeros(2)).tolist())\n"
        "print(counter)\n",
        "[1.0, 1.0]\n[2.0, 2.0]\n[3.0, 3.0]\n[3]\n");
}

BOOST_AUTO_TEST_CASE(print_of_a_non_tensor_happens_on_every_call) {
    check_like_eager(
        "def f(x):\n"
        "    print('called')\n"
        "    return x - 1\n"
        "opt = OPT\n"
        "for i in range(3):\n"
        "    y = opt(ones(2))\n"
        "print(y.tolist())\n",
        "called\ncalled\ncalled\n[0.0, 0.0]\n");
}

BOOST_AUTO_TEST_CASE(a_local_list_needs_no_rerun) {
    // Lists the call makes itself are not side effects: the entry replays its graphs.
    std::string out = run(
        "def f(x):\n"
        "    parts = []\n"
        "    parts.append(x * 2)\n"
        "    parts.append(x + 1)\n"
        "    return parts[0] + parts[1]\n"
        "opt = compile(f, backend='eager')\n"
        "for i in range(3):\n"
        "    y = opt(ones(2))\n"
        "print(y.tolist())\n"
        "print(explain(f)(ones(2)))\n");
    BOOST_TEST(out.find("[4.0, 4.0]\n") == 0, out);
    BOOST_TEST(out.find("Re-run every call: no") != std::string::npos, out);
}

BOOST_AUTO_TEST_CASE(explain_names_the_side_effect) {
    std::string out = run(
        "log = []\n"
        "def f(x):\n"
        "    log.append(1)\n"
        "    return x + 1\n"
        "print(explain(f)(ones(2)))\n");
    BOOST_TEST(out.find("Re-run every call: yes") != std::string::npos, out);
    BOOST_TEST(out.find("list.append() at compiled.ks:3 in f") != std::string::npos, out);
}

// compile(f, choose_faster=...) reaches the inductor; either way calls print eager's values
// (the choice between kernels and eager happens over the calls after the first).
BOOST_AUTO_TEST_CASE(choose_faster_is_a_compile_option) {
    const std::string body =
        "def f(x):\n"
        "    return sin(x) * 2 + 1\n"
        "opt = OPT\n"
        "x = ones(3)\n"
        "for i in range(9):\n"
        "    print(opt(x + i).sum())\n";
    auto with = [&](const std::string& opt) {
        std::string src = body;
        src.replace(src.find("OPT"), 3, opt);
        return run(src);
    };
    std::string eager = with("f");
    BOOST_TEST(with("compile(f, choose_faster=False)") == eager);
    BOOST_TEST(with("compile(f, choose_faster=True)") == eager);
}

BOOST_AUTO_TEST_SUITE_END()
