// Lesson 05: dynamic shapes — one recompile, then every size.
//
// Mirrors "A Walk Through Example of torch.compile": the opening program
// (modified_sigmoid warmed up on [10] and [8] inputs), the dict-input variant
// `function(inputs)`, and the section "Dynamic shape support from Dynamo".
//
// The first entry is specialized to the sizes it saw ([10]). A call with [8] fails only
// a size guard; kiln then guesses that this size varies, makes it a symbol s0, and
// records one entry that holds for any s0 >= 2. 0 and 1 stay special (broadcasting
// treats them differently).
//
// Build and run: make demo, or build/tutorial_05_dynamic_shapes (tutorials/README.md).
#include <algorithm>
#include <iostream>
#include <map>

#include "kiln.h"

using namespace kiln;

Tensor modified_sigmoid(Tensor x, Tensor y) {
    x = 1.0 / (exp(-x) + 5);
    if (x.mean() > 0.5) x = x / 1.1;
    return x * y;
}

// The dict version: a std::map<std::string, Tensor> argument. Every value is guarded
// (and the keys: a dict with other keys is another entry).
Tensor function(std::map<std::string, Tensor> inputs) {
    Tensor x = inputs["x"];
    Tensor y = inputs["y"];
    x = cos(cos(x));
    if (x.mean() > 0.5) x = x / 1.1;
    return x * y;
}

int main() {
    int failures = 0;
    auto check = [&](bool ok, const std::string& fact) {
        std::cout << "  check: " << fact << ": " << (ok ? "yes" : "NO") << "\n";
        failures += !ok;
    };
    manual_seed(0);
    auto print_guards = [](const jit::ExplainOutput& e) {
        for (size_t i = 0; i < e.guards.size(); ++i) {
            std::cout << "  entry " << i + 1 << ":\n";
            for (const std::string& g : e.guards[i]) std::cout << "      " << g << "\n";
        }
    };

    auto opt = compile(modified_sigmoid,
                       {.backend = "eager", .arg_names = {"x", "y"}, .name = "modified_sigmoid"});
    Tensor x10 = randn({10}, {.requires_grad = true}), y10 = randn({10}, {.requires_grad = true});
    Tensor x8 = randn({8}, {.requires_grad = true}), y8 = randn({8}, {.requires_grad = true});

    // --- The warm-up loop of the tutorial: 100 rounds of [10] then [8].
    jit::reset();
    opt(x10, y10);
    std::cout << "after the first call ([10]):\n";
    print_guards(jit::explain_compiled(opt));
    opt(x8, y8);
    std::cout << "after the first [8] call: recompiled because "
              << jit::counters().recompile_reasons.at(0) << "\n";
    print_guards(jit::explain_compiled(opt));
    for (int i = 1; i < 100; ++i) {
        opt(x10, y10);
        opt(x8, y8);
    }
    jit::Counters c = jit::counters();
    std::cout << "after 100 rounds: compiles " << c.compiles << ", recompiles " << c.recompiles
              << ", cache hits " << c.cache_hits << "\n";
    check(c.compiles == 2 && c.recompiles == 1,
          "200 calls, 2 entries: the static [10] one and a symbolic one");
    // Entry 2's guards: x and y of any size s0 (the same s0: "duck sizing", equal sizes
    // share a symbol), s0 at least 2.
    std::vector<std::string> g2 = jit::explain_compiled(opt).guards.at(1);
    auto has = [&](const std::string& s) { return std::find(g2.begin(), g2.end(), s) != g2.end(); };
    check(has("x: float32[s0] cpu requires_grad") && has("s0 == size(y,0)") && has("2 <= s0"),
          "entry 2 guards x: float32[s0], s0 == size(y,0), 2 <= s0");

    // The execution after warm-up, and new sizes: all served by entry 2, nothing compiles.
    check(allclose(opt(x10, y10), modified_sigmoid(x10, y10)), "opt(x10, y10) equals eager");
    for (int64_t n : {12, 100, 1000}) {
        Tensor x = randn({n}, {.requires_grad = true}), y = randn({n}, {.requires_grad = true});
        check(allclose(opt(x, y), modified_sigmoid(x, y)),
              "size " + std::to_string(n) + " equals eager");
    }
    check(jit::counters().compiles == 2, "sizes 12, 100, 1000 compiled nothing new");
    // Mismatched sizes are a guard failure too (s0 == size(y,0) fails): a new entry, and
    // the same broadcasting error eager raises.
    bool threw = false;
    try {
        opt(randn({5}), randn({6}));
    } catch (const Error&) {
        threw = true;
    }
    check(threw, "x[5] * y[6] raises, as eager does");

    // --- The dict version, with backward: values guarded key by key.
    auto opt_function =
        compile(function, {.backend = "eager", .arg_names = {"inputs"}, .name = "function"});
    jit::reset();
    std::map<std::string, Tensor> shape_10_inputs = {{"x", x10}, {"y", y10}},
                                  shape_8_inputs = {{"x", x8}, {"y", y8}};
    for (int i = 0; i < 100; ++i) {
        opt_function(shape_10_inputs);
        opt_function(shape_8_inputs);
    }
    check(jit::counters().compiles == 2, "function(inputs): 2 entries after the warm-up");
    std::cout << "function's guards:\n";
    print_guards(jit::explain_compiled(opt_function));
    Tensor out = opt_function(shape_10_inputs);
    out.sum().backward();
    Tensor gx = x10.grad(), gy = y10.grad();
    x10.zero_grad();
    y10.zero_grad();
    function(shape_10_inputs).sum().backward();
    check(allclose(out, function(shape_10_inputs)) && allclose(gx, x10.grad()) &&
              allclose(gy, y10.grad()),
          "compiled output and gradients equal eager");

    // Keys are guarded too: a dict with another key set is another entry.
    int64_t compiles_before = jit::counters().compiles;
    std::map<std::string, Tensor> extra_key = {{"x", x10}, {"y", y10}, {"z", x8}};
    check(allclose(opt_function(extra_key), function(extra_key)) &&
              jit::counters().compiles == compiles_before + 1,
          "a dict with an extra key made a new entry, and equals eager");

    // --- The choice is an option: dynamic = never specializes every size (a new entry
    // per size), always makes every size symbolic from the first call.
    auto never = compile(modified_sigmoid, {.backend = "eager", .dynamic = jit::Dynamic::never});
    auto always = compile(modified_sigmoid, {.backend = "eager", .dynamic = jit::Dynamic::always});
    jit::reset();
    for (int64_t n : {10, 8, 12}) never(randn({n}), randn({n}));
    int64_t never_compiles = jit::counters().compiles;
    jit::reset();
    for (int64_t n : {10, 8, 12}) always(randn({n}), randn({n}));
    std::cout << "sizes 10, 8, 12: dynamic=never made " << never_compiles
              << " entries, dynamic=always " << jit::counters().compiles << "\n";
    check(never_compiles == 3 && jit::counters().compiles == 1, "never: 3 entries; always: 1");

    std::cout << (failures ? "lesson 05: FAILED\n" : "lesson 05: all checks passed\n");
    return failures ? 1 : 0;
}
