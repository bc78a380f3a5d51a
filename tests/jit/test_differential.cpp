// Differential test of compile() against eager, at the level users see: seeded random
// programs (a small instruction list run by one host function) with in-place ops on
// arguments and intermediates, data-dependent branches (bool breaks), item() reads
// (re-run entries), several outputs, varying sizes (dynamic shapes) and backward. Each
// program is called 3 times per backend; outputs, argument mutations, exceptions and
// input gradients must equal eager's on clones of the same inputs.
//
// KILN_FUZZ_PROGRAMS=N (default 150) sets the count; `make fuzz N=100000` runs many.
#include <boost/test/unit_test.hpp>

#include <cstdlib>
#include <iostream>
#include <random>

#include "kiln.h"
#include "tests/jit/fuzz_env.h"

using namespace kiln;
using kiln_test::fuzz_count;
using kiln_test::seed_offset;

namespace {

// view_mul_ and sizes come last: programs drawn without them stay as they were.
enum class Ins { unary, binary, scalar, rowsum, add_, mul_, fill_, copy_, arg_add_, branch, item, output, view_mul_, sizes };

struct Step {
    Ins ins;
    int a = 0, b = 0;  // registers
    int k = 0;         // which op / which argument
    double s = 1;
};

struct Program {
    std::vector<Step> steps;
    bool grad = false;      // arguments require grad (then no in-place on arguments)
    bool vary_rows = false;  // calls use different row counts
    int64_t rows[3] = {3, 6, 7};
};

// Registers start as the two arguments; every instruction may append one.
std::vector<Tensor> run(const Program& p, Tensor x, Tensor y) {
    std::vector<Tensor> r{x, y}, outs;
    auto reg = [&](int i) -> Tensor& { return r[size_t(i) % r.size()]; };
    for (const Step& st : p.steps) {
        switch (st.ins) {
            case Ins::unary: {
                static Tensor (*const ops[])(const Tensor&) = {kiln::sin, kiln::tanh, kiln::exp, kiln::relu, kiln::sigmoid, kiln::neg};
                r.push_back(ops[st.k % 6](reg(st.a) * 0.5));
                break;
            }
            case Ins::binary: {
                const Tensor &u = reg(st.a), &v = reg(st.b);
                r.push_back(st.k % 3 == 0 ? u + v : st.k % 3 == 1 ? u * v : maximum(u, v));
                break;
            }
            case Ins::scalar: r.push_back(st.k % 2 ? reg(st.a) * st.s : st.s - reg(st.a)); break;
            case Ins::rowsum: r.push_back(reg(st.a) - reg(st.a).sum({-1}, true) * 0.1); break;
            case Ins::add_: {  // on a fresh intermediate: functionalized even with grad
                Tensor t = reg(st.a) * 1.0;
                t.add_(reg(st.b), st.s);
                r.push_back(t);
                break;
            }
            case Ins::mul_: {
                Tensor t = reg(st.a) + 0.0;
                t.mul_(st.s);
                r.push_back(t);
                break;
            }
            case Ins::fill_: {
                Tensor t = reg(st.a) * 2.0;
                Tensor keep = t + 1.0;
                t.fill_(st.s);
                r.push_back(keep + t);
                break;
            }
            case Ins::copy_: {
                Tensor t = reg(st.a) * 1.0;
                t.copy_(reg(st.b) * 3.0);
                r.push_back(t);
                break;
            }
            case Ins::arg_add_: {  // mutates an argument: the caller must see it
                if (p.grad) break;
                Tensor& target = st.k % 2 ? x : y;
                NoGradGuard no_grad;
                target.add_(reg(st.a), st.s);
                break;
            }
            case Ins::view_mul_: {  // through a view: eager fallback, the base must see the write
                Tensor base = reg(st.a) * 1.0;
                Tensor head = base.slice(0, 0, 2);
                NoGradGuard no_grad;
                head.mul_(st.s);
                r.push_back(base.detach() + reg(st.b));
                break;
            }
            case Ins::branch:
                if (reg(st.a).sum() > 0) r.push_back(reg(st.b) * 2.0);
                else r.push_back(reg(st.b) - 1.0);
                break;
            case Ins::item: {
                float v = reg(st.a).amax().item<float>();
                r.push_back(reg(st.b) + (v > 0 ? 1.0 : -1.0));
                break;
            }
            case Ins::sizes: {  // sizes as numbers (pinned) and composites that take sizes (symbolic)
                const Tensor &u = reg(st.a), &v = reg(st.b);
                switch (st.k % 6) {
                    case 0: r.push_back(u * double(u.size(0))); break;
                    case 1: r.push_back(u + v.sum() / double(v.numel())); break;
                    case 2: r.push_back(v + u.slice(0, 0, u.size(0) / 2 + 1).mean({0}, true)); break;
                    // (x - mean * 0.5, not x - mean: a later branch on the sum of x - mean(x),
                    // which is 0 up to rounding, would compare rounding noise, not kiln)
                    case 3: r.push_back(u - u.mean({0}, true) * 0.5 + zeros_like(v) * st.s); break;
                    case 4: r.push_back(u.unsqueeze(0).squeeze(0) * st.s + full_like(v, st.s)); break;
                    case 5: r.push_back(u.size(0) > 4 ? v * 2.0 : v - u.mean() * 0.5); break;
                }
                break;
            }
            case Ins::output: outs.push_back(reg(st.a)); break;
        }
    }
    outs.push_back(r.back());
    return outs;
}

Program make_program(std::mt19937& rng, Ins last) {
    auto pick = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); };
    Program p;
    p.grad = pick(3) == 0;
    p.vary_rows = pick(2) == 0;
    int n = 2 + pick(7);
    for (int i = 0; i < n; ++i) {
        Step st{.ins = Ins(pick(int(last) + 1)), .a = pick(8), .b = pick(8), .k = pick(6),
                .s = double(pick(9) - 4) * 0.5};
        p.steps.push_back(st);
    }
    static const int64_t kRowChoices[] = {1, 2, 3, 4, 5, 6, 7};  // 5: as many rows as columns
    for (int64_t& rows : p.rows) rows = kRowChoices[pick(7)];
    return p;
}

bool close(const Tensor& a, const Tensor& b) {
    if (a.defined() != b.defined()) return false;
    if (!a.defined()) return true;
    return a.shape() == b.shape() && allclose(a, b, 1e-4, 1e-5);
}

Tensor clone_like(const Tensor& t, bool grad) {
    Tensor c = t.detach().clone();
    return grad ? c.requires_grad_() : c;
}

struct Outcome {
    std::vector<Tensor> outs, args, grads;
    std::string error;
};

template <class F>
Outcome call(F&& f, const Tensor& x0, const Tensor& y0, bool grad, const std::vector<Tensor>& tangents) {
    Outcome o;
    Tensor x = clone_like(x0, grad), y = clone_like(y0, grad);
    try {
        o.outs = f(x, y);
        if (grad) {
            Tensor total;
            for (size_t i = 0; i < o.outs.size(); ++i)
                if (o.outs[i].requires_grad()) {
                    Tensor term = (o.outs[i] * tangents[i % tangents.size()]).sum();
                    total = total.defined() ? total + term : term;
                }
            if (total.defined()) total.backward();
            o.grads = {x.grad(), y.grad()};
        }
    } catch (const Error& e) {
        o.error = e.what();
    }
    o.args = {x.detach(), y.detach()};
    return o;
}

std::string describe(const Program& p) {
    static const char* names[] = {"unary", "binary", "scalar", "rowsum", "add_", "mul_", "fill_", "copy_", "arg_add_", "branch", "item", "output", "view_mul_", "sizes"};
    std::string s = p.grad ? "grad " : "";
    if (p.vary_rows) s += "rows " + std::to_string(p.rows[0]) + "," + std::to_string(p.rows[1]) + "," + std::to_string(p.rows[2]) + " ";
    for (const Step& st : p.steps)
        s += std::string(names[int(st.ins)]) + "(" + std::to_string(st.a) + "," + std::to_string(st.b) + "," +
             std::to_string(st.k) + "," + std::to_string(st.s) + ") ";
    return s;
}

// KILN_FUZZ_SEED shifts every stream, so parallel runs draw different programs.
// Runs `count` programs under `backend`; returns mismatches.
int differential(const char* backend, int count, uint32_t seed, Ins last = Ins::output) {
    std::mt19937 rng(seed + seed_offset());
    int mismatches = 0;
    for (int i = 0; i < count; ++i) {
        Program p = make_program(rng, last);
        jit::reset();
        auto compiled = compile([&p](Tensor x, Tensor y) { return run(p, x, y); }, {.backend = backend});
        for (int callno = 0; callno < 3; ++callno) {
            int64_t rows = p.vary_rows ? p.rows[callno] : 4;
            Tensor x = randn({rows, 5}), y = randn({rows, 5});
            std::vector<Tensor> tangents{randn({rows, 5}), randn({rows, 5})};
            Outcome want = call([&](Tensor a, Tensor b) { return run(p, a, b); }, x, y, p.grad, tangents);
            Outcome got = call(compiled, x, y, p.grad, tangents);
            bool ok = want.error.empty() == got.error.empty() && want.outs.size() == got.outs.size();
            for (size_t k = 0; ok && k < want.outs.size(); ++k) ok = close(want.outs[k], got.outs[k]);
            for (size_t k = 0; ok && k < 2; ++k) ok = close(want.args[k], got.args[k]);
            for (size_t k = 0; ok && k < want.grads.size(); ++k) ok = k < got.grads.size() && close(want.grads[k], got.grads[k]);
            if (!ok && ++mismatches <= 5)
                BOOST_ERROR(backend << " program " << i << " call " << callno << ": " << describe(p) << "\n eager error: '"
                                    << want.error << "'\n compiled error: '" << got.error << "'");
            if (!ok) break;
        }
    }
    return mismatches;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(jit_differential)

BOOST_AUTO_TEST_CASE(random_programs_match_eager_under_eager_and_aot_eager) {
    int count = fuzz_count(150);
    int mismatches = 0;
    for (const char* backend : {"eager", "aot_eager"}) mismatches += differential(backend, count, 20261123);
    std::cout << "jit differential: programs " << 2 * count << ", mismatches " << mismatches << "\n";
    BOOST_TEST(mismatches == 0);
}

// Inductor compiles C++ per new graph: a small slice here (kernels land in the disk cache).
BOOST_AUTO_TEST_CASE(random_programs_match_eager_under_inductor) {
    int count = std::max(1, fuzz_count(150) / 10);
    int mismatches = differential("inductor", count, 777);
    std::cout << "jit differential (inductor): programs " << count << ", mismatches " << mismatches << "\n";
    BOOST_TEST(mismatches == 0);
}

// In-place through views (the eager fallback) mixed with everything above, every backend.
BOOST_AUTO_TEST_CASE(random_programs_with_in_place_through_views) {
    int count = std::max(1, fuzz_count(150) / 3);
    int mismatches = 0;
    for (const char* backend : {"eager", "aot_eager"}) mismatches += differential(backend, count, 4242, Ins::view_mul_);
    mismatches += differential("inductor", std::max(1, count / 5), 4243, Ins::view_mul_);
    std::cout << "jit differential (views): programs " << 2 * count + std::max(1, count / 5) << ", mismatches " << mismatches << "\n";
    BOOST_TEST(mismatches == 0);
}

// Sizes read as numbers (pinned by guards) and composites that take sizes (symbolic),
// with row counts that coincide with the column count, mixed with everything above.
BOOST_AUTO_TEST_CASE(random_programs_with_sizes_as_numbers) {
    int count = std::max(1, fuzz_count(150) / 3);
    int mismatches = 0;
    for (const char* backend : {"eager", "aot_eager"}) mismatches += differential(backend, count, 9090, Ins::sizes);
    mismatches += differential("inductor", std::max(1, count / 5), 9091, Ins::sizes);
    std::cout << "jit differential (sizes): programs " << 2 * count + std::max(1, count / 5) << ", mismatches " << mismatches << "\n";
    BOOST_TEST(mismatches == 0);
}

BOOST_AUTO_TEST_SUITE_END()
