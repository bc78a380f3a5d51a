// Post-accumulate-grad hooks (PyTorch's Tensor.register_post_accumulate_grad_hook): a function
// called once per backward, after a leaf's .grad has received every gradient that backward
// sends it. DistributedDataParallel starts a bucket's all-reduce from them.
#pragma once
#include <functional>
#include <unordered_map>
#include <vector>

#include "autograd/node.h"

namespace kiln::autograd {

using PostAccumulateGradHook = std::function<void(const Tensor& leaf)>;
// Returns an id for remove_post_accumulate_grad_hook. `leaf` must be a leaf that requires grad.
int64_t register_post_accumulate_grad_hook(const Tensor& leaf, PostAccumulateGradHook hook);
void remove_post_accumulate_grad_hook(int64_t id);

// The engine's side (autograd/node.cpp's run_backward): how many gradients each hooked leaf
// still expects in this backward; the hooks run when that reaches zero.
class LeafHookCounter {
   public:
    // Counts the edges into hooked leaves of `order`'s nodes (nothing when no hook exists).
    explicit LeafHookCounter(const std::vector<Node*>& order);
    // One edge into `leaf` is done: `accumulated` says whether it carried a gradient.
    void edge_done(TensorImpl* leaf, bool accumulated);
    // A node that will not run (no gradient reached it): its leaf edges are done, empty.
    void node_skipped(const Node& node);

   private:
    struct Pending {
        int edges = 0;
        bool any = false;
    };
    std::unordered_map<TensorImpl*, Pending> pending_;
};
// A root leaf (backward on a leaf itself) has its one gradient: its hooks run.
void run_post_accumulate_hooks(TensorImpl* leaf);

}  // namespace kiln::autograd
