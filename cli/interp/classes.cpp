// Classes, instances, methods and super(); nn.Module subclasses through ScriptModule and
// autograd.Function subclasses through autograd::Function.
#include "cli/interp/classes.h"

#include <map>
#include <sstream>

#include "autograd/function.h"
#include "cli/interp/builtins.h"
#include "cli/interp/compiled.h"

namespace kiln::interp {

Value* find_attr(AttrList& attrs, const std::string& name) {
    for (auto& [k, v] : attrs)
        if (k == name) return &v;
    return nullptr;
}

// ---- Object's defaults

Value Object::call(Interp& in, const ObjectPtr&, CallArgs&) { in.raise("TypeError", "'" + type_name() + "' object is not callable"); }
std::optional<Value> Object::attr(Interp&, const ObjectPtr&, const std::string&) { return std::nullopt; }
bool Object::set_attr(Interp&, const std::string&, const Value&) { return false; }

// ---- built-in classes

namespace {

struct BuiltinClasses {
    std::map<std::string, ClassPtr> by_name;
    std::vector<std::string> plain_names;
    ClassPtr add(const std::string& qualname, ClassObj::Kind kind, const std::string& base) {
        auto c = std::make_shared<ClassObj>();
        c->qualname = qualname;
        c->name = qualname.substr(qualname.rfind('.') + 1);
        c->kind = kind;
        if (!base.empty()) c->base = by_name.at(base);
        by_name[qualname] = c;
        if (qualname.find('.') == std::string::npos) plain_names.push_back(qualname);
        return c;
    }
    BuiltinClasses() {
        using K = ClassObj::Kind;
        add("object", K::object, "");
        add("BaseException", K::exception, "object");
        add("KeyboardInterrupt", K::exception, "BaseException");
        add("Exception", K::exception, "BaseException");
        // Python's hierarchy, as far as kiln script raises these.
        for (auto [name, base] : std::initializer_list<std::pair<const char*, const char*>>{
                 {"RuntimeError", "Exception"}, {"NotImplementedError", "RuntimeError"}, {"RecursionError", "RuntimeError"},
                 {"TypeError", "Exception"}, {"ValueError", "Exception"}, {"NameError", "Exception"},
                 {"UnboundLocalError", "NameError"}, {"AttributeError", "Exception"}, {"LookupError", "Exception"},
                 {"KeyError", "LookupError"}, {"IndexError", "LookupError"}, {"ArithmeticError", "Exception"},
                 {"ZeroDivisionError", "ArithmeticError"}, {"OverflowError", "ArithmeticError"}, {"AssertionError", "Exception"},
                 {"ImportError", "Exception"}, {"ModuleNotFoundError", "ImportError"}, {"MemoryError", "Exception"},
                 {"StopIteration", "Exception"}, {"SyntaxError", "Exception"},
                 {"IndentationError", "SyntaxError"}})
            add(name, K::exception, base);
        // torch._dynamo's errors derive from RuntimeError, as in PyTorch.
        add("torch._dynamo.exc.TorchDynamoException", K::exception, "RuntimeError");
        add("torch._dynamo.exc.Unsupported", K::exception, "torch._dynamo.exc.TorchDynamoException");
        add("torch._dynamo.exc.BackendCompilerFailed", K::exception, "torch._dynamo.exc.TorchDynamoException");
        add("torch.fx.proxy.TraceError", K::exception, "ValueError");
        add("torch.nn.Module", K::module, "object")->name = "Module";
        add("torch.autograd.Function", K::function, "object")->name = "Function";
        add("torch.Tensor", K::tensor, "object")->name = "Tensor";
    }
};
const BuiltinClasses& builtins() {
    static const BuiltinClasses b;
    return b;
}

std::string message_of(const InstanceObj& e) {
    const Value* args = nullptr;
    for (auto& [k, v] : e.attrs)
        if (k == "args") args = &v;
    const std::vector<Value>* items = args ? as_sequence(*args) : nullptr;
    if (!items || items->empty()) return "";
    if (items->size() == 1) return interp::str((*items)[0]);
    return interp::repr(*args);
}

Value bind(const Value& self, const Value& v) {
    if (auto s = v.object<StaticMethodObj>()) return s->fn;
    if (v.is<std::shared_ptr<FunctionObj>>()) {
        auto m = std::make_shared<MethodObj>();
        m->self = self, m->fn = v;
        return m;
    }
    return v;
}

}  // namespace

ClassPtr builtin_class(const std::string& qualname) {
    auto it = builtins().by_name.find(qualname);
    return it == builtins().by_name.end() ? nullptr : it->second;
}
std::vector<std::string> builtin_class_names() { return builtins().plain_names; }

// ---- classes

const Value* ClassObj::lookup(const std::string& key) const {
    for (const ClassObj* c = this; c; c = c->base.get())
        for (auto& [k, v] : c->attrs)
            if (k == key) return &v;
    return nullptr;
}

bool ClassObj::derives_from(const ClassObj& other) const {
    for (const ClassObj* c = this; c; c = c->base.get())
        if (c == &other) return true;
    return false;
}

ClassObj::Kind ClassObj::root() const {
    for (const ClassObj* c = this; c; c = c->base.get())
        if (c->kind != Kind::script && c->kind != Kind::object) return c->kind;
    return Kind::object;
}

ClassPtr make_class(const std::string& name, ClassPtr base, const std::shared_ptr<Scope>& body_scope) {
    auto c = std::make_shared<ClassObj>();
    c->name = name;
    c->qualname = name;
    c->base = base ? base : builtin_class("object");
    std::vector<std::pair<std::string, Value>> attrs(body_scope->vars.begin(), body_scope->vars.end());
    std::sort(attrs.begin(), attrs.end(), [](auto& a, auto& b) { return a.first < b.first; });
    for (auto& [k, v] : attrs) {
        // Methods see the scope around the class, not the class body (Python's rule), and
        // remember their class for super().
        Value fn = v;
        if (auto s = v.object<StaticMethodObj>()) fn = s->fn;
        if (auto f = fn.as<std::shared_ptr<FunctionObj>>()) {
            if ((*f)->closure == body_scope) (*f)->closure = body_scope->parent;
            (*f)->owner_class = c;
        }
        c->attrs.emplace_back(k, v);
    }
    return c;
}

Value ClassObj::call(Interp& in, const ObjectPtr& self, CallArgs& args) {
    auto cls = std::static_pointer_cast<ClassObj>(self);
    switch (root()) {
        case Kind::tensor: in.raise("TypeError", "torch.Tensor(...) is not supported in kiln script; use torch.tensor(data)");
        case Kind::function:
            if (kind == Kind::function) in.raise("TypeError", "torch.autograd.Function is a base class: subclass it and call .apply()");
            break;
        case Kind::module:
            if (kind == Kind::module) in.raise("TypeError", "torch.nn.Module is a base class: subclass it with a forward()");
            break;
        default: break;
    }
    auto inst = std::make_shared<InstanceObj>();
    inst->cls = cls;
    in.track(inst);
    if (root() == Kind::module) {
        inst->module = std::make_shared<ScriptModule>(in, name);
        inst->module->instance = inst;
    }
    Value v = inst;
    if (root() == Kind::exception) inst->attrs.emplace_back("args", make_tuple(args.args));
    if (const Value* init = lookup("__init__")) {
        Value r = in.call(bind(v, *init), std::move(args));
        if (!r.is_none()) in.raise("TypeError", "__init__() should return None, not '" + interp::type_name(r) + "'");
    } else if (root() != Kind::exception && (!args.args.empty() || !args.kwargs.empty())) {
        in.raise("TypeError", name + "() takes no arguments");
    }
    return v;
}

std::optional<Value> ClassObj::attr(Interp& in, const ObjectPtr& self, const std::string& key) {
    if (key == "__name__") return Value(name);
    if (key == "apply" && root() == Kind::function && kind != Kind::function)
        return Value(std::make_shared<BoundMethod>(BoundMethod{Value(self), find_builtin("autograd.Function.apply")}));
    const Value* v = lookup(key);
    if (!v) return std::nullopt;
    if (auto s = v->object<StaticMethodObj>()) return s->fn;
    (void)in;
    return *v;  // a function looked up on the class is the plain function (Python 3)
}

bool ClassObj::set_attr(Interp&, const std::string& key, const Value& value) {
    if (kind != Kind::script) return false;
    if (Value* v = find_attr(attrs, key)) *v = value;
    else attrs.emplace_back(key, value);
    return true;
}

// ---- instances

std::string InstanceObj::repr() const {
    if (cls->root() == ClassObj::Kind::exception) return cls->name + "(" + [&] {
        std::string m = message_of(*this);
        return m.empty() ? std::string() : interp::repr(Value(m));
    }() + ")";
    if (module) {
        std::ostringstream os;
        os << *module;
        return os.str();
    }
    return "<" + cls->qualname + " object>";
}

std::string InstanceObj::str() const {
    if (cls->root() == ClassObj::Kind::exception) return message_of(*this);
    return repr();
}

Value InstanceObj::call(Interp& in, const ObjectPtr& self, CallArgs& args) {
    Value me = std::static_pointer_cast<Object>(self);
    if (const Value* fn = cls->lookup("__call__")) return in.call(bind(me, *fn), std::move(args));
    if (module) {
        const Value* forward = cls->lookup("forward");
        if (!forward) in.raise("NotImplementedError", "Module [" + cls->name + "] is missing the required \"forward\" function");
        module->report_guard_state();  // under compile(): guard the module's state, as Module::operator() does
        return in.call(bind(me, *forward), std::move(args));
    }
    return Object::call(in, self, args);
}

std::optional<Value> InstanceObj::attr(Interp& in, const ObjectPtr& self, const std::string& key) {
    if (Value* v = find_attr(attrs, key)) return *v;
    Value me = std::static_pointer_cast<Object>(self);
    if (key == "__class__") return Value(std::static_pointer_cast<Object>(cls));
    if (const Value* v = cls->lookup(key)) return bind(me, *v);
    if (module) {  // parameters(), train(), eval(), zero_grad() ... of the C++ module
        Value m = ModulePtr(module);
        if (key == "training") return Value(module->is_training());
        if (const Builtin* method = find_method(m, key)) return Value(std::make_shared<BoundMethod>(BoundMethod{m, method}));
    }
    (void)in;
    return std::nullopt;
}

bool InstanceObj::set_attr(Interp& in, const std::string& key, const Value& value) {
    if (module) {
        // Modules and parameters register themselves, as nn.Module.__setattr__ does; a new
        // value for a registered name replaces it. As in PyTorch, a child module's name takes
        // only a module (or None), a parameter's only a parameter (or None).
        ModulePtr child;
        if (auto m = value.as<ModulePtr>()) child = *m;
        else if (auto i = value.object<InstanceObj>(); i && i->module) child = ModulePtr(i->module);
        auto t = value.as<Tensor>();
        bool parameter = t && t->defined() && t->requires_grad() && t->is_leaf();
        if (module->has_child(key) && !child && !value.is_none())
            in.raise("TypeError", "cannot assign '" + interp::type_name(value) +
                                      "' as child module '" + key +
                                      "' (torch.nn.Module or None expected)");
        if (module->has_parameter(key) && !parameter && !value.is_none())
            in.raise(
                "TypeError",
                "cannot assign '" + interp::type_name(value) + "' as parameter '" + key +
                    "' (torch.nn.Parameter or None expected; a tensor that requires grad is one)");
        module->unregister(key);
        if (child) module->register_module(key, child);
        else if (parameter) module->register_parameter(key, *t);
        module->state_changed();  // compiled callers re-check what forward may read
    }
    if (Value* v = find_attr(attrs, key)) *v = value;
    else attrs.emplace_back(key, value);
    return true;
}

Tensor ScriptModule::forward(const Tensor& x) {
    auto inst = instance.lock();
    if (!inst) throw kiln::Error(name_ + ".forward: the script object is gone");
    const Value* fn = inst->cls->lookup("forward");
    if (!fn) in_.raise("NotImplementedError", "Module [" + name_ + "] is missing the required \"forward\" function");
    Value r = in_.call(bind(Value(std::static_pointer_cast<Object>(inst)), *fn), CallArgs{{x}, {}});
    if (!r.is<Tensor>()) in_.raise("TypeError", name_ + ".forward must return a Tensor when called from C++ (nn.Sequential); got " + interp::type_name(r));
    return *r.as<Tensor>();
}

// ---- methods, static methods, super

std::string MethodObj::name() const {
    if (auto f = fn.as<std::shared_ptr<FunctionObj>>()) return (*f)->name;
    return "?";
}

Value MethodObj::call(Interp& in, const ObjectPtr&, CallArgs& args) {
    args.args.insert(args.args.begin(), self);
    return in.call(fn, std::move(args));
}

Value StaticMethodObj::call(Interp& in, const ObjectPtr&, CallArgs& args) { return in.call(fn, std::move(args)); }

std::optional<Value> SuperObj::attr(Interp& in, const ObjectPtr&, const std::string& key) {
    for (const ClassObj* c = start.get(); c; c = c->base.get()) {
        for (auto& [k, v] : c->attrs)
            if (k == key) return bind(self, v);
        // The built-in bases' __init__: nothing to do (the module exists already), except
        // that an exception keeps its arguments.
        if (c->kind != ClassObj::Kind::script && key == "__init__") {
            auto inst = self.object<InstanceObj>();
            bool is_exception = c->kind == ClassObj::Kind::exception;
            return Value(std::make_shared<BoundMethod>(
                BoundMethod{self, find_builtin(is_exception ? "object._exception_init" : "object._init")}));
            (void)inst;
        }
    }
    (void)in;
    return std::nullopt;
}

// ---- isinstance

bool is_instance(const Value& v, const ClassObj& cls) {
    using K = ClassObj::Kind;
    if (cls.kind == K::object) return true;
    if (cls.kind == K::tensor) return v.is<Tensor>();
    if (cls.kind == K::module && v.is<ModulePtr>()) return true;
    if (auto i = v.object<InstanceObj>()) return i->cls->derives_from(cls);
    return false;
}

ClassPtr class_of(const Value& v) {
    if (auto i = v.object<InstanceObj>()) return i->cls;
    return nullptr;
}

// ---- autograd.Function

namespace {

// One apply(): the script class, its arguments, and the attributes a script sets on ctx.
struct ScriptApply {
    Interp* in;
    ClassPtr cls;
    std::vector<Value> args;
    AttrList ctx_attrs;
};
using ApplyPtr = std::shared_ptr<ScriptApply>;

// ctx in forward, setup_context and backward.
struct CtxObj : Object {
    autograd::Ctx* ctx;
    ApplyPtr apply;
    CtxObj(autograd::Ctx* c, ApplyPtr a) : ctx(c), apply(std::move(a)) {}
    std::string type_name() const override { return "FunctionCtx"; }
    std::string repr() const override { return "<FunctionCtx of " + apply->cls->name + ">"; }
    std::optional<Value> attr(Interp& in, const ObjectPtr& self, const std::string& key) override {
        if (key == "saved_tensors") {
            std::vector<Value> out;
            for (const Tensor& t : ctx->saved_tensors()) out.emplace_back(t);
            return make_tuple(std::move(out));
        }
        if (key == "needs_input_grad") {
            std::vector<Value> out;
            size_t tensor_index = 0;
            for (const Value& a : apply->args) out.emplace_back(a.is<Tensor>() && ctx->needs_input_grad(tensor_index++));
            return make_tuple(std::move(out));
        }
        if (key == "save_for_backward")
            return Value(std::make_shared<BoundMethod>(BoundMethod{Value(self), find_builtin("FunctionCtx.save_for_backward")}));
        if (Value* v = find_attr(apply->ctx_attrs, key)) return *v;
        (void)in;
        return std::nullopt;
    }
    bool set_attr(Interp&, const std::string& key, const Value& value) override {
        if (key == "saved_tensors" || key == "needs_input_grad") return false;
        if (Value* v = find_attr(apply->ctx_attrs, key)) *v = value;
        else apply->ctx_attrs.emplace_back(key, value);
        return true;
    }
};

Value static_fn(Interp& in, const ClassObj& cls, const std::string& name) {
    const Value* v = cls.lookup(name);
    if (!v) in.raise("NotImplementedError", cls.name + " must define " + name + "()");
    if (auto s = v->object<StaticMethodObj>()) return s->fn;
    return *v;
}

// The adapter autograd::Function<ScriptFunction> calls: forward takes the ctx first (the
// older PyTorch style, so it sees the ctx), then the ScriptApply, then the tensors, which
// it leaves to the script (they are in ScriptApply's args too, in their places).
struct ScriptFunction {
    template <class... Ts>
    static Tensor forward(autograd::Ctx& ctx, const ApplyPtr& a, const Ts&...) {
        Interp& in = *a->in;
        Value ctx_value = std::make_shared<CtxObj>(&ctx, a);
        Value out;
        if (a->cls->lookup("setup_context")) {
            out = in.call(static_fn(in, *a->cls, "forward"), CallArgs{a->args, {}});
            CallArgs setup{{ctx_value, make_tuple(a->args), out}, {}};
            in.call(static_fn(in, *a->cls, "setup_context"), std::move(setup));
        } else {
            std::vector<Value> args{ctx_value};
            args.insert(args.end(), a->args.begin(), a->args.end());
            out = in.call(static_fn(in, *a->cls, "forward"), CallArgs{std::move(args), {}});
        }
        if (!out.is<Tensor>())
            in.raise("TypeError", a->cls->name + ".forward must return one Tensor in kiln script (got " + interp::type_name(out) + ")");
        return *out.as<Tensor>();
    }
    static std::vector<Tensor> backward(autograd::Ctx& ctx, const Tensor& grad) {
        const ApplyPtr& a = ctx.arg<ApplyPtr>(0);
        Interp& in = *a->in;
        Value ctx_value = std::make_shared<CtxObj>(&ctx, a);
        Value r = in.call(static_fn(in, *a->cls, "backward"), CallArgs{{ctx_value, grad}, {}});
        std::vector<Value> grads = as_sequence(r) ? *as_sequence(r) : std::vector<Value>{r};
        // One gradient per argument of apply; those of the tensor arguments are kept.
        size_t n_tensors = 0;
        for (const Value& v : a->args) n_tensors += v.is<Tensor>();
        std::vector<Tensor> out;
        if (grads.size() == a->args.size()) {
            for (size_t i = 0; i < grads.size(); ++i)
                if (a->args[i].is<Tensor>()) out.push_back(grads[i].is<Tensor>() ? *grads[i].as<Tensor>() : Tensor());
        } else if (grads.size() == n_tensors) {
            for (const Value& g : grads) out.push_back(g.is<Tensor>() ? *g.as<Tensor>() : Tensor());
        } else {
            in.raise("RuntimeError", "function " + a->cls->name + "Backward returned an incorrect number of gradients (expected " +
                                         std::to_string(a->args.size()) + ", got " + std::to_string(grads.size()) + ")");
        }
        for (const Value& g : grads)
            if (!g.is<Tensor>() && !g.is_none())
                in.raise("TypeError", a->cls->name + ".backward must return Tensors or None, got " + interp::type_name(g));
        return out;
    }
};

template <size_t N, class... Ts>
Tensor apply_with(const ApplyPtr& a, const std::vector<Tensor>& ts, const Ts&... picked) {
    if constexpr (sizeof...(Ts) == N) {
        return autograd::Function<ScriptFunction>::apply(a, picked...);
    } else {
        return apply_with<N>(a, ts, picked..., ts[sizeof...(Ts)]);
    }
}

}  // namespace

Value autograd_apply(Interp& in, const ClassPtr& cls, CallArgs& args) {
    if (!args.kwargs.empty()) in.raise("TypeError", cls->name + ".apply() takes positional arguments only");
    auto a = std::make_shared<ScriptApply>(ScriptApply{&in, cls, args.args, {}});
    std::vector<Tensor> ts;
    for (const Value& v : args.args)
        if (auto t = v.as<Tensor>()) ts.push_back(*t);
    switch (ts.size()) {
        case 0: return apply_with<0>(a, ts);
        case 1: return apply_with<1>(a, ts);
        case 2: return apply_with<2>(a, ts);
        case 3: return apply_with<3>(a, ts);
        case 4: return apply_with<4>(a, ts);
        case 5: return apply_with<5>(a, ts);
        case 6: return apply_with<6>(a, ts);
        default: in.raise("TypeError", cls->name + ".apply(): kiln script passes at most 6 tensor arguments to an autograd.Function");
    }
}

}  // namespace kiln::interp

// ---- builtins of the class model

namespace kiln::interp {
namespace {

Value b_apply(Bound& b) {
    CallArgs args{b.rest, {}};
    return autograd_apply(b.in, b.self.object<ClassObj>(), args);
}
Value b_save_for_backward(Bound& b) {
    auto ctx = b.self.object<CtxObj>();
    std::vector<Tensor> ts;
    for (const Value& v : b.rest) {
        if (v.is_none()) {
            ts.emplace_back();
            continue;
        }
        if (!v.is<Tensor>()) b.in.raise("TypeError", "save_for_backward() takes Tensors (or None), not " + type_name(v));
        ts.push_back(*v.as<Tensor>());
    }
    ctx->ctx->save_for_backward(ts);
    return None{};
}
Value b_object_init(Bound&) { return None{}; }
Value b_exception_init(Bound& b) {
    if (auto inst = b.self.object<InstanceObj>()) {
        if (Value* args = find_attr(inst->attrs, "args")) *args = make_tuple(b.rest);
        else inst->attrs.emplace_back("args", make_tuple(b.rest));
    }
    return None{};
}
Value b_super(Bound& b) {
    std::shared_ptr<FunctionObj> fn = b.in.current_function();
    auto owner = fn ? std::dynamic_pointer_cast<ClassObj>(fn->owner_class.lock()) : nullptr;
    if (!owner || fn->def->params.empty()) b.in.raise("RuntimeError", "super(): no arguments, and not inside a method of a class");
    Value* self = b.in.lookup(fn->def->params[0].name);
    if (!self) b.in.raise("RuntimeError", "super(): the method's first argument is gone");
    auto s = std::make_shared<SuperObj>();
    s->start = owner->base;
    s->self = *self;
    return s;
}
Value b_staticmethod(Bound& b) {
    auto s = std::make_shared<StaticMethodObj>();
    s->fn = b.value(0);
    return s;
}
Value b_isinstance(Bound& b) {
    const Value& v = b.value(0);
    std::function<bool(const Value&)> check = [&](const Value& type) -> bool {
        if (auto c = type.object<ClassObj>()) return is_instance(v, *c);
        if (auto seq = type.as<std::shared_ptr<TupleObj>>()) {
            for (const Value& t : (*seq)->items)
                if (check(t)) return true;
            return false;
        }
        if (auto builtin = type.as<const Builtin*>()) {  // int, float, str, list, dict, tuple, bool
            std::string want = (*builtin)->name, have = type_name(v);
            return have == want || (want == "int" && have == "bool") || (want == "tuple" && have == "Size");
        }
        b.in.raise("TypeError", "isinstance() arg 2 must be a type or a tuple of types, not " + type_name(type));
    };
    return check(b.value(1));
}
Value b_issubclass(Bound& b) {
    auto c = b.value(0).object<ClassObj>(), d = b.value(1).object<ClassObj>();
    if (!c || !d) b.in.raise("TypeError", "issubclass() takes two classes");
    return c->derives_from(*d);
}
Value b_hasattr(Bound& b) {
    try {
        b.in.get_attr(b.value(0), b.string(1));
        return true;
    } catch (const ScriptError& e) {
        if (e.kind() != "AttributeError") throw;
        return false;
    }
}
Value b_getattr(Bound& b) {
    if (!b.params[2]) return b.in.get_attr(b.value(0), b.string(1));
    try {
        return b.in.get_attr(b.value(0), b.string(1));
    } catch (const ScriptError& e) {
        if (e.kind() != "AttributeError") throw;
        return *b.params[2];
    }
}
Value b_setattr(Bound& b) {
    b.in.set_attr(b.value(0), b.string(1), b.value(2));
    return None{};
}

const Builtin kClasses[] = {
    {"autograd.Function.apply", "*args", b_apply, "runs forward, records backward for autograd"},
    {"FunctionCtx.save_for_backward", "*tensors", b_save_for_backward, "keep tensors for backward (ctx.saved_tensors)"},
    {"object._init", "*args", b_object_init, "the built-in bases' __init__"},
    {"object._exception_init", "*args", b_exception_init, "an exception's __init__: keeps its args"},
    {"super", "", b_super, "super(): the base class's methods, bound to self"},
    {"staticmethod", "fn", b_staticmethod, "@staticmethod: a method without self"},
    {"isinstance", "obj, classinfo", b_isinstance, "isinstance(x, A), isinstance(x, (int, float)), isinstance(t, torch.Tensor)"},
    {"issubclass", "cls, classinfo", b_issubclass, "issubclass(A, B)"},
    {"hasattr", "obj, name", b_hasattr, "whether obj has the attribute"},
    {"getattr", "obj, name, default=None", b_getattr, "obj.name, or default when missing"},
    {"setattr", "obj, name, value", b_setattr, "obj.name = value"},
};

}  // namespace

std::span<const Builtin> class_builtins() { return kClasses; }

}  // namespace kiln::interp
