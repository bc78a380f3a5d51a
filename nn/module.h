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

// PyTorch's state dict: (name, tensor) in registration order, parameters and buffers
// ("layer1.0.bn1.weight", "layer1.0.bn1.running_mean", ...). nn/state_dict.cpp.
using StateDict = std::vector<std::pair<std::string, Tensor>>;

// What load_state_dict(dict, strict = false) could not match (PyTorch's _IncompatibleKeys).
struct IncompatibleKeys {
    std::vector<std::string> missing_keys, unexpected_keys;
};

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

    // Registers state that is not a parameter (BatchNorm's running_mean): it is listed by
    // state_dict() and moved by to(), but never by parameters(), so no optimizer updates it.
    Tensor register_buffer(const std::string& name, Tensor value);

    // Drops the parameter, buffer or child module registered as `name` (reassignment from kiln
    // script: m.fc = nn.Linear(...) replaces fc); false when there is none.
    bool unregister(const std::string& name);
    bool has_parameter(const std::string& name) const;
    bool has_child(const std::string& name) const;

    // Own parameters, then each child's, in registration order; a shared tensor once.
    std::vector<Tensor> parameters() const;
    std::vector<std::pair<std::string, Tensor>> named_parameters() const;  // "0.weight", "0.bias", ...
    std::vector<std::pair<std::string, Tensor>> named_buffers() const;  // "bn1.running_mean", ...
    const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& children() const { return children_; }

    // Parameters and buffers, each module's own then its children's (PyTorch's order), as
    // detached tensors sharing the module's storage. A tensor registered under two names
    // (a tied weight) is listed once, under the first.
    StateDict state_dict() const;
    // Copies each entry into the tensor of that name, in place and without autograd (an
    // optimizer built before keeps updating the same tensors), converting the dtype as
    // copy_() does. Any name a tied tensor is registered under is accepted. Everything is
    // checked before anything is copied: a kiln::Error lists missing keys and unexpected
    // keys (only when strict) and every shape mismatch (always), and the module is untouched.
    IncompatibleKeys load_state_dict(const StateDict& dict, bool strict = true);

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
    // Moves every parameter (and its .grad) and buffer to `device` in place: each keeps its identity, so
    // an optimizer built before still updates it (PyTorch's module.to(device)).
    void to(Device device);

    // For printing: "Linear" and "in_features=2, out_features=3, bias=True".
    virtual std::string type_name() const;
    virtual std::string extra_repr() const { return ""; }

   private:
    void add_child(const std::string& name, std::shared_ptr<Module> module);
    void collect(const std::string& prefix, std::vector<std::pair<std::string, Tensor>>& out) const;
    // Every (name, tensor) of parameters and buffers, tied tensors under each of their names.
    void collect_state(const std::string& prefix, StateDict& out) const;

    std::vector<std::pair<std::string, Tensor>> params_;
    std::vector<std::pair<std::string, Tensor>> buffers_;
    std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
    bool training_ = true;
    uint64_t state_version_ = 0;
};

// PyTorch's layout: "Sequential(\n  (0): Linear(in_features=2, ...)\n  (1): ReLU()\n)".
std::ostream& operator<<(std::ostream& os, const Module& m);

}  // namespace kiln::nn
