// Printing and comparing kiln script values the way Python does.
#include "cli/interp/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <sstream>

#include "cli/interp/builtins.h"
#include "cli/interp/compiled.h"
#include "cli/interp/limits.h"
#include "cli/interp/numbers.h"
#include "tensor/print.h"

namespace kiln::interp {

namespace {

bool is_container(const Value& v) {
    return v.is<std::shared_ptr<ListObj>>() || v.is<std::shared_ptr<TupleObj>>() || v.is<std::shared_ptr<DictObj>>();
}

// Freeing `a = [a]` repeated 200,000 times would recurse once per level through the
// destructors. Instead each container moves its container items to one queue, and only
// the outermost destructor drains it: the depth of the C++ stack stays constant.
thread_local std::vector<Value> g_pending_release;
thread_local bool g_releasing = false;

void release_later(Value& v) {
    if (is_container(v)) g_pending_release.push_back(std::move(v));
}

void drain_releases() {
    if (g_releasing) return;
    g_releasing = true;
    while (!g_pending_release.empty()) {
        Value v = std::move(g_pending_release.back());
        g_pending_release.pop_back();
    }  // v's destructor may queue more
    g_releasing = false;
}

}  // namespace

thread_local uint64_t g_epoch = 0;
thread_local uint64_t g_epochs_made = 0;
uint64_t creation_epoch() { return g_epoch; }
CreationEpochScope::CreationEpochScope() : saved(g_epoch) { g_epoch = ++g_epochs_made; }
CreationEpochScope::~CreationEpochScope() { g_epoch = saved; }

ListObj::~ListObj() {
    for (Value& v : items) release_later(v);
    items.clear();
    drain_releases();
}
TupleObj::~TupleObj() {
    for (Value& v : items) release_later(v);
    items.clear();
    drain_releases();
}
DictObj::~DictObj() {
    for (auto& [k, v] : items) release_later(k), release_later(v);
    items.clear();
    drain_releases();
}

Value* DictObj::find(const Value& key) {
    for (auto& [k, v] : items)
        if (values_equal(k, key)) return &v;
    return nullptr;
}

Value* Scope::find(const std::string& name) {
    for (Scope* s = this; s; s = s->parent.get()) {
        auto it = s->vars.find(name);
        if (it != s->vars.end()) return &it->second;
    }
    return nullptr;
}

Value make_list(std::vector<Value> items) { return std::make_shared<ListObj>(ListObj{std::move(items)}); }
Value make_tuple(std::vector<Value> items) { return std::make_shared<TupleObj>(TupleObj{std::move(items)}); }
Value make_dict() { return std::make_shared<DictObj>(); }
Value make_size(const Shape& shape) {
    auto t = std::make_shared<TupleObj>();
    for (int64_t d : shape) t->items.emplace_back(d);
    t->is_size = true;
    return t;
}

std::string type_name(const Value& v) {
    struct Namer {
        std::string operator()(const None&) { return "NoneType"; }
        std::string operator()(bool) { return "bool"; }
        std::string operator()(int64_t) { return "int"; }
        std::string operator()(double) { return "float"; }
        std::string operator()(const std::string&) { return "str"; }
        std::string operator()(const Tensor&) { return "Tensor"; }
        std::string operator()(DType) { return "dtype"; }
        std::string operator()(const std::shared_ptr<ListObj>&) { return "list"; }
        std::string operator()(const std::shared_ptr<TupleObj>& t) { return t->is_size ? "Size" : "tuple"; }
        std::string operator()(const std::shared_ptr<DictObj>&) { return "dict"; }
        std::string operator()(const std::shared_ptr<FunctionObj>&) { return "function"; }
        std::string operator()(const Builtin*) { return "builtin_function"; }
        std::string operator()(const std::shared_ptr<BoundMethod>&) { return "method"; }
        std::string operator()(const std::shared_ptr<Partial>&) { return "partial"; }
        std::string operator()(const ModulePtr& m) { return m->type_name(); }
        std::string operator()(const OptimizerPtr&) { return "Optimizer"; }
        std::string operator()(const std::shared_ptr<CompiledObj>&) { return "CompiledFunction"; }
        std::string operator()(const std::shared_ptr<Namespace>&) { return "module"; }
        std::string operator()(const std::shared_ptr<ExplainObj>&) { return "ExplainOutput"; }
        std::string operator()(const ObjectPtr& o) { return o->type_name(); }
    };
    return std::visit(Namer{}, v.node);
}

std::string repr_float(double v) {
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    // Shortest digits that round-trip, then Python's layout: scientific only for
    // exponents below -4 or from 16 up, and always a '.0' on integral values.
    char buf[64];
    auto res = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
    std::string sci(buf, res.ptr);
    size_t e = sci.find('e');
    int exp = std::stoi(sci.substr(e + 1));
    std::string mant = sci.substr(0, e);
    bool neg = mant[0] == '-';
    if (neg) mant.erase(0, 1);
    std::string digits;
    for (char c : mant)
        if (c != '.') digits += c;
    std::string out;
    if (exp < -4 || exp >= 16) {
        out = digits.substr(0, 1);
        if (digits.size() > 1) out += "." + digits.substr(1);
        char ebuf[16];
        std::snprintf(ebuf, sizeof ebuf, "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
        out += ebuf;
    } else if (exp < 0) {
        out = "0." + std::string(size_t(-exp - 1), '0') + digits;
    } else {
        if (digits.size() <= size_t(exp) + 1) {
            out = digits + std::string(size_t(exp) + 1 - digits.size(), '0') + ".0";
        } else {
            out = digits.substr(0, size_t(exp) + 1) + "." + digits.substr(size_t(exp) + 1);
        }
    }
    return neg ? "-" + out : out;
}

namespace {

std::string quote(const std::string& s) {
    // Python prefers single quotes unless the text contains one.
    char q = s.find('\'') != std::string::npos && s.find('"') == std::string::npos ? '"' : '\'';
    std::string out(1, q);
    for (char c : s) {
        if (c == '\\') out += "\\\\";
        else if (c == '\n') out += "\\n";
        else if (c == '\t') out += "\\t";
        else if (c == '\r') out += "\\r";
        else if (c == q) out += std::string("\\") + q;
        else if ((unsigned char)c < ' ' || c == 0x7f) {  // \x00 as Python shows it (and no NUL in a message)
            char hex[8];
            std::snprintf(hex, sizeof hex, "\\x%02x", unsigned((unsigned char)c));
            out += hex;
        } else out += c;
    }
    return out + q;
}

std::string join(const std::vector<Value>& items) {
    std::string out;
    for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + repr(items[i]);
    return out;
}

// The containers whose repr is being built: one met again is a cycle, shown as [...].
thread_local std::vector<const void*> g_repr_in_progress;
struct ReprScope {
    explicit ReprScope(const void* p) { g_repr_in_progress.push_back(p); }
    ~ReprScope() { g_repr_in_progress.pop_back(); }
};
bool repr_in_progress(const void* p) {
    return std::find(g_repr_in_progress.begin(), g_repr_in_progress.end(), p) != g_repr_in_progress.end();
}

}  // namespace

std::string repr(const Value& v) {
    if (auto s = v.as<std::string>()) return quote(*s);
    if (auto o = v.as<ObjectPtr>()) return (*o)->repr();
    if (!is_container(v)) return str(v);
    RecursionGuard depth("while getting the repr of an object");
    const void* self = identity(v);
    if (repr_in_progress(self)) return v.is<std::shared_ptr<ListObj>>() ? "[...]" : v.is<std::shared_ptr<DictObj>>() ? "{...}" : "(...)";
    ReprScope scope(self);
    if (auto t = v.as<std::shared_ptr<TupleObj>>()) {
        const auto& items = (*t)->items;
        if ((*t)->is_size) return "torch.Size([" + join(items) + "])";
        return "(" + join(items) + (items.size() == 1 ? ",)" : ")");
    }
    if (auto l = v.as<std::shared_ptr<ListObj>>()) return "[" + join((*l)->items) + "]";
    if (auto d = v.as<std::shared_ptr<DictObj>>()) {
        std::string out = "{";
        for (size_t i = 0; i < (*d)->items.size(); ++i)
            out += (i ? ", " : "") + repr((*d)->items[i].first) + ": " + repr((*d)->items[i].second);
        return out + "}";
    }
    return str(v);
}

std::string str(const Value& v) {
    if (v.is_none()) return "None";
    if (auto b = v.as<bool>()) return *b ? "True" : "False";
    if (auto i = v.as<int64_t>()) return std::to_string(*i);
    if (auto d = v.as<double>()) return repr_float(*d);
    if (auto s = v.as<std::string>()) return *s;
    if (auto t = v.as<Tensor>()) return t->defined() ? to_string(*t) : "None";
    if (auto d = v.as<DType>()) return std::string("torch.") + dtype_name(*d);
    if (auto f = v.as<std::shared_ptr<FunctionObj>>()) return "<function " + (*f)->name + ">";
    if (auto b = v.as<const Builtin*>())
        return (is_type_builtin(**b) ? "<class '" : "<built-in function ") + (*b)->name +
               (is_type_builtin(**b) ? "'>" : ">");
    if (auto m = v.as<std::shared_ptr<BoundMethod>>())
        return "<built-in method " + (*m)->method->name + " of " + type_name((*m)->self) + ">";
    if (auto p = v.as<std::shared_ptr<Partial>>()) {  // nn.CrossEntropyLoss(weight=...)
        auto b = (*p)->fn.as<const Builtin*>();
        if (!b) return "<compile decorator>";
        std::string out = "<built-in function " + (*b)->name;
        for (size_t i = 0; i < (*p)->kwargs.size(); ++i)
            out += (i ? ", " : " with ") + (*p)->kwargs[i].first + "=" + repr((*p)->kwargs[i].second);
        return out + ">";
    }
    if (auto m = v.as<ModulePtr>()) {
        std::ostringstream os;
        os << **m;
        return os.str();
    }
    if (v.is<OptimizerPtr>()) return "<optimizer>";
    if (auto c = v.as<std::shared_ptr<CompiledObj>>()) return "<compiled function " + (*c)->name + ">";
    if (auto n = v.as<std::shared_ptr<Namespace>>()) return "<module '" + (*n)->name + "'>";
    if (auto e = v.as<std::shared_ptr<ExplainObj>>()) return explain_text(**e);
    if (auto o = v.as<ObjectPtr>()) return (*o)->str();
    return repr(v);
}

std::optional<int> compare_numbers(const Value& a, const Value& b) {
    std::optional<int64_t> ia = as_int(a), ib = as_int(b);
    if (ia && ib) return *ia < *ib ? -1 : *ia > *ib ? 1 : 0;
    if (ia) return compare_int_float(*ia, *as_double(b));
    if (ib) {
        std::optional<int> c = compare_int_float(*ib, *as_double(a));
        return c ? std::optional<int>(-*c) : std::nullopt;
    }
    double x = *as_double(a), y = *as_double(b);
    if (std::isnan(x) || std::isnan(y)) return std::nullopt;
    return x < y ? -1 : x > y ? 1 : 0;
}

const void* identity(const Value& v) {
    return std::visit(
        [](const auto& x) -> const void* {
            using T = std::decay_t<decltype(x)>;
            if constexpr (std::is_pointer_v<T>) return x;
            else if constexpr (requires { x.get(); }) return x.get();
            else return nullptr;
        },
        v.node);
}

bool values_equal(const Value& a, const Value& b) {
    if (a.is_number() && b.is_number()) {
        std::optional<int> c = compare_numbers(a, b);
        return c && *c == 0;
    }
    if (a.node.index() != b.node.index()) return false;
    if (auto s = a.as<std::string>()) return *s == *b.as<std::string>();
    if (a.is_none()) return true;
    if (auto t = a.as<Tensor>()) return t->same(*b.as<Tensor>());
    if (auto d = a.as<DType>()) return *d == *b.as<DType>();
    if (auto o = a.as<ObjectPtr>()) return (*o)->equals(**b.as<ObjectPtr>());
    if (identity(a) == identity(b)) return true;  // Python's `x is y or x == y`: a cycle equals itself
    if (!is_container(a)) return false;           // functions, modules and the like: the same object
    RecursionGuard depth("in comparison");
    const std::vector<Value>* x = as_sequence(a);
    const std::vector<Value>* y = as_sequence(b);
    if (x && y) {
        if (x->size() != y->size()) return false;
        for (size_t i = 0; i < x->size(); ++i)
            if (!values_equal((*x)[i], (*y)[i])) return false;
        return true;
    }
    auto& d = *a.as<std::shared_ptr<DictObj>>();
    auto& e = *b.as<std::shared_ptr<DictObj>>();
    if (d->items.size() != e->items.size()) return false;
    for (auto& [k, v] : d->items) {
        Value* other = e->find(k);
        if (!other || !values_equal(v, *other)) return false;
    }
    return true;
}

std::optional<double> as_double(const Value& v) {
    if (auto b = v.as<bool>()) return *b ? 1.0 : 0.0;
    if (auto i = v.as<int64_t>()) return double(*i);
    if (auto d = v.as<double>()) return *d;
    return std::nullopt;
}

std::optional<int64_t> as_int(const Value& v) {
    if (auto b = v.as<bool>()) return *b ? 1 : 0;
    if (auto i = v.as<int64_t>()) return *i;
    return std::nullopt;
}

const std::vector<Value>* as_sequence(const Value& v) {
    if (auto l = v.as<std::shared_ptr<ListObj>>()) return &(*l)->items;
    if (auto t = v.as<std::shared_ptr<TupleObj>>()) return &(*t)->items;
    return nullptr;
}

}  // namespace kiln::interp
