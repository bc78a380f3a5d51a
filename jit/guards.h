// Guards: what an entry's recording assumed about fn's arguments (DESIGN.md §6). A call
// runs an entry only when every guard holds; the check is the whole cost of a cache hit.
#pragma once
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "tensor/tensor.h"

namespace kiln::jit {

// fn's arguments, flattened: Tensors, scalars, objects (modules: by identity), and the
// entries of string-keyed dicts of Tensors.
enum class ArgKind : uint8_t { tensor, scalar, object };
struct ArgValue {
    ArgKind kind = ArgKind::tensor;
    Tensor tensor;
    double scalar = 0;                 // ints and bools too
    const void* object = nullptr;      // identity of a module or other object
    int position = 0;                  // which parameter of fn
    const std::string* key = nullptr;  // the key, for a dict entry
};
using Args = std::vector<ArgValue>;
// "a", or "inputs[\"x\"]" for a dict entry; `names` are the parameter names, if given.
std::string arg_name(const ArgValue& a, const std::vector<std::string>& names);

enum class Dynamic { auto_, always, never };

struct ArgGuard {
    ArgKind kind = ArgKind::tensor;
    int position = 0;
    std::optional<std::string> key;
    DType dtype = DType::float32;
    Device device = cpu;
    bool requires_grad = false;
    Shape sizes;             // static sizes (sizes seen, for symbolic dims)
    std::vector<int> sym;    // per dim: symbol id or -1
    int alias_of = -1;       // index of an earlier argument holding the same tensor
    double scalar = 0;
    const void* object = nullptr;
};

// A dim of a tensor argument: (index into Args, dim).
using ArgDim = std::pair<int, int>;

struct GuardSet {
    std::vector<ArgGuard> args;
    bool grad_mode = true;
    std::vector<int64_t> sym_values;  // symbol values when recorded
    int num_symbols() const { return int(sym_values.size()); }

    // The fast check; binds symbol values into `syms` (resized to num_symbols()).
    bool check(const Args& args, std::vector<int64_t>& syms) const;
    // The first guard that fails, readable ("" when all hold).
    std::string failure(const Args& args, const std::vector<std::string>& names) const;
    // When only sizes fail: the dims whose sizes changed (candidates for symbols).
    std::optional<std::vector<ArgDim>> size_only_mismatch(const Args& args) const;
    std::set<ArgDim> symbolic_dims() const;
    std::vector<std::string> lines(const std::vector<std::string>& names) const;
};

// Guards for a recording of `args`; `symbolic` dims get symbols (same size, same symbol:
// PyTorch's duck sizing), except sizes 0 and 1 which stay specialized.
GuardSet make_guards(const Args& args, const std::set<ArgDim>& symbolic);
// Every dim of every tensor argument (dynamic=always).
std::set<ArgDim> all_dims(const Args& args);

}  // namespace kiln::jit
