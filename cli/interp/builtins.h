// The builtins of kiln script: one table, keyed by the name a script uses. Functions are
// keyed by their PyTorch name ("randn", "nn.Linear", "F.relu", "optim.SGD"); methods by
// receiver type and name ("Tensor.cos", "Module.parameters", "list.append"). A `torch.`
// prefix resolves to the same entries (namespace_attr), so tutorial code pastes in.
#pragma once
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cli/interp/interp.h"

namespace kiln::interp {

struct Builtin;

// The arguments of a builtin call, matched to its parameter list: params[i] is the i-th
// parameter (positional or by keyword), unset when not given; `rest` collects *args.
struct Bound {
    Interp& in;
    const Builtin& fn;
    Value self;  // the receiver of a method; None for functions
    std::vector<std::optional<Value>> params;
    std::vector<Value> rest;

    bool has(size_t i) const { return i < params.size() && params[i] && !params[i]->is_none(); }
    const Value& value(size_t i);  // raises TypeError when missing
    Tensor tensor(size_t i);
    double number(size_t i);
    double number_or(size_t i, double fallback) { return has(i) ? number(i) : fallback; }
    int64_t integer(size_t i);
    int64_t integer_or(size_t i, int64_t fallback) { return has(i) ? integer(i) : fallback; }
    bool flag_or(size_t i, bool fallback);
    std::string string(size_t i);
    // A shape given as varargs (randn(2, 3)) or one sequence (randn((2, 3))): from `rest`,
    // or from params[i] when the builtin takes the shape as a named parameter.
    Shape shape_from_rest();
    Shape dims(size_t i);  // an int or a sequence of ints (sum(dim=(0, 1)))
    [[noreturn]] void type_error(size_t i, const std::string& expected);
    const Tensor& self_tensor() const;
};

using BuiltinFn = Value (*)(Bound&);

struct Builtin {
    std::string name;    // the key: "randn", "Tensor.cos"
    std::string params;  // "*size, requires_grad=False, dtype=None": binding and :help
    BuiltinFn fn;
    std::string doc;     // one line, for :help
};

// The entries of each builtins_*.cpp, gathered into the table by builtins.cpp.
std::span<const Builtin> core_builtins();    // print, range, len, compile, explain, ...
std::span<const Builtin> tensor_builtins();  // factories, ops, Tensor.* methods
std::span<const Builtin> nn_builtins();      // nn.*, F.*, optim.*, Module.*, Optimizer.*
std::span<const Builtin> class_builtins();   // super, isinstance, staticmethod, Function.apply (classes.cpp)
std::span<const Builtin> extra_builtins();
// torch.distributed, nn.parallel.DistributedDataParallel (builtins_dist.cpp)
std::span<const Builtin> dist_builtins();
// dist.ReduceOp.SUM / AVG / MAX (builtins_dist.cpp), nullopt for another name.
std::optional<Value> dist_reduce_op(const std::string& name);
std::span<const Builtin> models_builtins();  // nn.MultiheadAttention, torchvision.models.resnet18, kiln.models.gpt, state_dict (builtins_models.cpp)
Value b_round(Bound& b);  // Python's round, and torch.round(tensor, decimals) (builtins.cpp)
std::span<const Builtin> ops_builtins();     // stack, clamp, argmax, var/std, chunk, F.gelu, nn.LayerNorm ... (builtins_ops.cpp)   // sorted, sum, abs, str methods, no_grad, jit.trace ... (extras.cpp)

const Builtin* find_builtin(const std::string& key);
// int, float, str, bool, list, tuple, dict, set: builtins that are also types (type(1) is int).
bool is_type_builtin(const Builtin& b);
// The method `name` of `self`'s type, or null.
const Builtin* find_method(const Value& self, const std::string& name);
// torch.sin, nn.Linear, torch.nn.functional: what `ns.name` means, or nullopt.
std::optional<Value> namespace_attr(const Namespace& ns, const std::string& name);
// What `import torch.nn` binds (the namespace value), or nullopt for an unknown module.
std::optional<Value> import_module(const std::string& dotted);
// Names a script can use without a prefix (for the REPL's tab completion and :help).
std::vector<std::string> builtin_names();
// The attribute and method names `v.` may be followed by, for the REPL's Tab completion
// (torch.nn.fun<Tab>, x.su<Tab>): sorted, no duplicates.
std::vector<std::string> attribute_names(const Value& v);

// Binds and runs a builtin (a method when self is not None). Raises TypeError for a wrong
// number of arguments or an unknown keyword.
Value call_builtin(Interp& in, const Builtin& fn, const Value& self, CallArgs& args);

// Tensor attributes that are not methods: shape, grad, requires_grad, dtype, T, ndim ...
std::optional<Value> tensor_attr(const Tensor& t, const std::string& name);
// A device argument ("cpu", "cuda:0", torch.device): the kiln device, or a RuntimeError
// naming `op` when it cannot be used here (no usable GPU: the reason).
Device device_arg(Interp& in, const Value& v, const std::string& op);
bool set_tensor_attr(Interp& in, Tensor& t, const std::string& name, const Value& v);
std::optional<Value> module_attr(const ModulePtr& m, const std::string& name);

// A Python value as a Tensor operand: tensors as they are, numbers as 0-d tensors.
Tensor to_tensor(Interp& in, const Value& v, const char* what);
// torch.tensor([[1, 2], [3, 4]]): nested lists of numbers.
Tensor tensor_from_data(Interp& in, const Value& data, std::optional<DType> dtype, bool requires_grad);

}  // namespace kiln::interp
