// Python's operator semantics for numbers, strings and containers; kiln ops for tensors.
#include "cli/interp/operators.h"
#include "cli/interp/format.h"

#include <cmath>

#include "cli/interp/builtins.h"
#include "cli/interp/compiled.h"
#include "cli/interp/limits.h"
#include "cli/interp/numbers.h"
#include "tensor/ops.h"

namespace kiln::interp {

using script::BinaryOperator;
using script::CompareOperator;
using script::UnaryOperator;

namespace {

[[noreturn]] void unsupported(Interp& in, std::string_view op, const Value& a, const Value& b) {
    in.raise("TypeError", "unsupported operand type(s) for " + std::string(op) + ": '" + type_name(a) + "' and '" + type_name(b) + "'");
}

// Bytes that copying `items` takes: a str item is copied with its characters ([s] * 10**5
// of a 1 MB s is 100 GB), other items are handles.
unsigned __int128 copy_bytes(const std::vector<Value>& items) {
    unsigned __int128 bytes = 0;
    for (const Value& v : items) bytes += sizeof(Value) + (v.is<std::string>() ? v.as<std::string>()->size() : 0);
    return bytes;
}

// One kiln op for each operator that tensors support, with a scalar on either side.
Value tensor_binary(Interp& in, BinaryOperator op, const Value& a, const Value& b) {
    const Tensor* ta = a.as<Tensor>();
    const Tensor* tb = b.as<Tensor>();
    std::optional<double> na = as_double(a), nb = as_double(b);
    if ((!ta && !na) || (!tb && !nb)) unsupported(in, script::spelling(op), a, b);
    using BinFn = Tensor (*)(const Tensor&, const Tensor&);
    using LeftFn = Tensor (*)(const Tensor&, double);
    using RightFn = Tensor (*)(double, const Tensor&);
    struct Ops {
        BinFn tt;
        LeftFn ts;
        RightFn st;
    };
    Ops ops{};
    switch (op) {
        case BinaryOperator::add: ops = {add, add, add}; break;
        case BinaryOperator::sub: ops = {sub, sub, sub}; break;
        case BinaryOperator::mul: ops = {mul, mul, mul}; break;
        case BinaryOperator::div: ops = {div, div, div}; break;
        case BinaryOperator::pow: ops = {pow, pow, pow}; break;
        case BinaryOperator::matmul:
            if (!ta || !tb) unsupported(in, "@", a, b);
            return matmul(*ta, *tb);
        default:
            in.raise("TypeError", "operator " + std::string(script::spelling(op)) + " is not supported on tensors in kiln");
    }
    if (ta && tb) return ops.tt(*ta, *tb);
    // torch: an int or bool tensor with a Python float computes in float32. The C++ ops take
    // every scalar as a double (2 and 2.0 look alike); here the script's type is known.
    auto promoted = [](const Tensor& t, const Value& scalar) {
        return scalar.is<double>() && (t.dtype() == DType::int64 || t.dtype() == DType::boolean) ? t.to(DType::float32) : t;
    };
    if (ta) return ops.ts(promoted(*ta, b), *nb);
    return ops.st(*na, promoted(*tb, a));
}

// Ints meet ints exactly (numbers.cpp); as soon as a float is involved both are floats.
Value number_binary(BinaryOperator op, const Value& a, const Value& b) {
    std::optional<int64_t> ia = as_int(a), ib = as_int(b);
    if (ia && ib) {
        NumberResult r = int_binary(op, *ia, *ib);
        return r.is_float ? Value(r.float_result) : Value(r.int_result);
    }
    return float_binary(op, *as_double(a), *as_double(b));
}

// Python's slice rules: negative bounds count from the end, then clamp to [0, n].
void slice_bounds(Interp& in, const IndexPart& p, int64_t n, int64_t& start, int64_t& stop, int64_t& step) {
    step = p.step.value_or(1);
    if (step == 0) in.raise("ValueError", "slice step cannot be zero");
    auto fix = [&](std::optional<int64_t> v, int64_t fallback) {
        if (!v) return fallback;
        int64_t i = *v < 0 ? *v + n : *v;
        return step > 0 ? std::clamp<int64_t>(i, 0, n) : std::clamp<int64_t>(i, -1, n - 1);
    };
    start = fix(p.lower, step > 0 ? 0 : n - 1);
    stop = fix(p.upper, step > 0 ? n : -1);
}

int64_t item_index(Interp& in, const Value& index, int64_t n, const char* what) {
    std::optional<int64_t> i = as_int(index);
    if (!i) in.raise("TypeError", std::string(what) + " indices must be integers or slices, not " + type_name(index));
    int64_t k = *i < 0 ? *i + n : *i;
    if (k < 0 || k >= n) in.raise("IndexError", std::string(what) + " index " + std::to_string(*i) + " out of range (size " + std::to_string(n) + ")");
    return k;
}

Value tensor_subscript(Interp& in, Tensor t, const std::vector<IndexPart>& index) {
    int64_t dim = 0;
    for (const IndexPart& p : index) {
        if (!p.is_slice && p.value.is_none()) {  // x[None]: a new dim of size 1
            t = t.unsqueeze(dim++);
            continue;
        }
        if (dim >= t.dim())
            in.raise("IndexError", "too many indices for a tensor of dimension " + std::to_string(t.dim()));
        if (p.is_slice) {
            int64_t start, stop, step;
            slice_bounds(in, p, t.size(dim), start, stop, step);
            if (step < 0) in.raise("ValueError", "tensor slices need a positive step");
            step = std::min(step, std::max<int64_t>(t.size(dim), 1));  // the same slice, with no overflow below
            t = t.slice(dim++, start, std::max(start, stop), step);
        } else if (p.value.is<Tensor>()) {
            in.raise("TypeError", "indexing a tensor with a tensor is not supported in kiln; use where() or a mask product");
        } else {
            t = t.select(dim, item_index(in, p.value, t.size(dim), "tensor"));
        }
    }
    return t;
}

}  // namespace

Value binary_op(Interp& in, BinaryOperator op, const Value& a, const Value& b) {
    if (op == BinaryOperator::mod && a.is<std::string>()) return percent_format(in, *a.as<std::string>(), b);
    if (a.is<Tensor>() || b.is<Tensor>()) return tensor_binary(in, op, a, b);
    if (a.is_number() && b.is_number()) {
        if (op == BinaryOperator::matmul) unsupported(in, "@", a, b);
        return number_binary(op, a, b);
    }
    const std::vector<Value>* sa = as_sequence(a);
    const std::vector<Value>* sb = as_sequence(b);
    if (op == BinaryOperator::add) {
        if (a.is<std::string>() && b.is<std::string>()) {
            const std::string &x = *a.as<std::string>(), &y = *b.as<std::string>();
            check_memory((unsigned __int128)x.size() + y.size(), "str concatenation");
            return x + y;
        }
        if (sa && sb && a.node.index() == b.node.index()) {
            check_memory(copy_bytes(*sa) + copy_bytes(*sb), "list concatenation");
            std::vector<Value> items;
            items.reserve(sa->size() + sb->size());
            items.insert(items.end(), sa->begin(), sa->end());
            items.insert(items.end(), sb->begin(), sb->end());
            return a.is<std::shared_ptr<ListObj>>() ? make_list(std::move(items)) : make_tuple(std::move(items));
        }
    }
    if (op == BinaryOperator::mul) {
        // "~" * 10 and [0] * 3, either way round; the size is checked before anything grows.
        const Value& seq = a.is_number() ? b : a;
        std::optional<int64_t> n = as_int(a.is_number() ? a : b);
        int64_t times = n ? std::max<int64_t>(*n, 0) : 0;
        if (n && seq.is<std::string>()) {
            const std::string& s = *seq.as<std::string>();
            if (s.empty() || times == 0) return std::string();
            check_memory((unsigned __int128)s.size() * uint64_t(times), "str repetition");
            std::string out;
            out.reserve(s.size() * size_t(times));
            for (int64_t i = 0; i < times; ++i) out += s;
            return out;
        }
        if (const std::vector<Value>* items_in = as_sequence(seq); n && items_in) {
            std::vector<Value> items;
            if (!items_in->empty() && times > 0) {
                check_memory(copy_bytes(*items_in) * uint64_t(times), "list repetition");
                items.reserve(items_in->size() * size_t(times));
                for (int64_t i = 0; i < times; ++i) items.insert(items.end(), items_in->begin(), items_in->end());
            }
            return seq.is<std::shared_ptr<ListObj>>() ? make_list(std::move(items)) : make_tuple(std::move(items));
        }
    }
    unsupported(in, script::spelling(op), a, b);
}

Value unary_op(Interp& in, UnaryOperator op, const Value& a) {
    if (auto t = a.as<Tensor>()) return op == UnaryOperator::neg ? neg(*t) : *t;
    if (auto i = as_int(a)) return op == UnaryOperator::neg ? int_negate(*i) : *i;
    if (auto d = a.as<double>()) return op == UnaryOperator::neg ? -*d : *d;
    in.raise("TypeError", "bad operand type for unary " + std::string(script::spelling(op)) + ": '" + type_name(a) + "'");
}

Value compare_op(Interp& in, CompareOperator op, const Value& a, const Value& b) {
    switch (op) {
        case CompareOperator::in:
        case CompareOperator::not_in: {
            bool found = false;
            if (const std::vector<Value>* seq = as_sequence(b)) {
                for (const Value& v : *seq) found = found || values_equal(a, v);
            } else if (auto d = b.as<std::shared_ptr<DictObj>>()) {
                found = (*d)->find(a) != nullptr;
            } else if (b.is<std::string>() && a.is<std::string>()) {
                found = b.as<std::string>()->find(*a.as<std::string>()) != std::string::npos;
            } else {
                in.raise("TypeError", "argument of type '" + type_name(b) + "' is not iterable");
            }
            return op == CompareOperator::in ? found : !found;
        }
        case CompareOperator::is: return values_equal(a, b) && a.node.index() == b.node.index();
        case CompareOperator::is_not: return !(values_equal(a, b) && a.node.index() == b.node.index());
        default: break;
    }
    if (a.is<Tensor>() || b.is<Tensor>()) {
        // A tensor comparison is a bool tensor, as in PyTorch; an `if` on it is the break.
        Tensor x = to_tensor(in, a, "comparison operand");
        if (b.is<Tensor>()) {
            Tensor y = *b.as<Tensor>();
            switch (op) {
                case CompareOperator::eq: return eq(x, y);
                case CompareOperator::ne: return ne(x, y);
                case CompareOperator::lt: return lt(x, y);
                case CompareOperator::le: return le(x, y);
                case CompareOperator::gt: return gt(x, y);
                default: return ge(x, y);
            }
        }
        std::optional<double> y = as_double(b);
        if (!y) in.raise("TypeError", "cannot compare a Tensor with a " + type_name(b));
        switch (op) {
            case CompareOperator::eq: return eq(x, *y);
            case CompareOperator::ne: return ne(x, *y);
            case CompareOperator::lt: return lt(x, *y);
            case CompareOperator::le: return le(x, *y);
            case CompareOperator::gt: return gt(x, *y);
            default: return ge(x, *y);
        }
    }
    if (op == CompareOperator::eq) return values_equal(a, b);
    if (op == CompareOperator::ne) return !values_equal(a, b);
    int c = 0;
    if (a.is_number() && b.is_number()) {
        std::optional<int> order = compare_numbers(a, b);
        if (!order) return false;  // NaN: every ordering is false
        c = *order;
    } else if (a.is<std::string>() && b.is<std::string>()) {
        c = a.as<std::string>()->compare(*b.as<std::string>());
    } else {
        in.raise("TypeError", "'" + std::string(script::spelling(op)) + "' not supported between instances of '" + type_name(a) +
                                  "' and '" + type_name(b) + "'");
    }
    switch (op) {
        case CompareOperator::lt: return c < 0;
        case CompareOperator::le: return c <= 0;
        case CompareOperator::gt: return c > 0;
        default: return c >= 0;
    }
}

Value subscript(Interp& in, const Value& object, const std::vector<IndexPart>& index) {
    if (auto t = object.as<Tensor>()) return tensor_subscript(in, *t, index);
    if (auto d = object.as<std::shared_ptr<DictObj>>()) {
        if (Value* v = (*d)->find(index.at(0).value)) return *v;
        in.raise("KeyError", repr(index.at(0).value));
    }
    const std::vector<Value>* seq = as_sequence(object);
    const std::string* s = object.as<std::string>();
    if (!seq && !s) in.raise("TypeError", "'" + type_name(object) + "' object is not subscriptable");
    int64_t n = seq ? int64_t(seq->size()) : int64_t(s->size());
    const IndexPart& p = index.at(0);
    if (!p.is_slice) {
        int64_t k = item_index(in, p.value, n, seq ? type_name(object).c_str() : "string");
        return seq ? (*seq)[size_t(k)] : Value(std::string(1, (*s)[size_t(k)]));
    }
    int64_t start, stop, step;
    slice_bounds(in, p, n, start, stop, step);
    std::vector<Value> items;
    std::string chars;
    // Counted, not `i += step` until past stop: a step near 2**63 would overflow.
    __int128 span = step > 0 ? __int128(stop) - start : __int128(start) - stop;
    __int128 magnitude = step > 0 ? __int128(step) : -__int128(step);
    for (__int128 k = 0, count = span <= 0 ? 0 : (span + magnitude - 1) / magnitude; k < count; ++k) {
        size_t i = size_t(start + k * step);
        if (seq) items.push_back((*seq)[i]);
        else chars += (*s)[i];
    }
    if (s) return chars;
    return object.is<std::shared_ptr<ListObj>>() ? make_list(std::move(items)) : make_tuple(std::move(items));
}

void subscript_assign(Interp& in, const Value& object, const std::vector<IndexPart>& index, const Value& v) {
    if (!object.is<Tensor>()) note_host_effect(in, object, type_name(object) + " item assignment");
    if (auto d = object.as<std::shared_ptr<DictObj>>()) {
        if (Value* slot = (*d)->find(index.at(0).value)) *slot = v;
        else (*d)->items.emplace_back(index.at(0).value, v);
        return;
    }
    if (auto l = object.as<std::shared_ptr<ListObj>>(); l && !index.at(0).is_slice) {
        (*l)->items[size_t(item_index(in, index[0].value, int64_t((*l)->items.size()), "list"))] = v;
        return;
    }
    if (object.is<Tensor>())
        in.raise("TypeError", "kiln tensors do not support item assignment (an in-place write); build a new tensor with where() or cat()");
    in.raise("TypeError", "'" + type_name(object) + "' object does not support item assignment");
}

std::vector<Value> iterate(Interp& in, const Value& v) {
    if (const std::vector<Value>* seq = as_sequence(v)) return *seq;
    if (auto d = v.as<std::shared_ptr<DictObj>>()) {
        std::vector<Value> keys;
        for (const auto& [k, x] : (*d)->items) keys.push_back(k);
        return keys;
    }
    if (auto s = v.as<std::string>()) {
        std::vector<Value> chars;
        for (char c : *s) chars.emplace_back(std::string(1, c));
        return chars;
    }
    if (auto t = v.as<Tensor>()) {
        if (t->dim() == 0) in.raise("TypeError", "iteration over a 0-d tensor");
        std::vector<Value> rows;
        for (int64_t i = 0; i < t->size(0); ++i) rows.emplace_back(t->select(0, i));
        return rows;
    }
    in.raise("TypeError", "'" + type_name(v) + "' object is not iterable");
}

}  // namespace kiln::interp
