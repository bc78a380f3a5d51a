// Values of kiln script: what a name can hold. A Value is a std::variant of plain data
// (None, bool, int, float, str, Tensor, dtype) and shared handles to heap objects (lists,
// dicts, functions, modules, compiled functions), so copying a Value is cheap and two
// names can share one list, as in Python.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "cli/script/ast.h"
#include "jit/cache.h"
#include "jit/explain.h"
#include "nn/module.h"
#include "optim/optimizer.h"
#include "tensor/tensor.h"

namespace kiln::interp {

struct Value;
struct Builtin;
struct Scope;

struct None {
    bool operator==(const None&) const = default;
};
class Interp;
struct CallArgs;
struct Object;
struct Value;
using ObjectPtr = std::shared_ptr<Object>;
struct Object {
    virtual ~Object() = default;
    virtual std::string type_name() const = 0;
    virtual std::string repr() const = 0;
    virtual std::string str() const { return repr(); }
    // `self` is the handle that holds this object. call: TypeError unless overridden; attr:
    // nullopt for an unknown name; set_attr: false when the name cannot be set.
    virtual Value call(Interp& in, const ObjectPtr& self, CallArgs& args);
    virtual std::optional<Value> attr(Interp& in, const ObjectPtr& self, const std::string& name);
    virtual bool set_attr(Interp& in, const std::string& name, const Value& value);
    // ==: identity unless a kind of object compares by value (torch.device).
    virtual bool equals(const Object& other) const { return this == &other; }
};

// Which call of a compiled function's host code made an object (0: none): compile() reports
// a mutation of an object it did not make in this call as a host side effect (compiled.cpp).
uint64_t creation_epoch();
struct CreationEpochScope {  // a fresh epoch while host code runs
    CreationEpochScope();
    ~CreationEpochScope();
    uint64_t saved;
};

// Containers free their items without recursion (release_items in value.cpp), so a list
// nested 200,000 deep is freed without overflowing the C++ stack.
struct ListObj {
    std::vector<Value> items;
    uint64_t born = creation_epoch();
    ~ListObj();
};
struct TupleObj {
    std::vector<Value> items;
    bool is_size = false;  // x.shape: prints as torch.Size([2, 3])
    ~TupleObj();
};
struct DictObj {  // insertion-ordered, as in Python; small, so a linear search is fine
    std::vector<std::pair<Value, Value>> items;
    uint64_t born = creation_epoch();
    Value* find(const Value& key);
    ~DictObj();
};
// Where a piece of code came from, kept alive by every function defined in it so that
// runtime errors can quote the line long after the REPL input was parsed.
struct CodeUnit {
    std::string filename;
    std::string source;
};
struct FunctionObj {
    std::string name;
    script::StmtPtr def_stmt;  // holds a Def
    const script::Def* def = nullptr;
    std::vector<Value> defaults;  // one per param, evaluated at `def` time (None marks "no default")
    std::vector<bool> has_default;
    std::shared_ptr<Scope> closure;
    std::shared_ptr<const CodeUnit> unit;
    std::optional<std::vector<std::string>> free_names;  // computed on first compile() call
    std::weak_ptr<Object> owner_class;  // the class whose body defined it: for super()
    // The arguments of the latest call, for `kiln explain FILE FUNC`.
    std::vector<Value> last_args;
    std::vector<std::pair<std::string, Value>> last_kwargs;
};
// x.cos, model.parameters, opt.step: a method of a built-in type with its receiver.
struct BoundMethod;
// compile(backend="eager") without a function: a decorator waiting for its function.
struct Partial;
struct CompiledObj;  // compile(f): see compiled.h
struct ExplainObj;
// torch, torch.nn, F, optim, time: attribute lookup on these resolves builtins (builtins.cpp).
struct Namespace {
    std::string name;  // "torch", "nn", "F", "optim", "time", "_dynamo"
};

// The objects of the class model, exceptions and the torch extras (classes.h,
// exceptions.h, torch_extras.cpp): one open family behind one handle, so that a new kind of
// object does not grow Value's variant. Each says its type name and repr.
using ModulePtr = std::shared_ptr<nn::Module>;
using OptimizerPtr = std::shared_ptr<optim::Optimizer>;

struct Value {
    using Node = std::variant<None, bool, int64_t, double, std::string, Tensor, DType,
                              std::shared_ptr<ListObj>, std::shared_ptr<TupleObj>, std::shared_ptr<DictObj>,
                              std::shared_ptr<FunctionObj>, const Builtin*, std::shared_ptr<BoundMethod>,
                              std::shared_ptr<Partial>, ModulePtr, OptimizerPtr, std::shared_ptr<CompiledObj>,
                              std::shared_ptr<Namespace>, std::shared_ptr<ExplainObj>, ObjectPtr>;
    Node node;

    Value() = default;
    Value(None) {}
    Value(bool b) : node(b) {}
    Value(int v) : node(int64_t(v)) {}
    Value(int64_t v) : node(v) {}
    Value(double v) : node(v) {}
    Value(std::string s) : node(std::move(s)) {}
    Value(const char* s) : node(std::string(s)) {}
    Value(Tensor t) : node(std::move(t)) {}
    Value(DType d) : node(d) {}
    template <class T>
        requires(!std::is_base_of_v<Object, T>)
    Value(std::shared_ptr<T> p) : node(std::move(p)) {}
    Value(const Builtin* b) : node(b) {}
    template <class T>
        requires std::is_base_of_v<Object, T>
    Value(std::shared_ptr<T> p) : node(ObjectPtr(std::move(p))) {}

    template <class T>
    const T* as() const { return std::get_if<T>(&node); }
    template <class T>
    T* as() { return std::get_if<T>(&node); }
    template <class T>
    bool is() const { return std::holds_alternative<T>(node); }
    bool is_none() const { return is<None>(); }
    bool is_number() const { return is<int64_t>() || is<double>() || is<bool>(); }
    // The Object of kind T this value holds, or null.
    template <class T>
    std::shared_ptr<T> object() const {
        auto o = std::get_if<ObjectPtr>(&node);
        return o ? std::dynamic_pointer_cast<T>(*o) : nullptr;
    }
};

struct BoundMethod {
    Value self;
    const Builtin* method;
};
struct Partial {
    Value fn;
    std::vector<std::pair<std::string, Value>> kwargs;
};

// Variables of one function call (or the globals); `parent` is the scope the function
// was defined in, so nested defs see their enclosing variables.
struct Scope {
    std::unordered_map<std::string, Value> vars;
    std::shared_ptr<Scope> parent;
    std::vector<std::string> global_names;    // `global x` in this function: x lives in the globals
    std::vector<std::string> nonlocal_names;  // `nonlocal x`: x lives in an enclosing function
    Value* find(const std::string& name);
};

Value make_list(std::vector<Value> items);
Value make_tuple(std::vector<Value> items);
Value make_size(const Shape& shape);  // torch.Size
Value make_dict();

// Python's type(x).__name__: "int", "Tensor", "list", "function", "Linear" ...
std::string type_name(const Value& v);
// repr() and str(): they differ only for strings ('a' vs a), as in Python.
std::string repr(const Value& v);
std::string str(const Value& v);
std::string repr_float(double v);  // Python's shortest round-trip form: 0.1, 3.0, 1e-05
bool values_equal(const Value& a, const Value& b);  // ==, for non-tensors
// The object a handle points to (lists, functions, modules ...); null for plain data.
const void* identity(const Value& v);
// Two numbers compared exactly, as Python does (an int against a float too): -1, 0 or 1;
// nullopt when either is NaN.
std::optional<int> compare_numbers(const Value& a, const Value& b);

// A Value as a C++ number, or nullopt when it is not one (bools count as ints).
std::optional<double> as_double(const Value& v);
std::optional<int64_t> as_int(const Value& v);
// Lists and tuples (not strings): their items, or null.
const std::vector<Value>* as_sequence(const Value& v);

}  // namespace kiln::interp
