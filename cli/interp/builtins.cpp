// The builtins table: binding a call to a builtin's parameter list, name resolution
// through the torch/nn/F/optim namespaces, and the Python-level builtins (print, range,
// len, compile, explain ...). Tensor and nn entries live in builtins_tensor.cpp and
// builtins_nn.cpp; all three feed the one table here.
#include "cli/interp/builtins.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <ostream>
#include <set>

#include "cli/interp/classes.h"
#include "cli/interp/compiled.h"
#include "cli/interp/limits.h"
#include "cli/interp/numbers.h"
#include "cli/interp/operators.h"
#include "jit/backends.h"

namespace kiln::interp {
namespace {

// A parameter list such as "input, dim=None, keepdim=False" or "*size, requires_grad=False".
struct ParamSpec {
    std::vector<std::string> names;  // without defaults; "*size" is not among them
    int star = -1;                   // index in names where *rest sits (the rest are keyword-only)
};

ParamSpec parse_params(const std::string& text) {
    ParamSpec spec;
    size_t start = 0;
    while (start < text.size()) {
        size_t comma = text.find(',', start);
        std::string part = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        start = comma == std::string::npos ? text.size() : comma + 1;
        part.erase(0, part.find_first_not_of(' '));
        part = part.substr(0, part.find('='));
        while (!part.empty() && part.back() == ' ') part.pop_back();
        if (part.empty()) continue;
        if (part[0] == '*') spec.star = int(spec.names.size());
        else spec.names.push_back(part);
    }
    return spec;
}

struct Table {
    std::map<std::string, const Builtin*> entries;
    std::map<const Builtin*, ParamSpec> specs;
    Table() {
        for (auto span : {core_builtins(), tensor_builtins(), nn_builtins(), class_builtins(), extra_builtins(), ops_builtins(), models_builtins(), dist_builtins()})
            for (const Builtin& b : span) entries[b.name] = &b, specs[&b] = parse_params(b.params);
    }
};
const Table& table() {
    static const Table t;
    return t;
}

// What `ns.name` looks up: its own entries first, then the plain torch names.
const std::map<std::string, std::vector<std::string>> kNamespacePrefixes = {
    {"torch", {""}}, {"nn", {"nn."}}, {"F", {"F.", ""}}, {"optim", {"optim."}}, {"time", {"time."}}, {"_dynamo", {"_dynamo."}},
    {"jit", {"jit."}}, {"fx", {"fx."}}, {"cuda", {"cuda."}}, {"autograd", {"autograd."}}, {"warnings", {"warnings."}},
    {"traceback", {"traceback."}}, {"exc", {}}, {"typing", {}}, {"proxy", {}},
    {"torchvision", {}}, {"torchvision.models", {"torchvision.models."}}, {"kiln", {"kiln."}}, {"kiln.models", {"kiln.models."}},
    {"dist", {"dist."}}, {"parallel", {"parallel."}}, {"ReduceOp", {}},
};
const std::map<std::string, std::string> kSubmodules = {
    {"torch.nn", "nn"}, {"torch.nn.functional", "F"}, {"torch.optim", "optim"}, {"torch._dynamo", "_dynamo"},
    {"nn.functional", "F"}, {"torch.compiler", "_dynamo"}, {"torch.jit", "jit"}, {"torch.fx", "fx"}, {"torch.cuda", "cuda"},
    {"torch.autograd", "autograd"}, {"_dynamo.exc", "exc"}, {"torch._dynamo.exc", "exc"},
    {"fx.proxy", "proxy"}, {"torch.fx.proxy", "proxy"},
    {"torchvision.models", "torchvision.models"}, {"kiln.models", "kiln.models"},
    {"torch.distributed", "dist"}, {"dist.ReduceOp", "ReduceOp"}, {"torch.nn.parallel", "parallel"}, {"nn.parallel", "parallel"},
};
// Classes reached through a namespace: torch.nn.Module, torch.autograd.Function, torch.Tensor ...
const std::map<std::string, std::string> kNamespaceClasses = {
    {"nn.Module", "torch.nn.Module"}, {"autograd.Function", "torch.autograd.Function"}, {"torch.Tensor", "torch.Tensor"},
    {"exc.Unsupported", "torch._dynamo.exc.Unsupported"}, {"exc.TorchDynamoException", "torch._dynamo.exc.TorchDynamoException"},
    {"exc.BackendCompilerFailed", "torch._dynamo.exc.BackendCompilerFailed"},
    {"proxy.TraceError", "torch.fx.proxy.TraceError"},
};
const std::map<std::string, DType> kDTypes = {
    {"float32", float32}, {"float", float32}, {"float64", float64}, {"double", float64},
    {"int64", int64},     {"long", int64},    {"bool", boolean},
};

// ---- Python-level builtins

Value b_print(Bound& b) {
    note_host_effect(b.in, None{}, "print()");
    std::string sep = b.has(0) ? b.string(0) : " ";
    std::string end = b.has(1) ? b.string(1) : "\n";
    for (size_t i = 0; i < b.rest.size(); ++i) b.in.out << (i ? sep : "") << str(b.rest[i]);
    b.in.out << end << std::flush;
    return None{};
}
Value b_range(Bound& b) {
    std::vector<int64_t> a;
    for (const Value& v : b.rest) {
        auto i = as_int(v);
        if (!i) b.in.raise("TypeError", "range() takes integers, not " + type_name(v));
        a.push_back(*i);
    }
    if (a.empty() || a.size() > 3) b.in.raise("TypeError", "range expected 1 to 3 arguments, got " + std::to_string(a.size()));
    int64_t start = a.size() > 1 ? a[0] : 0, stop = a.size() > 1 ? a[1] : a[0], step = a.size() > 2 ? a[2] : 1;
    if (step == 0) b.in.raise("ValueError", "range() arg 3 must not be zero");
    // The count in 128 bits: stop - start overflows 64 for range(-2**63, 2**63 - 1).
    __int128 span = step > 0 ? __int128(stop) - start : __int128(start) - stop;
    __int128 magnitude = step > 0 ? __int128(step) : -__int128(step);
    __int128 count = span <= 0 ? 0 : (span + magnitude - 1) / magnitude;
    check_memory((unsigned __int128)count * sizeof(Value), "range()");
    std::vector<Value> items;
    items.reserve(size_t(count));
    for (__int128 k = 0; k < count; ++k) items.emplace_back(int64_t(start + k * step));
    return make_list(std::move(items));
}
Value b_len(Bound& b) {
    const Value& v = b.value(0);
    if (auto seq = as_sequence(v)) return int64_t(seq->size());
    if (auto s = v.as<std::string>()) return int64_t(s->size());
    if (auto d = v.as<std::shared_ptr<DictObj>>()) return int64_t((*d)->items.size());
    if (auto t = v.as<Tensor>()) {
        if (t->dim() == 0) b.in.raise("TypeError", "len() of a 0-d tensor");
        return t->size(0);
    }
    b.in.raise("TypeError", "object of type '" + type_name(v) + "' has no len()");
}
Value b_str(Bound& b) { return b.has(0) ? str(b.value(0)) : std::string(); }
Value b_repr(Bound& b) { return repr(b.value(0)); }
// type(x): an instance of a script class gives its class, a tensor torch.Tensor, a number,
// string or container the builtin that makes one (so `type(x) == int` and `type(x)(v)` work,
// printed <class 'int'>), anything else a type object that knows its name.
struct TypeObj : Object {
    std::string name;
    std::string type_name() const override { return "type"; }
    std::string repr() const override { return "<class '" + name + "'>"; }
    std::optional<Value> attr(Interp&, const ObjectPtr&, const std::string& key) override {
        if (key == "__name__" || key == "__qualname__") return Value(name);
        return std::nullopt;
    }
    bool equals(const Object& other) const override {
        auto t = dynamic_cast<const TypeObj*>(&other);
        return t && t->name == name;
    }
};
Value b_type(Bound& b) {
    const Value& v = b.value(0);
    if (auto i = v.object<InstanceObj>()) return Value(i->cls);
    if (v.is<Tensor>()) return Value(builtin_class("torch.Tensor"));
    std::string name = type_name(v);
    if (const Builtin* maker = find_builtin(name); maker && is_type_builtin(*maker)) return maker;
    auto t = std::make_shared<TypeObj>();
    t->name = name;
    return Value(t);
}
Value b_float(Bound& b) {
    const Value& v = b.value(0);
    if (auto t = v.as<Tensor>()) return b.in.note_escape(), t->item<double>();
    if (auto d = as_double(v)) return *d;
    if (auto s = v.as<std::string>())
        if (std::optional<double> d = parse_float(*s)) return *d;
    b.in.raise("ValueError", "could not convert " + repr(v) + " to float");
}
Value b_int(Bound& b) {
    const Value& v = b.value(0);
    if (auto t = v.as<Tensor>()) {
        b.in.note_escape();
        if (t->numel() == 1 && t->dtype() == int64) return t->item<int64_t>();  // exact, not through a double
        return float_to_int(t->item<double>());
    }
    if (auto i = as_int(v)) return *i;
    if (auto d = v.as<double>()) return float_to_int(*d);
    if (auto s = v.as<std::string>())
        if (std::optional<int64_t> i = parse_int(*s)) return *i;
    b.in.raise("ValueError", "invalid literal for int() with base 10: " + repr(v));
}
Value b_bool(Bound& b) { return b.has(0) && b.in.truthy(b.value(0)); }
Value b_list(Bound& b) { return make_list(b.has(0) ? iterate(b.in, b.value(0)) : std::vector<Value>{}); }
Value b_tuple(Bound& b) { return make_tuple(b.has(0) ? iterate(b.in, b.value(0)) : std::vector<Value>{}); }
Value b_dict(Bound&) { return make_dict(); }
Value b_enumerate(Bound& b) {
    std::vector<Value> items;
    for (const Value& v : iterate(b.in, b.value(0))) items.push_back(make_tuple({int64_t(items.size()), v}));
    return make_list(std::move(items));
}
Value b_zip(Bound& b) {
    std::vector<std::vector<Value>> seqs;
    for (const Value& v : b.rest) seqs.push_back(iterate(b.in, v));
    std::vector<Value> items;
    for (size_t i = 0; !seqs.empty() && std::all_of(seqs.begin(), seqs.end(), [&](auto& s) { return i < s.size(); }); ++i) {
        std::vector<Value> row;
        for (auto& s : seqs) row.push_back(s[i]);
        items.push_back(make_tuple(std::move(row)));
    }
    return make_list(std::move(items));
}
Value b_minmax(Bound& b, bool is_max) {
    std::vector<Value> items = b.rest.size() == 1 ? iterate(b.in, b.rest[0]) : b.rest;
    if (items.empty()) b.in.raise("ValueError", std::string(is_max ? "max" : "min") + "() arg is an empty sequence");
    Value best = items[0];
    for (const Value& v : items)
        if (b.in.truthy(compare_op(b.in, is_max ? script::CompareOperator::gt : script::CompareOperator::lt, v, best))) best = v;
    return best;
}
Value b_max(Bound& b) { return b_minmax(b, true); }
Value b_min(Bound& b) { return b_minmax(b, false); }
}  // namespace

// Python's round(number, ndigits), and torch.round(tensor, decimals) under the same name
// (registered again after the table's ops in builtins_ops.cpp, so this one is found).
Value b_round(Bound& b) {
    if (b.value(0).is<Tensor>())
        return kiln::round(b.tensor(0), b.has(2) ? b.integer(2) : b.has(1) ? b.integer(1) : 0);
    if (auto i = as_int(b.value(0)); i && !b.has(1)) return *i;
    double x = b.number(0);
    if (!b.has(1)) return float_to_int(std::nearbyint(x));
    // Python: round(2.5, 400) is 2.5 and round(2.5, -400) is 0.0 (10**n is inf or 0 there:
    // inf/inf was NaN). An int with ndigits < 0 stays an int, rounded half to even.
    int64_t n = std::clamp<int64_t>(b.integer(1), -400, 400);
    if (auto i = as_int(b.value(0))) {
        if (n >= 0) return *i;
        if (n < -19) return int64_t(0);
        __int128 unit = 1;
        for (int64_t k = 0; k < -n; ++k) unit *= 10;
        __int128 q = *i / unit, r = *i % unit;
        if (r < 0) q -= 1, r += unit;  // floor
        if (2 * r > unit || (2 * r == unit && q % 2 != 0)) q += 1;
        __int128 rounded = q * unit;
        if (rounded > INT64_MAX || rounded < INT64_MIN) b.in.raise("OverflowError", "round(): the result does not fit in 64 bits (kiln script ints are 64-bit)");
        return int64_t(rounded);
    }
    if (!std::isfinite(x)) return x;
    if (n >= 0) {
        // Python rounds the exact binary value (2.675 is 2.67499999..., so round(2.675, 2) is
        // 2.67) and breaks exact ties to even: what printf's correctly rounded %.*f does.
        char buf[800];
        std::snprintf(buf, sizeof buf, "%.*f", int(n), x);
        return std::strtod(buf, nullptr);
    }
    double scale = std::pow(10.0, double(-n));
    double y = x / scale;
    if (y == 0 || std::isinf(scale)) return std::copysign(0.0, x);
    return std::nearbyint(y) * scale;
}

namespace {

// ---- the JIT

Value b_compile(Bound& b) {
    std::vector<std::pair<std::string, Value>> options;
    for (size_t i = 1; i < b.params.size(); ++i)
        if (b.params[i]) options.emplace_back(table().specs.at(&b.fn).names[i], *b.params[i]);
    // @compile(backend="eager") decorates later: keep the options until the function comes.
    if (!b.has(0)) return std::make_shared<Partial>(Partial{find_builtin("compile"), std::move(options)});
    return compile_value(b.in, b.value(0), options);
}
Value b_explain(Bound& b) {
    // explain(f)(args): the method below holds f until the arguments come.
    if (b.rest.empty()) return std::make_shared<BoundMethod>(BoundMethod{b.value(0), find_builtin("function._explain")});
    // explain(f, *args), the older form: (explanation, out_guards, graphs, ops_per_graph,
    // break_reasons, explanation_verbose), as PyTorch 2.0 returned.
    Value e = explain_call(b.in, b.value(0), CallArgs{b.rest, {}});
    std::string text = str(e);
    Value reasons = b.in.get_attr(e, "break_reasons");
    return make_tuple({Value(text.substr(0, text.find('\n'))), make_list({}), b.in.get_attr(e, "graph_count"),
                       b.in.get_attr(e, "op_count"), reasons, Value(text)});
}
Value b_explain_call(Bound& b) { return explain_call(b.in, b.self, CallArgs{b.rest, {}}); }
Value b_reset(Bound&) {
    jit::reset();
    return None{};
}
Value b_counters(Bound&) {
    jit::Counters c = jit::counters();
    Value d = make_dict();
    auto& items = (*d.as<std::shared_ptr<DictObj>>())->items;
    for (auto [name, n] : {std::pair{"compiles", c.compiles}, {"recompiles", c.recompiles}, {"cache_hits", c.cache_hits},
                           {"replays", c.replays}, {"reruns", c.reruns}, {"graphs_compiled", c.graphs_compiled},
                           {"graph_breaks", c.graph_breaks}, {"eager_fallbacks", c.eager_fallbacks}})
        items.emplace_back(Value(name), Value(n));
    return d;
}
Value b_list_backends(Bound&) {
    std::vector<Value> names;
    for (const std::string& n : jit::list_backends()) names.emplace_back(n);
    return make_list(std::move(names));
}
Value b_time(Bound& b) {
    note_host_effect(b.in, None{}, "reading the clock");
    using namespace std::chrono;
    return duration<double>(steady_clock::now().time_since_epoch()).count();
}

// ---- methods of lists and dicts

Value m_append(Bound& b) {
    note_host_effect(b.in, b.self, "list.append()");
    (*b.self.as<std::shared_ptr<ListObj>>())->items.push_back(b.value(0));
    return None{};
}
Value m_keys(Bound& b) {
    std::vector<Value> out;
    for (auto& [k, v] : (*b.self.as<std::shared_ptr<DictObj>>())->items) out.push_back(k);
    return make_list(std::move(out));
}
Value m_values(Bound& b) {
    std::vector<Value> out;
    for (auto& [k, v] : (*b.self.as<std::shared_ptr<DictObj>>())->items) out.push_back(v);
    return make_list(std::move(out));
}
Value m_items(Bound& b) {
    std::vector<Value> out;
    for (auto& [k, v] : (*b.self.as<std::shared_ptr<DictObj>>())->items) out.push_back(make_tuple({k, v}));
    return make_list(std::move(out));
}
Value m_get(Bound& b) {
    Value* v = (*b.self.as<std::shared_ptr<DictObj>>())->find(b.value(0));
    return v ? *v : b.has(1) ? b.value(1) : Value(None{});
}

const Builtin kCore[] = {
    {"print", "*args, sep=' ', end='\\n', flush=False", b_print, "print values separated by spaces"},
    {"range", "*args", b_range, "range(stop) or range(start, stop[, step]): a list of ints"},
    {"len", "obj", b_len, "number of items (a tensor: its first dim)"},
    {"str", "obj=''", b_str, "str(x)"},
    {"repr", "obj", b_repr, "repr(x)"},
    {"type", "obj", b_type, "the type of obj: type(1) is int, type(e).__name__"},
    {"float", "x", b_float, "float(x); of a tensor: item() (a graph break)"},
    {"int", "x", b_int, "int(x); of a tensor: item() (a graph break)"},
    {"bool", "x=False", b_bool, "truth value; of a tensor: a graph break"},
    {"list", "iterable=None", b_list, "list(x)"},
    {"tuple", "iterable=None", b_tuple, "tuple(x)"},
    {"dict", "", b_dict, "an empty dict"},
    {"enumerate", "iterable", b_enumerate, "(index, item) pairs"},
    {"zip", "*iterables", b_zip, "tuples of items side by side"},
    {"max", "*args", b_max, "largest of the arguments or of one sequence"},
    {"min", "*args", b_min, "smallest of the arguments or of one sequence"},
    {"round", "number, ndigits=None, decimals=None", b_round, "round half to even"},
    {"compile", "model=None, *, backend=None, fullgraph=False, dynamic=None, mode=None, cache_size_limit=8, choose_faster=True", b_compile,
     "compile(f, backend=\"inductor\"): a JIT-compiled f (torch.compile)"},
    {"explain", "fn, *args", b_explain, "explain(f)(args): graphs, graph breaks and guards (torch._dynamo.explain)"},
    {"function._explain", "*args", b_explain_call, "runs the explained function"},
    {"reset", "", b_reset, "forget every compiled function's cache (torch._dynamo.reset)"},
    {"_dynamo.reset", "", b_reset, "forget every compiled function's cache"},
    {"_dynamo.explain", "fn, *args", b_explain, "explain(f)(args), or explain(f, *args) (the older form)"},
    {"counters", "", b_counters, "JIT counters: compiles, recompiles, cache_hits, graph_breaks ..."},
    {"list_backends", "", b_list_backends, "names of the compile backends"},
    {"_dynamo.list_backends", "", b_list_backends, "names of the compile backends"},
    {"time.time", "", b_time, "seconds, for timing"},
    {"time.perf_counter", "", b_time, "seconds, for timing"},
    {"list.append", "item", m_append, "add an item at the end"},
    {"dict.keys", "", m_keys, "the keys, in insertion order"},
    {"dict.values", "", m_values, "the values, in insertion order"},
    {"dict.items", "", m_items, "(key, value) pairs"},
    {"dict.get", "key, default=None", m_get, "d[key], or default when missing"},
};

}  // namespace

std::span<const Builtin> core_builtins() { return kCore; }

bool is_type_builtin(const Builtin& b) {
    static const std::set<std::string> types = {"int",  "float", "str",  "bool",
                                                "list", "tuple", "dict", "set"};
    return types.count(b.name) > 0;
}
const Builtin* find_builtin(const std::string& key) {
    auto it = table().entries.find(key);
    return it == table().entries.end() ? nullptr : it->second;
}

const Builtin* find_method(const Value& self, const std::string& name) {
    // A built-in module's own methods first (MultiheadAttention.forward), then every module's.
    if (auto m = self.as<ModulePtr>(); m && !dynamic_cast<ScriptModule*>(m->get()))
        if (const Builtin* own = find_builtin((*m)->type_name() + "." + name)) return own;
    std::string prefix = self.is<Tensor>() ? "Tensor" : self.is<ModulePtr>() ? "Module" : self.is<OptimizerPtr>() ? "Optimizer" : type_name(self);
    return find_builtin(prefix + "." + name);
}

std::optional<Value> namespace_attr(const Namespace& ns, const std::string& name) {
    if (auto sub = kSubmodules.find(ns.name + "." + name); sub != kSubmodules.end())
        return Value(std::make_shared<Namespace>(Namespace{sub->second}));
    if (ns.name == "torch")
        if (auto d = kDTypes.find(name); d != kDTypes.end()) return Value(d->second);
    if (ns.name == "ReduceOp") return dist_reduce_op(name);
    if (auto c = kNamespaceClasses.find(ns.name + "." + name); c != kNamespaceClasses.end()) return Value(builtin_class(c->second));
    // typing's names (List, Optional, ...) only ever appear in annotations, which kiln script
    // does not evaluate: importing one gives None.
    if (ns.name == "typing" && !name.empty() && std::isupper((unsigned char)name[0])) return Value(None{});
    auto prefixes = kNamespacePrefixes.find(ns.name);
    if (prefixes == kNamespacePrefixes.end()) return std::nullopt;
    for (const std::string& p : prefixes->second)
        if (const Builtin* b = find_builtin(p + name); b && name.find('.') == std::string::npos) return Value(b);
    return std::nullopt;
}

std::optional<Value> import_module(const std::string& dotted) {
    if (dotted == "torch" || dotted == "time" || dotted == "warnings" || dotted == "traceback" || dotted == "typing" ||
        dotted == "torchvision" || dotted == "kiln")
        return Value(std::make_shared<Namespace>(Namespace{dotted}));
    if (auto sub = kSubmodules.find(dotted); sub != kSubmodules.end()) return Value(std::make_shared<Namespace>(Namespace{sub->second}));
    return std::nullopt;
}

std::vector<std::string> builtin_names() {
    std::vector<std::string> names;
    for (const auto& [name, b] : table().entries)
        if (name.find('.') == std::string::npos) names.push_back(name);
    return names;
}

std::vector<std::string> attribute_names(const Value& v) {
    std::set<std::string> names;
    auto methods_of = [&](const std::string& prefix) {
        for (const auto& [key, b] : table().entries)
            if (key.rfind(prefix + ".", 0) == 0 && key.find('.', prefix.size() + 1) == std::string::npos)
                names.insert(key.substr(prefix.size() + 1));
    };
    if (auto ns = v.as<std::shared_ptr<Namespace>>()) {
        const std::string& n = (*ns)->name;
        if (auto p = kNamespacePrefixes.find(n); p != kNamespacePrefixes.end())
            for (const std::string& prefix : p->second) {
                if (prefix.empty()) {
                    for (const std::string& plain : builtin_names()) names.insert(plain);
                } else {
                    methods_of(prefix.substr(0, prefix.size() - 1));
                }
            }
        for (const auto& [dotted, sub] : kSubmodules)
            if (dotted.rfind(n + ".", 0) == 0 && dotted.find('.', n.size() + 1) == std::string::npos) names.insert(dotted.substr(n.size() + 1));
        for (const auto& [dotted, cls] : kNamespaceClasses)
            if (dotted.rfind(n + ".", 0) == 0) names.insert(dotted.substr(n.size() + 1));
        if (n == "torch") {
            for (const auto& [name, d] : kDTypes) names.insert(name);
            for (const char* sub : {"nn", "optim", "cuda", "jit", "fx", "autograd", "_dynamo", "compiler"}) names.insert(sub);
        }
    } else if (v.is<Tensor>()) {
        methods_of("Tensor");
        for (const char* a : {"shape", "dtype", "device", "grad", "requires_grad", "ndim", "T", "is_leaf", "data", "grad_fn", "is_cuda"})
            names.insert(a);
    } else if (auto m = v.as<ModulePtr>()) {
        methods_of("Module");
        for (const auto& [name, child] : (*m)->children()) names.insert(name);
        for (const auto& [name, p] : (*m)->named_parameters())
            if (name.find('.') == std::string::npos) names.insert(name);
    } else if (auto i = v.object<InstanceObj>()) {
        for (const auto& [name, value] : i->attrs) names.insert(name);
        for (ClassPtr c = i->cls; c; c = c->base)
            for (const auto& [name, value] : c->attrs) names.insert(name);
        if (i->module) methods_of("Module");
    } else if (auto c = v.object<ClassObj>()) {
        for (ClassPtr k = c; k; k = k->base)
            for (const auto& [name, value] : k->attrs) names.insert(name);
    } else if (v.is<OptimizerPtr>()) {
        methods_of("Optimizer");
    } else {
        methods_of(type_name(v));
    }
    return std::vector<std::string>(names.begin(), names.end());
}

Value call_builtin(Interp& in, const Builtin& fn, const Value& self, CallArgs& args) {
    const ParamSpec& spec = table().specs.at(&fn);
    std::string shown = fn.name.substr(fn.name.find('.') == std::string::npos ? 0 : fn.name.find('.') + 1) + "()";
    Bound b{in, fn, self, std::vector<std::optional<Value>>(spec.names.size()), {}};
    size_t positional = spec.star >= 0 ? size_t(spec.star) : spec.names.size();
    for (size_t i = 0; i < args.args.size(); ++i) {
        if (i < positional) b.params[i] = args.args[i];
        else if (spec.star >= 0) b.rest.push_back(args.args[i]);
        else in.raise("TypeError", shown + " takes at most " + std::to_string(positional) + " positional argument" +
                                       (positional == 1 ? "" : "s") + " (" + std::to_string(args.args.size()) + " given)");
    }
    for (auto& [key, v] : args.kwargs) {
        auto it = std::find(spec.names.begin(), spec.names.end(), key);
        if (it == spec.names.end()) in.raise("TypeError", shown + " got an unexpected keyword argument '" + key + "'");
        size_t i = size_t(it - spec.names.begin());
        if (b.params[i]) in.raise("TypeError", shown + " got multiple values for argument '" + key + "'");
        b.params[i] = v;
    }
    return fn.fn(b);
}

// ---- Bound helpers

const Value& Bound::value(size_t i) {
    if (i >= params.size() || !params[i]) {
        const auto& names = table().specs.at(&fn).names;
        in.raise("TypeError", fn.name + "() missing required argument '" + (i < names.size() ? names[i] : "?") + "'");
    }
    return *params[i];
}
void Bound::type_error(size_t i, const std::string& expected) {
    const auto& names = table().specs.at(&fn).names;
    in.raise("TypeError", fn.name + "(): argument '" + (i < names.size() ? names[i] : "?") + "' must be " + expected + ", not " +
                              type_name(value(i)));
}
Tensor Bound::tensor(size_t i) {
    if (auto t = value(i).as<Tensor>(); t && t->defined()) return *t;
    type_error(i, "Tensor");
}
double Bound::number(size_t i) {
    if (auto d = as_double(value(i))) return *d;
    type_error(i, "a number");
}
int64_t Bound::integer(size_t i) {
    if (auto n = as_int(value(i))) return *n;
    type_error(i, "an int");
}
bool Bound::flag_or(size_t i, bool fallback) { return has(i) ? in.truthy(value(i)) : fallback; }
std::string Bound::string(size_t i) {
    if (auto s = value(i).as<std::string>()) return *s;
    type_error(i, "a str");
}
const Tensor& Bound::self_tensor() const { return *self.as<Tensor>(); }

Shape Bound::shape_from_rest() {
    std::vector<Value> items = rest;
    if (items.size() == 1 && as_sequence(items[0])) items = *as_sequence(items[0]);
    Shape shape;
    for (const Value& v : items) {
        auto n = as_int(v);
        if (!n) in.raise("TypeError", fn.name + "(): a size must be an int, not " + type_name(v));
        if (*n < 0) in.raise("ValueError", fn.name + "(): negative size " + std::to_string(*n));
        shape.push_back(*n);
    }
    return shape;
}
Shape Bound::dims(size_t i) {
    const Value& v = value(i);
    if (auto n = as_int(v)) return {*n};
    Shape out;
    if (auto seq = as_sequence(v)) {
        for (const Value& x : *seq) {
            auto n = as_int(x);
            if (!n) type_error(i, "an int or a tuple of ints");
            out.push_back(*n);
        }
        return out;
    }
    type_error(i, "an int or a tuple of ints");
}

}  // namespace kiln::interp
