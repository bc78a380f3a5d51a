// Autograd graph nodes. Each differentiable op call leaves one Node behind (the tape,
// kept as links from each tensor to the node that made it); backward() walks them in
// reverse topological order.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "tensor/ops.h"

namespace kiln::autograd {

// Where a node sends the gradient for one of its inputs.
struct Edge {
    std::shared_ptr<Node> node;          // producer of the input, or
    std::shared_ptr<TensorImpl> leaf;    // a leaf that accumulates into .grad
    int output_nr = 0;                   // which output of `node` the input was
    bool defined() const { return node || leaf; }
};

struct Node {
    virtual ~Node() = default;
    virtual std::string name() const = 0;
    // Gradients for each input (undefined Tensor where none), given the output's gradient.
    virtual std::vector<Tensor> apply(const Tensor& grad) = 0;
    // Nodes with several outputs (a compiled segment) get one gradient per output,
    // undefined where that output received none.
    virtual int num_outputs() const { return 1; }
    virtual std::vector<Tensor> apply_all(const std::vector<Tensor>& grads) { return apply(grads[0]); }
    // Tensors this node keeps alive for backward.
    virtual std::vector<Tensor> saved_tensors() const = 0;
    virtual void release_saved() = 0;  // after backward without retain_graph

    std::vector<Edge> next;  // one per input
    bool released = false;
    bool releases_after_apply = false;  // set by backward: release_saved() follows apply_all()
    size_t saved_bytes() const;
};

// A node for an op of the table: runs the table's derivative formula.
struct OpNode final : Node {
    OpId op;
    Attrs attrs;
    std::vector<Tensor> saved_inputs;  // undefined where the formula doesn't read the input
    Tensor saved_out;                  // detached alias, undefined unless the formula reads out
    std::vector<uint64_t> saved_versions;  // storage versions of saved_inputs, then saved_out, when saved
    std::vector<Shape> input_shapes;
    std::vector<DType> input_dtypes;

    std::string name() const override;
    std::vector<Tensor> apply(const Tensor& grad) override;
    std::vector<Tensor> saved_tensors() const override;
    void release_saved() override;
    std::vector<const Tensor*> saved_list() const;  // saved_inputs, then saved_out (some undefined)
};

// --- grad mode
bool grad_enabled();
void set_grad_enabled(bool on);
struct NoGradGuard {
    bool prev;
    NoGradGuard() : prev(grad_enabled()) { set_grad_enabled(false); }
    ~NoGradGuard() { set_grad_enabled(prev); }
    NoGradGuard(const NoGradGuard&) = delete;
    NoGradGuard& operator=(const NoGradGuard&) = delete;
};
struct EnableGradGuard {
    bool prev;
    EnableGradGuard() : prev(grad_enabled()) { set_grad_enabled(true); }
    ~EnableGradGuard() { set_grad_enabled(prev); }
};

// Edge for sending gradient to `t` (empty when t needs no grad).
Edge edge_to(const Tensor& t);
// Connects `out` to a node as its output `output_nr`: out.grad_fn = node, requires_grad = true.
void set_history(const Tensor& out, std::shared_ptr<Node> node, int output_nr = 0);
// Called by the dispatcher after an eager op: records an OpNode when needed.
void record_op(OpId op, std::span<const Tensor> inputs, const Attrs& attrs, const Tensor& out);

// Pack hook: called for every tensor a node saves (the seeds' "saving tensor of size ...").
using SavedTensorHook = std::function<void(const Tensor&)>;
struct SavedTensorsHooks {
    SavedTensorHook prev;
    explicit SavedTensorsHooks(SavedTensorHook pack);
    ~SavedTensorsHooks();
};
void notify_saved(const Tensor& t);

// Runs backward from `root` with output gradient `grad`.
void run_backward(const Tensor& root, const Tensor& grad, bool retain_graph);

}  // namespace kiln::autograd

namespace kiln {
using autograd::NoGradGuard;
}
