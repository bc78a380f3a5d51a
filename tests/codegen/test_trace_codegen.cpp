// The provenance map of the compile log (codegen/trace_codegen.h): each node's generated
// lines, read off the emitted source and the schedule.
#include <boost/test/unit_test.hpp>
#include <map>
#include <set>
#include <sstream>

#include "codegen/emit_cpp.h"
#include "codegen/schedule.h"
#include "codegen/trace_codegen.h"
#include "kiln.h"
#include "lgraph_builder.h"

using namespace kiln;
using namespace kiln::codegen;

namespace {

std::vector<std::string> split(const std::string& text) {
    std::vector<std::string> out;
    std::istringstream in(text);
    for (std::string l; std::getline(in, l);) out.push_back(l);
    return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(codegen_trace)

// A chain of 24 cos: cos_2 must not claim cos_23's lines, nor a line that only reads it.
BOOST_AUTO_TEST_CASE(each_line_belongs_to_the_node_it_computes) {
    testing::GraphBuilder b;
    int v = b.input({1000}, "x");
    for (int i = 0; i < 24; ++i) v = b.unary(OpId::cos, v);
    b.output(v);
    Schedule s = schedule(b.graph);
    std::string src = emit(s);
    std::vector<std::string> lines = split(src);
    std::vector<Provenance> map = provenance(s, src);

    std::map<int, std::set<int>> owner;  // line -> nodes claiming it
    std::set<int> nodes;
    for (const Provenance& p : map) {
        nodes.insert(p.node);
        BOOST_TEST(p.kernel == "kernel_0");
        std::string name = s.value_name(p.node);
        for (auto [first, last] : p.lines) {
            BOOST_REQUIRE(first >= 1);
            BOOST_REQUIRE(last <= int(lines.size()));
            for (int l = first; l <= last; ++l) {
                owner[l].insert(p.node);
                BOOST_TEST(lines[size_t(l - 1)].find(name) != std::string::npos,
                           lines[size_t(l - 1)] << " for " << name);
            }
        }
    }
    BOOST_TEST(nodes.size() == 25u);  // the input and the 24 cos
    for (const auto& [line, who] : owner)
        BOOST_TEST(who.size() == 1u, "line " << line << ": " << lines[size_t(line - 1)]);
    // cos_2's own statement is one of its lines
    bool found = false;
    for (const Provenance& p : map)
        if (p.node == 2)
            for (auto [first, last] : p.lines)
                for (int l = first; l <= last; ++l)
                    found = found ||
                            lines[size_t(l - 1)].find("cos_2 = cos(cos_1)") != std::string::npos;
    BOOST_TEST(found);
}

BOOST_AUTO_TEST_CASE(a_source_without_the_kernels_maps_nothing) {
    testing::GraphBuilder b;
    int x = b.input({8}, "x");
    b.output(b.unary(OpId::exp, x));
    Schedule s = schedule(b.graph);
    BOOST_TEST(provenance(s, "").empty());
    BOOST_TEST(provenance(s, "int unrelated(int exp_1) {\n  int exp_1_ptr = 0;\n}\n").empty());
}

BOOST_AUTO_TEST_SUITE_END()
