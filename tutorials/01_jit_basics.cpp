// Lesson 01: a JIT is guards + compiled code.
//
// Mirrors "A Walk Through Example of torch.compile", section "PyTorch compiler is a
// Just-In-Time compiler". The walk-through optimizes f(x, mod) = log(mod(x)) by hand:
//
//     if isinstance(mod, A): return 2 * x      <- a guard, and the code valid under it
//     elif isinstance(mod, B): return -x
//     else: the original code                   <- never a wrong answer
//
// and then says what a real JIT does instead: before each call it walks its list of
// compiled entries; the first entry whose guard holds runs; when none holds, it compiles
// a new entry for exactly what it sees. This lesson runs kiln::compile on that f and
// prints the entry list after every call.
//
// Build and run: make demo, or build/tutorial_01_jit_basics (tutorials/README.md).
#include <iostream>

#include "kiln.h"

using namespace kiln;

// The walk-through's two modules. A module is guarded by identity: kiln cannot look
// inside forward(), so "this very object" is the guard (isinstance is not enough in C++,
// where two objects of one class may hold different state).
struct A : nn::Module {
    Tensor forward(const Tensor& x) override { return exp(2.0 * x); }
    std::string type_name() const override { return "A"; }
};
struct B : nn::Module {
    Tensor forward(const Tensor& x) override { return exp(-x); }
    std::string type_name() const override { return "B"; }
};

Tensor f(Tensor x, nn::Module& mod) {
    Tensor y = mod(x);
    Tensor z = log(y);
    return z;
}

int main() {
    // Every fact the lesson teaches is checked where it is printed; any "NO" fails the
    // lesson (it is a CTest test).
    int failures = 0;
    auto check = [&](bool ok, const std::string& fact) {
        std::cout << "  check: " << fact << ": " << (ok ? "yes" : "NO") << "\n";
        failures += !ok;
    };

    // The "eager" backend interprets each recorded graph op by op: this lesson is about
    // the guards and the entry list, not the kernels (lesson 07 is). Argument names make
    // the guards read like the code.
    auto opt_f = compile(f, {.backend = "eager", .arg_names = {"x", "mod"}, .name = "f"});

    // After each call, the compiled entries: one guard set and one graph each (f has no
    // graph break, so entry i owns graph i), plus the JIT's counters (jit::counters()
    // sums every compiled function since jit::reset()).
    auto show_entries = [&](const std::string& call, bool with_entries = true) {
        jit::ExplainOutput e = jit::explain_compiled(opt_f);
        jit::Counters c = jit::counters();
        std::cout << "after " << call << ": " << e.guards.size() << " entr"
                  << (e.guards.size() == 1 ? "y" : "ies") << " (compiles " << c.compiles
                  << ", cache hits " << c.cache_hits << ")\n";
        for (size_t i = 0; with_entries && i < e.guards.size(); ++i) {
            std::cout << "  entry " << i + 1 << " guard:\n";
            for (const std::string& g : e.guards[i]) std::cout << "      " << g << "\n";
            std::cout << "  entry " << i + 1 << " compiled code:\n" << e.graphs[i];
        }
    };

    A a;
    B b;
    Tensor x = randn({5, 5, 5});
    jit::reset();

    // --- Call 1: the entry list is empty, so kiln records f: every op is appended to a
    // graph, its result a fake tensor with only a shape (PyTorch's fake tensors; docs/jit.md,
    // "Shape-only tracing"), and the graph compiled then runs to give them their values.
    // The guards note what the recording assumed (x's dtype, device and sizes; mod's
    // identity; grad mode).
    std::cout << "before the first call: " << jit::explain_compiled(opt_f).guards.size()
              << " entries\n";
    Tensor out = opt_f(x, a);
    show_entries("opt_f(x, a)");
    check(jit::counters().compiles == 1, "the first call compiled one entry");
    check(allclose(out, f(x, a), 1e-5, 1e-6), "opt_f(x, a) equals eager f(x, a)");
    // Our brain would have written `return 2 * x`. kiln records the ops f ran (mul, exp,
    // log) and no backend of kiln does algebra on them: the JIT's job is to capture what
    // ran, soundly; making it cheap is the backend's (lesson 07).

    // --- Call 2: same x, same module: the guard holds, the graph runs, f does not.
    out = opt_f(x, a);
    show_entries("opt_f(x, a) again", false);
    check(jit::counters().compiles == 1 && jit::counters().cache_hits == 1,
          "the second call was a cache hit");

    // --- Call 3: a different module. Entry 1's guard ("mod is object@... (identity)")
    // fails, so kiln records a second entry for B: exp(-x), then log.
    out = opt_f(x, b);
    show_entries("opt_f(x, b)");
    check(jit::counters().compiles == 2, "a new module made a new entry");
    check(jit::counters().recompile_reasons.back().find("mod is a different object") !=
              std::string::npos,
          "the recompile reason names the failed guard (" +
              jit::counters().recompile_reasons.back() + ")");
    check(allclose(out, f(x, b), 1e-5, 1e-6), "opt_f(x, b) equals eager f(x, b)");

    // --- Call 4: B again: a hit on entry 2 (the lookup walks the list in order).
    out = opt_f(x, b);
    show_entries("opt_f(x, b) again", false);
    check(jit::counters().cache_hits == 2, "opt_f(x, b) again was a cache hit");

    // --- A guard failure falls back to recording, never to a wrong answer. Guards cover
    // every property the compiled code assumed. A float64 x fails the dtype guard of both
    // entries; kiln records a third entry instead of running float32 code on it.
    Tensor x64 = x.to(float64);
    out = opt_f(x64, a);
    show_entries("opt_f(x64, a)");
    check(jit::counters().compiles == 3, "a float64 x made a third entry");
    check(out.dtype() == float64 && allclose(out, f(x64, a), 1e-9, 1e-12),
          "opt_f(x64, a) is float64 and equals eager");

    // And when a JIT gives up? The walk-through's `except FailToCompileError: run the
    // original code`. kiln's version: past cache_size_limit entries a function stops
    // compiling new ones and runs fn eagerly (with one warning on stderr), keeping the
    // entries it has.
    auto small_cache = compile(
        f, {.backend = "eager", .cache_size_limit = 1, .arg_names = {"x", "mod"}, .name = "f"});
    jit::reset();
    Tensor r1 = small_cache(x, a);  // entry 1
    Tensor r2 = small_cache(x, b);  // no room for entry 2: eager
    std::cout << "with cache_size_limit = 1: compiles " << jit::counters().compiles
              << ", eager fallbacks " << jit::counters().eager_fallbacks << "\n";
    check(jit::counters().compiles == 1 && jit::counters().eager_fallbacks == 1,
          "the second module ran eagerly");
    check(allclose(r1, f(x, a), 1e-5, 1e-6) && allclose(r2, f(x, b), 1e-5, 1e-6),
          "both answers equal eager");

    std::cout << (failures ? "lesson 01: FAILED\n" : "lesson 01: all checks passed\n");
    return failures ? 1 : 0;
}
