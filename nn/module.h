// nn::Module: a callable with named parameters and child modules (PyTorch's nn.Module).
// Modules are held by shared_ptr and never copied: the JIT guards on a module's identity.
#pragma once
#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "tensor/ops.h"

namespace kiln::nn {

class Module {
   public:
    Module() = default;
    virtual ~Module() = default;
    Module(const Module&) = delete;
    Module& operator=(const Module&) = delete;
    Module(Module&&) = default;  // only while building: nn::sequential(nn::Linear(2, 3), ...)
    Module& operator=(Module&&) = delete;

    virtual Tensor forward(const Tensor& x) = 0;
    // Under compile(), calling a module guards its state (see state_changed).
    Tensor operator()(const Tensor& x) {
        report_guard_state();
        return forward(x);
    }

    // Makes `value` a leaf that requires grad and lists it under `name`; returns it.
    Tensor register_parameter(const std::string& name, Tensor value);
    template <class M>
    std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
        add_child(name, module);
        return module;
    }

    // Drops the parameter or child module registered as `name` (reassignment from kiln
    // script: m.fc = nn.Linear(...) replaces fc); false when there is none.
    bool unregister(const std::string& name);
    bool has_parameter(const std::string& name) const;
    bool has_child(const std::string& name) const;

    // Own parameters, then each child's, in registration order; a shared tensor once.
    std::vector<Tensor> parameters() const;
    std::vector<std::pair<std::string, Tensor>> named_parameters() const;  // "0.weight", "0.bias", ...
    const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& children() const { return children_; }

    void train(bool on = true);  // this module and every child
    void eval() { train(false); }
    bool is_training() const;  // under compile(): guarded
    // Compiled functions that called this module are guarded on its state: the training
    // flag, the registered modules and parameters. A forward that reads a plain member
    // must call state_changed() when that member changes, or the compiled code keeps the
    // old value (docs/jit.md). Reassigning a registered tensor is unseen: copy_() into it.
    void state_changed() { ++state_version_; }
    void report_guard_state() const;
    void zero_grad();  // drops every parameter's .grad
    // Moves every parameter (and its .grad) to `device` in place: each keeps its identity, so
    // an optimizer built before still updates it (PyTorch's module.to(device)).
    void to(Device device);

    // For printing: "Linear" and "in_features=2, out_features=3, bias=True".
    virtual std::string type_name() const;
    virtual std::string extra_repr() const { return ""; }

   private:
    void add_child(const std::string& name, std::shared_ptr<Module> module);
    void collect(const std::string& prefix, std::vector<std::pair<std::string, Tensor>>& out) const;

    std::vector<std::pair<std::string, Tensor>> params_;
    std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
    bool training_ = true;
    uint64_t state_version_ = 0;
};

// PyTorch's layout: "Sequential(\n  (0): Linear(in_features=2, ...)\n  (1): ReLU()\n)".
std::ostream& operator<<(std::ostream& os, const Module& m);

}  // namespace kiln::nn
