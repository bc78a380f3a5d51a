// A planted cheat: task 4.2 by brute force over the vertex subsets that hold the source and
// not the sink. Right on every network, and fine on the 6-vertex ones the tests used to
// have; the 30-60 vertex networks now in test_a4.cpp never finish.
// grader-expects: 4.2 | a search over vertex subsets never finishes
#include "assignments/a4/student.h"

#define min_cut reference_min_cut
#include "assignments/solutions/a4/student.cpp"
#undef min_cut

namespace student {

Cut min_cut(int num_vertices, const std::vector<FlowEdge>& edges, int source, int sink) {
    Cut best{std::numeric_limits<int64_t>::max(), {}};
    for (uint64_t mask = 0; mask < (uint64_t(1) << num_vertices); ++mask) {
        if (!(mask >> source & 1) || (mask >> sink & 1)) continue;
        std::vector<bool> side(num_vertices);
        for (int v = 0; v < num_vertices; ++v) side[v] = mask >> v & 1;
        int64_t c = 0;
        for (const FlowEdge& e : edges)
            if (side[e.from] && !side[e.to]) c += e.capacity;
        if (c < best.value) best = {c, side};
    }
    return best;
}

}  // namespace student
