// Shape rules over symbols, one per kind of op (see sym_shapes.h). Each rule answers for
// every output dim: a symbol, or static; and which symbols it had to pin. When a rule
// meets something it cannot say, it pins every symbol involved: that is always sound.
#include "jit/sym_shapes.h"

#include <algorithm>
#include <set>

#include "tensor/view_rules.h"

namespace kiln::jit {
namespace {

struct Dim {
    int64_t size;
    int sym;  // -1: static
};

Dim dim_of(const ValueMeta& m, size_t d) { return {m.shape[d], d < m.sym.size() ? m.sym[d] : -1}; }

class Rule {
   public:
    Rule(std::span<const AttrPatch> patches, std::span<const ValueMeta> in) : patches_(patches), in_(in) {}

    void pin(int k) {
        if (k >= 0) pins_.insert(k);
    }
    void pin_expr(const SymExpr& e) {
        for (int k : e.syms) pin(k);
    }
    // Every symbol the op touches: the answer when no rule fits.
    void pin_everything() {
        for (const ValueMeta& m : in_)
            for (size_t d = 0; d < m.shape.size(); ++d) pin(dim_of(m, d).sym);
        for (const AttrPatch& p : patches_) pin_expr(p.expr);
    }

    // Dims that must agree (sizes equal, or 1 and broadcast) and give an output dim of
    // `out_size`: its symbol if exactly one symbol and no static size takes part.
    int unify(const std::vector<Dim>& ds, int64_t out_size) {
        std::set<int> syms;
        bool fixed = false;
        for (const Dim& d : ds) {
            if (d.size != out_size) continue;  // a broadcast 1
            if (d.sym >= 0) syms.insert(d.sym);
            else fixed = true;
        }
        if (syms.empty()) return -1;
        if (syms.size() == 1 && !fixed) return *syms.begin();
        for (int k : syms) pin(k);  // s0 against 5, or s0 against s1: true only today
        return -1;
    }

    const AttrPatch* patch(AttrField f, int index = 0) const {
        for (const AttrPatch& p : patches_)
            if (p.field == f && p.index == index) return &p;
        return nullptr;
    }
    // The symbol an attribute is, if it is one symbol; pins the symbols of any other expression.
    int attr_sym(AttrField f, int index = 0) {
        const AttrPatch* p = patch(f, index);
        if (!p) return -1;
        if (p->expr.syms.size() == 1 && p->expr.coeff == 1 && !p->expr.reciprocal) return p->expr.syms[0];
        pin_expr(p->expr);
        return -1;
    }

    std::vector<int> pins() const { return {pins_.begin(), pins_.end()}; }

   private:
    std::span<const AttrPatch> patches_;
    std::span<const ValueMeta> in_;
    std::set<int> pins_;
};

// coeff * s_a * s_b ...: a product of sizes, to compare element counts.
struct Monomial {
    int64_t coeff = 1;
    std::multiset<int> syms;
    bool operator==(const Monomial&) const = default;
};

Monomial numel_of(const ValueMeta& m) {
    Monomial r;
    for (size_t d = 0; d < m.shape.size(); ++d) {
        Dim x = dim_of(m, d);
        if (x.sym >= 0) r.syms.insert(x.sym);
        else r.coeff *= x.size;
    }
    return r;
}

std::vector<int> pointwise(Rule& r, std::span<const ValueMeta> in, const Shape& out) {
    std::vector<int> sym(out.size(), -1);
    for (size_t i = 0; i < out.size(); ++i) {
        std::vector<Dim> ds;
        for (const ValueMeta& m : in) {
            int64_t j = int64_t(i) - int64_t(out.size() - m.shape.size());
            if (j >= 0) ds.push_back(dim_of(m, size_t(j)));
        }
        sym[i] = r.unify(ds, out[i]);
    }
    return sym;
}

std::vector<int> reduction(const Attrs& a, const ValueMeta& x) {
    int64_t rank = int64_t(x.shape.size());
    std::vector<bool> reduced(size_t(rank), a.dims.empty());
    for (int64_t d : a.dims)
        if (rank > 0) reduced[size_t(normalize_dim(d, rank, "sum"))] = true;
    std::vector<int> sym;
    for (int64_t i = 0; i < rank; ++i) {
        if (!reduced[size_t(i)]) sym.push_back(dim_of(x, size_t(i)).sym);
        else if (a.keepdim) sym.push_back(-1);
    }
    return sym;
}

std::vector<int> matmul(Rule& r, const ValueMeta& a, const ValueMeta& b, const Shape& out) {
    // As torch.matmul: a 1-D left operand is a row [1, k], a 1-D right one a column [k, 1];
    // the added dim is dropped from the result.
    std::vector<Dim> ad, bd;
    for (size_t d = 0; d < a.shape.size(); ++d) ad.push_back(dim_of(a, d));
    for (size_t d = 0; d < b.shape.size(); ++d) bd.push_back(dim_of(b, d));
    bool a_vec = ad.size() == 1, b_vec = bd.size() == 1;
    if (a_vec) ad.insert(ad.begin(), Dim{1, -1});
    if (b_vec) bd.push_back(Dim{1, -1});
    Dim ka = ad[ad.size() - 1], kb = bd[bd.size() - 2];
    r.unify({ka, kb}, ka.size);
    std::vector<int> sym;
    size_t batch = std::max(ad.size(), bd.size()) - 2;
    for (size_t i = 0; i < batch; ++i) {
        std::vector<Dim> ds;
        int64_t ja = int64_t(i) - int64_t(batch - (ad.size() - 2)), jb = int64_t(i) - int64_t(batch - (bd.size() - 2));
        if (ja >= 0) ds.push_back(ad[size_t(ja)]);
        if (jb >= 0) ds.push_back(bd[size_t(jb)]);
        sym.push_back(i < out.size() ? r.unify(ds, out[i]) : -1);
    }
    if (!a_vec) sym.push_back(ad[ad.size() - 2].sym);
    if (!b_vec) sym.push_back(bd.back().sym);
    return sym;
}

std::vector<int> reshape(Rule& r, const Attrs& a, const ValueMeta& x) {
    std::vector<int> sym(a.shape.size(), -1);
    Monomial known;
    int inferred = -1;
    for (size_t i = 0; i < a.shape.size(); ++i) {
        if (a.shape[i] == -1) {
            inferred = int(i);
            continue;
        }
        sym[i] = r.attr_sym(AttrField::shape, int(i));
        if (sym[i] >= 0) known.syms.insert(sym[i]);
        else known.coeff *= a.shape[i];
    }
    Monomial total = numel_of(x);
    auto pin_all = [&] {
        for (int k : total.syms) r.pin(k);
        for (int k : known.syms) r.pin(k);
        std::fill(sym.begin(), sym.end(), -1);
    };
    if (inferred < 0) {
        if (!(known == total)) pin_all();  // the element counts agree only for today's sizes
        return sym;
    }
    // The -1 dim is total / known, when that divides as monomials.
    Monomial rest = total;
    for (int k : known.syms) {
        auto it = rest.syms.find(k);
        if (it == rest.syms.end()) return pin_all(), sym;
        rest.syms.erase(it);
    }
    if (known.coeff == 0 || rest.coeff % known.coeff != 0) return pin_all(), sym;
    rest.coeff /= known.coeff;
    if (rest.syms.empty()) return sym;  // static
    if (rest.syms.size() == 1 && rest.coeff == 1) {
        sym[size_t(inferred)] = *rest.syms.begin();
        return sym;
    }
    return pin_all(), sym;  // 3*s0 or s0*s1: not one symbol
}

std::vector<int> expand(Rule& r, const Attrs& a, const ValueMeta& x, const ViewRule& v) {
    std::vector<int> sym(a.shape.size(), -1);
    for (size_t i = 0; i < a.shape.size(); ++i) {
        int j = v.from[i];
        Dim have = j >= 0 ? dim_of(x, size_t(j)) : Dim{1, -1};
        if (a.shape[i] == -1) {
            sym[i] = have.sym;
            continue;
        }
        int want = r.attr_sym(AttrField::shape, int(i));
        if (have.size != 1 && have.sym != want) {  // kept dims must agree for every call
            r.pin(have.sym);
            r.pin(want);
            want = -1;
        }
        sym[i] = want;
    }
    return sym;
}

// Dim d of a slice: the input's symbol only when the slice is the whole dim.
void slice_dim(Rule& r, const Attrs& a, std::vector<int>& sym, size_t d) {
    int k = sym[d];
    int end = r.attr_sym(AttrField::end);
    if (k < 0) {
        r.pin(end);  // an end that follows a symbol, on a static dim: clamping depends on its value
        return;
    }
    bool to_the_end = r.patch(AttrField::end) ? end == k : a.end >= (int64_t(1) << 62);
    if (!(a.start == 0 && a.step == 1 && to_the_end)) {  // s0 - 1, s0 / 2 ...: pin
        r.pin(k);
        r.pin(end);
        sym[d] = -1;
    }
}

// A view whose dims each read one input dim (tensor/view_rules.h): permute, slice,
// contiguous take that dim's symbol; expand and a slice's dim have rules of their own.
std::vector<int> view_dims(Rule& r, OpId op, const Attrs& a, const ValueMeta& x,
                           const ViewRule& v) {
    if (op == OpId::expand) return expand(r, a, x, v);
    std::vector<int> sym;
    for (int j : v.from) sym.push_back(j < 0 ? -1 : dim_of(x, size_t(j)).sym);
    if (v.sliced >= 0) slice_dim(r, a, sym, size_t(v.sliced));
    return sym;
}

std::vector<int> cat(Rule& r, const Attrs& a, std::span<const ValueMeta> in, const Shape& out) {
    std::vector<int> sym(out.size(), -1);
    if (out.empty()) return sym;
    size_t d = size_t(normalize_dim(a.dim, int64_t(out.size()), "cat"));
    for (size_t i = 0; i < out.size(); ++i) {
        std::vector<Dim> ds;
        for (const ValueMeta& m : in)
            if (i < m.shape.size()) ds.push_back(dim_of(m, i));
        if (i != d) {
            sym[i] = r.unify(ds, out[i]);
        } else {
            for (const Dim& x : ds) r.pin(x.sym);  // a sum of sizes
        }
    }
    return sym;
}

// gather(x, index) along dim: the index's shape; outside dim the index and x agree (kiln asks
// for equal sizes). x's size along dim shapes nothing: the kernel reads it to check the
// indices. scatter_add(base, index, src): base's shape, the index and src agreeing with it
// outside dim and with each other everywhere.
std::vector<int> index_op(Rule& r, OpId op, const Attrs& a, std::span<const ValueMeta> in) {
    const ValueMeta& data = in[0];
    const ValueMeta& index = in[1];
    size_t rank = index.shape.size();
    if (rank == 0 || data.shape.size() != rank) {  // 0-d, or a call the kernel refuses
        r.pin_everything();
        return {};
    }
    size_t d = size_t(normalize_dim(a.dim, int64_t(rank), op_info(op).name));
    std::vector<int> sym(rank, -1);
    for (size_t i = 0; i < rank; ++i) {
        std::vector<Dim> ds = {dim_of(index, i)};
        if (op == OpId::scatter_add) ds.push_back(dim_of(in[2], i));
        if (i != d) ds.push_back(dim_of(data, i));
        int k = r.unify(ds, index.shape[i]);
        sym[i] = op == OpId::scatter_add && i == d ? dim_of(data, i).sym : k;
    }
    return sym;
}

std::vector<int> factory(Rule& r, const Attrs& a) {
    std::vector<int> sym(a.shape.size(), -1);
    for (size_t i = 0; i < a.shape.size(); ++i) sym[i] = r.attr_sym(AttrField::shape, int(i));
    return sym;
}

}  // namespace

SymShape infer_sym_shape(OpId op, const Attrs& a, std::span<const AttrPatch> patches, std::span<const ValueMeta> in,
                         const Shape& out, std::span<const int64_t> values) {
    Rule r(patches, in);
    std::vector<int> sym;
    bool known = true;
    switch (op_info(op).kind) {
        case OpKind::pointwise: sym = pointwise(r, in, out); break;
        case OpKind::reduction: sym = reduction(a, in[0]); break;
        case OpKind::matmul: sym = matmul(r, in[0], in[1], out); break;
        case OpKind::factory:
        case OpKind::random:
            if (op == OpId::arange) {
                int hi = r.attr_sym(AttrField::hi);
                bool plain = a.lo == 0 && a.scalar == 1 && hi >= 0;  // arange(s0)
                if (!plain) r.pin(hi);
                sym = {plain ? hi : -1};
            } else {
                sym = factory(r, a);
            }
            break;
        case OpKind::view: {
            ViewRule v = view_rule(op, a, in[0].shape.size(), out.size());
            if (v.kind == ViewRule::Kind::regroup)
                sym = reshape(r, a, in[0]);
            else if (v.kind == ViewRule::Kind::dims)
                sym = view_dims(r, op, a, in[0], v);
            else
                known = false;
            break;
        }
        case OpKind::other:
            if (op == OpId::cat) sym = cat(r, a, in, out);
            else if (op == OpId::gather || op == OpId::scatter_add)
                sym = index_op(r, op, a, in);
            else if (op == OpId::slice_backward) {
                for (const ValueMeta& m : in)
                    for (size_t d = 0; d < m.shape.size(); ++d) r.pin(dim_of(m, d).sym);
                sym = factory(r, a);
            } else known = false;
            break;
    }
    sym.resize(out.size(), -1);
    // Every symbol claimed must have the size eager computed; else the rule did not fit.
    for (size_t d = 0; d < out.size() && known; ++d)
        if (sym[d] >= 0 && (size_t(sym[d]) >= values.size() || values[size_t(sym[d])] != out[d])) known = false;
    if (!known) {
        r.pin_everything();
        std::fill(sym.begin(), sym.end(), -1);
    }
    return {sym, r.pins()};
}

}  // namespace kiln::jit
