// Lesson 04: why guards and graph breaks — compile vs tracing.
//
// Mirrors "Introduction to torch.compile", section "Comparison to TorchScript and FX
// Tracing" (f1, f2, f3). jit::trace is kiln's TorchScript trace: it runs fn once and
// keeps the one path it took, with no guards. export_graph is kiln's stand-in for FX's
// symbolic_trace: it refuses what it cannot put in one graph. FX's symbolic_trace with
// concrete_args fixes some arguments to values; in C++ that is a lambda that binds them,
// traced over the rest.
//
// Build and run: make demo, or build/tutorial_04_vs_tracing (tutorials/README.md).
#include <cmath>
#include <iostream>
#include <vector>

#include "kiln.h"

using namespace kiln;

// f1: data-dependent control flow.
Tensor f1(Tensor x, Tensor y) {
    if (x.sum() < 0) return -y;
    return y;
}

// f2: a plain integer argument (TorchScript's script needs annotations for it).
Tensor f2(Tensor x, int y) { return x + y; }

// f3: a non-kiln function in the middle. The tutorial calls scipy.fft.dct on x.numpy();
// here a hand-written DCT-II (unnormalized, like scipy's default) along the last axis
// works on the raw floats. kiln cannot see inside it, only that the data left.
std::vector<float> dct_rows(const std::vector<float>& x, int n) {
    std::vector<float> y(x.size());
    for (size_t row = 0; row < x.size() / n; ++row)
        for (int k = 0; k < n; ++k) {
            double s = 0;
            for (int i = 0; i < n; ++i)
                s += x[row * n + i] * std::cos(M_PI * k * (2 * i + 1) / (2.0 * n));
            y[row * n + k] = float(2 * s);
        }
    return y;
}

Tensor f3(Tensor x) {
    x = x * 2;
    x = tensor(dct_rows(x.to_vector<float>(), int(x.size(-1))),
               x.shape());  // x.numpy() -> dct -> from_numpy
    x = x * 2;
    return x;
}

int main() {
    int failures = 0;
    auto check = [&](bool ok, const std::string& fact) {
        std::cout << "  check: " << fact << ": " << (ok ? "yes" : "NO") << "\n";
        failures += !ok;
    };
    // The tutorial's test_fns: do two functions agree on these arguments?
    auto test_fns = [](auto&& fn1, auto&& fn2, auto&&... args) {
        return allclose(fn1(args...), fn2(args...), 1e-4, 1e-5);
    };
    manual_seed(0);
    Tensor inp1 = randn({5, 5}), inp2 = randn({5, 5});
    if (inp1.sum().item<float>() < 0) inp1 = -inp1;  // the traced path: x.sum() >= 0, return y

    // --- f1. A trace records the path the example took (`return y`) and forgets the if.
    // On -inp1 the real f1 returns -y; the trace still returns y: silently wrong.
    auto traced_f1 = jit::trace(f1, inp1, inp2);
    bool t11 = test_fns(f1, traced_f1, inp1, inp2), t12 = test_fns(f1, traced_f1, -inp1, inp2);
    std::cout << "traced 1, 1: " << std::boolalpha << t11 << "\ntraced 1, 2: " << t12 << "\n";
    std::cout << "what the trace ignored: " << traced_f1.ignored_escapes().at(0).reason << "\n";
    check(t11 && !t12, "the trace is right on its example and wrong on -inp1");

    // FX's symbolic_trace raises on the if. export_graph does too, naming the break.
    try {
        jit::export_graph(f1, inp1, inp2);
        check(false, "export_graph(f1) raised");
    } catch (const Error& e) {
        std::cout << "export_graph(f1) raised: " << std::string(e.what()).substr(0, 100) << "...\n";
    }

    // torch.fx.symbolic_trace(f1, concrete_args={"x": inp1}): x is no longer an input but
    // the value inp1, so the if is decided while tracing and the graph keeps one branch.
    // The C++ equivalent binds x in a lambda and traces over y alone; like FX's result,
    // the traced function still takes x and ignores it. Right on inp1, wrong on -inp1.
    auto fx_trace = jit::trace([&](Tensor y) { return f1(inp1, y); }, inp2);
    auto fx_f1 = [&](Tensor, Tensor y) { return fx_trace(y); };
    bool fx11 = test_fns(f1, fx_f1, inp1, inp2), fx12 = test_fns(f1, fx_f1, -inp1, inp2);
    std::cout << "fx 1, 1: " << fx11 << "\nfx 1, 2: " << fx12 << "\n";
    check(fx11 && !fx12, "concrete_args bakes x's branch in: right on inp1, wrong on -inp1");

    // compile breaks the graph at the if and guards the outcome (lesson 03): right on both.
    jit::reset();
    auto compile_f1 = compile(f1, {.backend = "eager"});
    bool c11 = test_fns(f1, compile_f1, inp1, inp2), c12 = test_fns(f1, compile_f1, -inp1, inp2);
    std::cout << "compile 1, 1: " << c11 << "\ncompile 1, 2: " << c12 << "\n";
    check(c11 && c12, "compile is right on both");

    // --- f2. An int argument: compile guards its value (y == 3), so f2(x, 4) records a
    // new entry rather than reusing code that added 3.
    jit::reset();
    auto compile_f2 = compile(f2, {.backend = "eager", .arg_names = {"x", "y"}});
    bool c2 = test_fns(f2, compile_f2, inp1, 3);
    std::cout << "compile 2: " << c2 << "\n";
    check(c2, "compile handles f2(x, 3)");
    bool c2b = test_fns(f2, compile_f2, inp1, 4);
    std::cout << "f2(x, 4) recompiled because: " << jit::counters().recompile_reasons.at(0) << "\n";
    check(c2b && jit::counters().compiles == 2,
          "f2(x, 4) is right and made a second entry (y == 3 failed)");

    // --- f3. The trace bakes dct's output in as a constant: on new input it returns
    // inp1's answer (times 2), silently.
    auto traced_f3 = jit::trace(f3, inp1);
    bool t3 = test_fns(f3, traced_f3, inp2);
    std::cout << "traced 3: " << t3 << "\n";
    check(!t3, "the trace of f3 is wrong on new input");

    // compile breaks at to_vector() (the data leaves kiln). Because host code consumed
    // the values, nothing can be guarded about what it does with them, so the entry is
    // *re-run*: f3's host code runs on every call, and its two graphs (x * 2 before, x * 2
    // after) come from the cache.
    jit::reset();
    auto compile_f3 = compile(f3, {.backend = "eager", .name = "f3"});
    bool c3a = test_fns(f3, compile_f3, inp1), c3 = test_fns(f3, compile_f3, inp2);
    std::cout << "compile 3: " << c3 << "\n";
    check(c3a && c3, "compile is right on f3 with new input");
    jit::ExplainOutput e = jit::explain_compiled(compile_f3);
    std::cout << "explain(f3): " << e.graph_count
              << " graphs, re-run every call: " << (e.rerun ? "yes" : "no") << " ("
              << e.rerun_reasons.at(0) << ")\n";
    check(e.graph_count == 2 && e.rerun, "f3: two graphs, re-run every call");
    check(jit::counters().compiles == 1 && jit::counters().reruns == 1,
          "one entry; the second call was a re-run, not a recompile");

    std::cout << (failures ? "lesson 04: FAILED\n" : "lesson 04: all checks passed\n");
    return failures ? 1 : 0;
}
