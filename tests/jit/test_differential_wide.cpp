// A second differential tester of compile() against eager, drawing the program classes the
// first one (test_differential.cpp) never drew: random ops before and after breaks (some
// unused), the generator's offset compared after every call, arguments in several layouts
// (transposed, offset slice, step slice, stride-0 expand), float64/int64/bool values and
// casts feeding compares, where() and branch conditions, broadcast operands, rows in the
// thousands (split reductions), outputs that alias arguments, and five calls per program
// (record; the same tensors refilled in place; new tensors; a new size; refilled again)
// with backward after each. Outputs (values, dtype, requires_grad, aliasing with the
// arguments), argument mutations, exceptions and input gradients must equal eager's.
//
// KILN_FUZZ_PROGRAMS=N (default 150), KILN_FUZZ_SEED, KILN_FUZZ_DEVICE=cuda (GPU machine).
#include <boost/test/unit_test.hpp>

#include <cstdlib>
#include <iostream>
#include <random>
#include <sstream>

#include "kiln.h"
#include "tests/jit/fuzz_env.h"
#include "tensor/cuda.h"

using namespace kiln;
using kiln_test::fuzz_count;
using kiln_test::seed_offset;

namespace {

enum class Ins {
    unary,       // float op of a register
    binary,      // two registers, or a register and the broadcast row
    cast_where,  // an int64/bool cast of exact values feeding a compare and where()
    random,      // randn_like / rand, used or not
    rowsum,      // a reduction over the last dim (long rows: split work)
    colsum,      // over the first dim
    branch,      // a data-dependent branch on an exact (integer) condition
    item,        // a value read into C++ (a re-run entry)
    arg_add_,    // an in-place write into an argument
    output,      // an extra output
    return_arg,  // returns an argument (or a view of it) as an output
    library,     // softmax, log_softmax, amax, argmax, clamp, matmul, attention
    last = library
};

struct Step {
    Ins ins;
    int a = 0, b = 0, k = 0;
    double s = 1;
};

enum class Layout { contiguous, transposed, offset_slice, step_slice, expanded };

struct Program {
    std::vector<Step> steps;
    bool grad = false;
    DType dtype = float32;
    Layout layout = Layout::contiguous;
    int64_t cols = 5;
    int64_t rows[2] = {4, 6};  // recorded size, the new size
};

// Registers hold [rows, cols] values of the program's dtype; `row` is a broadcast [cols].
std::vector<Tensor> run(const Program& p, Tensor x, Tensor y, Tensor row) {
    std::vector<Tensor> r{x, y}, outs;
    auto reg = [&](int i) -> Tensor& { return r[size_t(i) % r.size()]; };
    for (const Step& st : p.steps) {
        switch (st.ins) {
            case Ins::unary: {
                static Tensor (*const ops[])(const Tensor&) = {kiln::sin, kiln::tanh, kiln::exp, kiln::relu, kiln::sigmoid, kiln::abs};
                r.push_back(ops[st.k % 6](reg(st.a) * 0.5));
                break;
            }
            case Ins::binary: {
                const Tensor& u = reg(st.a);
                const Tensor& v = st.k % 2 ? row : reg(st.b);
                r.push_back(st.k % 3 == 0 ? u + v : st.k % 3 == 1 ? u * v : maximum(u, v));
                break;
            }
            case Ins::cast_where: {
                // Casts read only exact values (arguments times powers of two), so fused and
                // unfused code round them the same way.
                const Tensor& src = st.a % 2 ? x : y;
                Tensor scaled = src * 4.0;
                Tensor cond;
                switch (st.k % 4) {
                    case 0: cond = scaled.to(DType::int64) > 0.0; break;
                    case 1: cond = scaled.to(DType::int64) == (row * 4.0).to(DType::int64); break;
                    case 2: cond = (scaled.to(DType::int64) + 1).to(DType::boolean) ; break;
                    case 3: cond = ne(scaled.to(DType::boolean), (row > 0.0)); break;
                }
                const Tensor& other = st.b % 2 ? row : reg(st.b);
                Tensor w = where(cond, reg(st.a), other);
                if (st.s > 0) w = w + cond.to(p.dtype) * st.s;
                r.push_back(w);
                if (st.b % 3 == 0) outs.push_back(cond);  // a bool output
                if (st.b % 3 == 1) outs.push_back(scaled.to(DType::int64).sum({-1}));  // an int64 one
                break;
            }
            case Ins::random: {
                Tensor d = st.k % 2 ? randn_like(reg(st.a)) : rand({reg(st.a).size(0), p.cols}, {.dtype = p.dtype, .device = x.device()});
                if (st.k % 3 != 0) r.push_back(reg(st.a) + d * 0.25);  // else unused: the stream still moves
                break;
            }
            case Ins::rowsum: r.push_back(reg(st.a) - reg(st.a).sum({-1}, true) * 0.1); break;
            case Ins::colsum: r.push_back(reg(st.a) * 0.5 + reg(st.b).mean({0}, true)); break;
            case Ins::branch: {
                Tensor count = ((reg(st.a % 2) * 4.0).to(DType::int64) > 0.0).to(DType::int64).sum();
                if (count > double(reg(st.a % 2).numel() / 2)) r.push_back(reg(st.b) * 2.0);
                else r.push_back(reg(st.b) - 1.0);
                break;
            }
            case Ins::item: {
                double v = (reg(st.a % 2) * 4.0).to(DType::int64).amax().item<int64_t>();
                r.push_back(reg(st.b) + (v > 0 ? 1.0 : -1.0));
                break;
            }
            case Ins::arg_add_: {
                if (p.grad || p.layout == Layout::expanded) break;
                Tensor& target = st.k % 2 ? x : y;
                NoGradGuard no_grad;
                target.add_(reg(st.a) * 0.5);
                break;
            }
            case Ins::output: outs.push_back(reg(st.a)); break;
            case Ins::library: {
                const Tensor& u = reg(st.a);
                switch (st.k % 7) {
                    case 0: r.push_back(softmax(u, -1)); break;
                    case 1: r.push_back(log_softmax(u * 0.5, -1)); break;
                    case 2: r.push_back(u - u.amax({-1}, true)); break;
                    case 3: {
                        Tensor idx = argmax(u, -1, true);  // an int64 output, and a compare with it
                        outs.push_back(idx);
                        r.push_back(where(idx > double(p.cols / 2), u, u * 0.5));
                        break;
                    }
                    case 4: r.push_back(clamp(u, -0.5, st.s)); break;
                    case 5: r.push_back(matmul(u, row.unsqueeze(0) * eye(p.cols, -1, {.dtype = p.dtype, .device = x.device()}))); break;
                    case 6: {  // the attention op (on CUDA its kernel where cols <= 128), causal or not
                        const Tensor& w = reg(st.b);
                        r.push_back(attention(u, w, w * 0.5 - 0.25, 1.0 / double(p.cols), st.k % 2 == 0));
                        break;
                    }
                }
                break;
            }
            case Ins::return_arg: {
                const Tensor& arg = st.k % 2 ? x : y;
                outs.push_back(st.k % 3 == 0 ? arg : st.k % 3 == 1 ? arg.slice(0, 0, 1) : arg.transpose(0, 1));
                break;
            }
        }
    }
    outs.push_back(r.back());
    return outs;
}

Program make_program(std::mt19937& rng) {
    auto pick = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); };
    Program p;
    p.grad = pick(3) == 0;
    p.dtype = pick(3) == 0 ? float64 : float32;
    p.layout = Layout(pick(5));
    bool long_rows = pick(12) == 0;
    p.cols = long_rows ? 2000 + pick(3000) : 3 + pick(4);
    static const int64_t kRows[] = {1, 2, 3, 4, 5, 7, 9001};
    p.rows[0] = kRows[pick(long_rows ? 6 : 7)];
    p.rows[1] = kRows[pick(6)];
    int n = 2 + pick(8);
    for (int i = 0; i < n; ++i)
        p.steps.push_back({.ins = Ins(pick(int(Ins::last) + 1)), .a = pick(8), .b = pick(8), .k = pick(7), .s = double(pick(9) - 4) * 0.5});
    return p;
}

Device fuzz_device() {
    const char* env = std::getenv("KILN_FUZZ_DEVICE");
    return env && std::string(env) == "cuda" ? Device{DeviceType::cuda, 0} : cpu;
}

// Values that are exact in float32 (quarters), so casts and compares agree fused or not.
Tensor values(int64_t rows, int64_t cols, DType dtype, std::mt19937& rng) {
    std::vector<double> v(size_t(rows * cols));
    std::uniform_int_distribution<int> d(-8, 8);
    for (double& e : v) e = d(rng) * 0.25 + 0.125;
    return tensor(v, {rows, cols}).to(dtype);
}

// The argument as the program's layout holds it: same values, other strides.
Tensor lay_out(const Tensor& v, Layout layout, Device dev) {
    Tensor d = v.to(dev);
    switch (layout) {
        case Layout::contiguous: return d.clone();
        case Layout::transposed: return d.transpose(0, 1).clone().transpose(0, 1);
        case Layout::offset_slice: return cat({zeros_like(d.slice(0, 0, 1)), d}, 0).slice(0, 1, d.size(0) + 1);
        case Layout::step_slice: return stack({d, zeros_like(d)}, 1).reshape({d.size(0) * 2, d.size(1)}).slice(0, 0, d.size(0) * 2, 2);
        case Layout::expanded: return d.slice(0, 0, 1).expand(d.shape());
    }
    return d;
}

struct Outcome {
    std::vector<Tensor> outs;
    std::vector<bool> out_grad, aliases_x, aliases_y;
    std::vector<Tensor> args, grads;
    uint64_t rng_offset = 0;
    std::string error;
};

bool shares(const Tensor& a, const Tensor& b) {
    return a.defined() && b.defined() && a.impl()->storage == b.impl()->storage;
}

// The weight of each output element in the loss that backward runs from: fixed by shape.
Tensor tangent_for(const Tensor& t) {
    NoGradGuard no_grad;
    Tensor w = sin(arange(double(t.numel()), {.dtype = float64}) * 0.7 + double(t.numel() % 5));
    return w.reshape(t.shape()).to(t.dtype()).to(t.device());
}

template <class F>
Outcome call(F&& f, Tensor x, Tensor y, const Tensor& row, const Program& p, RngState start) {
    Outcome o;
    set_rng_state(start);
    if (p.grad) x.requires_grad_(), y.requires_grad_();
    try {
        o.outs = f(x, y, row);
        o.rng_offset = get_rng_state().offset;
        for (const Tensor& t : o.outs) {
            o.out_grad.push_back(t.requires_grad());
            o.aliases_x.push_back(shares(t, x));
            o.aliases_y.push_back(shares(t, y));
        }
        if (p.grad) {
            Tensor total;
            for (const Tensor& t : o.outs)
                if (t.requires_grad()) {
                    Tensor term = (t * tangent_for(t)).sum();
                    total = total.defined() ? total + term : term;
                }
            if (total.defined()) total.backward();
            o.grads = {x.grad(), y.grad()};
        }
    } catch (const Error& e) {
        o.error = e.what();
        o.rng_offset = get_rng_state().offset;
    }
    o.args = {x.detach().clone(), y.detach().clone()};
    // A later write to an argument must show in every output that aliases it.
    if (o.error.empty() && p.layout != Layout::expanded) {
        x.detach().fill_(3.0);
        for (Tensor& t : o.outs) t = t.detach().clone();
    }
    return o;
}

bool close(const Tensor& a, const Tensor& b) {
    if (a.defined() != b.defined()) return false;
    if (!a.defined()) return true;
    if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
    Tensor ac = a.to(cpu), bc = b.to(cpu);
    if (a.dtype() == DType::boolean || a.dtype() == DType::int64) return ac.to(int64).to_vector<int64_t>() == bc.to(int64).to_vector<int64_t>();
    return allclose(ac.to(float64), bc.to(float64), 1e-4, 1e-4);
}

std::string describe(const Program& p) {
    static const char* names[] = {"unary", "binary", "cast_where", "random", "rowsum", "colsum", "branch", "item", "arg_add_", "output", "return_arg", "library"};
    static const char* layouts[] = {"contiguous", "transposed", "offset_slice", "step_slice", "expanded"};
    std::string s = std::string(p.grad ? "grad " : "") + dtype_name(p.dtype) + " " + layouts[int(p.layout)] + " rows " +
                    std::to_string(p.rows[0]) + "," + std::to_string(p.rows[1]) + " cols " + std::to_string(p.cols) + ": ";
    for (const Step& st : p.steps)
        s += std::string(names[int(st.ins)]) + "(" + std::to_string(st.a) + "," + std::to_string(st.b) + "," + std::to_string(st.k) +
             "," + std::to_string(st.s) + ") ";
    return s;
}

std::string mismatch(const Outcome& want, const Outcome& got) {
    if (want.error.empty() != got.error.empty()) return "error: eager '" + want.error + "', compiled '" + got.error + "'";
    if (want.rng_offset != got.rng_offset)
        return "generator offset: eager " + std::to_string(want.rng_offset) + ", compiled " + std::to_string(got.rng_offset);
    if (!want.error.empty()) return "";
    if (want.outs.size() != got.outs.size()) return "output count";
    for (size_t k = 0; k < want.outs.size(); ++k) {
        if (!close(want.outs[k], got.outs[k])) return "output " + std::to_string(k) + " values";
        if (want.out_grad[k] != got.out_grad[k])
            return "output " + std::to_string(k) + " (" + dtype_name(want.outs[k].dtype()) + ") requires_grad: eager " +
                   std::to_string(want.out_grad[k]) + ", compiled " + std::to_string(got.out_grad[k]);
        if (want.aliases_x[k] != got.aliases_x[k] || want.aliases_y[k] != got.aliases_y[k])
            return "output " + std::to_string(k) + " aliasing of the arguments";
    }
    for (size_t k = 0; k < 2; ++k)
        if (!close(want.args[k], got.args[k])) return "argument " + std::to_string(k) + " after the call";
    if (want.grads.size() != got.grads.size()) return "gradient count";
    for (size_t k = 0; k < want.grads.size(); ++k)
        if (!close(want.grads[k], got.grads[k])) {
            std::ostringstream os;
            os << "gradient of argument " << k;
            for (const Tensor* g : {&want.grads[k], &got.grads[k]}) {
                os << (g == &want.grads[k] ? "\n  eager: " : "\n  compiled: ");
                if (!g->defined()) os << "undefined";
                else if (g->numel() <= 64) os << g->cpu();
                else os << g->shape();
            }
            return os.str();
        }
    return "";
}

// KILN_FUZZ_ONLY=i runs program i alone (to study one mismatch).
int only_program() {
    const char* env = std::getenv("KILN_FUZZ_ONLY");
    return env ? std::atoi(env) : -1;
}

int differential(const char* backend, int count, uint32_t seed) {
    const int only = only_program();
    Device dev = fuzz_device();
    int mismatches = 0;
    for (int i = 0; i < count; ++i) {
        if (only >= 0 && i != only) continue;
        std::mt19937 rng(seed + seed_offset() + uint32_t(i) * 2654435761u);  // one stream per program
        Program p = make_program(rng);
        auto fn = [&p](Tensor x, Tensor y, Tensor row) { return run(p, x, y, row); };
        jit::reset();
        auto compiled = compile(fn, {.backend = backend});
        Tensor row = values(1, p.cols, p.dtype, rng).reshape({p.cols}).to(dev);
        // Calls: record; the same tensors refilled in place; new tensors; a new size; refilled.
        Tensor xe, ye, xc, yc;
        for (int callno = 0; callno < 5; ++callno) {
            int64_t rows = p.rows[callno >= 3 ? 1 : 0];
            Tensor xv = values(rows, p.cols, p.dtype, rng), yv = values(rows, p.cols, p.dtype, rng);
            bool refill = callno == 1 || callno == 4;
            if (!refill || p.layout == Layout::expanded) {
                xe = lay_out(xv, p.layout, dev), ye = lay_out(yv, p.layout, dev);
                xc = lay_out(xv, p.layout, dev), yc = lay_out(yv, p.layout, dev);
            } else {
                NoGradGuard no_grad;
                for (Tensor* t : {&xe, &xc}) *t = t->detach(), t->copy_(xv.to(dev));
                for (Tensor* t : {&ye, &yc}) *t = t->detach(), t->copy_(yv.to(dev));
            }
            RngState start = get_rng_state();
            Outcome want = call(fn, xe, ye, row, p, start);
            Outcome got = call(compiled, xc, yc, row, p, start);
            std::string why = mismatch(want, got);
            if (!why.empty() && ++mismatches <= 5)
                BOOST_ERROR(backend << " on " << dev << ", program " << i << " call " << callno << ": " << why << "\n  " << describe(p));
            if (!why.empty()) break;
            set_rng_state({start.seed, want.rng_offset});
        }
    }
    return mismatches;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(jit_differential_wide)

BOOST_AUTO_TEST_CASE(wide_programs_match_eager_under_eager_and_aot_eager) {
    if (fuzz_device().type == DeviceType::cuda && !cuda::is_available()) {
        BOOST_TEST_MESSAGE("KILN_FUZZ_DEVICE=cuda but no GPU: " << cuda::unavailable_reason());
        return;
    }
    int count = fuzz_count(150);
    int mismatches = 0;
    for (const char* backend : {"eager", "aot_eager"}) mismatches += differential(backend, count, 20261126);
    std::cout << "jit differential (wide): programs " << 2 * count << ", mismatches " << mismatches << "\n";
    BOOST_TEST(mismatches == 0);
}

BOOST_AUTO_TEST_CASE(wide_programs_match_eager_under_inductor) {
    if (fuzz_device().type == DeviceType::cuda && !cuda::is_available()) {
        BOOST_TEST_MESSAGE("KILN_FUZZ_DEVICE=cuda but no GPU: " << cuda::unavailable_reason());
        return;
    }
    int count = std::max(1, fuzz_count(150) / 10);
    int mismatches = differential("inductor", count, 5151);
    std::cout << "jit differential (wide, inductor): programs " << count << ", mismatches " << mismatches << "\n";
    BOOST_TEST(mismatches == 0);
}

BOOST_AUTO_TEST_SUITE_END()
