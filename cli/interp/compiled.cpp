// Script functions under the JIT: arguments flattened for the guards, the interpreter as
// the host code, results rebuilt from the tensors the cached program returns.
#include "cli/interp/compiled.h"

#include "codegen/inductor.h"

#include <algorithm>
#include <deque>
#include <sstream>

#include "cli/interp/builtins.h"
#include "cli/interp/classes.h"
#include "cli/interp/free_names.h"
#include "cli/interp/limits.h"
#include "jit/tracer.h"
#include "tensor/ops.h"

namespace kiln::interp {
namespace {

// Where globals go among the flattened arguments: after any plausible argument list.
constexpr size_t kGlobalsPosition = 64;

void add_globals_of_value(Interp& in, Flattener& flat, const Value& value, int pos, std::vector<const FunctionObj*>& seen,
                          std::deque<std::string>& labels);

// The globals (and enclosing-scope variables) fn reads, and those of the script functions
// it reads in turn, as each is bound now: passed to the JIT after the arguments, at
// position `pos` keyed by name, so the guards see a rebinding (`w = randn(5)` between
// calls) and a global tensor is a graph input, not a constant of the first call.
void add_globals(Interp& in, Flattener& flat, const std::shared_ptr<FunctionObj>& fn, int pos,
                 std::vector<const FunctionObj*>& seen, std::deque<std::string>& labels) {
    if (std::find(seen.begin(), seen.end(), fn.get()) != seen.end()) return;
    seen.push_back(fn.get());
    if (!fn->free_names) fn->free_names = free_names(*fn->def);
    for (const std::string& name : *fn->free_names) {
        Value* v = in.lookup_in(fn->closure.get(), name);
        Value value = v ? *v : Value(None{});
        // torch, F, randn ...: modules and builtins are constants here, as for Dynamo.
        if (value.is<const Builtin*>() || value.is<std::shared_ptr<Namespace>>()) continue;
        std::string label = seen.size() == 1 ? name : fn->name + "." + name;
        flat.add_global(value, pos, &labels.emplace_back(label));
        add_globals_of_value(in, flat, value, pos, seen, labels);
    }
}

// The globals read by what `value` may run: a function, a lambda, a bound method, or the
// methods of a class or of an object's class.
void add_globals_of_value(Interp& in, Flattener& flat, const Value& value, int pos, std::vector<const FunctionObj*>& seen,
                          std::deque<std::string>& labels) {
    if (auto helper = value.as<std::shared_ptr<FunctionObj>>()) return add_globals(in, flat, *helper, pos, seen, labels);
    if (auto m = value.object<MethodObj>()) return add_globals_of_value(in, flat, m->fn, pos, seen, labels);
    if (auto s = value.object<StaticMethodObj>()) return add_globals_of_value(in, flat, s->fn, pos, seen, labels);
    std::shared_ptr<ClassObj> cls = value.object<ClassObj>();
    if (!cls) cls = class_of(value);
    for (const ClassObj* c = cls.get(); c; c = c->base.get())
        for (auto& [name, item] : c->attrs)
            if (item.is<std::shared_ptr<FunctionObj>>() || item.object<StaticMethodObj>())
                add_globals_of_value(in, flat, item, pos, seen, labels);
}

std::vector<Tensor> flatten_result(Interp& in, const Value& r, CompiledObj& c) {
    CompiledObj::Result& kind = c.result;
    c.result_none.clear();
    if (auto t = r.as<Tensor>()) {
        kind = CompiledObj::Result::tensor;
        return {*t};
    }
    if (r.is_none()) {
        kind = CompiledObj::Result::none;
        return {};
    }
    if (const std::vector<Value>* seq = as_sequence(r)) {
        kind = r.is<std::shared_ptr<ListObj>>() ? CompiledObj::Result::list : CompiledObj::Result::tuple;
        std::vector<Tensor> out;
        for (const Value& v : *seq) {
            c.result_none.push_back(v.is_none());
            if (v.is_none()) continue;
            if (!v.is<Tensor>()) in.raise("TypeError", "a compiled function must return Tensors; its result holds a " + type_name(v));
            out.push_back(*v.as<Tensor>());
        }
        return out;
    }
    in.raise("TypeError", "a compiled function must return a Tensor, a tuple or list of Tensors, or None; got " + type_name(r));
}

Value unflatten_result(std::vector<Tensor> ts, const CompiledObj& c) {
    std::vector<Value> items;
    size_t next = 0;
    for (bool none : c.result_none) items.push_back(none || next >= ts.size() ? Value(None{}) : Value(ts[next++]));
    while (next < ts.size()) items.emplace_back(ts[next++]);
    switch (c.result) {
        case CompiledObj::Result::tensor: return items.empty() ? Value() : items[0];
        case CompiledObj::Result::none: return None{};
        case CompiledObj::Result::list: return make_list(std::move(items));
        case CompiledObj::Result::tuple: return make_tuple(std::move(items));
    }
    return None{};
}

// The names guards print for each position: fn's parameters, then "G" for its globals
// (G["w"], as Dynamo prints G['w']).
std::vector<std::string> param_names(const Value& target) {
    std::vector<std::string> names;
    if (auto f = target.as<std::shared_ptr<FunctionObj>>()) {
        for (const auto& p : (*f)->def->params) names.push_back(p.name);
        while (names.size() < kGlobalsPosition) names.push_back("arg" + std::to_string(names.size()));
        names.push_back("G");
    } else {
        names.push_back("x");  // a module's forward(x)
    }
    return names;
}

std::string target_name(const Value& target) {
    if (auto f = target.as<std::shared_ptr<FunctionObj>>()) return (*f)->name;
    if (auto c = target.as<std::shared_ptr<CompiledObj>>()) return (*c)->name;
    return type_name(target);
}

jit::Dynamic dynamic_option(Interp& in, const Value& v) {
    if (v.is_none()) return jit::Dynamic::auto_;
    if (auto b = v.as<bool>()) return *b ? jit::Dynamic::always : jit::Dynamic::never;
    in.raise("TypeError", "compile: dynamic must be None, True or False, got " + repr(v));
}

// What a custom backend receives as `gm`: the graph, printable (gm.graph.print_tabular(),
// gm.code) and runnable (gm.forward, gm(...)) through the reference interpreter.
struct GraphModuleObj : Object {
    std::shared_ptr<const jit::Graph> graph;
    std::string type_name() const override { return "GraphModule"; }
    std::string repr() const override { return "GraphModule()"; }
    Value call(Interp& in, const ObjectPtr&, CallArgs& args) override {
        std::vector<Tensor> inputs;
        for (const Value& v : args.args) inputs.push_back(to_tensor(in, v, "graph input"));
        std::vector<Tensor> outs = jit::interpret(*graph, inputs);
        std::vector<Value> items(outs.begin(), outs.end());
        return items.size() == 1 ? items[0] : make_tuple(std::move(items));
    }
    std::optional<Value> attr(Interp&, const ObjectPtr& self, const std::string& name) override {
        if (name == "forward") return Value(self);
        if (name == "graph") return Value(self);  // gm.graph.print_tabular(): the same object answers
        if (name == "code") return Value(graph->tabular());
        if (name == "print_tabular") return Value(std::make_shared<BoundMethod>(BoundMethod{Value(self), find_builtin("GraphModule.print_tabular")}));
        return std::nullopt;
    }
};

}  // namespace

jit::Backend script_backend(Interp& in, const Value& fn) {
    Interp* interp = &in;
    return jit::Backend(jit::BackendFn([interp, fn](const jit::Graph& graph, std::span<const Tensor> example) -> jit::CompiledFn {
        auto gm = std::make_shared<GraphModuleObj>();
        gm->graph = std::make_shared<const jit::Graph>(graph);
        std::vector<Value> examples(example.begin(), example.end());
        Value compiled = interp->call(fn, CallArgs{{Value(gm), make_list(std::move(examples))}, {}});
        if (compiled.object<GraphModuleObj>()) return [gm](std::span<const Tensor> inputs) { return jit::interpret(*gm->graph, inputs); };
        return [interp, compiled](std::span<const Tensor> inputs) {
            std::vector<Value> args(inputs.begin(), inputs.end());
            Value r = interp->call(compiled, CallArgs{std::move(args), {}});
            if (auto t = r.as<Tensor>()) return std::vector<Tensor>{*t};
            std::vector<Tensor> out;
            if (auto seq = as_sequence(r))
                for (const Value& v : *seq) out.push_back(to_tensor(*interp, v, "backend result"));
            else interp->raise("TypeError", "a backend's compiled function must return Tensors, got " + type_name(r));
            return out;
        };
    }));
}

namespace {
}  // namespace

void Flattener::add(const Value& v, int pos, const std::string* key) {
    // A deep or cyclic list argument: RecursionError, not a C++ stack overflow.
    RecursionGuard depth("while flattening the arguments of a compiled function");
    if (auto t = v.as<Tensor>()) {
        args.push_back({.kind = jit::ArgKind::tensor, .tensor = *t, .position = pos, .key = key});
    } else if (auto d = as_double(v)) {
        args.push_back({.kind = jit::ArgKind::scalar, .scalar = *d, .position = pos, .key = key});
    } else if (auto s = v.as<std::string>()) {
        // Strings are guarded by value: their hash stands in for them.
        double h = double(std::hash<std::string>{}(*s) % (1ull << 52));
        args.push_back({.kind = jit::ArgKind::scalar, .scalar = h, .position = pos, .key = key});
    } else if (auto d = v.as<std::shared_ptr<DictObj>>()) {
        for (auto& [k, item] : (*d)->items) {
            const std::string* name = k.as<std::string>();
            if (!name) name = &keys.emplace_back(repr(k));
            add(item, pos, name);
        }
    } else if (const std::vector<Value>* seq = as_sequence(v)) {
        for (size_t i = 0; i < seq->size(); ++i) add((*seq)[i], pos, &keys.emplace_back(std::to_string(i)));
    } else if (auto inst = v.object<InstanceObj>()) {
        // An object is guarded by identity and by the attributes a method may read: its
        // own (self.scale = 3 between calls is seen) and its class's data attributes.
        args.push_back({.kind = jit::ArgKind::object, .object = identity(v), .position = pos, .key = key});
        if (std::find(objects_seen.begin(), objects_seen.end(), inst.get()) != objects_seen.end()) return;
        objects_seen.push_back(inst.get());
        for (auto& [name, item] : inst->attrs) add_global(item, pos, &keys.emplace_back((key ? *key + "." : "") + name));
        add_class(inst->cls, pos, key);
    } else if (auto cls = v.object<ClassObj>()) {
        args.push_back({.kind = jit::ArgKind::object, .object = identity(v), .position = pos, .key = key});
        add_class(cls, pos, key);
    } else {
        args.push_back({.kind = jit::ArgKind::object, .object = identity(v), .position = pos, .key = key});
    }
}

void Flattener::add_class(const std::shared_ptr<ClassObj>& cls, int pos, const std::string* key) {
    for (const ClassObj* c = cls.get(); c; c = c->base.get()) {
        if (std::find(objects_seen.begin(), objects_seen.end(), c) != objects_seen.end()) continue;
        objects_seen.push_back(c);
        for (auto& [name, item] : c->attrs) {
            if (item.is<std::shared_ptr<FunctionObj>>() || item.object<StaticMethodObj>()) continue;
            add_global(item, pos, &keys.emplace_back((key ? *key + "." : "") + c->name + "." + name));
        }
    }
}

void Flattener::add_global(const Value& v, int pos, const std::string* key) {
    if (as_sequence(v) || v.is<std::shared_ptr<DictObj>>())
        args.push_back({.kind = jit::ArgKind::object, .object = identity(v), .position = pos, .key = key});
    else
        add(v, pos, key);
}

Value compile_value(Interp& in, const Value& target, const std::vector<std::pair<std::string, Value>>& options) {
    bool callable_object = target.object<InstanceObj>() || target.object<MethodObj>();
    if (!target.is<std::shared_ptr<FunctionObj>>() && !target.is<ModulePtr>() && !callable_object)
        in.raise("TypeError", "compile: expected a function or an nn module, got " + type_name(target));
    CompileOptions opt{.backend = in.default_backend, .async_compile = in.async_compile};
    for (const auto& [key, v] : options) {
        if (key == "backend") {
            if (!v.is<std::string>() && !v.is_none()) {
                opt.backend = script_backend(in, v);  // backend=my_backend: a script function (gm, example_inputs)
                continue;
            }
            if (v.is_none()) continue;
            opt.backend = *v.as<std::string>();
        } else if (key == "fullgraph") {
            opt.fullgraph = in.truthy(v);
        } else if (key == "async_compile") {
            opt.async_compile = in.truthy(v);
        } else if (key == "choose_faster") {
            opt.choose_faster = in.truthy(v);
        } else if (key == "dynamic") {
            opt.dynamic = dynamic_option(in, v);
        } else if (key == "mode") {
            opt.mode = v.is_none() ? "default" : str(v);
        } else if (key == "cache_size_limit") {
            auto n = as_int(v);
            if (!n) in.raise("TypeError", "compile: cache_size_limit must be an int");
            opt.cache_size_limit = int(*n);
        } else {
            in.raise("TypeError", "compile() got an unexpected keyword argument '" + key + "'");
        }
    }
    opt.arg_names = param_names(target);
    opt.name = target_name(target);
    auto c = std::make_shared<CompiledObj>();
    c->name = opt.name;
    c->target = target;
    c->core = std::make_shared<jit::CompiledCore>(std::move(opt));
    jit::register_core(c->core);  // so reset() clears it
    return c;
}

Value call_compiled(Interp& in, CompiledObj& c, CallArgs args) {
    // Inside another compiled function's recording: inline, as the C++ wrapper does.
    if (dispatch_hook()) return in.call(c.target, std::move(args));
    if (!args.kwargs.empty()) in.raise("TypeError", c.name + ": a compiled function takes positional arguments only");
    Flattener flat{in};
    if (args.args.size() >= kGlobalsPosition) in.raise("TypeError", c.name + ": a compiled function takes at most " + std::to_string(kGlobalsPosition - 1) + " arguments");
    for (size_t i = 0; i < args.args.size(); ++i) flat.add(args.args[i], int(i), nullptr);
    std::deque<std::string> labels;
    std::vector<const FunctionObj*> seen;
    if (auto f = c.target.as<std::shared_ptr<FunctionObj>>()) {
        (*f)->last_args = args.args, (*f)->last_kwargs = {};
        add_globals(in, flat, *f, int(kGlobalsPosition), seen, labels);
    } else {
        add_globals_of_value(in, flat, c.target, int(kGlobalsPosition), seen, labels);  // a script module's methods
    }
    for (const Value& a : args.args) add_globals_of_value(in, flat, a, int(kGlobalsPosition), seen, labels);
    jit::HostFn host = [&] {
        CreationEpochScope fresh;  // objects made from here on are this call's own
        jit::HostSiteScope site([&in] { return in.current_site(); });  // graph breaks name the script's line
        return flatten_result(in, in.call(c.target, args), c);
    };
    return unflatten_result(c.core->call(flat.args, host), c);
}

Value explain_call(Interp& in, const Value& target, CallArgs args) {
    Value fn = target;
    if (auto c = target.as<std::shared_ptr<CompiledObj>>()) fn = (*c)->target;
    Value compiled = compile_value(in, fn, {{"backend", Value("eager")}});
    auto e = std::make_shared<ExplainObj>();
    std::vector<std::string>* outer = in.escape_sites;
    in.escape_sites = &e->sites;
    try {
        call_compiled(in, **compiled.as<std::shared_ptr<CompiledObj>>(), std::move(args));
    } catch (...) {
        in.escape_sites = outer;
        throw;
    }
    in.escape_sites = outer;
    e->output = jit::explain_core(*(*compiled.as<std::shared_ptr<CompiledObj>>())->core);
    return e;
}

void note_host_effect(Interp& in, const Value& object, const std::string& what) {
    if (!dispatch_hook()) return;  // nothing records
    auto l = object.as<std::shared_ptr<ListObj>>();
    auto d = object.as<std::shared_ptr<DictObj>>();
    uint64_t born = l ? (*l)->born : d ? (*d)->born : 0;
    if (born != 0 && born == creation_epoch()) return;  // made in this call: replaying the graphs remakes it
    report_host_effect(what + " at " + in.current_site());
}

std::string explain_text(const ExplainObj& e) {
    std::ostringstream os;
    os << e.output;
    std::string text = os.str();
    // The library cannot see the caller of operator bool; the interpreter can.
    const std::string unknown = "unknown line (Tensor::operator bool cannot see its caller)";
    size_t at = 0;
    for (const std::string& site : e.sites) {
        at = text.find(unknown, at);
        if (at == std::string::npos) break;
        text.replace(at, unknown.size(), site);
        at += site.size();
    }
    if (!text.empty() && text.back() == '\n') text.pop_back();
    return text;
}

std::string graphs_text(const CompiledObj& c) {
    std::string out;
    c.core->with_entries([&](const std::vector<std::unique_ptr<jit::Entry>>& entries) {
        for (const auto& e : entries) {
            for (const jit::Segment* s : e->segments()) {
                out += "entry " + std::to_string(e->id) + ", graph " + std::to_string(s->id);
                out += s->is_return ? " (returns)\n" : " (ends at a graph break: " + s->brk.reason + ")\n";
                out += s->graph ? s->graph->tabular() : "  (no ops)\n";
            }
        }
    });
    return out.empty() ? c.name + " has not been called yet: nothing is compiled\n" : out;
}

std::string code_text(const CompiledObj& c) {
    std::string out;
    c.core->with_entries([&](const std::vector<std::unique_ptr<jit::Entry>>& entries) {
        for (const auto& e : entries) {
            for (const jit::Segment* s : e->segments()) {
                if (!s->graph) continue;
                std::string head = "entry " + std::to_string(e->id) + ", graph " + std::to_string(s->id);
                std::vector<codegen::CompiledGraphInfo> halves = codegen::compiled_graphs(s->graph.get());
                if (halves.empty()) out += "# " + head + ": backend '" + c.core->options().backend.name + "' generates no code; the graph runs op by op\n";
                for (const codegen::CompiledGraphInfo& h : halves) {
                    out += "# " + head + " (output_code_" + std::to_string(h.id) + (h.cuda ? ".cu" : ".cpp") + ")\n# schedule:\n" + h.schedule;
                    out += h.interpreted ? "# interpreted: " + h.why_interpreted + "\n" : h.source;
                }
            }
        }
    });
    return out.empty() ? c.name + " has not been called yet: nothing is compiled\n" : out;
}

std::string guards_text(const CompiledObj& c) {
    std::string out;
    c.core->with_entries([&](const std::vector<std::unique_ptr<jit::Entry>>& entries) {
        for (const auto& e : entries) {
            out += "entry " + std::to_string(e->id) + (e->rerun ? " (re-runs fn on every call)" : "") + ":\n";
            for (const std::string& line : e->guards.lines(c.core->options().arg_names)) out += "  " + line + "\n";
        }
    });
    return out.empty() ? c.name + " has not been called yet: no guards\n" : out;
}

}  // namespace kiln::interp
