// channels_last(): the NHWC rewrite of a CPU graph's convolutions and the ops between them
// (channels_last.h). One walk in execution order: each node either runs on NHWC values (its
// output keeps its id with the NHWC shape) or on NCHW ones (its operands converted back on
// demand, once per value).
#include "codegen/channels_last.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>
#include <string_view>

#include "tensor/parallel.h"

namespace kiln::codegen {
namespace {

const Shape kToNhwc{0, 2, 3, 1}, kToNchw{0, 3, 1, 2};

Shape permuted(const Shape& s, const Shape& p) {
    Shape out;
    for (int64_t d : p) out.push_back(s[size_t(d)]);
    return out;
}

// Whether permuting `s` by `p` keeps the memory order: only dims of size 1 move (a symbol is
// never 1). Then the permute is a reshape.
bool same_order(const Shape& s, const Shape& p) {
    int64_t last = -1;
    for (int64_t d : p) {
        if (s[size_t(d)] == 1) continue;
        if (d < last) return false;
        last = d;
    }
    return true;
}

// KILN_CONV_NHWC: 0 off, 1 (default) for graphs with a large enough activation, always.
std::string_view mode() {
    const char* e = std::getenv("KILN_CONV_NHWC");
    std::string_view v = e ? e : "1";
    KILN_CHECK(v == "0" || v == "1" || v == "always",
               "KILN_CONV_NHWC: expected 0, 1 or always, got '", v, "'");
    return v;
}

// The rewrite pays where the reorders it saves are large: ResNet-18 224x224's training step
// (its largest conv activation 6.4M elements) took 0.89-1.39x less time with it, 32x32's
// (131K) 1.3x more (docs/perf-models.md, "Channels-last training graphs"). A graph with
// symbolic sizes keeps NCHW.
constexpr int64_t kMinActivation = int64_t(1) << 20;  // elements

bool is_conv(OpId op) {
    return op == OpId::conv2d || op == OpId::conv2d_input_grad || op == OpId::conv2d_weight_grad;
}

// The conv nodes the rewrite takes: float32 with 4-D activations.
bool convertible_conv(const LNode& n, const std::map<int, LValue>& values) {
    if (!is_conv(n.op) || n.out.dtype != DType::float32 || n.inputs.size() < 2) return false;
    for (int v : n.inputs)
        if (values.at(v).dtype != DType::float32) return false;
    return values.at(n.inputs[0]).shape.size() == 4 && n.out.shape.size() == 4;
}

class Rewriter {
   public:
    explicit Rewriter(const LGraph& g) : in_(g) {
        for (const LValue& v : g.inputs) {
            values_[v.id] = v;
            next_id_ = std::max(next_id_, v.id + 1);
            if (v.shape.size() == 4 && v.dtype == DType::float32) inputs4_.insert(v.id);
        }
        for (size_t i = 0; i < g.nodes.size(); ++i) {
            values_[g.nodes[i].out.id] = g.nodes[i].out;
            producer_[g.nodes[i].out.id] = i;
            next_id_ = std::max(next_id_, g.nodes[i].out.id + 1);
        }
        nchw_ = values_;  // the NCHW (original) shape of every value
    }

    ChannelsLast run(LGraph& out) {
        out.device = in_.device;
        out.inputs = in_.inputs;
        for (const LNode& n : in_.nodes) {
            if (convertible_conv(n, values_))
                convert_conv(n);
            else if (pointwise_on_nhwc(n))
                convert_pointwise(n);
            else if (!reduce_on_nhwc(n)) {
                LNode copy = n;
                for (int& v : copy.inputs) v = as_nchw(v);
                emit(std::move(copy));
            }
        }
        for (int id : in_.outputs) out.outputs.push_back(returned(id));
        out.nodes = std::move(nodes_);
        return stats_;
    }

   private:
    const LGraph& in_;
    std::map<int, LValue> values_;  // id -> the value as the new graph has it
    std::map<int, LValue> nchw_;    // id -> the value as the old graph had it
    std::map<int, size_t> producer_;
    std::set<int> inputs4_, nhwc_;
    std::map<int, int> to_nchw_, to_nhwc_, returned_;  // id -> its converted copy's id
    std::vector<LNode> nodes_;
    int next_id_ = 0;
    ChannelsLast stats_;

    int emit(LNode n) {
        values_[n.out.id] = n.out;
        nodes_.push_back(std::move(n));
        return nodes_.back().out.id;
    }
    LValue fresh(const LValue& like, Shape shape) {
        return {next_id_++, std::move(shape), like.dtype, like.name};
    }
    // One node of `op` reading `from`, its output `shape`; a layout change, counted.
    int layout_op(int from, const Shape& perm, const Shape& shape, bool host = false) {
        const LValue& v = values_.at(from);
        LNode n{OpId::permute, {}, {from}, fresh(v, shape)};
        if (same_order(v.shape, perm)) {
            n.op = OpId::reshape;
            n.attrs.shape = shape;
        } else {
            n.attrs.dims = perm;
            n.attrs.keepdim = host;
            ++stats_.layout_ops;
        }
        return emit(std::move(n));
    }

    // The NCHW value of `id` (itself unless it is NHWC), for readers: one contiguous copy the
    // host makes, however many read it.
    int as_nchw(int id) {
        if (!nhwc_.count(id)) return id;
        if (auto it = to_nchw_.find(id); it != to_nchw_.end()) return it->second;
        return to_nchw_[id] = layout_op(id, kToNchw, nchw_.at(id).shape, true);
    }
    // ... returned: the channels-last view, no copy.
    int returned(int id) {
        if (!nhwc_.count(id)) return id;
        if (auto it = returned_.find(id); it != returned_.end()) return it->second;
        return returned_[id] = layout_op(id, kToNchw, nchw_.at(id).shape);
    }

    // The NHWC value of `id`, a 4-D value.
    int as_nhwc(int id) {
        if (nhwc_.count(id)) return id;
        if (auto it = to_nhwc_.find(id); it != to_nhwc_.end()) return it->second;
        const LValue& v = values_.at(id);
        Shape shape = permuted(v.shape, kToNhwc);
        int made = -1;
        auto p = producer_.find(id);
        const LNode* n = p == producer_.end() ? nullptr : &in_.nodes[p->second];
        if (n && n->op == OpId::full) {  // a constant: made in the NHWC shape
            LNode f = *n;
            f.attrs.shape = shape;
            f.out = fresh(v, shape);
            made = emit(std::move(f));
        } else if (n && n->op == OpId::expand) {  // a broadcast: of the NHWC operand
            LNode e = *n;
            e.inputs = {operand(n->inputs[0], 4)};
            e.attrs.shape = shape;
            e.out = fresh(v, shape);
            made = emit(std::move(e));
        } else {
            made = layout_op(id, kToNhwc, shape, true);
        }
        return to_nhwc_[id] = made;
    }

    // Operand `id` of a pointwise node of rank `rank` (4) that runs on NHWC: broadcast from
    // the right, so a lower-rank operand is seen as 4-D with leading 1s first.
    int operand(int id, size_t rank) {
        const LValue& v = values_.at(id);
        if (v.shape.empty() || nhwc_.count(id)) return id;
        if (v.shape.size() == rank) return as_nhwc(id);
        Shape four(rank - v.shape.size(), 1);
        four.insert(four.end(), v.shape.begin(), v.shape.end());
        if (same_order(four, kToNhwc)) {
            auto key = to_nhwc_.find(id);
            if (key != to_nhwc_.end()) return key->second;
            LNode r{OpId::reshape, {}, {id}, fresh(v, permuted(four, kToNhwc))};
            r.attrs.shape = r.out.shape;
            return to_nhwc_[id] = emit(std::move(r));
        }
        LNode r{OpId::reshape, {}, {id}, fresh(v, four)};
        r.attrs.shape = four;
        int r_id = emit(std::move(r));
        int made = layout_op(r_id, kToNhwc, permuted(four, kToNhwc));
        return to_nhwc_[id] = made;
    }

    void convert_conv(const LNode& n) {
        LNode c = n;
        c.attrs.keepdim = true;
        if (n.op == OpId::conv2d_weight_grad) {
            c.inputs = {as_nhwc(n.inputs[0]), as_nhwc(n.inputs[1])};
        } else {
            c.inputs[0] = as_nhwc(n.inputs[0]);  // the input, or the output gradient
            c.out.shape = permuted(n.out.shape, kToNhwc);
            nhwc_.insert(n.out.id);
        }
        emit(std::move(c));
        ++stats_.convs;
    }

    bool pointwise_on_nhwc(const LNode& n) const {
        if (op_info(n.op).kind != OpKind::pointwise || n.out.shape.size() != 4) return false;
        for (int v : n.inputs)
            if ((nhwc_.count(v) || inputs4_.count(v)) && nchw_.at(v).shape == n.out.shape)
                return true;
        return false;
    }

    void convert_pointwise(const LNode& n) {
        LNode p = n;
        for (int& v : p.inputs) v = operand(v, 4);
        p.out.shape = permuted(n.out.shape, kToNhwc);
        nhwc_.insert(n.out.id);
        emit(std::move(p));
        ++stats_.nodes;
    }

    // A reduction of an NHWC value: emitted on it when its result can be had (returns false
    // to leave it to the NCHW path).
    bool reduce_on_nhwc(const LNode& n) {
        if (op_info(n.op).kind != OpKind::reduction || n.inputs.size() != 1 ||
            !(nhwc_.count(n.inputs[0]) || inputs4_.count(n.inputs[0])))
            return false;
        const Shape where{0, 3, 1, 2};  // NCHW dim d is NHWC dim where[d]
        std::set<int64_t> reduced;      // NCHW dims
        for (int64_t d : n.attrs.dims) reduced.insert(d < 0 ? d + 4 : d);
        if (n.attrs.dims.empty()) reduced = {0, 1, 2, 3};
        if (!n.attrs.keepdim) {  // the kept dims must keep their order
            int64_t last = -1;
            for (int64_t d = 0; d < 4; ++d) {
                if (reduced.count(d)) continue;
                if (where[size_t(d)] < last) return false;
                last = where[size_t(d)];
            }
        }
        std::set<int64_t> dims;
        for (int64_t d : reduced) dims.insert(where[size_t(d)]);
        LNode r = n;
        r.inputs = {as_nhwc(n.inputs[0])};
        r.attrs.dims.assign(dims.begin(), dims.end());
        if (n.attrs.dims.empty()) r.attrs.dims.clear();
        if (n.attrs.keepdim) {
            r.out.shape = permuted(n.out.shape, kToNhwc);
            nhwc_.insert(n.out.id);
        }
        emit(std::move(r));
        ++stats_.nodes;
        return true;
    }
};

}  // namespace

std::string ChannelsLast::note() const {
    if (convs == 0) return "";
    return "channels-last: " + std::to_string(convs) + " convolutions and " +
           std::to_string(nodes) + " ops on NHWC values, " + std::to_string(layout_ops) +
           " layout changes";
}

ChannelsLast channels_last(LGraph& graph) {
    // Without oneDNN's convolutions (KILN_CONV=im2col, a build without it) NHWC buys nothing.
    if (graph.device.type != DeviceType::cpu || !detail::conv_onednn_enabled()) return {};
    std::string_view m = mode();
    if (m == "0") return {};
    std::map<int, LValue> values;
    for (const LValue& v : graph.inputs) values[v.id] = v;
    for (const LNode& n : graph.nodes) values[n.out.id] = n.out;
    int64_t largest = -1;  // elements of the largest conv activation; -1: no conv
    bool symbolic = false;
    for (const LNode& n : graph.nodes) {
        if (!convertible_conv(n, values)) continue;
        const Shape* shapes[] = {
            &values.at(n.inputs[0]).shape,  // the activations
            n.op == OpId::conv2d_weight_grad ? &values.at(n.inputs[1]).shape : &n.out.shape};
        for (const Shape* s : shapes) {
            symbolic = symbolic || std::any_of(s->begin(), s->end(), is_symbol);
            largest = std::max(largest, shape_numel(*s));
        }
    }
    if (largest < 0) return {};
    // At 2 threads the tiled NHWC batch-norm kernels split the channels of each cache line
    // between threads and the step measured 1.15-1.3x slower than NCHW (whose rows split
    // cleanly), though oneDNN's share fell 461 -> 323 ms: kiln's thread count when the graph
    // compiles decides (docs/perf-models.md, "Channels-last training graphs").
    if (m != "always" && (symbolic || largest < kMinActivation || num_threads() > 1)) return {};
    LGraph out;
    ChannelsLast stats = Rewriter(graph).run(out);
    graph = std::move(out);
    return stats;
}

}  // namespace kiln::codegen
