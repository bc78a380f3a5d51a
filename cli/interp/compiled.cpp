// Script functions under the JIT: arguments flattened for the guards, the interpreter as
// the host code, results rebuilt from the tensors the cached program returns.
#include "cli/interp/compiled.h"

#include "codegen/inductor.h"

#include <algorithm>
#include <deque>
#include <sstream>

#include "cli/interp/builtins.h"
#include "cli/interp/free_names.h"
#include "tensor/ops.h"

namespace kiln::interp {
namespace {

// Where globals go among the flattened arguments: after any plausible argument list.
constexpr size_t kGlobalsPosition = 64;

// Guards see Tensors, numbers and object identities; a dict of tensors becomes one
// argument per key (the walk-through's `inputs["x"]`), a list one per element.
struct Flattener {
    Interp& in;
    jit::Args args;
    std::deque<std::string> keys;  // stable addresses for ArgValue::key

    void add(const Value& v, int pos, const std::string* key) {
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
        } else {
            args.push_back({.kind = jit::ArgKind::object, .object = identity(v), .position = pos, .key = key});
        }
    }
    // A global is guarded as an argument is, except that a list or dict is guarded by
    // identity, not item by item: fn may append to it, and each call would then recompile.
    void add_global(const Value& v, int pos, const std::string* key) {
        if (as_sequence(v) || v.is<std::shared_ptr<DictObj>>())
            args.push_back({.kind = jit::ArgKind::object, .object = identity(v), .position = pos, .key = key});
        else
            add(v, pos, key);
    }
};

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
        if (auto helper = value.as<std::shared_ptr<FunctionObj>>()) add_globals(in, flat, *helper, pos, seen, labels);
    }
}

std::vector<Tensor> flatten_result(Interp& in, const Value& r, CompiledObj::Result& kind) {
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
            if (!v.is<Tensor>()) in.raise("TypeError", "a compiled function must return Tensors; its result holds a " + type_name(v));
            out.push_back(*v.as<Tensor>());
        }
        return out;
    }
    in.raise("TypeError", "a compiled function must return a Tensor, a tuple or list of Tensors, or None; got " + type_name(r));
}

Value unflatten_result(std::vector<Tensor> ts, CompiledObj::Result kind) {
    std::vector<Value> items(ts.begin(), ts.end());
    switch (kind) {
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

}  // namespace

Value compile_value(Interp& in, const Value& target, const std::vector<std::pair<std::string, Value>>& options) {
    if (!target.is<std::shared_ptr<FunctionObj>>() && !target.is<ModulePtr>())
        in.raise("TypeError", "compile: expected a function or an nn module, got " + type_name(target));
    CompileOptions opt{.backend = in.default_backend, .async_compile = in.async_compile};
    for (const auto& [key, v] : options) {
        if (key == "backend") {
            if (!v.is<std::string>()) in.raise("TypeError", "compile: backend must be a string such as \"eager\", got " + type_name(v));
            opt.backend = *v.as<std::string>();
        } else if (key == "fullgraph") {
            opt.fullgraph = in.truthy(v);
        } else if (key == "async_compile") {
            opt.async_compile = in.truthy(v);
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
    if (auto f = c.target.as<std::shared_ptr<FunctionObj>>()) {
        (*f)->last_args = args.args, (*f)->last_kwargs = {};
        std::vector<const FunctionObj*> seen;
        add_globals(in, flat, *f, int(kGlobalsPosition), seen, labels);
    }
    jit::HostFn host = [&] {
        CreationEpochScope fresh;  // objects made from here on are this call's own
        return flatten_result(in, in.call(c.target, args), c.result);
    };
    return unflatten_result(c.core->call(flat.args, host), c.result);
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
                    out += "# " + head + " (output_code_" + std::to_string(h.id) + ".cpp)\n# schedule:\n" + h.schedule;
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
