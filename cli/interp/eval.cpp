// Evaluating expressions, and attribute lookup on every kind of value.
#include <functional>

#include "cli/interp/builtins.h"
#include "cli/interp/classes.h"
#include "cli/interp/compiled.h"
#include "cli/interp/format.h"
#include "cli/interp/interp.h"
#include "cli/interp/limits.h"
#include "cli/interp/operators.h"

namespace kiln::interp {

using namespace kiln::script;

Value Interp::eval(const Expr& expr) {
    // frames_ may grow while children are evaluated (calls push frames): no reference into it.
    auto point_at = [&](Pos pos) { frames_.back().pos = pos; };
    if (auto n = expr.as<Number>()) return n->is_float ? Value(n->float_value) : Value(n->int_value);
    if (auto s = expr.as<script::String>()) return s->value;
    if (expr.is<NoneLit>()) return None{};
    if (auto b = expr.as<script::Bool>()) return b->value;
    if (auto n = expr.as<Name>()) {
        if (Value* v = lookup(n->id)) return *v;
        point_at(expr.pos);
        raise("NameError", "name '" + n->id + "' is not defined");
    }
    if (auto l = expr.as<script::List>()) {
        std::vector<Value> items;
        for (const ExprPtr& e : l->elements) items.push_back(eval(*e));
        return make_list(std::move(items));
    }
    if (auto t = expr.as<script::Tuple>()) {
        std::vector<Value> items;
        for (const ExprPtr& e : t->elements) items.push_back(eval(*e));
        return make_tuple(std::move(items));
    }
    if (auto d = expr.as<script::Dict>()) {
        Value dict = make_dict();
        auto& obj = **dict.as<std::shared_ptr<DictObj>>();
        for (const DictItem& item : d->items) {
            Value key = eval(*item.key);
            Value value = eval(*item.value);
            if (Value* existing = obj.find(key)) *existing = value;
            else obj.items.emplace_back(std::move(key), std::move(value));
        }
        return dict;
    }
    if (auto a = expr.as<Attribute>()) {
        Value object = eval(*a->object);
        point_at(expr.pos);
        return get_attr(object, a->name);
    }
    if (auto c = expr.as<script::Call>()) return eval_call(expr, *c);
    if (auto s = expr.as<Subscript>()) {
        Value v = eval_subscript(*s);
        return v;
    }
    if (auto b = expr.as<BinOp>()) {
        if (!b->left->is<BinOp>()) {
            Value left = eval(*b->left);
            Value right = eval(*b->right);
            point_at(expr.pos);
            return binary_op(*this, b->op, left, right);
        }
        // a + b + c + ...: a tree leaning left, as deep as the chain is long. Walk its left
        // spine in a loop, so no chain length overflows the C++ stack.
        std::vector<const Expr*> spine{&expr};
        while (spine.back()->as<BinOp>()->left->is<BinOp>()) spine.push_back(spine.back()->as<BinOp>()->left.get());
        Value left = eval(*spine.back()->as<BinOp>()->left);
        for (auto it = spine.rbegin(); it != spine.rend(); ++it) {
            const BinOp& op = *(*it)->as<BinOp>();
            Value right = eval(*op.right);
            point_at((*it)->pos);
            left = binary_op(*this, op.op, left, right);
        }
        return left;
    }
    if (auto u = expr.as<UnaryOp>()) {
        Value operand = eval(*u->operand);
        point_at(expr.pos);
        if (u->op == UnaryOperator::not_) return !truthy(operand);
        return unary_op(*this, u->op, operand);
    }
    if (auto c = expr.as<Compare>()) {
        // a < b < c means a < b and b < c, with b evaluated once.
        Value left = eval(*c->left);
        Value result;
        for (size_t i = 0; i < c->ops.size(); ++i) {
            Value right = eval(*c->comparators[i]);
            point_at(expr.pos);
            result = compare_op(*this, c->ops[i], left, right);
            if (i + 1 < c->ops.size() && !truthy(result)) return result;
            left = std::move(right);
        }
        return result;
    }
    if (auto b = expr.as<BoolOp>()) {
        // Python's and/or return the deciding operand, not a bool.
        Value v;
        for (const ExprPtr& e : b->values) {
            v = eval(*e);
            bool t = truthy(v);
            if (b->op == BoolOperator::and_ ? !t : t) return v;
        }
        return v;
    }
    if (auto i = expr.as<IfExp>()) return truthy(eval(*i->test)) ? eval(*i->if_true) : eval(*i->if_false);
    if (auto f = expr.as<FString>()) return eval_fstring(*f);
    if (auto l = expr.as<Lambda>()) return make_function(l->def, *l->def->as<Def>());
    if (auto c = expr.as<Comprehension>()) return eval_comprehension(*c);
    point_at(expr.pos);
    raise("SyntaxError", "a slice is only allowed inside []");
}

Value Interp::eval_fstring(const FString& f) {
    std::string out;
    for (const FStringPart& part : f.parts) {
        out += part.literal;
        if (!part.value) continue;
        Value v = eval(*part.value);
        if (part.conversion == 'r') v = repr(v);
        else if (part.conversion == 's') v = str(v);
        std::string piece = format_value(*this, v, part.spec);
        check_memory((unsigned __int128)out.size() + piece.size() + part.literal.size(), "f-string");  // s = f'{s}{s}' doubles
        out += piece;
    }
    return out;
}

// A comprehension runs in a scope of its own (its loop variables do not leak), nested in
// the scope it is written in. A generator expression is evaluated at once, into a list.
Value Interp::eval_comprehension(const Comprehension& c) {
    auto scope = std::make_shared<Scope>();
    scope->parent = frames_.back().scope;
    struct Restore {
        Frame& f;
        std::shared_ptr<Scope> s;
        ~Restore() { f.scope = s; }
    } restore{frames_.back(), frames_.back().scope};
    frames_.back().scope = scope;
    std::vector<Value> items;
    Value dict = make_dict();
    auto& dict_items = (*dict.as<std::shared_ptr<DictObj>>())->items;
    std::function<void(size_t)> loop = [&](size_t level) {
        if (level == c.fors.size()) {
            check_interrupt();
            if (c.kind != ComprehensionKind::dict) return items.push_back(eval(*c.element));
            Value key = eval(*c.element);
            Value value = eval(*c.value);
            for (auto& [k, v] : dict_items)
                if (values_equal(k, key)) return void(v = value);
            dict_items.emplace_back(std::move(key), std::move(value));
            return;
        }
        const ComprehensionFor& f = c.fors[level];
        for (const Value& item : iterate(*this, eval(*f.iter))) {
            assign(*f.target, item);
            bool keep = true;
            for (const ExprPtr& cond : f.ifs)
                if (!(keep = truthy(eval(*cond)))) break;
            if (keep) loop(level + 1);
        }
    };
    loop(0);
    return c.kind == ComprehensionKind::dict ? dict : make_list(std::move(items));
}

Value Interp::eval_subscript(const Subscript& sub) {
    Value object = eval(*sub.object);
    std::vector<IndexPart> index;
    auto bound = [&](const ExprPtr& x) -> std::optional<int64_t> {
        if (!x) return std::nullopt;
        Value v = eval(*x);
        if (v.is_none()) return std::nullopt;
        if (auto i = as_int(v)) return *i;
        frames_.back().pos = x->pos;
        raise("TypeError", "slice indices must be integers or None, not " + type_name(v));
    };
    auto part = [&](const Expr& e) {
        if (auto sl = e.as<script::Slice>()) {
            IndexPart p{.is_slice = true};
            p.lower = bound(sl->lower), p.upper = bound(sl->upper), p.step = bound(sl->step);
            index.push_back(p);
        } else {
            index.push_back({.value = eval(e)});
        }
    };
    // x[i, j] indexes a tensor by dims; d[(1, 2)] would index a dict by a tuple, which
    // kiln script leaves out.
    if (auto t = sub.index->as<script::Tuple>(); t && object.is<Tensor>()) {
        for (const ExprPtr& e : t->elements) part(*e);
    } else {
        part(*sub.index);
    }
    frames_.back().pos = sub.index->pos;
    return subscript(*this, object, index);
}

Value Interp::get_attr(const Value& object, const std::string& name) {
    auto missing = [&]() -> Value {
        raise("AttributeError", "'" + type_name(object) + "' object has no attribute '" + name + "'");
    };
    if (auto ns = object.as<std::shared_ptr<Namespace>>()) {
        if (auto v = namespace_attr(**ns, name)) return *v;
        raise("AttributeError", "module '" + (*ns)->name + "' has no attribute '" + name + "'");
    }
    if (auto t = object.as<Tensor>()) {
        if (auto v = tensor_attr(*t, name)) return *v;
    } else if (auto m = object.as<ModulePtr>()) {
        if (auto v = module_attr(*m, name)) return *v;
    } else if (auto e = object.as<std::shared_ptr<ExplainObj>>()) {
        const jit::ExplainOutput& o = (*e)->output;
        if (name == "graph_count") return int64_t(o.graph_count);
        if (name == "graph_break_count") return int64_t(o.graph_break_count);
        if (name == "op_count") return int64_t(o.op_count);
        if (name == "break_reasons") {
            std::vector<Value> reasons;
            for (const auto& b : o.break_reasons) reasons.emplace_back(b.reason);
            return make_list(std::move(reasons));
        }
        return missing();
    } else if (auto f = object.as<std::shared_ptr<FunctionObj>>()) {
        if (name == "__name__") return (*f)->name;
    } else if (auto b = object.as<const Builtin*>()) {
        if (name == "__name__" || name == "__qualname__") return (*b)->name;
    } else if (auto o = object.as<ObjectPtr>()) {
        if (auto v = (*o)->attr(*this, *o, name)) return *v;
    } else if (auto s = object.as<std::string>(); s && name == "format") {
        return str_format_method(*s);
    }
    if (const Builtin* method = find_method(object, name))
        return std::make_shared<BoundMethod>(BoundMethod{object, method});
    return missing();
}

}  // namespace kiln::interp
