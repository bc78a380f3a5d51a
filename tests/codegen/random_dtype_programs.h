// Seeded random programs over every dtype the code generators take (float32, float64,
// int64, bool): comparisons, where, casts, type promotion between operands and with
// scalars, and reductions of every dtype over any dims. Forward only (the inputs need no grad);
// every output is checked against eager by the tests that build them (CPU run, CUDA compile).
#pragma once
#include "random_programs.h"

namespace kiln_test {
using namespace kiln;

class DtypeProgramGenerator {
   public:
    explicit DtypeProgramGenerator(uint32_t seed) : rng_(seed) {}

    Program make() {
        static const std::vector<Shape> shapes = {{37},     {8, 16},   {3, 5, 7},
                                                  {16, 33}, {2, 1, 9}, {4, 8, 8}};
        Recorder r;
        Program p;
        Shape base = shapes[pick(shapes.size())];
        int current = input(r, p, base, random_dtype());
        std::vector<int> outs;
        int steps = 2 + int(pick(5));
        for (int step = 0; step < steps; ++step) {
            double u = uniform();
            if (u < 0.15)
                current = unary(r, current);
            else if (u < 0.35)
                current = binary(r, p, current);
            else if (u < 0.45)
                current = scalar(r, current);
            else if (u < 0.6)
                current = compare(r, p, current);
            else if (u < 0.75)
                current = where(r, p, current);
            else if (u < 0.87)
                current = cast(r, current, random_dtype());
            else
                current = reduction(r, current);
            if (uniform() < 0.2) outs.push_back(current);  // an intermediate leaves too
        }
        outs.push_back(current);
        p.graph = r.b.build(outs);
        return p;
    }

   private:
    std::mt19937 rng_;

    size_t pick(size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng_); }
    double uniform() { return std::uniform_real_distribution<double>(0, 1)(rng_); }
    DType random_dtype() {
        static const DType all[] = {DType::float32, DType::float32, DType::float64, DType::int64,
                                    DType::boolean};
        return all[pick(std::size(all))];
    }
    DType dtype(const Recorder& r, int v) const { return r.value[v].dtype(); }

    // Small integers as int64 (ties and equalities are common), randn * 2 as floats.
    int input(Recorder& r, Program& p, const Shape& shape, DType dt) {
        Tensor t = dt == DType::int64     ? randint(-4, 5, shape)
                   : dt == DType::boolean ? randn(shape) > 0.0
                                          : (randn(shape) * 2.0).to(dt);
        p.inputs.push_back(t);
        return r.input(t, "in" + std::to_string(p.inputs.size() - 1));
    }

    // A shape that broadcasts against `shape`: some dims 1, maybe fewer leading dims.
    Shape broadcast_shape(Shape s) {
        for (int64_t& d : s)
            if (uniform() < 0.3) d = 1;
        while (!s.empty() && uniform() < 0.2) s.erase(s.begin());
        return s;
    }

    int unary(Recorder& r, int v) {
        static const OpId ops[] = {OpId::neg,  OpId::abs,     OpId::relu,
                                   OpId::sign, OpId::sigmoid, OpId::tanh};
        if (dtype(r, v) == DType::boolean)
            v = cast(r, v, DType::int64);  // neg of bool is an eager error
        return r.call(ops[pick(std::size(ops))], {v});
    }

    int binary(Recorder& r, Program& p, int v) {
        int other = input(r, p, broadcast_shape(r.shape(v)), random_dtype());
        if (dtype(r, v) == DType::boolean) v = cast(r, v, DType::float32);
        if (dtype(r, other) == DType::boolean) other = cast(r, other, DType::int64);
        bool swap = uniform() < 0.5;
        int a = swap ? other : v, b = swap ? v : other;
        static const OpId ops[] = {OpId::add, OpId::sub, OpId::mul, OpId::maximum, OpId::minimum};
        if (uniform() < 0.15)
            return r.call(OpId::div, {a, r.call(OpId::add, {r.call(OpId::abs, {b})},
                                                {.scalar = 1.0, .scalar_pos = ScalarPos::right})});
        return r.call(ops[pick(std::size(ops))], {a, b});
    }

    // Integral scalars keep int64 values int64; fractional ones promote them to float32.
    int scalar(Recorder& r, int v) {
        if (dtype(r, v) == DType::boolean) v = cast(r, v, DType::int64);
        double s =
            uniform() < 0.5 ? double(int(pick(7)) - 3) : std::round(uniform() * 40.0 - 20.0) / 8.0;
        static const OpId ops[] = {OpId::add, OpId::sub, OpId::mul};
        ScalarPos side = uniform() < 0.5 ? ScalarPos::left : ScalarPos::right;
        return r.call(ops[pick(3)], {v}, {.scalar = s, .scalar_pos = side});
    }

    int compare(Recorder& r, Program& p, int v) {
        static const OpId ops[] = {OpId::lt, OpId::le, OpId::gt, OpId::ge, OpId::eq, OpId::ne};
        OpId op = ops[pick(std::size(ops))];
        if (uniform() < 0.4)
            return r.call(op, {v},
                          {.scalar = double(int(pick(3)) - 1) * (uniform() < 0.5 ? 1.0 : 0.5),
                           .scalar_pos = ScalarPos::right});
        return r.call(op, {v, input(r, p, broadcast_shape(r.shape(v)), random_dtype())});
    }

    // where(cond, a, b) with a mask of any origin, and a 0-d branch now and then: an input or
    // masked_fill's value.
    // masked_fill's value: a 0-d `full` (a literal in generated kernels), -inf now and then.
    int fill(Recorder& r, int v) {
        double value = uniform() < 0.3 ? -INFINITY : double(int(pick(5)) - 2);
        DType dt = is_floating(dtype(r, v)) ? dtype(r, v) : DType::float32;
        return r.call(OpId::full, {}, {.shape = {}, .scalar = value, .dtype = dt});
    }

    int where(Recorder& r, Program& p, int v) {
        int cond = dtype(r, v) == DType::boolean
                       ? v
                       : r.call(OpId::gt, {v}, {.scalar = 0.0, .scalar_pos = ScalarPos::right});
        int other = uniform() < 0.3
                        ? fill(r, v)
                        : input(r, p, uniform() < 0.3 ? Shape{} : broadcast_shape(r.shape(v)),
                                random_dtype());
        int value = dtype(r, v) == DType::boolean ? input(r, p, r.shape(v), random_dtype()) : v;
        bool swap = uniform() < 0.5;
        return r.call(OpId::where, {cond, swap ? other : value, swap ? value : other});
    }

    int cast(Recorder& r, int v, DType to) {
        if (dtype(r, v) == to) return v;
        if (is_floating(dtype(r, v)) && to == DType::int64)
            v = r.call(OpId::mul, {v}, {.scalar = 3.0, .scalar_pos = ScalarPos::right});
        return r.call(OpId::cast, {v}, {.dtype = to});
    }

    // Reductions of every dtype over any dims (sum of int64 or bool: int64; amax/amin keep
    // the dtype); values are sometimes cast first. A result that is not bool, kept with
    // keepdim, is often consumed row-wise.
    int reduction(Recorder& r, int v) {
        if (uniform() < 0.3) v = cast(r, v, random_dtype());
        const Shape& shape = r.shape(v);
        if (shape.empty()) return unary(r, v);
        bool keepdim = uniform() < 0.6;
        Shape dims = {-1};
        if (uniform() < 0.6) {  // any non-empty set of dims, or (empty) all of them
            dims.clear();
            for (int64_t d = 0; d < int64_t(shape.size()); ++d)
                if (uniform() < 0.5) dims.push_back(d);
        }
        static const std::vector<OpId> ops = reduction_ops();  // tensor/reductions.def
        int reduced = r.call(ops[pick(ops.size())], {v}, {.dims = dims, .keepdim = keepdim});
        if (keepdim && dtype(r, reduced) != DType::boolean && uniform() < 0.7)
            return r.call(OpId::sub, {v, reduced});
        return reduced;
    }
};

// Compiled vs eager for any dtype: the same dtype and shape, NaN at the same places, and
// |a - b| / (|b| + 1) within tol (bool and int64 values are compared as exact numbers).
inline double dtype_error(const Tensor& got, const Tensor& want) {
    if (got.dtype() != want.dtype() || got.shape() != want.shape()) return INFINITY;
    std::vector<double> a = got.contiguous().to(DType::float64).to_vector<double>();
    std::vector<double> b = want.contiguous().to(DType::float64).to_vector<double>();
    double worst = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        if (std::isnan(b[i]) || std::isinf(b[i])) {
            if (!(std::isnan(b[i]) ? std::isnan(a[i]) : a[i] == b[i])) return INFINITY;
            continue;
        }
        worst = std::max(worst, std::abs(a[i] - b[i]) / (std::abs(b[i]) + 1.0));
    }
    return worst;
}

}  // namespace kiln_test
