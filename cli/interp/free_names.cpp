// Free names of a function body: every Name read, minus parameters and assigned names.
#include "cli/interp/free_names.h"

#include <algorithm>
#include <set>

namespace kiln::interp {

using namespace kiln::script;

namespace {

struct Walker {
    std::set<std::string> reads, locals;
    std::set<std::string> globals;  // `global x` / `nonlocal x`: x is read from outside even when assigned

    void expr(const ExprPtr& e) {
        if (e) expr(*e);
    }
    void expr(const Expr& e) {
        if (auto n = e.as<Name>()) reads.insert(n->id);
        else if (auto l = e.as<List>()) for (const ExprPtr& x : l->elements) expr(x);
        else if (auto t = e.as<Tuple>()) for (const ExprPtr& x : t->elements) expr(x);
        else if (auto d = e.as<Dict>()) for (const DictItem& item : d->items) expr(item.key), expr(item.value);
        else if (auto a = e.as<Attribute>()) expr(a->object);
        else if (auto c = e.as<Call>()) {
            expr(c->func);
            for (const Argument& arg : c->args) expr(arg.value);
            for (const Keyword& k : c->keywords) expr(k.value);
        } else if (auto s = e.as<Slice>()) expr(s->lower), expr(s->upper), expr(s->step);
        else if (auto s = e.as<Subscript>()) expr(s->object), expr(s->index);
        else if (e.is<BinOp>()) {
            // a + b + c + ...: along the left spine in a loop (a chain may be very long).
            const Expr* at = &e;
            while (auto b = at->as<BinOp>()) expr(b->right), at = b->left.get();
            expr(*at);
        } else if (auto u = e.as<UnaryOp>()) expr(u->operand);
        else if (auto c = e.as<Compare>()) {
            expr(c->left);
            for (const ExprPtr& x : c->comparators) expr(x);
        } else if (auto b = e.as<BoolOp>()) for (const ExprPtr& x : b->values) expr(x);
        else if (auto i = e.as<IfExp>()) expr(i->test), expr(i->if_true), expr(i->if_false);
        else if (auto f = e.as<FString>()) for (const FStringPart& p : f->parts) expr(p.value);
        else if (auto l = e.as<Lambda>()) {
            const Def& d = *l->def->as<Def>();
            for (const Param& p : d.params) expr(p.default_value);
            for (const std::string& n : free_names(d)) reads.insert(n);
        } else if (auto c = e.as<Comprehension>()) {
            // Its loop variables are its own: what it reads besides them is read from here.
            Walker inner;
            for (const ComprehensionFor& f : c->fors) {
                inner.expr(f.iter), inner.target(*f.target);
                for (const ExprPtr& cond : f.ifs) inner.expr(cond);
            }
            inner.expr(c->element), inner.expr(c->value);
            for (const std::string& n : inner.reads)
                if (!inner.locals.count(n)) reads.insert(n);
        }
    }

    // An assignment target: names become locals; a[i] and a.b read a (and i).
    void target(const Expr& t) {
        if (auto n = t.as<Name>()) locals.insert(n->id);
        else if (auto tu = t.as<Tuple>()) for (const ExprPtr& x : tu->elements) target(*x);
        else if (auto l = t.as<List>()) for (const ExprPtr& x : l->elements) target(*x);
        else expr(t);
    }

    void body(const Body& stmts) {
        for (const StmtPtr& s : stmts) stmt(*s);
    }
    void stmt(const Stmt& s) {
        if (auto x = s.as<ExprStmt>()) expr(x->value);
        else if (auto a = s.as<Assign>()) {
            expr(a->value);
            for (const ExprPtr& t : a->targets) target(*t);
        } else if (auto a = s.as<AugAssign>()) expr(a->value), target(*a->target);
        else if (auto i = s.as<If>()) {
            for (const IfBranch& b : i->branches) expr(b.test), body(b.body);
            body(i->orelse);
        } else if (auto f = s.as<For>()) expr(f->iter), target(*f->target), body(f->body);
        else if (auto w = s.as<While>()) expr(w->test), body(w->body);
        else if (auto r = s.as<Return>()) expr(r->value);
        else if (auto d = s.as<Def>()) {
            locals.insert(d->name);
            for (const ExprPtr& x : d->decorators) expr(x);
            for (const Param& p : d->params) expr(p.default_value);
            for (const Param& p : d->kwonly_params) expr(p.default_value);
            // What the nested function reads from outside itself, it reads from here.
            for (const std::string& n : free_names(*d)) reads.insert(n);
        } else if (auto i = s.as<Import>()) {
            for (const ImportName& n : i->names) locals.insert(n.alias.empty() ? n.name.substr(0, n.name.find('.')) : n.alias);
        } else if (auto i = s.as<ImportFrom>()) {
            for (const ImportName& n : i->names) locals.insert(n.alias.empty() ? n.name : n.alias);
        } else if (auto a = s.as<Assert>()) expr(a->test), expr(a->message);
        else if (auto c = s.as<ClassDef>()) {
            locals.insert(c->name);
            for (const ExprPtr& x : c->decorators) expr(x);
            for (const ExprPtr& x : c->bases) expr(x);
            body(c->body);
        } else if (auto t = s.as<Try>()) {
            body(t->body), body(t->orelse), body(t->finalbody);
            for (const ExceptHandler& h : t->handlers) {
                expr(h.type), body(h.body);
                if (!h.name.empty()) locals.insert(h.name);
            }
        } else if (auto r = s.as<Raise>()) expr(r->exc), expr(r->cause);
        else if (auto w = s.as<With>()) {
            for (const WithItem& item : w->items) {
                expr(item.context);
                if (item.target) target(*item.target);
            }
            body(w->body);
        } else if (auto g = s.as<Global>()) for (const std::string& n : g->names) globals.insert(n);
        else if (auto n = s.as<Nonlocal>()) for (const std::string& name : n->names) globals.insert(name);
        else if (auto d = s.as<Delete>()) for (const ExprPtr& t : d->targets) target(*t);
    }
};

}  // namespace

std::vector<std::string> free_names(const Def& def) {
    Walker w;
    for (const Param& p : def.params) w.locals.insert(p.name);
    for (const Param& p : def.kwonly_params) w.locals.insert(p.name);
    if (!def.vararg.empty()) w.locals.insert(def.vararg);
    w.body(def.body);
    std::vector<std::string> out;
    if (!def.kwarg.empty()) w.locals.insert(def.kwarg);
    for (const std::string& n : w.globals) w.reads.insert(n), w.locals.erase(n);
    for (const std::string& n : w.reads)
        if (!w.locals.count(n)) out.push_back(n);
    return out;
}

}  // namespace kiln::interp
