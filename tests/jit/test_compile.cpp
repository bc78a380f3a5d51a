// kiln::compile: recording, lifting, guards, cache hits without host code, backends.
#include <boost/test/unit_test.hpp>

#include "jit/compile.h"
#include "jit/explain.h"

using namespace kiln;

namespace {

int g_host_calls = 0;

Tensor sin_plus_cos(Tensor x, Tensor y) {
    ++g_host_calls;
    return sin(x) + cos(y);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(jit_compile)

BOOST_AUTO_TEST_CASE(compiled_matches_eager_and_hits_skip_host_code) {
    jit::reset();
    auto f = compile(sin_plus_cos, {.backend = "eager"});
    Tensor x = randn({10, 10}), y = randn({10, 10});
    g_host_calls = 0;
    BOOST_CHECK(allclose(f(x, y), sin(x) + cos(y)));
    BOOST_CHECK_EQUAL(g_host_calls, 1);
    Tensor x2 = randn({10, 10}), y2 = randn({10, 10});
    BOOST_CHECK(allclose(f(x2, y2), sin(x2) + cos(y2)));
    BOOST_CHECK(allclose(f(x, y2), sin(x) + cos(y2)));
    BOOST_CHECK_EQUAL(g_host_calls, 1);  // hits run the graph, not fn
    jit::Counters c = jit::counters();
    BOOST_CHECK_EQUAL(c.compiles, 1);
    BOOST_CHECK_EQUAL(c.cache_hits, 2);
    BOOST_CHECK_EQUAL(c.graphs_compiled, 1);
}

BOOST_AUTO_TEST_SUITE_END()
