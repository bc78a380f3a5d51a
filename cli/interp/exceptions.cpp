// Exceptions in kiln script: try/except/else/finally, raise, and `with` (whose exit must
// run however its body ends). A runtime error is a C++ ScriptError; catching one makes
// its exception object (an instance of a built-in or script exception class) on demand.
#include <algorithm>

#include "cli/interp/classes.h"
#include "cli/interp/compiled.h"
#include "cli/interp/limits.h"
#include "cli/interp/operators.h"
#include "cli/interp/interp.h"

namespace kiln::interp {

using namespace kiln::script;

namespace {

// The exception object of an error: the one a script raised, or a new instance of the
// built-in class its kind names (a RuntimeError from the library, a TypeError ...).
ObjectPtr exception_object(const ScriptError& e) {
    if (e.exception) return e.exception;
    ClassPtr cls = builtin_class(e.kind());
    if (!cls) cls = builtin_class("RuntimeError");
    auto inst = std::make_shared<InstanceObj>();
    inst->cls = cls;
    inst->attrs.emplace_back("args", make_tuple({Value(e.message())}));
    return inst;
}

}  // namespace

ScriptError Interp::as_script_error(const std::exception& e) const {
    if (auto s = dynamic_cast<const ScriptError*>(&e)) return *s;
    std::string kind = "RuntimeError", message = e.what();
    if (auto r = dynamic_cast<const RaisedError*>(&e)) kind = r->kind, message = r->message;
    else if (auto syntax = dynamic_cast<const script::SyntaxError*>(&e))
        kind = syntax->kind(), message = syntax->message();
    else if (dynamic_cast<const std::bad_alloc*>(&e)) kind = "MemoryError", message = "out of memory";
    else if (dynamic_cast<const kiln::IndexError*>(&e))
        kind = "IndexError";
    const std::string fullgraph = "compile(fullgraph=true)";
    if (kind == "RuntimeError" && message.rfind(fullgraph, 0) == 0)
        kind = "torch._dynamo.exc.Unsupported", message = "torch.compile(fullgraph=True)" + message.substr(fullgraph.size());
    return ScriptError(kind, message, frames_.empty() ? "" : traceback());
}

bool Interp::exception_matches(const ScriptError& e, const Value& type) {
    if (auto seq = type.as<std::shared_ptr<TupleObj>>()) {
        for (const Value& t : (*seq)->items)
            if (exception_matches(e, t)) return true;
        return false;
    }
    auto cls = type.object<ClassObj>();
    if (!cls || cls->root() != ClassObj::Kind::exception)
        raise("TypeError", "catching classes that do not inherit from BaseException is not allowed (got " + type_name(type) + ")");
    auto inst = std::static_pointer_cast<InstanceObj>(exception_object(e));
    return inst->cls->derives_from(*cls);
}

Interp::Flow Interp::exec_try(const Try& t) {
    if (t.finalbody.empty()) return exec_try_body(t);
    Flow flow = Flow::normal;
    std::optional<ScriptError> pending;
    try {
        flow = exec_try_body(t);
    } catch (const std::exception& e) {
        pending = as_script_error(e);
    }
    Value returning = return_value_;
    Flow final_flow = exec_body(t.finalbody);
    if (final_flow != Flow::normal) return final_flow;  // return in finally wins, as in Python
    return_value_ = returning;
    if (pending) throw *pending;
    return flow;
}

Interp::Flow Interp::exec_try_body(const Try& t) {
    std::optional<ScriptError> error;
    size_t depth = frames_.size();
    try {
        Flow flow = exec_body(t.body);
        if (flow != Flow::normal) return flow;  // else runs only when the body finished
    } catch (const std::exception& e) {
        error = as_script_error(e);
    }
    if (!error) return exec_body(t.orelse);
    (void)depth;
    // KeyboardInterrupt is a BaseException: a bare except does not swallow Ctrl-C.
    bool is_exception = std::static_pointer_cast<InstanceObj>(exception_object(*error))->cls->derives_from(*builtin_class("Exception"));
    for (const ExceptHandler& h : t.handlers) {
        if (h.type) {
            Value type = eval(*h.type);
            frames_.back().pos = h.pos;
            if (!exception_matches(*error, type)) continue;
        } else if (!is_exception) {
            continue;
        }
        error->exception = exception_object(*error);
        if (!h.name.empty()) assign_name(h.name, error->exception);
        handling.push_back(*error);
        struct Pop {
            std::vector<ScriptError>& v;
            ~Pop() { v.pop_back(); }
        } pop{handling};
        return exec_body(h.body);
    }
    throw *error;
}

void Interp::exec_raise(const Raise& r) {
    if (!r.exc) {
        if (handling.empty()) raise("RuntimeError", "No active exception to reraise");
        throw handling.back();
    }
    Value v = eval(*r.exc);
    if (r.cause) eval(*r.cause);  // evaluated, as in Python; kiln script keeps no chain
    if (auto cls = v.object<ClassObj>()) v = call(v, CallArgs{});
    auto inst = v.object<InstanceObj>();
    if (!inst || inst->cls->root() != ClassObj::Kind::exception)
        raise("TypeError", "exceptions must derive from BaseException, not " + type_name(v));
    ScriptError e(inst->cls->qualname, inst->str(), traceback());
    e.exception = inst;
    throw e;
}

// `with a, b:` is `with a: with b:`. torch.no_grad() and the like are ContextObjs (extras);
// a script object brings __enter__ and __exit__.
Interp::Flow Interp::exec_with(const With& w, size_t item) {
    if (item == w.items.size()) return exec_body(w.body);
    const WithItem& it = w.items[item];
    Value manager = eval(*it.context);
    Value enter, exit;
    try {
        enter = get_attr(manager, "__enter__");
        exit = get_attr(manager, "__exit__");
    } catch (const ScriptError&) {  // as Python words it: the object is not a context manager
        raise("TypeError", "'" + type_name(manager) + "' object does not support the context manager protocol (it needs __enter__ and __exit__)");
    }
    Value entered = call(enter, CallArgs{});
    if (it.target) assign(*it.target, entered);
    Flow flow;
    try {
        flow = exec_with(w, item + 1);
    } catch (const std::exception& e) {
        ScriptError error = as_script_error(e);
        error.exception = exception_object(error);
        Value inst = error.exception;
        Value cls = std::static_pointer_cast<Object>(std::static_pointer_cast<InstanceObj>(error.exception)->cls);
        if (truthy(call(exit, CallArgs{{cls, inst, None{}}, {}}))) return Flow::normal;  // the manager swallowed it
        throw error;
    }
    call(exit, CallArgs{{None{}, None{}, None{}}, {}});
    return flow;
}

void Interp::exec_delete(const Expr& target) {
    frames_.back().pos = target.pos;
    if (auto n = target.as<Name>()) {
        Scope& scope = *frames_.back().scope;
        bool global = std::find(scope.global_names.begin(), scope.global_names.end(), n->id) != scope.global_names.end();
        Scope& where = global ? *globals_ : scope;
        if (!where.vars.erase(n->id)) raise("NameError", "name '" + n->id + "' is not defined");
    } else if (auto a = target.as<Attribute>()) {
        Value object = eval(*a->object);
        frames_.back().pos = target.pos;
        auto inst = object.object<InstanceObj>();
        if (!inst) raise("AttributeError", "cannot delete attribute '" + a->name + "' of a " + type_name(object));
        if (inst->born != creation_epoch()) note_host_effect(*this, object, "deleting ." + a->name);
        auto it = std::find_if(inst->attrs.begin(), inst->attrs.end(), [&](auto& kv) { return kv.first == a->name; });
        if (it == inst->attrs.end()) raise("AttributeError", "'" + type_name(object) + "' object has no attribute '" + a->name + "'");
        inst->attrs.erase(it);
        if (inst->module) inst->module->state_changed();
    } else if (auto s = target.as<Subscript>()) {
        Value object = eval(*s->object);
        Value key = eval(*s->index);
        frames_.back().pos = target.pos;
        note_host_effect(*this, object, "del of an item of a " + type_name(object));
        if (auto d = object.as<std::shared_ptr<DictObj>>()) {
            auto& items = (*d)->items;
            auto it = std::find_if(items.begin(), items.end(), [&](auto& kv) { return values_equal(kv.first, key); });
            if (it == items.end()) raise("KeyError", repr(key));
            items.erase(it);
        } else if (auto l = object.as<std::shared_ptr<ListObj>>()) {
            auto i = as_int(key);
            if (!i) raise("TypeError", "list indices must be integers, not " + type_name(key));
            int64_t n = int64_t((*l)->items.size()), at = *i < 0 ? *i + n : *i;
            if (at < 0 || at >= n) raise("IndexError", "list assignment index out of range");
            (*l)->items.erase((*l)->items.begin() + at);
        } else {
            raise("TypeError", "'" + type_name(object) + "' object does not support item deletion");
        }
    }
}

}  // namespace kiln::interp
