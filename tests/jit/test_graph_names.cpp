// GraphBuilder's node names (jit/graph.h): unique in a graph, a base name first, then
// base_1, base_2 ... skipping names already taken, and in time linear in the graph's size
// (AOT's joint graph of ResNet-18 has thousands of nodes; a scan of every name per node
// made naming most of a warm first call, docs/perf.md).
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <set>

#include "jit/graph.h"
#include "kiln.h"

using namespace kiln;

BOOST_AUTO_TEST_SUITE(jit_graph_names)

BOOST_AUTO_TEST_CASE(names_take_the_smallest_free_suffix) {
    jit::GraphBuilder b;
    jit::ValueMeta meta = jit::meta_of(randn({2}));
    int x = b.placeholder("mul_2", meta, "argument");  // takes a name mul would get
    for (int i = 0; i < 4; ++i) b.call(OpId::mul, {}, {x, x}, meta, true);
    b.placeholder("mul", meta, "argument");  // taken: gets a suffix too
    auto g = b.build({x});
    std::vector<std::string> names;
    for (const jit::Node& n : g->nodes()) names.push_back(n.name);
    // placeholders first (build's order), then the calls, then the output
    std::vector<std::string> want = {"mul_2", "mul_5", "mul", "mul_1", "mul_3", "mul_4", "output"};
    BOOST_TEST(names == want, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(naming_many_nodes_of_one_op_is_linear) {
    constexpr int kNodes = 3000;  // a scan per name: ~kNodes^3 / 3 string compares, minutes
    jit::GraphBuilder b;
    jit::ValueMeta meta = jit::meta_of(randn({2}));
    int x = b.placeholder("x", meta, "argument");
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < kNodes; ++i) b.call(OpId::mul, {}, {x, x}, meta, true);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    auto g = b.build({x});
    std::set<std::string> names;
    for (const jit::Node& n : g->nodes()) names.insert(n.name);
    BOOST_TEST(names.size() == g->nodes().size());
    BOOST_TEST(names.count("mul_" + std::to_string(kNodes - 1)) == 1u);
    BOOST_TEST(s < 5.0, kNodes << " nodes named in " << s << " s");  // milliseconds when linear
}

BOOST_AUTO_TEST_SUITE_END()
