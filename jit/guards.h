// Guards: what an entry's recording assumed about fn's arguments (docs/jit.md). A call
// runs an entry only when every guard holds; the check is the whole cost of a cache hit.
#pragma once
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tensor/tensor.h"

namespace kiln::jit {

// fn's arguments, flattened into leaves: Tensors, floating-point scalars, integers (ints,
// bools, container lengths: exact), strings, objects (modules: by identity). Containers
// (vectors, arrays, tuples, maps) become their length and their elements, recursively.
enum class ArgKind : uint8_t { tensor, scalar, integer, object, string };
inline constexpr int kLengthLeaf = -2;  // ArgValue::index of a container's length
struct ArgValue {
    ArgKind kind = ArgKind::tensor;
    Tensor tensor;
    double scalar = 0;                 // floating-point scalars (NaN matches NaN, -0.0 is not 0.0)
    int64_t integer = 0;               // integers and bools, exactly
    const void* object = nullptr;      // identity of a module or other object
    int position = 0;                  // which parameter of fn
    const std::string* key = nullptr;  // the key, for a dict entry
    int index = -1;                    // the element, for a sequence entry (kLengthLeaf: its length)
    std::string_view text = {};        // a string argument (points into the caller's string)
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
    int64_t integer = 0;
    const void* object = nullptr;
    int index = -1;
    std::string text;
};

// A dim of a tensor argument: (index into Args, dim).
using ArgDim = std::pair<int, int>;

struct GuardSet {
    std::vector<ArgGuard> args;
    bool grad_mode = true;
    std::vector<int64_t> sym_values;  // symbol values when recorded
    // Symbols the recording read as plain numbers (or that met a size no symbol can say):
    // pinned[k] != 0 means s_k must equal it. Empty until the first pin.
    std::vector<int64_t> pinned;
    std::vector<std::string> pin_reasons;
    int num_symbols() const { return int(sym_values.size()); }
    void pin(int k, int64_t value, const std::string& why);
    bool is_pinned(int k) const { return k < int(pinned.size()) && pinned[k] != 0; }

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
