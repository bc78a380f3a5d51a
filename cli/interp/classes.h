// The class model of kiln script: `class` with single inheritance, instances, bound
// methods, @staticmethod and super(). A class deriving from torch.nn.Module owns a real
// nn::Module (ScriptModule) that its module and parameter attributes register with, so
// parameters(), train() and compile's module guards work as for C++ modules; a class
// deriving from torch.autograd.Function runs through autograd::Function (autograd_apply).
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "cli/interp/interp.h"

namespace kiln::interp {

struct ClassObj;
struct InstanceObj;
using ClassPtr = std::shared_ptr<ClassObj>;

// Attributes in definition order; small, so a linear search is fine.
using AttrList = std::vector<std::pair<std::string, Value>>;
Value* find_attr(AttrList& attrs, const std::string& name);

struct ClassObj : Object {
    // The built-in roots a class can derive from; `script` for classes a script defines.
    enum class Kind { script, object, module, function, exception, tensor };
    std::string name;      // "Cosine"
    std::string qualname;  // how errors print it: "torch._dynamo.exc.Unsupported"
    Kind kind = Kind::script;
    ClassPtr base;
    AttrList attrs;

    // The attribute `name` of this class or the nearest base that has it; null when none.
    const Value* lookup(const std::string& name) const;
    bool derives_from(const ClassObj& other) const;  // other is this class or one of its bases
    Kind root() const;                               // the built-in kind this class derives from

    std::string type_name() const override { return "type"; }
    std::string repr() const override { return "<class '" + qualname + "'>"; }
    Value call(Interp& in, const ObjectPtr& self, CallArgs& args) override;
    std::optional<Value> attr(Interp& in, const ObjectPtr& self, const std::string& name) override;
    bool set_attr(Interp& in, const std::string& name, const Value& value) override;
};

class ScriptModule;

struct InstanceObj : Object {
    ClassPtr cls;
    AttrList attrs;
    std::shared_ptr<ScriptModule> module;  // set when cls derives from torch.nn.Module
    uint64_t born = creation_epoch();      // see note_host_effect

    std::string type_name() const override { return cls->name; }
    std::string repr() const override;
    std::string str() const override;  // an exception: its message
    Value call(Interp& in, const ObjectPtr& self, CallArgs& args) override;
    std::optional<Value> attr(Interp& in, const ObjectPtr& self, const std::string& name) override;
    bool set_attr(Interp& in, const std::string& name, const Value& value) override;
};

// instance.method: the function with its receiver.
struct MethodObj : Object {
    Value self;
    Value fn;
    std::string type_name() const override { return "method"; }
    std::string repr() const override { return "<bound method " + interp::type_name(self) + "." + name() + ">"; }
    std::string name() const;
    Value call(Interp& in, const ObjectPtr& self, CallArgs& args) override;
};

// @staticmethod def f(...): looked up on a class or an instance, it is the plain function.
struct StaticMethodObj : Object {
    Value fn;
    std::string type_name() const override { return "staticmethod"; }
    std::string repr() const override { return "<staticmethod>"; }
    Value call(Interp& in, const ObjectPtr& self, CallArgs& args) override;
};

// super(): attribute lookup that starts at the base of the class whose method is running.
struct SuperObj : Object {
    ClassPtr start;  // where lookup starts (the defining class's base)
    Value self;
    std::string type_name() const override { return "super"; }
    std::string repr() const override { return "<super>"; }
    std::optional<Value> attr(Interp& in, const ObjectPtr& self, const std::string& name) override;
};

// The nn::Module of a script class deriving from torch.nn.Module: C++ callers (nn.Sequential,
// compile's module guards) see a module whose forward runs the script's forward.
class ScriptModule : public nn::Module {
   public:
    ScriptModule(Interp& in, std::string name) : in_(in), name_(std::move(name)) {}
    Tensor forward(const Tensor& x) override;
    std::string type_name() const override { return name_; }
    std::weak_ptr<InstanceObj> instance;

   private:
    Interp& in_;
    std::string name_;
};

// The built-in classes: "object", "Exception", "RuntimeError" ..., "torch.nn.Module",
// "torch.autograd.Function", "torch.Tensor", "torch._dynamo.exc.Unsupported". Keyed by
// qualname and, for the Python builtins, by their plain name. Null when unknown.
ClassPtr builtin_class(const std::string& qualname);
// Exception class names a script can use without a prefix (Exception, TypeError, ...).
std::vector<std::string> builtin_class_names();

// Runs a class statement's body (already run in `scope`) into a class.
ClassPtr make_class(const std::string& name, ClassPtr base, const std::shared_ptr<Scope>& body_scope);
// isinstance(v, cls): by class chain for instances, by kind for values of built-in types.
bool is_instance(const Value& v, const ClassObj& cls);
// The classes that `v` is an instance of, nearest first (for guards: their methods' globals).
ClassPtr class_of(const Value& v);

// Cls.apply(*args) for a class deriving from torch.autograd.Function.
Value autograd_apply(Interp& in, const ClassPtr& cls, CallArgs& args);

}  // namespace kiln::interp
