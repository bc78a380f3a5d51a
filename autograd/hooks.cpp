// Post-accumulate-grad hooks (autograd/hooks.h): a table from leaf to functions, and the
// counter that tells the engine when a leaf has all of this backward's gradients.
#include "autograd/hooks.h"

#include <map>

#include "tensor/error.h"

namespace kiln::autograd {
namespace {

struct Hook {
    std::weak_ptr<TensorImpl> leaf;
    PostAccumulateGradHook fn;
};
struct Table {
    int64_t next_id = 1;
    std::map<int64_t, Hook> by_id;
    std::unordered_map<TensorImpl*, std::vector<int64_t>> by_leaf;
};
Table& table() {
    static Table t;
    return t;
}

}  // namespace

int64_t register_post_accumulate_grad_hook(const Tensor& leaf, PostAccumulateGradHook hook) {
    KILN_CHECK(leaf.is_leaf() && leaf.requires_grad(),
               "register_post_accumulate_grad_hook: the tensor (shape ", leaf.shape(),
               ") must be a leaf that requires grad");
    Table& t = table();
    int64_t id = t.next_id++;
    t.by_id[id] = {leaf.impl_ptr(), std::move(hook)};
    t.by_leaf[leaf.impl()].push_back(id);
    return id;
}

void remove_post_accumulate_grad_hook(int64_t id) {
    Table& t = table();
    auto it = t.by_id.find(id);
    if (it == t.by_id.end()) return;
    for (auto l = t.by_leaf.begin(); l != t.by_leaf.end(); ++l) {
        std::erase(l->second, id);
        if (l->second.empty()) {
            t.by_leaf.erase(l);
            break;
        }
    }
    t.by_id.erase(it);
}

void run_post_accumulate_hooks(TensorImpl* leaf) {
    Table& t = table();
    auto it = t.by_leaf.find(leaf);
    if (it == t.by_leaf.end()) return;
    std::vector<int64_t> ids = it->second;  // a hook may remove hooks
    for (int64_t id : ids) {
        auto h = t.by_id.find(id);
        if (h == t.by_id.end()) continue;
        if (auto impl = h->second.leaf.lock()) h->second.fn(Tensor(impl));
    }
}

LeafHookCounter::LeafHookCounter(const std::vector<Node*>& order) {
    const auto& hooked = table().by_leaf;
    if (hooked.empty()) return;
    for (const Node* n : order)
        for (const Edge& e : n->next)
            if (e.leaf && hooked.count(e.leaf.get())) ++pending_[e.leaf.get()].edges;
}

void LeafHookCounter::edge_done(TensorImpl* leaf, bool accumulated) {
    auto it = pending_.find(leaf);
    if (it == pending_.end()) return;
    it->second.any |= accumulated;
    if (--it->second.edges > 0) return;
    bool any = it->second.any;
    pending_.erase(it);
    if (any) run_post_accumulate_hooks(leaf);
}

void LeafHookCounter::node_skipped(const Node& node) {
    for (const Edge& e : node.next)
        if (e.leaf) edge_done(e.leaf.get(), false);
}

}  // namespace kiln::autograd
