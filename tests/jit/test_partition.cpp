// The min-cut partitioner on hand-built joint graphs (AOT autograd, docs/aot.md).
#include <boost/test/unit_test.hpp>

#include "jit/aot/partition.h"

using namespace kiln::jit::aot;

namespace {

struct JointBuilder {
    std::vector<PartitionNode> nodes;
    int add(std::string name, std::vector<int> inputs, size_t bytes = 400) {
        nodes.push_back({std::move(name), std::move(inputs), bytes});
        return int(nodes.size()) - 1;
    }
    std::vector<std::string> names(const std::vector<int>& ids) const {
        std::vector<std::string> out;
        for (int i : ids) out.push_back(nodes[i].name);
        return out;
    }
};

// cos(cos(x)) and its backward: grad_x = (g * -sin(cos x)) * -sin(x).
JointBuilder cos_cos() {
    JointBuilder b;
    int x = b.add("x", {});
    b.nodes[x].is_primal = true;
    int a = b.add("cos", {x});
    int out = b.add("cos_1", {a});
    b.nodes[out].is_fw_output = true;
    int g = b.add("tangent", {});
    b.nodes[g].is_tangent = true;
    int sa = b.add("sin", {a});
    int na = b.add("neg", {sa});
    int ga = b.add("mul", {g, na});
    int sx = b.add("sin_1", {x});
    int nx = b.add("neg_1", {sx});
    b.add("mul_1", {ga, nx});
    return b;
}

}  // namespace

BOOST_AUTO_TEST_CASE(cos_cos_saves_only_the_input_and_recomputes_cos) {
    JointBuilder b = cos_cos();
    Partition p = partition(b.nodes);
    BOOST_TEST(b.names(p.saved) == std::vector<std::string>{"x"});
    BOOST_TEST(p.saved_bytes == 400u);
    BOOST_TEST(p.in_backward[1]);   // cos(x) recomputed in backward
    BOOST_TEST(!p.in_backward[2]);  // the output is not needed there
    BOOST_TEST(p.in_forward[2]);
    BOOST_TEST(!p.in_forward[6]);   // backward nodes stay out of the forward
}

BOOST_AUTO_TEST_CASE(save_all_keeps_what_backward_reads_directly) {
    JointBuilder b = cos_cos();
    Partition p = partition_save_all(b.nodes);
    BOOST_TEST(p.saved.size() == 2u);  // neg(sin(cos x)) and neg(sin x)
    BOOST_TEST(partition(b.nodes).saved_bytes < p.saved_bytes);
}

BOOST_AUTO_TEST_CASE(matmul_outputs_are_saved_not_recomputed) {
    // h = relu(x @ w); out = h @ w2; backward reads h (for dw2) and x@w's mask.
    JointBuilder b;
    int x = b.add("x", {}, 1000), w = b.add("w", {}, 4000), w2 = b.add("w2", {}, 4000);
    for (int v : {x, w, w2}) b.nodes[v].is_primal = true;
    int mm = b.add("matmul", {x, w});
    b.nodes[mm].recomputable = false;
    int h = b.add("relu", {mm});
    int out = b.add("matmul_1", {h, w2});
    b.nodes[out].recomputable = false;
    b.nodes[out].is_fw_output = true;
    int g = b.add("tangent", {});
    b.nodes[g].is_tangent = true;
    int dw2 = b.add("matmul_2", {h, g});
    int dh = b.add("matmul_3", {g, w2});
    int mask = b.add("gt", {h}, 100);
    b.add("where", {mask, dh});
    (void)dw2;
    Partition p = partition(b.nodes);
    // Cheapest: save relu's output h (400) rather than the matmul (also 400) plus mask.
    BOOST_TEST(p.saved_bytes <= 400u + 4000u);
    for (int s : p.saved) BOOST_TEST(b.nodes[s].name != "matmul_1");
    BOOST_TEST(!p.in_backward[mm]);  // never recomputed
}

// min_cut is the max flow partition() cuts with (and assignment 4's reference for 4.2).
BOOST_AUTO_TEST_CASE(min_cut_of_the_textbook_network_is_23) {
    // CLRS figure 26.1: s = 0, t = 5.
    std::vector<FlowEdge> e{{0, 1, 16}, {0, 2, 13}, {2, 1, 4},  {1, 3, 12}, {3, 2, 9},
                            {2, 4, 14}, {4, 3, 7},  {3, 5, 20}, {4, 5, 4}};
    MinCut cut = min_cut(6, e, 0, 5);
    BOOST_TEST(cut.value == 23);
    BOOST_TEST_REQUIRE(cut.source_side.size() == 6u);
    int64_t crossing = 0;
    for (const FlowEdge& edge : e)
        if (cut.source_side[edge.from] && !cut.source_side[edge.to]) crossing += edge.capacity;
    BOOST_TEST(crossing == 23);
    BOOST_TEST((cut.source_side == std::vector<bool>{true, true, true, false, true, false}));
}
