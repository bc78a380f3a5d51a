// Functionalization (jit/functionalize.cpp; docs/jit.md, "Functionalization"): fn's
// in-place ops are recorded as the functional ops that compute their new values; a
// mutated argument's new value is a graph output, written back into its storage after
// the graph.
#include <boost/test/unit_test.hpp>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "jit/explain.h"
#include "kiln.h"

using namespace kiln;

namespace {

// A backend that keeps the text of each graph it is given and interprets it.
struct GraphText {
    std::shared_ptr<std::vector<std::string>> graphs = std::make_shared<std::vector<std::string>>();
    jit::Backend backend() const {
        auto seen = graphs;
        return jit::BackendFn(
            [seen](const jit::Graph& g, std::span<const Tensor>) -> jit::CompiledFn {
                seen->push_back(g.str());
                return [&g](std::span<const Tensor> in) { return jit::interpret(g, in); };
            });
    }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(jit_functionalize)

// The example of docs/jit.md: an in-place op on an intermediate replaces its graph value;
// one on an argument also makes the new value an output that is copied back.
BOOST_AUTO_TEST_CASE(in_place_ops_become_functional_nodes_and_an_argument_is_written_back) {
    auto f = [](Tensor x) {
        Tensor y = x * 2;
        y.mul_(3);  // an intermediate: nothing to write back
        x.add_(y);  // an argument: the caller sees the write
        return y;
    };
    jit::reset();
    GraphText text;
    auto c = compile(f, {.backend = text.backend(), .arg_names = {"x"}});
    for (int call = 0; call < 2; ++call) {  // recording, then a hit
        Tensor x = arange(0, 3).to(DType::float32), xe = x.clone();
        Tensor out = c(x), want = f(xe);
        BOOST_TEST_CONTEXT("call " << call) {
            BOOST_CHECK(allclose(out, want));
            BOOST_CHECK(allclose(x, xe));  // written back: x + 6x
        }
    }
    // mul_ and add_ are the ops that compute their new values; `add` (x's new value) is
    // also an output: the write-back.
    BOOST_REQUIRE_EQUAL(text.graphs->size(), 1u);
    BOOST_TEST(text.graphs->at(0) ==
               "graph(x: float32[3]):\n"
               "    mul: float32[3] = mul(x, 2)\n"
               "    mul_1: float32[3] = mul(mul, 3)\n"
               "    add: float32[3] = add(x, mul_1)\n"
               "    return (mul_1, add)\n");
    std::ostringstream os;
    os << jit::explain_compiled(c);
    BOOST_TEST(
        os.str().find("Functionalized in-place writes:\n  entry 1: 1 input(s) mutated in place "
                      "(slots 0=argument), written back after the graph\n") != std::string::npos,
        os.str());
    BOOST_CHECK_EQUAL(jit::counters().eager_runs, 0);
}

BOOST_AUTO_TEST_SUITE_END()
