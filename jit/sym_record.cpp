// Symbolic sizes while recording: each recorded value's dims carry the entry's symbols
// (s0, s1, ...) where a size may change between calls; a size the shape rule
// (jit/sym_shapes.cpp) cannot say, or one fn reads as a number, is pinned by a guard.
// Entry: Tracer::sym_meta, the symbols of a recorded op's output.
#include <algorithm>
#include <sstream>

#include "jit/log.h"
#include "jit/tracer_state.h"

namespace kiln::jit::tracing {

ValueMeta Tracer::sym_meta(const Step& s, const std::vector<int>& ids, const Tensor& out) {
    ValueMeta meta = meta_of(out);
    for (int round = 0; round < 4; ++round) {  // a pin can change the answer; it settles fast
        std::vector<ValueMeta> in;
        for (int id : ids) {
            ValueMeta m = b_->meta(id);
            m.sym = masked(m.sym, m.shape.size());
            in.push_back(std::move(m));
        }
        SymShape r = infer_sym_shape(s.op, s.attrs, s.patches, in, out.impl()->shape, syms_);
        bool pinned_new = false;
        for (int k : r.pin) {
            if (e_.guards.is_pinned(k)) continue;
            pin(k, std::string("a size of ") + op_info(s.op).name +
                       "'s output that no one symbol can say (or an agreement of sizes that holds "
                       "only for these)");
            pinned_new = true;
        }
        meta.sym = masked(r.sym, meta.shape.size());
        if (!pinned_new) break;
    }
    return meta;
}

// fn's code read a size as a number: if it is a symbol, the entry now depends on its
// value, so the value is pinned by a guard (docs/jit.md, "Sizes read as numbers").
void Tracer::size_read(const Tensor& t, int64_t dim, const std::source_location& loc) {
    if (passthrough_ || in_eager_) return;
    std::vector<int> syms = sym_dims(t);
    for (size_t d = 0; d < syms.size(); ++d) {
        if (syms[d] < 0 || (dim >= 0 && int64_t(d) != dim)) continue;
        std::ostringstream why;
        why << (dim >= 0 ? "size(" + std::to_string(d) + ")" : std::string("the shape")) << " of a "
            << shape_str(t) << " tensor read at " << loc.file_name() << ":" << loc.line();
        pin(syms[d], why.str());
    }
}

void Tracer::pin(int k, const std::string& why) {
    if (k < 0 || e_.guards.is_pinned(k)) return;
    e_.guards.pin(k, syms_[size_t(k)], why);
    log_event("guards", cfg_.fn_name + " entry " + std::to_string(e_.id) + ": s" +
                            std::to_string(k) + " pinned to " + std::to_string(syms_[size_t(k)]) +
                            " (" + why + ")");
}

std::vector<int> Tracer::masked(std::vector<int> sym, size_t rank) const {
    sym.resize(rank, -1);
    for (int& k : sym)
        if (k >= 0 && e_.guards.is_pinned(k)) k = -1;
    return sym;
}

std::vector<int> Tracer::sym_dims(const Tensor& t) {
    size_t rank = t.impl()->shape.size();
    const Ref* r = resolve(t);
    if (!r) return std::vector<int>(rank, -1);  // an outside tensor: lifted with its sizes
    if (r->kind == RefKind::slot) {
        if (e_.slot_kinds[r->id] == SlotKind::argument)
            return masked(slot_guard_[r->id]->sym, rank);
        return masked(e_.slot_syms[r->id], rank);
    }
    if (!matching()) return masked(b_->meta(r->id).sym, rank);
    if (cands_.empty() || !cands_[0]->graph) return std::vector<int>(rank, -1);
    const Graph& g = *cands_[0]->graph;
    return masked(g.nodes()[g.num_inputs() + r->id].meta.sym, rank);
}

void Tracer::same_symbols(const Tensor& target, const Tensor& value) {
    std::vector<int> a = sym_dims(target), b = sym_dims(value);
    for (size_t d = 0; d < a.size() && d < b.size(); ++d)
        if (a[d] != b[d]) {
            pin(a[d],
                "an in-place write into a tensor whose sizes equal its value's only for these "
                "sizes");
            pin(b[d],
                "an in-place write into a tensor whose sizes equal its value's only for these "
                "sizes");
        }
}

std::vector<AttrPatch> Tracer::patches_of(std::span<const SizeOrigin> origins, const Attrs& attrs,
                                          std::vector<Tensor>& sources) {
    std::vector<AttrPatch> out;
    for (const SizeOrigin& o : origins) {
        SymExpr e{.reciprocal = o.reciprocal};
        for (const auto& [t, d] : o.dims) {
            int k = sym_dims(t)[size_t(d)];
            if (k < 0) {
                e.coeff *= t.impl()->shape[size_t(d)];
                continue;
            }
            e.syms.push_back(k);
            sources.push_back(t);
        }
        if (e.syms.empty()) continue;
        std::sort(e.syms.begin(), e.syms.end());
        double want = o.field == AttrField::shape    ? double(attrs.shape[size_t(o.index)])
                      : o.field == AttrField::scalar ? attrs.scalar
                      : o.field == AttrField::end    ? double(attrs.end)
                                                     : attrs.hi;
        if (e.eval(syms_) !=
            want) {  // the origin does not say this attribute: keep it constant, exact
            for (int k : e.syms) pin(k, "an attribute whose stated size origin does not match it");
            continue;
        }
        out.push_back({o.field, o.index, std::move(e)});
    }
    return out;
}

}  // namespace kiln::jit::tracing
