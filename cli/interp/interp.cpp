// The tree-walking core of the interpreter: statements, expressions, calls, scopes and
// the traceback of a runtime error.
#include "cli/interp/interp.h"

#include <algorithm>
#include <ostream>

#include "cli/interp/builtins.h"
#include "cli/interp/classes.h"
#include "cli/interp/compiled.h"
#include "cli/interp/limits.h"
#include "cli/interp/operators.h"

namespace kiln::interp {

using namespace kiln::script;

namespace {

// What a C++ exception from below the interpreter means in Python's terms: a kiln::Error
// from the library is a RuntimeError (a kiln::IndexError an IndexError), running out of memory a
// MemoryError, and a RaisedError (numbers.cpp, limits.cpp, repr) already names its kind.
std::pair<std::string, std::string> python_error(const std::exception& e) {
    if (auto r = dynamic_cast<const RaisedError*>(&e)) return {r->kind, r->message};
    if (dynamic_cast<const std::bad_alloc*>(&e)) return {"MemoryError", "out of memory"};
    if (dynamic_cast<const std::length_error*>(&e)) return {"MemoryError", std::string("too large: ") + e.what()};
    if (dynamic_cast<const kiln::IndexError*>(&e)) return {"IndexError", e.what()};
    std::string message = e.what();
    // A graph break under fullgraph=True is Dynamo's Unsupported, in script terms.
    const std::string fullgraph = "compile(fullgraph=true)";
    if (message.rfind(fullgraph, 0) == 0)
        return {"torch._dynamo.exc.Unsupported", "torch.compile(fullgraph=True)" + message.substr(fullgraph.size())};
    return {"RuntimeError", message};
}

// what() is read as a C string: a NUL byte (from a binary file, a string) would cut it.
std::string without_nul(std::string text) {
    for (size_t at = text.find('\0'); at != std::string::npos; at = text.find('\0', at + 2)) text.replace(at, 1, "\\0");
    return text;
}

}  // namespace

// Pops the frame it pushed, however the call ends.
struct FrameGuard {
    Interp& in;
    ~FrameGuard() { in.frames_.pop_back(); }
};

ScriptError::ScriptError(std::string kind, std::string message, std::string traceback)
    : kiln::Error(without_nul(traceback + kind + (message.empty() ? "" : ": " + message))), kind_(std::move(kind)), message_(std::move(message)) {}

Interp::Interp(std::ostream& o) : out(o) { reset(); }
// Script functions keep the scope they were defined in, and the globals keep the functions:
// a reference cycle. Emptying the globals breaks it, so an Interp frees what its scripts made.
Interp::~Interp() { break_cycles(); }

void Interp::track(const ObjectPtr& object) {
    if (objects_.size() > 4096)  // forget the objects that died on their own
        std::erase_if(objects_, [](const std::weak_ptr<Object>& w) { return w.expired(); });
    objects_.push_back(object);
}

void Interp::break_cycles() {
    for (const auto& weak : scopes_)
        if (auto scope = weak.lock()) scope->vars.clear();
    scopes_.clear();
    for (const auto& weak : functions_)
        if (auto fn = weak.lock()) {
            fn->last_args.clear();
            fn->last_kwargs.clear();
            fn->defaults.clear();
            fn->closure.reset();
        }
    functions_.clear();
    for (const auto& weak : objects_) {
        ObjectPtr o = weak.lock();
        if (auto c = std::dynamic_pointer_cast<ClassObj>(o)) c->attrs.clear();
        if (auto i = std::dynamic_pointer_cast<InstanceObj>(o)) i->attrs.clear();
    }
    objects_.clear();
    if (globals_) globals_->vars.clear();
}

void Interp::reset() {
    break_cycles();
    globals_ = std::make_shared<Scope>();
    // The PyTorch namespaces are there without an import, so snippets paste in either way.
    for (const char* name : {"torch", "nn", "F", "optim", "time"})
        globals_->vars[name] = std::make_shared<Namespace>(Namespace{name});
}

Value* Interp::lookup(const std::string& name) {
    Scope* scope = frames_.empty() ? globals_.get() : frames_.back().scope.get();
    if (Value* v = scope->find(name)) return v;
    if (Value* v = globals_->find(name)) return v;
    static thread_local Value builtin;  // builtins are immutable: hand out a copy
    if (const Builtin* b = find_builtin(name)) return &(builtin = Value(b));
    if (ClassPtr c = builtin_class(name); c && name.find('.') == std::string::npos) return &(builtin = Value(c));
    return nullptr;
}

Value* Interp::lookup_in(Scope* scope, const std::string& name) {
    if (scope)
        if (Value* v = scope->find(name)) return v;
    if (Value* v = globals_->find(name)) return v;
    static thread_local Value builtin;
    if (const Builtin* b = find_builtin(name)) return &(builtin = Value(b));
    if (ClassPtr c = builtin_class(name); c && name.find('.') == std::string::npos) return &(builtin = Value(c));
    return nullptr;
}

std::shared_ptr<FunctionObj> Interp::current_function() const { return frames_.empty() ? nullptr : frames_.back().fn; }

std::string Interp::current_site() const {
    if (frames_.empty()) return "?";
    const Frame& f = frames_.back();
    return f.unit->filename + ":" + std::to_string(f.pos.line) + " in " + f.name;
}

void Interp::set_global(const std::string& name, Value v) { globals_->vars[name] = std::move(v); }

std::vector<std::string> Interp::global_names() const {
    std::vector<std::string> names;
    for (const auto& [k, v] : globals_->vars) names.push_back(k);
    std::sort(names.begin(), names.end());
    return names;
}

std::string Interp::traceback() const {
    std::string out = "Traceback (most recent call last):\n";
    for (const Frame& f : frames_) {
        std::string loc = format_location(f.unit->filename, f.unit->source, f.pos);
        if (f.name != "<module>") loc.insert(loc.find('\n'), ", in " + f.name);
        out += loc;
    }
    return out;
}

void Interp::raise(const std::string& kind, const std::string& message) {
    throw ScriptError(kind, message, frames_.empty() ? "" : traceback());
}

void Interp::note_escape() {
    if (!escape_sites || frames_.empty()) return;
    escape_sites->push_back(current_site());
}

bool Interp::truthy(const Value& v) {
    if (auto t = v.as<Tensor>()) {
        if (!t->defined()) return false;
        note_escape();
        return static_cast<bool>(*t);  // operator bool: the graph break of a script `if`
    }
    if (v.is_none()) return false;
    if (auto d = as_double(v)) return *d != 0;
    if (auto s = v.as<std::string>()) return !s->empty();
    if (auto seq = as_sequence(v)) return !seq->empty();
    if (auto d = v.as<std::shared_ptr<DictObj>>()) return !(*d)->items.empty();
    return true;
}

// ---- running a unit

void Interp::run_source(std::string_view source, const std::string& filename, bool echo) {
    script::Module module = parse_program(source, filename);
    auto unit = std::make_shared<const CodeUnit>(CodeUnit{filename, std::string(source)});
    frames_.clear();
    frames_.push_back({unit, "<module>", {}, globals_});
    FrameGuard guard{*this};
    try {
        for (const StmtPtr& stmt : module.body) {
            if (echo) {
                if (auto e = stmt->as<ExprStmt>()) {
                    frames_.back().pos = stmt->pos;
                    Value v = eval(*e->value);
                    if (!v.is_none()) out << repr(v) << "\n";
                    continue;
                }
            }
            if (exec(stmt) != Flow::normal) raise("SyntaxError", "'return', 'break' or 'continue' outside a function or loop");
        }
    } catch (const ScriptError&) {
        throw;
    } catch (const std::exception& e) {  // kiln::Error from the library: a shape mismatch, ...
        auto [kind, message] = python_error(e);
        raise(kind, message);
    }
}

Value Interp::eval_source(std::string_view source, const std::string& filename) {
    ExprPtr expr = parse_expression(source, filename);
    auto unit = std::make_shared<const CodeUnit>(CodeUnit{filename, std::string(source)});
    frames_.clear();
    frames_.push_back({unit, "<module>", {}, globals_});
    FrameGuard guard{*this};
    try {
        return eval(*expr);
    } catch (const ScriptError&) {
        throw;
    } catch (const std::exception& e) {
        auto [kind, message] = python_error(e);
        raise(kind, message);
    }
}

// ---- statements

Interp::Flow Interp::exec_body(const Body& body) {
    for (const StmtPtr& stmt : body) {
        Flow flow = exec(stmt);
        if (flow != Flow::normal) return flow;
    }
    return Flow::normal;
}

Interp::Flow Interp::exec(const StmtPtr& stmt_ptr) {
    const Stmt& stmt = *stmt_ptr;
    frames_.back().pos = stmt.pos;
    check_interrupt();  // Ctrl-C: KeyboardInterrupt at the next statement
    if (auto s = stmt.as<ExprStmt>()) {
        eval(*s->value);
    } else if (auto s = stmt.as<Assign>()) {
        Value v = eval(*s->value);
        for (const ExprPtr& target : s->targets) assign(*target, v);
    } else if (auto s = stmt.as<AugAssign>()) {
        Value current = eval(*s->target);
        Value rhs = eval(*s->value);
        frames_.back().pos = stmt.pos;
        assign(*s->target, binary_op(*this, s->op, current, rhs));
    } else if (auto s = stmt.as<If>()) {
        for (const IfBranch& branch : s->branches)
            if (truthy(eval(*branch.test))) return exec_body(branch.body);
        return exec_body(s->orelse);
    } else if (auto s = stmt.as<For>()) {
        return exec_for(*s);
    } else if (auto s = stmt.as<While>()) {
        while (truthy(eval(*s->test))) {
            check_interrupt();  // `while True: pass` runs no statement that could notice
            Flow flow = exec_body(s->body);
            if (flow == Flow::break_) break;
            if (flow == Flow::return_) return flow;
        }
    } else if (stmt.is<Break>()) {
        return Flow::break_;
    } else if (stmt.is<Continue>()) {
        return Flow::continue_;
    } else if (auto s = stmt.as<Return>()) {
        return_value_ = s->value ? eval(*s->value) : Value(None{});
        return Flow::return_;
    } else if (auto s = stmt.as<Def>()) {
        exec_def(stmt_ptr, *s);
    } else if (stmt.is<Import>() || stmt.is<ImportFrom>()) {
        exec_import(stmt);
    } else if (auto s = stmt.as<Assert>()) {
        if (!truthy(eval(*s->test))) {
            std::string message = s->message ? str(eval(*s->message)) : "";
            frames_.back().pos = stmt.pos;
            raise("AssertionError", message);
        }
    } else if (auto s = stmt.as<ClassDef>()) {
        exec_class(*s);
    } else if (auto s = stmt.as<Try>()) {
        return exec_try(*s);
    } else if (auto s = stmt.as<Raise>()) {
        exec_raise(*s);
    } else if (auto s = stmt.as<With>()) {
        return exec_with(*s, 0);
    } else if (auto s = stmt.as<Global>()) {
        Scope& scope = *frames_.back().scope;
        if (&scope != globals_.get())
            for (const std::string& n : s->names) scope.global_names.push_back(n), scope.vars.erase(n);
    } else if (auto s = stmt.as<Nonlocal>()) {
        Scope& scope = *frames_.back().scope;
        if (&scope == globals_.get()) raise("SyntaxError", "nonlocal declaration not allowed at module level");
        for (const std::string& n : s->names) {
            bool found = false;
            for (Scope* up = scope.parent.get(); up && up != globals_.get() && !found; up = up->parent.get()) found = up->vars.count(n) > 0;
            if (!found) raise("SyntaxError", "no binding for nonlocal '" + n + "' found");
            scope.nonlocal_names.push_back(n);
            scope.vars.erase(n);
        }
    } else if (auto s = stmt.as<Delete>()) {
        for (const ExprPtr& target : s->targets) exec_delete(*target);
    }
    return Flow::normal;  // Pass
}

Interp::Flow Interp::exec_for(const For& loop) {
    std::vector<Value> items = iterate(*this, eval(*loop.iter));
    for (const Value& item : items) {
        assign(*loop.target, item);
        Flow flow = exec_body(loop.body);
        if (flow == Flow::break_) break;
        if (flow == Flow::return_) return flow;
    }
    return Flow::normal;
}

void Interp::exec_def(const StmtPtr& stmt, const Def& def) {
    std::vector<Value> decorators;
    for (const ExprPtr& d : def.decorators) decorators.push_back(eval(*d));
    Value v = make_function(stmt, def);
    // @a @b def f: f = a(b(f)); the list is outermost first.
    for (auto it = decorators.rbegin(); it != decorators.rend(); ++it) v = call(*it, CallArgs{{v}, {}});
    assign_name(def.name, v);
}

Value Interp::make_function(const StmtPtr& stmt, const Def& def) {
    auto fn = std::make_shared<FunctionObj>();
    fn->name = def.name;
    fn->def_stmt = stmt;
    fn->def = &def;
    for (const Param& p : def.params) {
        fn->has_default.push_back(p.default_value != nullptr);
        fn->defaults.push_back(p.default_value ? eval(*p.default_value) : Value());
    }
    for (const Param& p : def.kwonly_params) {
        fn->has_default.push_back(p.default_value != nullptr);
        fn->defaults.push_back(p.default_value ? eval(*p.default_value) : Value());
    }
    fn->closure = frames_.back().scope;
    fn->unit = frames_.back().unit;
    if (functions_.size() > 4096)
        std::erase_if(functions_, [](const std::weak_ptr<FunctionObj>& w) { return w.expired(); });
    functions_.push_back(fn);
    return fn;
}

void Interp::exec_class(const ClassDef& def) {
    std::vector<Value> decorators;
    for (const ExprPtr& d : def.decorators) decorators.push_back(eval(*d));
    ClassPtr base;
    if (!def.bases.empty()) {
        Value b = eval(*def.bases[0]);
        base = b.object<ClassObj>();
        frames_.back().pos = def.bases[0]->pos;
        if (!base) raise("TypeError", "class " + def.name + ": the base must be a class, not " + type_name(b));
    }
    // The body runs in a scope of its own; what it binds becomes the class's attributes.
    auto body_scope = std::make_shared<Scope>();
    body_scope->parent = frames_.back().scope;
    scopes_.push_back(body_scope);
    {
        struct Restore {
            Frame& f;
            std::shared_ptr<Scope> s;
            ~Restore() { f.scope = s; }
        } restore{frames_.back(), frames_.back().scope};
        frames_.back().scope = body_scope;
        Flow flow = exec_body(def.body);
        if (flow != Flow::normal) raise("SyntaxError", "'return', 'break' or 'continue' in a class body");
    }
    Value v = make_class(def.name, base, body_scope);
    track(v.object<ClassObj>());
    body_scope->vars.clear();
    for (auto it = decorators.rbegin(); it != decorators.rend(); ++it) v = call(*it, CallArgs{{v}, {}});
    assign_name(def.name, v);
}

void Interp::exec_import(const Stmt& stmt) {
    auto need = [&](const std::string& name, Pos pos) {
        std::optional<Value> m = import_module(name);
        frames_.back().pos = pos;
        if (!m) raise("ModuleNotFoundError", "No module named '" + name + "' (kiln script knows torch, torch.nn, torch.nn.functional, torch.optim, torch._dynamo, torch.distributed, torch.nn.parallel, time, torchvision.models and kiln.models)");
        return *m;
    };
    Scope& scope = *frames_.back().scope;
    if (auto s = stmt.as<Import>()) {
        for (const ImportName& n : s->names) {
            Value m = need(n.name, n.pos);
            if (!n.alias.empty()) scope.vars[n.alias] = m;
            else scope.vars[n.name.substr(0, n.name.find('.'))] = need(n.name.substr(0, n.name.find('.')), n.pos);
        }
        return;
    }
    const auto& s = *stmt.as<ImportFrom>();
    Value m = need(s.module, stmt.pos);
    for (const ImportName& n : s.names) {
        std::optional<Value> v = import_module(s.module + "." + n.name);
        if (!v) v = namespace_attr(**m.as<std::shared_ptr<Namespace>>(), n.name);
        frames_.back().pos = n.pos;
        if (!v) raise("ImportError", "cannot import name '" + n.name + "' from '" + s.module + "'");
        scope.vars[n.alias.empty() ? n.name : n.alias] = *v;
    }
}

void Interp::assign_name(const std::string& name, const Value& value) {
    Scope& scope = *frames_.back().scope;
    if (std::find(scope.global_names.begin(), scope.global_names.end(), name) != scope.global_names.end()) {
        globals_->vars[name] = value;
        return;
    }
    if (std::find(scope.nonlocal_names.begin(), scope.nonlocal_names.end(), name) != scope.nonlocal_names.end()) {
        for (Scope* up = scope.parent.get(); up; up = up->parent.get())
            if (auto it = up->vars.find(name); it != up->vars.end()) {
                it->second = value;
                return;
            }
    }
    scope.vars[name] = value;
}

void Interp::set_attr(const Value& object, const std::string& name, const Value& value) {
    if (auto inst = object.object<InstanceObj>(); !inst || inst->born != creation_epoch())
        note_host_effect(*this, object, "setting ." + name + " of a " + type_name(object));
    if (auto o = object.as<ObjectPtr>(); o && (*o)->set_attr(*this, name, value)) return;
    if (auto t = object.as<Tensor>()) {
        Tensor copy = *t;
        if (set_tensor_attr(*this, copy, name, value)) return;
    }
    if (auto o = object.as<OptimizerPtr>(); o && name == "lr") {
        // The one optimizer field tutorials change by hand.
        if (auto sgd = dynamic_cast<optim::SGD*>(o->get())) sgd->lr = as_double(value).value_or(sgd->lr);
        if (auto adam = dynamic_cast<optim::Adam*>(o->get())) adam->lr = as_double(value).value_or(adam->lr);
        return;
    }
    raise("AttributeError", "cannot set attribute '" + name + "' of a " + type_name(object));
}

void Interp::assign(const Expr& target, const Value& value) {
    if (auto n = target.as<Name>()) {
        assign_name(n->id, value);
    } else if (target.is<script::Tuple>() || target.is<script::List>()) {
        const auto& targets = target.is<script::Tuple>() ? target.as<script::Tuple>()->elements : target.as<script::List>()->elements;
        std::vector<Value> items = iterate(*this, value);
        frames_.back().pos = target.pos;
        if (items.size() != targets.size())
            raise("ValueError", (items.size() < targets.size() ? "not enough" : "too many") + std::string(" values to unpack (expected ") +
                                    std::to_string(targets.size()) + ", got " + std::to_string(items.size()) + ")");
        for (size_t i = 0; i < items.size(); ++i) assign(*targets[i], items[i]);
    } else if (auto a = target.as<Attribute>()) {
        Value object = eval(*a->object);
        frames_.back().pos = target.pos;
        set_attr(object, a->name, value);
    } else if (auto s = target.as<Subscript>()) {
        Value object = eval(*s->object);
        std::vector<IndexPart> index;
        auto part = [&](const Expr& e) {
            if (auto sl = e.as<script::Slice>()) {
                IndexPart p{.is_slice = true};
                auto bound = [&](const ExprPtr& x) -> std::optional<int64_t> {
                    if (!x) return std::nullopt;
                    Value v = eval(*x);
                    if (v.is_none()) return std::nullopt;
                    if (auto i = as_int(v)) return *i;
                    raise("TypeError", "slice indices must be integers or None, not " + type_name(v));
                };
                p.lower = bound(sl->lower), p.upper = bound(sl->upper), p.step = bound(sl->step);
                index.push_back(p);
            } else {
                index.push_back({.value = eval(e)});
            }
        };
        if (auto t = s->index->as<script::Tuple>()) for (const ExprPtr& e : t->elements) part(*e);
        else part(*s->index);
        frames_.back().pos = target.pos;
        subscript_assign(*this, object, index, value);
    } else {
        raise("SyntaxError", "cannot assign to this expression");
    }
}

// ---- calls

Value Interp::call(const Value& fn, CallArgs args) {
    if (auto f = fn.as<std::shared_ptr<FunctionObj>>()) return call_function(*f, args);
    if (auto o = fn.as<ObjectPtr>()) return (*o)->call(*this, *o, args);
    if (auto b = fn.as<const Builtin*>()) return call_builtin(*this, **b, None{}, args);
    if (auto m = fn.as<std::shared_ptr<BoundMethod>>()) return call_builtin(*this, *(*m)->method, (*m)->self, args);
    if (auto c = fn.as<std::shared_ptr<CompiledObj>>()) return call_compiled(*this, **c, std::move(args));
    if (auto p = fn.as<std::shared_ptr<Partial>>()) {
        for (const auto& kw : (*p)->kwargs) args.kwargs.push_back(kw);
        return call((*p)->fn, std::move(args));
    }
    if (auto m = fn.as<ModulePtr>()) {
        // A built-in module whose call takes more than one tensor (nn.MultiheadAttention).
        if (const Builtin* forward = find_method(fn, "forward"); forward && forward->name != "Module.forward") {
            (*m)->report_guard_state();
            return call_builtin(*this, *forward, fn, args);
        }
        if (args.args.size() != 1 || !args.kwargs.empty())
            raise("TypeError", (*m)->type_name() + ".forward() takes one Tensor argument (" + std::to_string(args.args.size()) + " given)");
        return (**m)(to_tensor(*this, args.args[0], "module input"));
    }
    raise("TypeError", "'" + type_name(fn) + "' object is not callable");
}

void Interp::bind_params(const FunctionObj& fn, CallArgs& args, Scope& scope) {
    const Def& def = *fn.def;
    size_t n = def.params.size();
    if (args.args.size() > n && def.vararg.empty() && n == 0 && fn.name == "<lambda>")
        raise("TypeError", "<lambda>() takes 0 positional arguments but " + std::to_string(args.args.size()) + " were given");
    if (args.args.size() > n && def.vararg.empty())
        raise("TypeError", fn.name + "() takes " + std::to_string(n) + " positional argument" + (n == 1 ? "" : "s") + " but " +
                               std::to_string(args.args.size()) + " were given");
    std::vector<bool> bound(n + def.kwonly_params.size(), false);
    for (size_t i = 0; i < std::min(n, args.args.size()); ++i) scope.vars[def.params[i].name] = args.args[i], bound[i] = true;
    if (!def.vararg.empty()) {
        std::vector<Value> rest;
        for (size_t i = n; i < args.args.size(); ++i) rest.push_back(args.args[i]);
        scope.vars[def.vararg] = make_tuple(std::move(rest));
    }
    auto param_name = [&](size_t i) { return i < n ? def.params[i].name : def.kwonly_params[i - n].name; };
    Value extra = make_dict();  // **kwargs
    for (auto& [key, v] : args.kwargs) {
        size_t i = 0;
        while (i < bound.size() && param_name(i) != key) ++i;
        if (i == bound.size() && !def.kwarg.empty()) {
            auto& items = (*extra.as<std::shared_ptr<DictObj>>())->items;
            for (auto& [k, old] : items)
                if (*k.as<std::string>() == key) raise("TypeError", fn.name + "() got multiple values for keyword argument '" + key + "'");
            items.emplace_back(key, v);
            continue;
        }
        if (i == bound.size()) raise("TypeError", fn.name + "() got an unexpected keyword argument '" + key + "'");
        if (bound[i]) raise("TypeError", fn.name + "() got multiple values for argument '" + key + "'");
        scope.vars[key] = v, bound[i] = true;
    }
    for (size_t i = 0; i < bound.size(); ++i) {
        if (bound[i]) continue;
        if (!fn.has_default[i]) raise("TypeError", fn.name + "() missing required argument: '" + param_name(i) + "'");
        scope.vars[param_name(i)] = fn.defaults[i];
    }
    if (!def.kwarg.empty()) scope.vars[def.kwarg] = extra;
}

Value Interp::call_function(const std::shared_ptr<FunctionObj>& fn, CallArgs& args) {
    check_interrupt();
    if (frames_.size() >= size_t(kRecursionLimit) || stack_nearly_full())
        raise("RecursionError", "maximum recursion depth exceeded calling " + fn->name + "()");
    auto scope = std::make_shared<Scope>();
    if (scopes_.size() > 4096)  // forget the scopes that died on their own
        std::erase_if(scopes_, [](const std::weak_ptr<Scope>& w) { return w.expired(); });
    scopes_.push_back(scope);
    scope->parent = fn->closure;
    bind_params(*fn, args, *scope);
    fn->last_args = args.args, fn->last_kwargs = args.kwargs;
    frames_.push_back({fn->unit, fn->name, fn->def_stmt->pos, scope, fn});
    FrameGuard guard{*this};
    try {
        Flow flow = exec_body(fn->def->body);
        if (flow == Flow::return_) return std::exchange(return_value_, Value());
        if (flow != Flow::normal) raise("SyntaxError", "'break' or 'continue' outside a loop");
        return None{};
    } catch (const ScriptError&) {
        throw;
    } catch (const std::exception& e) {  // still inside the frame: the traceback names this line
        auto [kind, message] = python_error(e);
        // A fullgraph break cannot see its caller from C++; this frame can.
        const std::string unknown = "unknown line (Tensor::operator bool cannot see its caller)";
        if (size_t at = message.find(unknown); at != std::string::npos)
            message.replace(at, unknown.size(), fn->unit->filename + ":" + std::to_string(frames_.back().pos.line) + " in " + fn->name);
        raise(kind, message);
    }
}

Value Interp::eval_call(const Expr& expr, const script::Call& c) {
    Value fn = eval(*c.func);
    CallArgs args;
    for (const Argument& a : c.args) {
        Value v = eval(*a.value);
        if (!a.unpack) {
            args.args.push_back(std::move(v));
            continue;
        }
        frames_.back().pos = a.value->pos;
        const std::vector<Value>* seq = as_sequence(v);
        if (!seq) raise("TypeError", "argument after * must be a list or tuple, not " + type_name(v));
        args.args.insert(args.args.end(), seq->begin(), seq->end());
    }
    for (const Keyword& k : c.keywords) {
        Value v = eval(*k.value);
        if (!k.name.empty()) {
            args.kwargs.emplace_back(k.name, std::move(v));
            continue;
        }
        frames_.back().pos = k.value->pos;  // f(**d)
        auto d = v.as<std::shared_ptr<DictObj>>();
        if (!d) raise("TypeError", "argument after ** must be a dict, not " + type_name(v));
        for (auto& [key, item] : (*d)->items) {
            if (!key.is<std::string>()) raise("TypeError", "keywords must be strings, not " + type_name(key));
            for (auto& [seen, unused] : args.kwargs)
                if (seen == *key.as<std::string>()) raise("TypeError", "got multiple values for keyword argument '" + seen + "'");
            args.kwargs.emplace_back(*key.as<std::string>(), item);
        }
    }
    frames_.back().pos = expr.pos;
    return call(fn, std::move(args));
}

}  // namespace kiln::interp
