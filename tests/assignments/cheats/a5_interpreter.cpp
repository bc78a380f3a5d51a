// A planted cheat: the reference solution with task 5.3's kernels left empty and run_fused
// computing the graph with kiln's interpreter, so the graded values never come from the
// kernels. Caught twice: the manifest forbids jit::interpret in 5.3, and the test that swaps
// in marker kernels sees outputs that no kernel wrote.
// grader-expects: 5.3 | calls kiln::jit::interpret (via student::run_fused)
// grader-expects: 5.3 | is not what kernel_0 wrote
#include "assignments/a5/student.h"

#define compile_fused reference_compile_fused
#define run_fused reference_run_fused
#include "assignments/solutions/a5/student.cpp"
#undef compile_fused
#undef run_fused

namespace student {

FusedGraph compile_fused(const Graph& graph) {
    FusedGraph fused;
    fused.groups = group_pointwise(graph);
    if (fused.groups.empty()) return fused;
    fused.source = kernel_preamble();
    for (size_t k = 0; k < fused.groups.size(); ++k)
        fused.source += "namespace kiln_math { extern \"C\" void kernel_" + std::to_string(k) +
                        "(const float* const*, float* const*, int64_t) {} }\n";
    fused.library = codegen::build_library(fused.source, {.include_dirs = {KILN_SOURCE_DIR}});
    return fused;
}

std::vector<Tensor> run_fused(const FusedGraph& fused, const Graph& graph,
                              std::span<const Tensor> inputs) {
    (void)fused;
    return jit::interpret(graph, inputs);
}

}  // namespace student
