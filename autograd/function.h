// User-defined autograd functions: write forward and backward yourself, save what
// backward needs on a Ctx (PyTorch's torch.autograd.Function).
//
//   struct Cosine : autograd::Function<Cosine> {
//       static Tensor forward(const Tensor& x) { return cos(x); }
//       static void setup_context(autograd::Ctx& ctx, const std::vector<Tensor>& inputs, const Tensor&) {
//           ctx.save_for_backward(inputs[0]);
//       }
//       static std::vector<Tensor> backward(autograd::Ctx& ctx, const Tensor& grad) {
//           return {-sin(ctx.saved_tensors()[0]) * grad};
//       }
//   };
//   Tensor y = Cosine::apply(x);
//
// Tensor arguments of apply are the inputs that get gradients; any other argument is a
// constant, passed to forward and readable in backward as ctx.arg<T>(index). forward may
// also take the ctx first (`forward(Ctx&, args...)`, the older PyTorch style); then
// setup_context is not needed (it is optional anyway when nothing is saved).
#pragma once
#include <algorithm>
#include <any>
#include <functional>
#include <map>
#include <optional>
#include <ostream>
#include <source_location>
#include <string>
#include <typeinfo>
#include <vector>

#include "autograd/node.h"

namespace kiln::autograd {

// What forward leaves for backward: saved tensors, named scalars, the call's arguments.
class Ctx {
   public:
    template <class... Ts>
    void save_for_backward(const Ts&... tensors) {
        static_assert((std::is_same_v<Ts, Tensor> && ...), "save_for_backward: pass Tensors (use set_scalar for numbers)");
        save_for_backward(std::vector<Tensor>{tensors...});
    }
    void save_for_backward(const std::vector<Tensor>& tensors);
    const std::vector<Tensor>& saved_tensors() const;

    void set_scalar(const std::string& key, double value) { scalars_[key] = value; }
    double scalar(const std::string& key) const;

    // Argument `index` of apply(...) (counting tensors too), for non-tensor arguments.
    template <class V>
    const V& arg(size_t index) const {
        check_arg(index, typeid(V));
        return *std::any_cast<V>(&args_[index]);
    }
    size_t num_args() const { return args_.size(); }
    // Whether tensor input `i` (counting tensors only) wants a gradient.
    bool needs_input_grad(size_t i) const { return i < needs_input_grad_.size() && needs_input_grad_[i]; }

   private:
    friend struct FunctionNode;
    template <class T>
    friend struct Function;
    void check_arg(size_t index, const std::type_info& want) const;

    std::vector<Tensor> saved_;            // detached aliases: no cycle through the output
    std::map<std::string, double> scalars_;
    std::vector<std::any> args_;           // empty at tensor positions
    std::vector<bool> needs_input_grad_;
    std::string function_;                 // for error messages
    bool recording_ = false;               // a node will be attached: saving is reported
    bool released_ = false;
};

// The node a Function leaves on the tape: calls the user's backward with the ctx.
struct FunctionNode final : Node {
    using BackwardFn = std::function<std::vector<Tensor>(Ctx&, const Tensor&)>;
    FunctionNode(std::string function_name, BackwardFn backward);

    std::string name() const override { return function_name_ + "Backward"; }
    std::vector<Tensor> apply(const Tensor& grad) override;
    std::vector<Tensor> saved_tensors() const override { return ctx.saved_; }
    void release_saved() override;

    // Connects `out` to `node` (when recording) and returns it.
    static Tensor attach(const std::shared_ptr<FunctionNode>& node, const std::vector<Tensor>& inputs, Tensor out,
                         bool recording);

    Ctx ctx;

   private:
    std::string function_name_;
    BackwardFn backward_;
    std::vector<Shape> input_shapes_;
    std::vector<DType> input_dtypes_;
};

// A type's name without namespaces or enclosing functions: "Cosine" for struct Cosine.
std::string short_type_name(const std::type_info& type);

template <class T>
struct Function {
    template <class... Args>
    static Tensor apply(const Args&... args) {
        auto node = std::make_shared<FunctionNode>(short_type_name(typeid(T)), &T::backward);
        Ctx& ctx = node->ctx;
        std::vector<Tensor> inputs;
        (collect(args, inputs, ctx), ...);
        bool recording = grad_enabled() &&
                         std::any_of(inputs.begin(), inputs.end(), [](const Tensor& t) { return t.requires_grad(); });
        for (const Tensor& t : inputs) ctx.needs_input_grad_.push_back(recording && t.requires_grad());
        ctx.recording_ = recording;
        // Under compile() a Function that puts a node on the tape is a graph break: its
        // backward is user code the joint graph cannot hold, so it runs eagerly, between
        // two graphs, on every call (docs/autograd-and-nn.md).
        std::optional<NoDispatchHook> eager;
        if (DispatchHook* hook = dispatch_hook(); recording && hook)
            if (hook->custom_function(inputs[0], std::source_location::current())) eager.emplace();
        Tensor out;
        {
            NoGradGuard no_grad;  // forward's own ops are not recorded: backward is the user's
            if constexpr (requires { T::forward(ctx, args...); }) {
                out = T::forward(ctx, args...);
            } else {
                out = T::forward(args...);
                if constexpr (requires { T::setup_context(ctx, inputs, out); }) T::setup_context(ctx, inputs, out);
            }
        }
        return FunctionNode::attach(node, inputs, std::move(out), recording);
    }

   private:
    template <class A>
    static void collect(const A& arg, std::vector<Tensor>& inputs, Ctx& ctx) {
        if constexpr (std::is_same_v<A, Tensor>) {
            inputs.push_back(arg);
            ctx.args_.emplace_back();
        } else {
            ctx.args_.emplace_back(std::decay_t<A>(arg));
        }
    }
};

// How much each node reachable from a tensor keeps alive for backward.
struct SavedReport {
    struct Entry {
        std::string node;
        size_t tensors = 0;
        size_t bytes = 0;
    };
    std::vector<Entry> nodes;  // breadth first from the output's grad_fn
    size_t total_tensors = 0;
    size_t total_bytes = 0;
};
SavedReport saved_report(const Tensor& out);
std::ostream& operator<<(std::ostream& os, const SavedReport& r);

}  // namespace kiln::autograd
