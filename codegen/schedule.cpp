// The scheduler: one walk over the nodes in order, placing each into a kernel. A node
// joins an existing kernel when it has the same loop structure and everything it reads is
// either computed there or already in memory; otherwise it starts a new kernel, and the
// values it needs from other kernels are written out ("realized").
#include "codegen/schedule.h"

#include <algorithm>
#include <optional>
#include <set>
#include <sstream>

#include "tensor/error.h"
#include "tensor/reductions.h"
#include "tensor/view_rules.h"

namespace kiln::codegen {

// ---- size expressions

SizeExpr size_expr(int64_t size) {
    if (is_symbol(size)) return {1, {symbol_index(size)}};
    return {size, {}};
}

SizeExpr operator*(const SizeExpr& a, const SizeExpr& b) {
    SizeExpr r{a.c * b.c, a.syms};
    r.syms.insert(r.syms.end(), b.syms.begin(), b.syms.end());
    std::sort(r.syms.begin(), r.syms.end());
    if (r.c == 0) r.syms.clear();  // a broadcast stride stays 0 whatever it multiplies
    return r;
}

std::string to_cpp(const SizeExpr& e) {
    std::string out;
    for (int k : e.syms) out += (out.empty() ? "s" : " * s") + std::to_string(k);
    if (e.c != 1 || out.empty()) out += (out.empty() ? "" : " * ") + std::to_string(e.c);
    return out;
}

std::string to_cpp(const std::vector<SizeExpr>& sum) {
    std::string out;
    for (const SizeExpr& term : sum)
        if (term.c != 0) out += (out.empty() ? "" : " + ") + to_cpp(term);
    return out.empty() ? "0" : out;
}

std::vector<SizeExpr> contiguous_stride_exprs(const Shape& shape) {
    std::vector<SizeExpr> strides(shape.size());
    SizeExpr running{1, {}};
    for (size_t i = shape.size(); i-- > 0;) {
        strides[i] = running;
        running = running * size_expr(shape[i]);
    }
    return strides;
}

const char* kernel_kind_name(KernelKind k) {
    static const char* names[] = {"pointwise", "row", "blas", "fallback"};
    return names[int(k)];
}

std::vector<int> Kernel::args() const {
    std::vector<int> all = loads;
    all.insert(all.end(), stores.begin(), stores.end());
    return all;
}

// ---- Schedule accessors and printing

const LValue& Schedule::value(int id) const {
    // A node's output first: emit asks for values many times, and a backward graph has
    // hundreds of inputs to scan.
    if (auto it = producer.find(id); it != producer.end()) return graph.nodes[it->second].out;
    for (const LValue& v : graph.inputs)
        if (v.id == id) return v;
    fail("codegen: value ", id, " is not defined in the graph");
}

std::string Schedule::value_name(int id) const {
    const LValue& v = value(id);
    std::string base = v.name;
    if (base.empty()) {
        auto it = producer.find(id);
        base = it == producer.end() ? "in" : op_info(graph.nodes[it->second].op).name;
    }
    return base + "_" + std::to_string(id);
}

std::string Schedule::kernel_name(int k) const { return prefix + "kernel_" + std::to_string(k); }

namespace {

std::string shape_str(const Shape& shape) {
    std::string out = "[";
    for (size_t i = 0; i < shape.size(); ++i)
        out += (i ? ", " : "") + (is_symbol(shape[i]) ? "s" + std::to_string(symbol_index(shape[i]))
                                                      : std::to_string(shape[i]));
    return out + "]";
}

}  // namespace

bool Schedule::has_epilogue(int k) const {
    return k + 1 < int(kernels.size()) && kernels[size_t(k) + 1].epilogue_of == k;
}

std::string Schedule::print() const {
    std::ostringstream os;
    for (size_t k = 0; k < kernels.size(); ++k) {
        if (kernels[k].epilogue_of >= 0) continue;  // printed on its blas kernel's line
        bool fused = has_epilogue(int(k));
        Kernel kernel = kernels[k];
        if (fused) {  // one line: the matmul, then the epilogue's nodes and stores
            const Kernel& epilogue = kernels[k + 1];
            kernel.domain = epilogue.domain;
            kernel.nodes.insert(kernel.nodes.end(), epilogue.nodes.begin(), epilogue.nodes.end());
            kernel.stores = epilogue.stores;
            if (epilogue.in_place < 0)
                kernel.stores.insert(kernel.stores.begin(),
                                     graph.nodes[kernels[k].nodes[0]].out.id);
        }
        std::string head =
            kernel_name(int(k)) + "  " + kernel_kind_name(kernel.kind) + (fused ? "+epilogue" : "");
        if (kernel.kind == KernelKind::pointwise || fused) head += " " + shape_str(kernel.domain);
        if (kernel.kind == KernelKind::row) {
            Shape rows(kernel.domain.begin(), kernel.domain.begin() + kernel.outer_dims);
            Shape row(kernel.domain.begin() + kernel.outer_dims, kernel.domain.end());
            head += " " + shape_str(rows) + " x " + shape_str(row);
            if (!kernel.perm
                     .empty()) {  // the loop order, when the reduced dims are not the trailing ones
                head += " (dims";
                for (int d : kernel.perm) head += " " + std::to_string(d);
                head += ")";
            }
        }
        os << head << std::string(head.size() < 36 ? 36 - head.size() : 1, ' ');
        for (size_t i = 0; i < kernel.nodes.size(); ++i)
            os << (i ? " " : "") << value_name(graph.nodes[kernel.nodes[i]].out.id);
        if (!kernel.stores.empty()) {
            os << "  ->";
            for (int id : kernel.stores) os << " " << value_name(id);
        }
        if (!kernel.why.empty()) os << "  (" << kernel.why << ")";
        if (fused)
            os << "  (epilogue " << kernel_name(int(k) + 1) << " per block of GEMM rows"
               << (kernels[k + 1].in_place >= 0 ? ", in place" : "") << ")";
        os << "\n";
    }
    return os.str();
}

// ---- the scheduler

namespace {

enum class Plan { pointwise, reduction, view, blas, fallback };
enum class Role { none, element, per_row };

bool is_identity(const LNode& n) { return n.op == OpId::contiguous || n.op == OpId::cast; }

// How a row kernel loops for reduction n over `in`: the kept dims, then the reduced ones.
struct RowLoop {
    std::vector<int> perm;  // loop dim i is dim perm[i] of `in`; empty: the identity
    int outer_dims = 0;     // how many kept dims (the rows)
};
RowLoop row_loop(const LNode& n, const Shape& in) {
    int64_t rank = int64_t(in.size());
    std::vector<bool> reduced(in.size(), n.attrs.dims.empty());
    for (int64_t d : n.attrs.dims)
        if (rank > 0)
            reduced[normalize_dim(d, rank, op_info(n.op).name)] = true;  // a 0-d value: itself
    RowLoop loop;
    for (int i = 0; i < int(rank); ++i)
        if (!reduced[i]) loop.perm.push_back(i);
    loop.outer_dims = int(loop.perm.size());
    for (int i = 0; i < int(rank); ++i)
        if (reduced[i]) loop.perm.push_back(i);
    bool identity = true;
    for (int i = 0; i < int(rank); ++i) identity = identity && loop.perm[i] == i;
    if (identity) loop.perm.clear();
    return loop;
}

Shape permuted(const Shape& shape, const std::vector<int>& perm) {
    if (perm.empty()) return shape;
    Shape out;
    for (int d : perm) out.push_back(shape[d]);
    return out;
}

Shape padded(const Shape& shape, size_t rank) {
    if (shape.size() >= rank) return shape;
    Shape out(rank - shape.size(), 1);
    out.insert(out.end(), shape.begin(), shape.end());
    return out;
}

struct Scheduler {
    Schedule s;
    std::set<int> graph_outputs_;

    ValueInfo& info(int id) {
        auto it = s.values.find(id);
        KILN_CHECK(it != s.values.end(), "codegen: value ", id, " is used before it is defined");
        return it->second;
    }
    const LValue& val(int id) const { return s.value(id); }

    // Generated reductions give eager's result dtype (reduction_dtype, tensor/reductions.h):
    // a sum of int64 or bool values is int64, amax/amin keep the dtype, floats stay as they are.
    bool reduction_dtype_ok(const LNode& n) const {
        return n.out.dtype == reduction_dtype(n.op, val(n.inputs[0]).dtype);
    }

    Plan plan_for(const LNode& n) {
        const OpInfo& op = op_info(n.op);
        if (is_identity(n)) return n.inputs.size() == 1 ? Plan::pointwise : Plan::fallback;
        if (n.op == OpId::where) return n.inputs.size() == 3 ? Plan::pointwise : Plan::fallback;
        if (op.kind == OpKind::pointwise && op.math) {
            size_t want = n.attrs.scalar_pos == ScalarPos::none ? size_t(op.arity) : size_t(op.arity) - 1;
            return n.inputs.size() == want ? Plan::pointwise : Plan::fallback;
        }
        if (op.kind == OpKind::reduction)
            return reduction_dtype_ok(n) ? Plan::reduction : Plan::fallback;
        // A layout change of a channels-last graph input (codegen/channels_last.h): the host
        // makes it, free when the input arrives channels-last.
        if (n.op == OpId::permute && n.attrs.keepdim) return Plan::fallback;
        if (op.kind == OpKind::view) return Plan::view;
        if (op.kind == OpKind::matmul) {  // the blas kernel is cblas_sgemm
            bool f32 = n.out.dtype == DType::float32;
            for (int in : n.inputs) f32 = f32 && val(in).dtype == DType::float32;
            return f32 ? Plan::blas : Plan::fallback;
        }
        return Plan::fallback;
    }

    // Why plan_for() sent `n` to a fallback kernel, for explain, :code and KILN_LOGS=schedule.
    std::string fallback_reason(const LNode& n) {
        const OpInfo& op = op_info(n.op);
        bool generable =
            (op.kind == OpKind::pointwise && (op.math || is_identity(n) || n.op == OpId::where)) ||
            op.kind == OpKind::reduction || op.kind == OpKind::view;
        auto a_dtype = [](DType d) {
            return std::string(d == DType::int64 ? "an " : "a ") + dtype_name(d);
        };
        if (op.kind == OpKind::matmul)
            return "a matmul of " + a_dtype(val(n.inputs[0]).dtype) +
                   " value; the blas kernel is float32 only";
        if (!generable)
            return std::string(op.name) + " has no generated form (a " + op_kind_name(op.kind) +
                   " op)";
        if (op.kind == OpKind::reduction)
            return "it reduces " + a_dtype(val(n.inputs[0]).dtype) + " value to " +
                   a_dtype(n.out.dtype) +
                   "; generated reductions give eager's result dtype (sum of int64 or bool: int64, "
                   "else the input's)";
        if (n.op == OpId::permute && n.attrs.keepdim)
            return "an input's NHWC copy, made on the host (free when it arrives channels-last)";
        if (op.kind == OpKind::view) return "a view the kernels cannot index as strides over one buffer";
        return "a pointwise form generated kernels do not take";
    }

    int new_kernel(KernelKind kind, Shape domain, int outer_dims) {
        Kernel k;
        k.kind = kind, k.domain = std::move(domain), k.outer_dims = outer_dims;
        s.kernels.push_back(std::move(k));
        return int(s.kernels.size()) - 1;
    }

    // From now on the value lives in memory: its kernel writes it out.
    void realize(int id) {
        ValueInfo& v = info(id);
        KILN_CHECK(v.home != Home::constant, "codegen: constant ", id, " has a reader outside generated kernels");
        if (v.home != Home::inlined) return;
        v.home = Home::stored;
        v.access = {id, contiguous_stride_exprs(val(id).shape), {}};
        s.kernels[v.kernel].stores.push_back(id);
    }

    bool computed_in(int id, int k) {
        const ValueInfo& v = info(id);
        return v.kernel == k && (v.home == Home::inlined || v.home == Home::stored) && s.producer.count(id);
    }

    // The shape of a kernel's element nodes (a row kernel's domain is in loop order).
    Shape element_shape(const Kernel& k) const {
        if (k.perm.empty()) return k.domain;
        Shape out(k.domain.size());
        for (size_t i = 0; i < k.perm.size(); ++i) out[k.perm[i]] = k.domain[i];
        return out;
    }

    // A per-row value with keepdim: the element shape with the reduced dims 1.
    Shape row_keepdim_shape(const Kernel& k) const {
        Shape keep = element_shape(k);
        for (size_t i = k.outer_dims; i < k.domain.size(); ++i)
            keep[k.perm.empty() ? i : k.perm[i]] = 1;
        return keep;
    }

    // The part node n would play in kernel k, if it fits there at all.
    Role role_in(const Kernel& k, const LNode& n, Plan plan) {
        if (plan == Plan::reduction) {
            const Shape& in = val(n.inputs[0]).shape;
            if (in != element_shape(k)) return Role::none;
            if (k.kind == KernelKind::pointwise) return Role::per_row;  // the kernel becomes a row kernel
            RowLoop loop = row_loop(n, in);
            return k.kind == KernelKind::row && loop.perm == k.perm &&
                           loop.outer_dims == k.outer_dims
                       ? Role::per_row
                       : Role::none;
        }
        if (k.kind == KernelKind::pointwise) return n.out.shape == k.domain ? Role::element : Role::none;
        if (k.kind != KernelKind::row) return Role::none;
        if (n.out.shape == element_shape(k)) return Role::element;
        Shape rows(k.domain.begin(), k.domain.begin() + k.outer_dims);
        if (n.out.shape == rows || n.out.shape == row_keepdim_shape(k)) return Role::per_row;
        return Role::none;
    }

    // Whether node n, playing `role` in kernel k, can read value v (computed in k) directly:
    // the broadcast from v's shape to n's must map rows to rows and elements to elements.
    bool can_read_inline(const Kernel& k, int v, Role role, const LNode& n, Plan plan) {
        bool v_per_row = info(v).per_row;
        if (plan == Plan::reduction) return !v_per_row;
        if (role == Role::element)
            return !v_per_row || padded(val(v).shape, k.domain.size()) == row_keepdim_shape(k);
        return v_per_row && padded(val(v).shape, n.out.shape.size()) == n.out.shape;
    }

    // Whether kernel k already reads from memory a value n reads.
    bool shares_a_load(const Kernel& k, const LNode& n) {
        for (int in : n.inputs) {
            if (info(in).home == Home::inlined) continue;
            for (int index : k.nodes)
                for (int other : s.graph.nodes[index].inputs)
                    if (other == in || (info(other).home != Home::inlined && info(other).access.buffer == info(in).access.buffer))
                        return true;
        }
        return false;
    }

    void place_compute(int index, const LNode& n, Plan plan) {
        int after = 0;  // the first candidate: no earlier than any kernel whose results n reads
        for (int in : n.inputs) {
            const ValueInfo& v = info(in);
            // A view reads its base from memory, which the base's kernel has only written
            // completely once it is over: n must run in a later kernel.
            after = std::max(after, v.home == Home::view && v.kernel >= 0 ? v.kernel + 1 : v.kernel);
        }
        int best = -1, best_score = -1;
        Role best_role = Role::none;
        for (int k = after; k < int(s.kernels.size()); ++k) {
            Role role = role_in(s.kernels[k], n, plan);
            if (role == Role::none) continue;
            int score = 0;
            bool fits = true;
            for (int in : n.inputs) {
                if (!computed_in(in, k)) continue;
                // Reading another row's value of this very kernel would race with its loop.
                fits = fits && can_read_inline(s.kernels[k], in, role, n, plan);
                ++score;
            }
            // Joining a kernel that runs before others, when n reads nothing it computes or
            // loads, saves no memory traffic and computes n early: its value would live across
            // those kernels (a backward graph's recomputed activations, all at once).
            if (score == 0 && k + 1 < int(s.kernels.size()) && !shares_a_load(s.kernels[k], n)) continue;
            if (fits && score >= best_score) best = k, best_score = score, best_role = role;
        }
        if (best < 0) {
            if (plan == Plan::reduction) {
                const Shape& in = val(n.inputs[0]).shape;
                RowLoop loop = row_loop(n, in);
                best = new_kernel(KernelKind::row, permuted(in, loop.perm), loop.outer_dims);
                s.kernels[best].perm = loop.perm;
                best_role = Role::per_row;
            } else {
                best = new_kernel(KernelKind::pointwise, n.out.shape, 0);
                best_role = Role::element;
            }
        }
        Kernel& kernel = s.kernels[best];
        if (plan == Plan::reduction && kernel.kind == KernelKind::pointwise) {
            RowLoop loop = row_loop(n, kernel.domain);
            kernel.kind = KernelKind::row;
            kernel.domain = permuted(kernel.domain, loop.perm);
            kernel.outer_dims = loop.outer_dims;
            kernel.perm = loop.perm;
        }
        kernel.nodes.push_back(index);
        for (int in : n.inputs)
            if (info(in).home == Home::inlined && info(in).kernel != best) realize(in);
        s.values[n.out.id] = {Home::inlined, best, best_role == Role::per_row, {}};
    }

    // A reshape of a strided view, when strides can express it (view_strides, PyTorch's rule
    // of Tensor.view, as eager reshape decides): concrete sizes and strides only; otherwise
    // the reshape runs eagerly as before. E.g. one head slice of a packed q/k/v projection,
    // [B, L, 1, H, d] with strides (3LD, 3D, D, d, 1), reshaped to [B, L, H, d].
    static bool strided_regroup(const Shape& from, const Shape& to, std::vector<SizeExpr>& strides) {
        for (int64_t d : from) if (is_symbol(d)) return false;
        for (int64_t d : to) if (is_symbol(d)) return false;
        Shape have;
        for (const SizeExpr& e : strides) {
            if (!e.syms.empty()) return false;
            have.push_back(e.c);
        }
        std::optional<Shape> view = view_strides(from, have, to);
        if (!view) return false;
        strides.clear();
        for (int64_t st : *view) strides.push_back(SizeExpr{st, {}});
        return true;
    }

    // Views become index math over the buffer underneath, by the view rules of
    // tensor/view_rules.h; those index math cannot express (reshaping a non-contiguous view)
    // run eagerly instead, as does contiguous, which copies.
    bool view_access(const LNode& n, const Shape& from, Access& a) {
        const Shape& to = n.out.shape;
        const Attrs& at = n.attrs;
        ViewRule rule = view_rule(n.op, at, from.size(), to.size());
        if (rule.kind == ViewRule::Kind::regroup) {
            if (a.strides == contiguous_stride_exprs(from)) {
                a.strides = contiguous_stride_exprs(to);
                return true;
            }
            return strided_regroup(from, to, a.strides);
        }
        if (rule.kind != ViewRule::Kind::dims || rule.copies) return false;
        std::vector<SizeExpr> strides;
        for (size_t i = 0; i < to.size(); ++i)
            strides.push_back(rule.broadcasts(from, to, i) ? SizeExpr{0, {}}
                                                           : a.strides[size_t(rule.from[i])]);
        if (rule.sliced >= 0) {
            size_t d = size_t(rule.sliced);
            int64_t size = from[d];
            if (is_symbol(size) || at.step <= 0) return false;
            auto clamp = [size](int64_t v) {
                return std::clamp(v < 0 ? v + size : v, int64_t(0), size);
            };
            int64_t start = clamp(at.start);
            a.offset.push_back(SizeExpr{start, {}} * a.strides[d]);
            strides[d] = SizeExpr{at.step, {}} * a.strides[d];
        }
        a.strides = strides;
        return true;
    }

    void place_extern(int index, const LNode& n, KernelKind kind) {
        for (int in : n.inputs) realize(in);
        int k = new_kernel(kind, n.out.shape, 0);
        s.kernels[k].nodes.push_back(index);
        s.values[n.out.id] = {Home::stored, k, false, {n.out.id, contiguous_stride_exprs(n.out.shape), {}}};
    }

    // A `full` read only by nodes that generated kernels compute (not a graph output, not
    // a view's base) is a literal in the kernels that read it (zeros_like(grad) in where's
    // backward, masked_fill's -inf).
    bool is_constant(const LNode& n) {
        if (n.op != OpId::full) return false;
        if (std::find(s.graph.outputs.begin(), s.graph.outputs.end(), n.out.id) != s.graph.outputs.end()) return false;
        for (const LNode& user : s.graph.nodes)
            if (std::find(user.inputs.begin(), user.inputs.end(), n.out.id) != user.inputs.end()) {
                Plan p = plan_for(user);
                if (p != Plan::pointwise && p != Plan::reduction) return false;
            }
        return true;
    }

    void place(int index) {
        const LNode& n = s.graph.nodes[index];
        if (is_constant(n)) {
            s.values[n.out.id] = {Home::constant, -1, false, {-1, {}, {}}};
            return;
        }
        Plan plan = plan_for(n);
        if (plan == Plan::pointwise || plan == Plan::reduction) return place_compute(index, n, plan);
        if (plan == Plan::view && n.inputs.size() == 1) {
            realize(n.inputs[0]);
            ValueInfo base = info(n.inputs[0]);
            if (view_access(n, val(n.inputs[0]).shape, base.access)) {
                s.values[n.out.id] = {Home::view, base.kernel, false, base.access};
                return;
            }
        }
        place_extern(index, n, plan == Plan::blas ? KernelKind::blas : KernelKind::fallback);
        if (plan != Plan::blas) s.kernels.back().why = fallback_reason(n);
    }

    void bind_symbols() {
        std::set<int> used;
        auto collect = [&](const Shape& shape) {
            for (int64_t d : shape)
                if (is_symbol(d)) used.insert(symbol_index(d));
        };
        for (size_t i = 0; i < s.graph.inputs.size(); ++i) {
            const Shape& shape = s.graph.inputs[i].shape;
            for (size_t d = 0; d < shape.size(); ++d)
                if (is_symbol(shape[d])) s.symbol_binding.emplace(symbol_index(shape[d]), std::pair{int(i), int(d)});
        }
        for (const LNode& n : s.graph.nodes) collect(n.out.shape);
        for (int k : used)
            KILN_CHECK(s.symbol_binding.count(k), "codegen: symbol s", k,
                       " is not the size of any input dim, so it cannot be bound at run time");
        s.num_symbols = s.symbol_binding.empty() ? 0 : s.symbol_binding.rbegin()->first + 1;
    }

    void collect_loads() {
        for (size_t k = 0; k < s.kernels.size(); ++k) {
            Kernel& kernel = s.kernels[k];
            if (kernel.kind != KernelKind::pointwise && kernel.kind != KernelKind::row) continue;
            for (int index : kernel.nodes)
                for (int in : s.graph.nodes[index].inputs) {
                    if (computed_in(in, int(k)) || info(in).home == Home::constant) continue;
                    int buffer = info(in).access.buffer;
                    if (std::find(kernel.loads.begin(), kernel.loads.end(), buffer) == kernel.loads.end())
                        kernel.loads.push_back(buffer);
                }
        }
    }

    // A pointwise kernel whose stored values only one later pointwise kernel reads (none
    // returned, none a view's base) is folded into that kernel: its nodes are recomputed
    // for every element there. So batch norm's per-channel rsqrt(var + eps), shape
    // [C, 1, 1], is computed inside the pass over x instead of by a kernel of its own.
    bool fold_small_kernel() {
        for (size_t k1 = 0; k1 < s.kernels.size(); ++k1) {
            const Kernel& small = s.kernels[k1];
            if (small.kind != KernelKind::pointwise || small.stores.empty()) continue;
            std::set<int> stored(small.stores.begin(), small.stores.end());
            int reader = -1;
            bool ok = true;
            for (int id : graph_outputs_) ok = ok && !stored.count(id);
            for (const auto& [id, v] : s.values)
                ok = ok && !(v.home == Home::view && stored.count(v.access.buffer));
            for (size_t k = 0; k < s.kernels.size() && ok; ++k)
                for (int index : s.kernels[k].nodes)
                    for (int in : s.graph.nodes[index].inputs)
                        if (stored.count(in) && int(k) != int(k1)) {
                            ok = ok && (reader < 0 || reader == int(k));
                            reader = int(k);
                        }
            if (!ok || reader < 0 || s.kernels[reader].kind != KernelKind::pointwise) continue;
            Kernel& big = s.kernels[reader];
            big.nodes.insert(big.nodes.end(), small.nodes.begin(), small.nodes.end());
            std::sort(big.nodes.begin(), big.nodes.end());  // node indices are an execution order
            for (int index : small.nodes) s.values[s.graph.nodes[index].out.id] = {Home::inlined, reader, false, {}};
            s.kernels.erase(s.kernels.begin() + long(k1));
            for (auto& [id, v] : s.values)
                if (v.kernel > int(k1)) --v.kernel;
            return true;
        }
        return false;
    }

    void run(const LGraph& graph) {
        s.graph = graph;
        for (const LValue& v : graph.inputs) {
            KILN_CHECK(!s.values.count(v.id), "codegen: value id ", v.id, " defined twice");
            s.values[v.id] = {Home::input, -1, false, {v.id, contiguous_stride_exprs(v.shape), {}}};
        }
        for (size_t i = 0; i < graph.nodes.size(); ++i) {
            int id = graph.nodes[i].out.id;
            KILN_CHECK(!s.values.count(id) && !s.producer.count(id), "codegen: value id ", id, " defined twice");
            s.producer[id] = int(i);
            place(int(i));
        }
        for (int id : graph.outputs) realize(id);
        graph_outputs_ = std::set<int>(graph.outputs.begin(), graph.outputs.end());
        while (fold_small_kernel()) {
        }
        bind_symbols();
        collect_loads();
    }
};

}  // namespace

Schedule schedule(const LGraph& graph) {
    Scheduler scheduler;
    scheduler.run(graph);
    return std::move(scheduler.s);
}

}  // namespace kiln::codegen
