// The smaller builtins tutorials reach for: sorted/sum/abs/any/all, str and list methods,
// torch.no_grad() and friends, warnings, traceback, torch.cuda; and the older compiler
// front ends the seeds compare torch.compile with: torch.jit.trace, torch.fx.symbolic_trace,
// torch._dynamo.optimize/export, torch.jit.script (which kiln does not have).
#include <algorithm>
#include <cmath>
#include <ostream>

#include "autograd/node.h"
#include "cli/interp/builtins.h"
#include "tensor/cuda.h"
#include "cli/interp/classes.h"
#include "cli/interp/compiled.h"
#include "cli/interp/format.h"
#include "cli/interp/limits.h"
#include "cli/interp/numbers.h"
#include "cli/interp/operators.h"
#include "jit/trace.h"

namespace kiln::interp {
namespace {

// ---- Python builtins

// sum and abs are also torch names: on a tensor they are the tensor ops.
const Builtin& tensor_entry(const std::string& name) {
    for (const Builtin& b : tensor_builtins())
        if (b.name == name) return b;
    throw kiln::Error("no tensor builtin " + name);
}
Value as_tensor_op(Bound& b, const std::string& name) {
    CallArgs args;
    for (size_t i = 0; i < b.params.size(); ++i)
        if (b.params[i]) args.args.push_back(*b.params[i]);
    args.args.insert(args.args.end(), b.rest.begin(), b.rest.end());
    return call_builtin(b.in, tensor_entry(name), None{}, args);
}

Value b_sorted(Bound& b) {
    std::vector<Value> items = iterate(b.in, b.value(0));
    Value key = b.has(1) ? b.value(1) : Value(None{});
    bool reverse = b.flag_or(2, false);
    std::vector<Value> keys;
    for (const Value& v : items) keys.push_back(key.is_none() ? v : b.in.call(key, CallArgs{{v}, {}}));
    std::vector<size_t> order(items.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    auto less = [&](size_t x, size_t y) { return b.in.truthy(compare_op(b.in, script::CompareOperator::lt, keys[x], keys[y])); };
    std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return reverse ? less(y, x) : less(x, y); });
    std::vector<Value> out;
    for (size_t i : order) out.push_back(items[i]);
    return make_list(std::move(out));
}
Value b_abs(Bound& b) {
    const Value& v = b.value(0);
    if (v.is<Tensor>()) return as_tensor_op(b, "abs");
    if (auto d = v.as<double>()) return std::fabs(*d);
    if (auto i = as_int(v)) {
        if (*i == INT64_MIN) b.in.raise("OverflowError", "abs() of the smallest 64-bit int does not fit");
        return *i < 0 ? -*i : *i;
    }
    b.in.raise("TypeError", "bad operand type for abs(): '" + type_name(v) + "'");
}
Value b_any(Bound& b) {
    for (const Value& v : iterate(b.in, b.value(0)))
        if (b.in.truthy(v)) return true;
    return false;
}
Value b_all(Bound& b) {
    for (const Value& v : iterate(b.in, b.value(0)))
        if (!b.in.truthy(v)) return false;
    return true;
}
Value b_format(Bound& b) { return format_value(b.in, b.value(0), b.has(1) ? b.string(1) : ""); }

// ---- methods of str, list and dict

const std::string& self_str(Bound& b) { return *b.self.as<std::string>(); }
Value m_str_join(Bound& b) {
    std::string out;
    bool first = true;
    for (const Value& v : iterate(b.in, b.value(0))) {
        if (!v.is<std::string>()) b.in.raise("TypeError", "sequence item: expected str instance, " + type_name(v) + " found");
        const std::string& item = *v.as<std::string>();
        check_memory((unsigned __int128)out.size() + self_str(b).size() + item.size(), "str.join");  // ''.join([s] * n)
        if (!first) out += self_str(b);
        out += item;
        first = false;
    }
    return out;
}
Value m_str_upper(Bound& b) {
    std::string s = self_str(b);
    for (char& c : s) c = char(toupper((unsigned char)c));
    return s;
}
Value m_str_lower(Bound& b) {
    std::string s = self_str(b);
    for (char& c : s) c = char(tolower((unsigned char)c));
    return s;
}
Value m_str_strip(Bound& b) {
    const std::string& s = self_str(b);
    size_t first = s.find_first_not_of(" \t\n\r\f\v"), last = s.find_last_not_of(" \t\n\r\f\v");
    return first == std::string::npos ? std::string() : s.substr(first, last - first + 1);
}
Value m_str_split(Bound& b) {
    const std::string& s = self_str(b);
    std::vector<Value> out;
    if (!b.has(0)) {
        size_t i = 0;
        while (true) {
            i = s.find_first_not_of(" \t\n\r\f\v", i);
            if (i == std::string::npos) break;
            size_t end = s.find_first_of(" \t\n\r\f\v", i);
            out.emplace_back(s.substr(i, end == std::string::npos ? std::string::npos : end - i));
            if (end == std::string::npos) break;
            i = end;
        }
        return make_list(std::move(out));
    }
    std::string sep = b.string(0);
    if (sep.empty()) b.in.raise("ValueError", "empty separator");
    size_t start = 0;
    for (size_t at; (at = s.find(sep, start)) != std::string::npos; start = at + sep.size()) out.emplace_back(s.substr(start, at - start));
    out.emplace_back(s.substr(start));
    return make_list(std::move(out));
}
Value m_str_startswith(Bound& b) { return self_str(b).rfind(b.string(0), 0) == 0; }
Value m_str_endswith(Bound& b) {
    const std::string &s = self_str(b), suffix = b.string(0);
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
Value m_str_replace(Bound& b) {
    std::string s = self_str(b), from = b.string(0), to = b.string(1);
    if (from.empty()) return s;
    std::string out;
    size_t start = 0;
    for (size_t at; (at = s.find(from, start)) != std::string::npos; start = at + from.size()) out += s.substr(start, at - start) + to;
    return out + s.substr(start);
}
Value m_list_extend(Bound& b) {
    note_host_effect(b.in, b.self, "list.extend()");
    auto& items = (*b.self.as<std::shared_ptr<ListObj>>())->items;
    std::vector<Value> more = iterate(b.in, b.value(0));
    items.insert(items.end(), more.begin(), more.end());
    return None{};
}
Value m_list_pop(Bound& b) {
    note_host_effect(b.in, b.self, "list.pop()");
    auto& items = (*b.self.as<std::shared_ptr<ListObj>>())->items;
    if (items.empty()) b.in.raise("IndexError", "pop from empty list");
    int64_t n = int64_t(items.size()), i = b.integer_or(0, -1);
    if (i < 0) i += n;
    if (i < 0 || i >= n) b.in.raise("IndexError", "pop index out of range");
    Value v = items[size_t(i)];
    items.erase(items.begin() + i);
    return v;
}
Value m_list_insert(Bound& b) {
    note_host_effect(b.in, b.self, "list.insert()");
    auto& items = (*b.self.as<std::shared_ptr<ListObj>>())->items;
    int64_t n = int64_t(items.size()), i = b.integer(0);
    if (i < 0) i = std::max<int64_t>(0, i + n);
    items.insert(items.begin() + std::min(i, n), b.value(1));
    return None{};
}
Value m_dict_update(Bound& b) {
    note_host_effect(b.in, b.self, "dict.update()");
    auto& d = *b.self.as<std::shared_ptr<DictObj>>();
    auto other = b.value(0).as<std::shared_ptr<DictObj>>();
    if (!other) b.in.raise("TypeError", "dict.update() takes a dict, not " + type_name(b.value(0)));
    for (auto [k, v] : (*other)->items) {
        if (Value* old = d->find(k)) *old = v;
        else d->items.emplace_back(k, v);
    }
    return None{};
}

// ---- grad mode: with torch.no_grad(), torch.enable_grad(), torch.set_grad_enabled(b)

struct GradModeObj : Object {
    bool enabled;
    std::vector<bool> saved;  // one per __enter__ not yet exited (a manager may be re-entered)
    explicit GradModeObj(bool on) : enabled(on) {}
    std::string type_name() const override { return enabled ? "enable_grad" : "no_grad"; }
    std::string repr() const override { return std::string("<torch.") + type_name() + ">"; }
    std::optional<Value> attr(Interp&, const ObjectPtr& self, const std::string& name) override {
        if (name == "__enter__") return Value(std::make_shared<BoundMethod>(BoundMethod{Value(self), find_builtin("grad_mode.__enter__")}));
        if (name == "__exit__") return Value(std::make_shared<BoundMethod>(BoundMethod{Value(self), find_builtin("grad_mode.__exit__")}));
        return std::nullopt;
    }
};
Value b_no_grad(Bound&) { return std::make_shared<GradModeObj>(false); }
Value b_enable_grad(Bound&) { return std::make_shared<GradModeObj>(true); }
Value b_set_grad_enabled(Bound& b) {
    bool on = b.flag_or(0, true);
    return std::make_shared<GradModeObj>(on);
}
Value b_is_grad_enabled(Bound&) { return autograd::grad_enabled(); }
Value m_grad_enter(Bound& b) {
    auto g = b.self.object<GradModeObj>();
    g->saved.push_back(autograd::grad_enabled());
    autograd::set_grad_enabled(g->enabled);
    return None{};
}
Value m_grad_exit(Bound& b) {
    auto g = b.self.object<GradModeObj>();
    if (!g->saved.empty()) autograd::set_grad_enabled(g->saved.back()), g->saved.pop_back();
    return false;  // never swallows an exception
}

// ---- warnings, traceback, torch.cuda

Value b_warn(Bound& b) {
    note_host_effect(b.in, None{}, "warnings.warn()");
    b.in.out << "UserWarning: " << str(b.value(0)) << "\n" << std::flush;
    return None{};
}
Value b_print_exc(Bound& b) {
    note_host_effect(b.in, None{}, "traceback.print_exc()");
    b.in.out << (b.in.handling.empty() ? std::string("NoneType: None") : std::string(b.in.handling.back().what())) << "\n" << std::flush;
    return None{};
}
Value b_format_exc(Bound& b) { return b.in.handling.empty() ? std::string("NoneType: None\n") : std::string(b.in.handling.back().what()) + "\n"; }
Value b_cuda_is_available(Bound&) { return cuda::is_available(); }
Value b_cuda_device_count(Bound&) { return int64_t(cuda::device_count()); }
Value b_cuda_synchronize(Bound&) {
    if (cuda::is_available()) cuda::synchronize();
    return None{};
}
Value b_cuda_empty_cache(Bound&) {
    cuda::empty_cache();
    return None{};
}
Value b_cuda_memory_allocated(Bound&) { return int64_t(cuda::memory_allocated()); }
Value b_cuda_device_name(Bound& b) { return cuda::device_name(int(b.integer_or(0, 0))); }
Value b_cuda_capability(Bound& b) {
    auto [major, minor] = cuda::device_capability(int(b.integer_or(0, 0)));
    return make_tuple({int64_t(major), int64_t(minor)});
}

// ---- the older front ends

// What torch.jit.trace, torch.fx.symbolic_trace and torch._dynamo.export return: one graph,
// replayed on the tensors of each call. Non-tensor arguments are whatever they were when
// it was recorded (as in PyTorch, they are baked in).
struct TracedObj : Object {
    std::string kind;  // "trace", "symbolic_trace", "export"
    std::string name;
    jit::OneGraph graph;
    bool returns_tuple = false;
    std::vector<std::string> concrete;  // parameters fixed by concrete_args (dropped from calls)
    std::vector<std::string> params;
    std::string type_name() const override { return kind == "trace" ? "TopLevelTracedModule" : "GraphModule"; }
    std::string repr() const override { return "<" + type_name() + " of " + name + ">"; }
    Value call(Interp& in, const ObjectPtr&, CallArgs& args) override {
        Flattener flat{in, {}, {}, {}};
        for (size_t i = 0; i < args.args.size(); ++i) {
            bool fixed = i < params.size() && std::find(concrete.begin(), concrete.end(), params[i]) != concrete.end();
            if (!fixed) flat.add(args.args[i], int(i), nullptr);
        }
        std::vector<Tensor> outs = jit::run_one_graph(graph, flat.args);
        std::vector<Value> items(outs.begin(), outs.end());
        if (!returns_tuple && items.size() == 1) return items[0];
        return make_tuple(std::move(items));
    }
    std::optional<Value> attr(Interp&, const ObjectPtr& self, const std::string& attr_name) override {
        if (attr_name == "graph" || attr_name == "forward") return Value(self);
        if (attr_name == "code") return Value(graph.graph->tabular());
        if (attr_name == "print_tabular") return Value(std::make_shared<BoundMethod>(BoundMethod{Value(self), find_builtin("GraphModule.print_tabular")}));
        return std::nullopt;
    }
};

std::vector<std::string> param_names_of(const Value& fn) {
    std::vector<std::string> names;
    if (auto f = fn.as<std::shared_ptr<FunctionObj>>())
        for (const auto& p : (*f)->def->params) names.push_back(p.name);
    return names;
}

// Records fn once on `example` (some of them fixed: `concrete`); `fail_on_escape` makes a
// data-dependent branch an error (symbolic_trace, export) instead of baking it in (trace).
Value record(Interp& in, const std::string& kind, const Value& fn, const std::vector<Value>& example,
             const std::vector<std::string>& concrete, bool fail_on_escape) {
    auto t = std::make_shared<TracedObj>();
    t->kind = kind;
    t->name = fn.is<std::shared_ptr<FunctionObj>>() ? (*fn.as<std::shared_ptr<FunctionObj>>())->name : type_name(fn);
    t->params = param_names_of(fn);
    t->concrete = concrete;
    Flattener flat{in, {}, {}, {}};
    for (size_t i = 0; i < example.size(); ++i) {
        bool fixed = i < t->params.size() && std::find(concrete.begin(), concrete.end(), t->params[i]) != concrete.end();
        if (!fixed) flat.add(example[i], int(i), nullptr);
    }
    jit::HostFn host = [&] {
        Value r = in.call(fn, CallArgs{example, {}});
        if (auto x = r.as<Tensor>()) return std::vector<Tensor>{*x};
        std::vector<Tensor> out;
        if (auto seq = as_sequence(r)) {
            t->returns_tuple = true;
            for (const Value& v : *seq) out.push_back(to_tensor(in, v, "traced result"));
            return out;
        }
        in.raise("TypeError", kind + ": the function must return Tensors, got " + type_name(r));
    };
    std::optional<jit::BreakInfo> failed_at;
    jit::OneGraphOptions options{.fail_on_escape = fail_on_escape,
                                 .arg_names = t->params,
                                 .caller = kind == "symbolic_trace" ? "torch.fx.symbolic_trace"
                                           : kind == "trace"        ? "torch.jit.trace"
                                                                    : "torch._dynamo.export",
                                 .fn_name = t->name,
                                 .failed_at = &failed_at};
    jit::OneGraph graph;
    try {
        jit::HostSiteScope site(
            [&in] { return in.current_site(); });  // escapes name the script's line
        graph = jit::record_one_graph(flat.args, host, options);
    } catch (const kiln::Error& e) {
        if (!failed_at) throw;
        // Raised through the script's frames, it is a ScriptError by now: keep its message.
        auto script_error = dynamic_cast<const ScriptError*>(&e);
        std::string message = script_error ? script_error->message() : e.what();
        if (kind == "symbolic_trace" &&
            failed_at->kind == Escape::bool_conversion)  // FX's own words for a branch
            message = "symbolically traced variables cannot be used as inputs to control flow\n" +
                      message;
        in.raise(kind == "symbolic_trace" ? "torch.fx.proxy.TraceError"
                                          : "torch._dynamo.exc.Unsupported",
                 message);
    }
    for (const jit::BreakInfo& e : graph.escapes)
        in.out << jit::trace_warning(e, "Python") << std::flush;
    t->graph = std::move(graph);
    return t;
}

Value b_jit_trace(Bound& b) {
    const Value& fn = b.value(0);
    const Value& ex = b.value(1);
    std::vector<Value> example = as_sequence(ex) ? *as_sequence(ex) : std::vector<Value>{ex};
    return record(b.in, "trace", fn, example, {}, false);
}
// torch.fx.symbolic_trace(fn, concrete_args=None). PyTorch traces with proxies and needs no
// inputs; kiln records with 1-element tensors standing in for the arguments (so a branch on
// their values fails as FX's does). With concrete_args, those are the real values, and a
// branch is baked in, as the seed shows for FX with concrete_args.
Value b_symbolic_trace(Bound& b) {
    const Value& fn = b.value(0);
    std::vector<std::string> params = param_names_of(fn);
    if (!fn.is<std::shared_ptr<FunctionObj>>()) b.in.raise("TypeError", "symbolic_trace: expected a script function, got " + type_name(fn));
    std::vector<Value> example;
    std::vector<std::string> concrete;
    auto given = b.has(1) ? b.value(1).as<std::shared_ptr<DictObj>>() : nullptr;
    if (b.has(1) && !given) b.in.raise("TypeError", "symbolic_trace: concrete_args must be a dict of parameter name to value");
    for (const std::string& p : params) {
        Value* v = given ? (*given)->find(Value(p)) : nullptr;
        if (v) concrete.push_back(p), example.push_back(*v);
        else example.push_back(Tensor(ones({1})));
    }
    return record(b.in, "symbolic_trace", fn, example, concrete, concrete.empty());
}
// torch.jit.script(fn): kiln has no TorchScript compiler. The scripted object raises a
// RuntimeError that says so when it is called (where PyTorch's type errors surface).
struct ScriptedObj : Object {
    std::string name;
    std::string type_name() const override { return "ScriptFunction"; }
    std::string repr() const override { return "<torch.jit.script of " + name + ": not available in kiln>"; }
    Value call(Interp& in, const ObjectPtr&, CallArgs&) override {
        in.raise("RuntimeError", "torch.jit.script is not available in kiln (TorchScript's compiler is not part of it); use torch.compile(" + name + ")");
    }
};
Value b_jit_script(Bound& b) {
    auto s = std::make_shared<ScriptedObj>();
    const Value& fn = b.value(0);
    s->name = fn.is<std::shared_ptr<FunctionObj>>() ? (*fn.as<std::shared_ptr<FunctionObj>>())->name : type_name(fn);
    return s;
}
// torch._dynamo.optimize(backend="inductor", nopython=False): a decorator, like compile().
Value b_optimize(Bound& b) {
    std::vector<std::pair<std::string, Value>> options;
    if (b.has(0)) options.emplace_back("backend", b.value(0));
    if (b.has(1)) options.emplace_back("fullgraph", Value(b.in.truthy(b.value(1))));
    return std::make_shared<Partial>(Partial{find_builtin("compile"), std::move(options)});
}
Value b_export(Bound& b) {
    const Value& fn = b.value(0);
    // export(fn)(*args) (PyTorch 2.1) or export(fn, *args) (the older form the seed uses)
    if (b.rest.empty()) return std::make_shared<BoundMethod>(BoundMethod{fn, find_builtin("function._export")});
    Value gm = record(b.in, "export", fn, b.rest, {}, true);
    return make_tuple({gm, make_list({})});
}
Value b_export_call(Bound& b) { return make_tuple({record(b.in, "export", b.self, b.rest, {}, true), make_list({})}); }
Value b_print_tabular(Bound& b) {
    note_host_effect(b.in, None{}, "print_tabular()");
    b.in.out << str(b.in.get_attr(b.self, "code")) << std::flush;
    return None{};
}

const Builtin kExtras[] = {
    {"sorted", "iterable, key=None, reverse=False", b_sorted, "a sorted list"},
    {"abs", "input", b_abs, "absolute value (of a tensor: elementwise)"},
    {"any", "iterable", b_any, "whether any item is true"},
    {"all", "iterable", b_all, "whether every item is true"},
    {"format", "value, spec=''", b_format, "format(x, '.3f')"},
    {"str.join", "iterable", m_str_join, "', '.join(names)"},
    {"str.upper", "", m_str_upper, "upper case"},
    {"str.lower", "", m_str_lower, "lower case"},
    {"str.strip", "", m_str_strip, "without surrounding whitespace"},
    {"str.split", "sep=None", m_str_split, "split on whitespace or sep"},
    {"str.startswith", "prefix", m_str_startswith, "whether it starts with prefix"},
    {"str.endswith", "suffix", m_str_endswith, "whether it ends with suffix"},
    {"str.replace", "old, new", m_str_replace, "every old replaced by new"},
    {"list.extend", "iterable", m_list_extend, "append every item"},
    {"list.pop", "index=-1", m_list_pop, "remove and return an item"},
    {"list.insert", "index, item", m_list_insert, "insert before index"},
    {"dict.update", "other", m_dict_update, "copy other's items in"},
    {"no_grad", "", b_no_grad, "with torch.no_grad(): ops record no autograd graph"},
    {"enable_grad", "", b_enable_grad, "with torch.enable_grad(): recording on again"},
    {"set_grad_enabled", "mode", b_set_grad_enabled, "with torch.set_grad_enabled(b)"},
    {"inference_mode", "", b_no_grad, "as no_grad() in kiln"},
    {"is_grad_enabled", "", b_is_grad_enabled, "whether ops record autograd graphs"},
    {"grad_mode.__enter__", "", m_grad_enter, "enter a grad mode"},
    {"grad_mode.__exit__", "*exc", m_grad_exit, "restore the grad mode"},
    {"warnings.warn", "message, category=None, stacklevel=1", b_warn, "prints UserWarning: message"},
    {"traceback.print_exc", "", b_print_exc, "prints the exception being handled"},
    {"traceback.format_exc", "", b_format_exc, "the exception being handled, as text"},
    {"cuda.is_available", "", b_cuda_is_available, "whether kiln found a usable GPU (driver, NVRTC)"},
    {"cuda.device_count", "", b_cuda_device_count, "GPUs the driver reports (0 without one)"},
    {"cuda.synchronize", "device=None", b_cuda_synchronize, "wait for the GPU's queued work"},
    {"cuda.empty_cache", "", b_cuda_empty_cache, "give cached device memory back to the driver"},
    {"cuda.memory_allocated", "device=None", b_cuda_memory_allocated, "bytes held by CUDA tensors"},
    {"cuda.get_device_name", "device=None", b_cuda_device_name, "the GPU's name and architecture"},
    {"cuda.get_device_capability", "device=None", b_cuda_capability, "(major, minor) compute capability"},
    {"jit.trace", "func, example_inputs", b_jit_trace, "records the path taken on the example inputs (branches baked in)"},
    {"jit.script", "obj", b_jit_script, "not available in kiln: calling the result raises; use torch.compile"},
    {"fx.symbolic_trace", "root, concrete_args=None", b_symbolic_trace, "records fn as one graph; a data-dependent branch is an error"},
    {"_dynamo.optimize", "backend='inductor', nopython=False", b_optimize, "torch._dynamo.optimize(backend)(fn): as compile()"},
    {"_dynamo.export", "f, *args", b_export, "export(f, *args): one graph and its guards, or an error at a graph break"},
    {"function._export", "*args", b_export_call, "runs the exported function"},
    {"GraphModule.print_tabular", "", b_print_tabular, "prints the graph, one node a line"},
};

}  // namespace

std::span<const Builtin> extra_builtins() { return kExtras; }

}  // namespace kiln::interp
