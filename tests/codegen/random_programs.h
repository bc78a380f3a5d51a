// Seeded random programs for differential tests of the code generators (CPU and CUDA):
// pointwise, reduction, broadcast and view ops recorded as jit Graphs whose inputs need grad.
#pragma once
#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "jit/aot/aot.h"
#include "jit/graph.h"
#include "kiln.h"
#include "tensor/reductions.h"

namespace kiln_test {
using namespace kiln;

// Records ops into a jit::GraphBuilder while running them eagerly for their shapes.
struct Recorder {
    jit::GraphBuilder b;
    std::vector<Tensor> value;  // per builder id

    int input(const Tensor& t, const std::string& name) {
        int id = b.placeholder(name, jit::meta_of(t), "argument");
        value.resize(id + 1);
        value[id] = t;
        return id;
    }
    int call(OpId op, std::vector<int> args, const Attrs& attrs = {}) {
        std::vector<Tensor> in;
        for (int a : args) in.push_back(value[a]);
        Tensor out = dispatch_eager(op, in, attrs);
        int id = b.call(op, attrs, std::move(args), out, true);
        value.resize(id + 1);
        value[id] = out;
        return id;
    }
    const Shape& shape(int id) const { return value[id].shape(); }
};

struct Program {
    std::shared_ptr<const jit::Graph> graph;
    std::vector<Tensor> inputs;  // require grad
};

class ProgramGenerator {
   public:
    explicit ProgramGenerator(uint32_t seed) : rng_(seed) {}

    Program make() {
        static const std::vector<Shape> shapes = {{37}, {8, 16}, {3, 5, 7}, {16, 33}, {2, 1, 9}, {4, 8, 8}};
        Recorder r;
        Program p;
        Shape base = shapes[pick(shapes.size())];
        p.inputs.push_back(example(base));
        int current = r.input(p.inputs.back(), "x");
        std::vector<int> outs;
        int steps = 2 + int(pick(4));
        for (int step = 0; step < steps; ++step) {
            double u = uniform();
            if (u < 0.35) current = unary(r, current);
            else if (u < 0.6) current = binary(r, p, current);
            else if (u < 0.72) current = scalar(r, current);
            else if (u < 0.86) current = reduction(r, current);
            else if (r.shape(current).size() >= 2 && uniform() < 0.5) current = linear(r, p, current);
            else current = view(r, current);
            if (uniform() < 0.15) outs.push_back(current);  // an intermediate leaves too
        }
        outs.push_back(current);
        p.graph = r.b.build(outs);
        return p;
    }

   private:
    std::mt19937 rng_;

    size_t pick(size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng_); }
    double uniform() { return std::uniform_real_distribution<double>(0, 1)(rng_); }

    // v @ W^T (+ b): a Linear, whose matmul the next steps' pointwise ops follow as its
    // epilogue (codegen/epilogue.cpp); in the backward, grad @ W and x^T @ grad.
    int linear(Recorder& r, Program& p, int v) {
        int64_t n = uniform() < 0.5 ? 8 : 17;
        p.inputs.push_back((example({n, r.shape(v).back()}) * 0.3).detach().requires_grad_());
        int w = r.input(p.inputs.back(), "w");
        int out = r.call(OpId::matmul, {v, r.call(OpId::permute, {w}, {.dims = {1, 0}})});
        if (uniform() < 0.5) return out;
        p.inputs.push_back(example({n}));
        return r.call(OpId::add, {out, r.input(p.inputs.back(), "b")});
    }

    // randn * 2, sometimes with a NaN or an inf planted, as leaves that need grad.
    Tensor example(const Shape& shape) {
        Tensor t = randn(shape) * 2.0;
        if (uniform() < 0.05) {
            std::vector<float> v = t.to_vector<float>();
            v[pick(v.size())] = uniform() < 0.5 ? NAN : INFINITY;
            t = tensor(v, shape);
        }
        return t.requires_grad_();
    }

    int positive(Recorder& r, int v) { return r.call(OpId::add, {r.call(OpId::abs, {v})}, {.scalar = 1.0, .scalar_pos = ScalarPos::right}); }
    // v moved into the domain of op's operand `arg` (tensor/ops.def's domain column).
    int in_domain(Recorder& r, OpId op, int arg, int v) {
        Domain d = op_info(op).domain[arg];
        KILN_CHECK(d == Domain::any || d == Domain::positive || d == Domain::nonzero, op_name(op),
                   ": random programs have no sampler for domain ", domain_name(d));
        return d == Domain::any ? v : positive(r, v);
    }

    int unary(Recorder& r, int v) {
        static const OpId plain[] = {OpId::neg, OpId::sin, OpId::cos, OpId::tanh, OpId::sigmoid, OpId::relu, OpId::abs};
        switch (pick(6)) {
            case 0: return r.call(OpId::exp, {r.call(OpId::tanh, {v})});
            case 1:
                return r.call(OpId::sqrt, {in_domain(r, OpId::sqrt, 0, v)});
            case 2:  // log(<0): NaN like eager
                return r.call(OpId::log, {uniform() < 0.3 ? v : in_domain(r, OpId::log, 0, v)});
            case 3: return r.call(OpId::exp, {v});  // may overflow to inf
            default: return r.call(plain[pick(std::size(plain))], {v});
        }
    }

    // A second operand that broadcasts against v: some dims 1, maybe fewer leading dims.
    int binary(Recorder& r, Program& p, int v) {
        Shape s = r.shape(v);
        for (int64_t& d : s)
            if (uniform() < 0.3) d = 1;
        while (s.size() > 1 && uniform() < 0.3) s.erase(s.begin());
        p.inputs.push_back(example(s));
        int other = r.input(p.inputs.back(), "y" + std::to_string(p.inputs.size() - 1));
        bool swap = uniform() < 0.5;
        int a = swap ? other : v, b = swap ? v : other;
        switch (pick(6)) {
            case 0: return r.call(OpId::add, {a, b});
            case 1: return r.call(OpId::sub, {a, b});
            case 2: return r.call(OpId::mul, {a, b});
            case 3: return r.call(OpId::maximum, {a, b});
            default:
                return r.call(OpId::div, {v, in_domain(r, OpId::div, 1, other)});
        }
    }

    int scalar(Recorder& r, int v) {
        ScalarPos side = uniform() < 0.5 ? ScalarPos::left : ScalarPos::right;
        double s = std::round(uniform() * 40.0 - 20.0) / 8.0;
        static const OpId ops[] = {OpId::add, OpId::sub, OpId::mul};
        if (uniform() < 0.2) return r.call(OpId::div, {v}, {.scalar = s == 0 ? 3.0 : s, .scalar_pos = ScalarPos::right});
        return r.call(ops[pick(3)], {v}, {.scalar = s, .scalar_pos = side});
    }

    // Over the trailing dims, often consumed row-wise (x - max(x)), as softmax does; or over
    // any other dims (batch norm's (0, 2, 3), a bias gradient's 0), consumed the same way.
    int reduction(Recorder& r, int v) {
        const Shape& shape = r.shape(v);
        if (shape.empty()) return unary(r, v);
        Shape dims = {-1};
        if (shape.size() >= 2 && uniform() < 0.3) dims = {-2, -1};
        if (uniform() < 0.5) dims = any_dims(shape.size());
        bool keepdim = uniform() < 0.6;
        static const std::vector<OpId> ops = reduction_ops();  // tensor/reductions.def
        int reduced = r.call(ops[pick(ops.size())], {v}, {.dims = dims, .keepdim = keepdim});
        if (keepdim && uniform() < 0.7) return r.call(OpId::sub, {v, reduced});
        return reduced;
    }

    // A random non-empty set of dims of a rank-`rank` value, in random order and sign.
    Shape any_dims(size_t rank) {
        Shape dims;
        for (int64_t d = 0; d < int64_t(rank); ++d)
            if (uniform() < 0.5) dims.push_back(uniform() < 0.5 ? d : d - int64_t(rank));
        if (dims.empty()) dims.push_back(int64_t(pick(rank)));
        std::shuffle(dims.begin(), dims.end(), rng_);
        return dims;
    }

    int view(Recorder& r, int v) {
        Shape shape = r.shape(v);
        if (shape.size() < 2) {
            if (shape.empty() || shape[0] < 2) return unary(r, v);
            return r.call(OpId::slice, {v}, {.dim = 0, .start = 1, .end = shape[0], .step = 1 + int64_t(pick(2))});
        }
        int64_t rank = int64_t(shape.size());
        switch (pick(6)) {
            case 0: {  // swap the last two dims
                Shape dims;
                for (int64_t d = 0; d < rank; ++d) dims.push_back(d);
                std::swap(dims[rank - 1], dims[rank - 2]);
                return r.call(OpId::permute, {v}, {.dims = dims});
            }
            case 1: return r.call(OpId::reshape, {v}, {.shape = {shape_numel(shape)}});
            case 2: {  // merge the leading dims (of a strided view: index math only where they chain)
                int64_t last = shape.back();
                return r.call(OpId::reshape, {v}, {.shape = {shape_numel(shape) / std::max<int64_t>(last, 1), last}});
            }
            case 4: {  // the last dim cut in two halves, combined: its gradient is one cat
                int64_t last = shape.back();
                if (last < 2 || last % 2) return unary(r, v);
                int lo = r.call(OpId::slice, {v}, {.dim = -1, .start = 0, .end = last / 2, .step = 1});
                int hi = r.call(OpId::slice, {v}, {.dim = -1, .start = last / 2, .end = last, .step = 1});
                return r.call(OpId::mul, {r.call(OpId::sin, {lo}), hi});
            }
            case 3: {  // split the last dim in two, or add a size-1 dim before it
                Shape to(shape.begin(), shape.end() - 1);
                int64_t last = shape.back();
                if (last % 2 == 0 && last > 0) to.insert(to.end(), {2, last / 2});
                else to.insert(to.end(), {1, last});
                return r.call(OpId::reshape, {v}, {.shape = to});
            }
            default: {  // a keepdim row value broadcast back over its row
                int reduced = r.call(OpId::sum, {v}, {.dims = {-1}, .keepdim = true});
                return r.call(OpId::expand, {reduced}, {.shape = shape});
            }
        }
    }
};

// Eager autograd's outputs and input gradients for tangents on the outputs that take one.
struct Reference {
    std::vector<Tensor> outputs, grads;
};
inline Reference eager_reference(const Program& p, const jit::aot::AotPlan& plan, const std::vector<Tensor>& tangents) {
    Reference ref;
    ref.outputs = jit::interpret(*p.graph, p.inputs);  // through dispatch(): the tape records
    Tensor total;
    for (size_t t = 0; t < tangents.size(); ++t) {
        Tensor term = (ref.outputs[plan.tangent_outputs[t]] * tangents[t]).sum();
        total = total.defined() ? total + term : term;
    }
    for (Tensor x : p.inputs) x.zero_grad();
    if (total.defined()) total.backward();
    for (const Tensor& x : p.inputs) ref.grads.push_back(x.grad());
    return ref;
}

// The same program in float64 (inputs and tangents widened, inputs optionally scaled by
// 1 + `nudge`): the arbiter when compiled and eager float32 disagree. Both are float32
// evaluations in different orders (the compiled backward factors and fuses), and where the
// function is ill-conditioned (cos(exp(x)) for x near 8: exp(x) ~ 3e3, whose float32 ulp
// moves cos by ~1e-4) each lands off the exact value by more than 1e-4. Compiled code then
// counts as right if its distance from float64 is within eager's distance plus what a
// one-ulp change of the inputs does to the exact result (the function's own sensitivity).
inline Reference exact_reference(const Program& p, const jit::aot::AotPlan& plan, const std::vector<Tensor>& tangents,
                          double nudge = 0) {
    Program wide{p.graph, {}};
    for (const Tensor& x : p.inputs)
        wide.inputs.push_back((x.detach().to(DType::float64) * (1.0 + nudge)).detach().requires_grad_(x.requires_grad()));
    std::vector<Tensor> wide_tangents;
    for (const Tensor& t : tangents) wide_tangents.push_back(t.to(DType::float64));
    return eager_reference(wide, plan, wide_tangents);
}

}  // namespace kiln_test
