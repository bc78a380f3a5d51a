// cuda::GraphedStep (tensor/cuda_graph_step.h): warm-up calls, one capture, then replays.
#include "tensor/cuda_graph_step.h"

#include <sstream>

#include "tensor/cuda.h"
#include "tensor/cuda_runtime.h"
#include "tensor/error.h"

namespace kiln::cuda {

GraphedStep::GraphedStep(Fn step, GraphedStepOptions options)
    : step_(std::move(step)), options_(options) {
    KILN_CHECK(step_ != nullptr, "GraphedStep: the step function is empty");
    KILN_CHECK(options_.warmup >= 1, "GraphedStep: warmup is ", options_.warmup,
               ", must be at least 1 (the eager calls before the capture make the optimizer's "
               "state and the "
               "gradients; captured, their creation would be replayed every step)");
}

GraphedStep::~GraphedStep() = default;

// A step's outputs as the caller gets them: detached (a replay rewrites their values, not
// their history) and on the GPU (a CPU value would be the capture's forever).
std::vector<Tensor> GraphedStep::run_eagerly() {
    std::vector<Tensor> out = step_();
    for (size_t i = 0; i < out.size(); ++i) {
        KILN_CHECK(out[i].defined(), "GraphedStep: output ", i,
                   " of the step is an undefined tensor");
        KILN_CHECK(out[i].device().type == DeviceType::cuda, "GraphedStep: output ", i,
                   " of the step is on ", out[i].device(), " (shape ", out[i].shape(),
                   "); a captured step's outputs must be CUDA tensors, which each replay rewrites "
                   "(a CPU value "
                   "would stay the capture's)");
        out[i] = out[i].detach();
    }
    return out;
}

std::vector<Tensor> GraphedStep::operator()() {
    detail::require("GraphedStep");
    KILN_CHECK(
        failed_.empty(),
        "GraphedStep: the step could not be captured earlier, so it is not replayed: ", failed_);
    KILN_CHECK(!detail::capturing(),
               "GraphedStep: called while a CUDA graph is being captured (a GraphedStep "
               "inside another's step, or inside a cuda::Graph): capture the outer one only");
    ++calls_;
    if (calls_ <= options_.warmup) return run_eagerly();
    if (!graph_) {
        auto graph = std::make_unique<Graph>();
        std::vector<Tensor> outputs;
        try {
            graph->capture([&] { outputs = run_eagerly(); });
        } catch (const Error& e) {
            outputs.clear();
            failed_ = e.what();
            fail("GraphedStep: the step cannot be captured as one CUDA graph (call ", calls_,
                 ", after ", options_.warmup, " warm-up calls): ", failed_,
                 ". Nothing captured ran: parameters and optimizer state keep their values");
        }
        graph_ = std::move(graph);
        outputs_ = std::move(outputs);
    }
    graph_->replay();
    ++replays_;
    return outputs_;
}

}  // namespace kiln::cuda
