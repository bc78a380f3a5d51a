// A planted cheat that calls nothing the manifest forbids: run_fused calls each kernel (so
// it "runs" them), then recomputes every node through kiln::dispatch and returns that. Only
// the test that swaps in marker kernels can tell: the outputs are not what the kernels wrote.
// grader-expects: 5.3 | is not what kernel_0 wrote
#include "assignments/a5/student.h"

#define run_fused reference_run_fused
#include "assignments/solutions/a5/student.cpp"
#undef run_fused

namespace student {

std::vector<Tensor> run_fused(const FusedGraph& fused, const Graph& graph,
                              std::span<const Tensor> inputs) {
    const auto& nodes = graph.nodes();
    std::vector<Tensor> env(nodes.size());
    for (int i = 0; i < graph.num_inputs(); ++i) env[i] = inputs[i];
    for (int i = graph.num_inputs(); i + 1 < int(nodes.size()); ++i) {
        std::vector<Tensor> args;
        for (int a : nodes[i].args) args.push_back(env[a]);
        env[i] = dispatch(nodes[i].op, args, nodes[i].attrs);
    }
    for (size_t k = 0; k < fused.groups.size(); ++k) {  // run each kernel once, into scratch
        const Group& g = fused.groups[k];
        std::vector<Tensor> ins, outs;
        std::vector<const float*> in_ptrs;
        std::vector<float*> out_ptrs;
        for (int a : g.inputs)
            ins.push_back(env[a].contiguous()),
                in_ptrs.push_back(static_cast<const float*>(ins.back().raw_data()));
        for (int o : g.outputs)
            outs.push_back(empty(env[o].shape())),
                out_ptrs.push_back(static_cast<float*>(outs.back().raw_data()));
        auto kernel =
            reinterpret_cast<KernelFn>(fused.library->symbol("kernel_" + std::to_string(k)));
        kernel(in_ptrs.data(), out_ptrs.data(), ins.front().numel());
    }
    std::vector<Tensor> out;
    for (int o : graph.outputs()) out.push_back(env[o]);
    return out;
}

}  // namespace student
