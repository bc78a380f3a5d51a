// Lesson 02: compiling functions and modules, and seeing the graph a backend receives.
//
// Mirrors "Introduction to torch.compile" (and the older "TorchDynamo and TorchInductor
// Tutorial"): sections "Basic Usage" and "TorchDynamo and FX Graphs" (the custom backend),
// plus "Getting Started"'s torch.compile.list_backends().
//
// compile() wraps the function; its first call runs the function under a recorder that
// appends every tensor op to a Graph (kiln's FX graph), then hands the graph to a
// backend, which returns something callable. Later calls run that callable. This lesson
// looks at the graph from the backend's side.
//
// Build and run: make demo, or build/tutorial_02_graph_capture (tutorials/README.md).
#include <algorithm>
#include <iostream>

#include "kiln.h"

using namespace kiln;
namespace F = nn::functional;

// --- Basic usage: any function of tensors.
Tensor foo(Tensor x, Tensor y) {
    Tensor a = sin(x);
    Tensor b = cos(y);
    return a + b;
}

// Python decorates: `@torch.compile def opt_foo2(x, y): ...`. C++ has no decorators;
// the same thing is a compiled lambda defined where the function would be. opt_foo2 is
// a Compiled object whose call operator has the lambda's signature.
const auto opt_foo2 = compile([](Tensor x, Tensor y) {
    Tensor a = sin(x);
    Tensor b = cos(y);
    return a + b;
});

// --- A module: Linear(100, 10) followed by relu, as in the tutorial's MyModule.
struct MyModule : nn::Module {
    std::shared_ptr<nn::Linear> lin = register_module("lin", std::make_shared<nn::Linear>(100, 10));
    Tensor forward(const Tensor& x) override { return F::relu((*lin)(x)); }
};

int main() {
    int failures = 0;
    auto check = [&](bool ok, const std::string& fact) {
        std::cout << "  check: " << fact << ": " << (ok ? "yes" : "NO") << "\n";
        failures += !ok;
    };
    manual_seed(0);

    // compile(foo) uses the default backend, "inductor": kiln's code generator fuses
    // sin, cos and + into one C++ loop (lesson 07 reads that loop).
    auto opt_foo1 = compile(foo);
    Tensor x = randn({10, 10}), y = randn({10, 10});
    Tensor out1 = opt_foo1(x, y);
    std::cout << "opt_foo1(x, y) =\n" << out1 << "\n";
    check(allclose(out1, foo(x, y), 1e-5, 1e-6), "opt_foo1(x, y) equals foo(x, y)");

    Tensor out2 = opt_foo2(x, y);
    check(allclose(out2, foo(x, y), 1e-5, 1e-6),
          "the decorator-style opt_foo2(x, y) equals foo(x, y)");

    // A module compiles the same way; the compiled object calls mod.forward. Parameters
    // are not arguments: the recorder *lifts* them into graph inputs that the entry
    // holds, and guards the module's state (training flag, registered parameters).
    MyModule mod;
    auto opt_mod = compile(mod);
    Tensor xm = randn({10, 100});
    Tensor out_mod = opt_mod(xm);
    std::cout << "opt_mod(randn(10, 100)) has shape " << out_mod.shape() << "\n";
    check(out_mod.shape() == Shape{10, 10}, "the module's output is [10, 10]");
    check(allclose(out_mod, mod(xm), 1e-5, 1e-6), "opt_mod(x) equals mod(x)");

    // --- A custom backend: a function (graph, example inputs) -> callable. This one
    // prints the graph FX-style (print_tabular) and returns a callable that runs it with
    // kiln's reference interpreter. That is all a backend is; "eager", "aot_eager" and
    // "inductor" have this very shape.
    int graphs_seen = 0;
    auto custom_backend = [&graphs_seen](
                              const jit::Graph& gm,
                              std::span<const Tensor> example_inputs) -> jit::CompiledFn {
        ++graphs_seen;
        std::cout << "custom backend called with graph (" << example_inputs.size()
                  << " example inputs):\n";
        gm.print_tabular();
        return [&gm](std::span<const Tensor> inputs) { return jit::interpret(gm, inputs); };
    };

    jit::reset();  // forget every compiled entry (torch._dynamo.reset())
    auto opt_model = compile(mod, {.backend = custom_backend});
    Tensor out_custom = opt_model(xm);
    // The graph has three placeholders, the argument (arg0) and the two lifted
    // parameters (weight, bias), then Linear's ops (permute the weight, matmul, add the
    // bias) and relu: the module call itself left no trace, it was inlined.
    check(graphs_seen == 1, "the backend received one graph");
    check(allclose(out_custom, mod(xm), 1e-5, 1e-6), "the custom backend's callable gives mod(x)");
    opt_model(randn({10, 100}));
    check(graphs_seen == 1, "a second call reused the compiled callable (no new graph)");

    // Backends can also be registered by name, then chosen by name.
    jit::register_backend("print_tabular", custom_backend);
    auto opt_foo3 = compile(foo, {.backend = "print_tabular", .arg_names = {"x", "y"}});
    check(allclose(opt_foo3(x, y), foo(x, y), 1e-5, 1e-6),
          "foo through the registered backend equals foo");
    check(graphs_seen == 2, "foo's graph went to the registered backend");

    // torch.compile.list_backends(): what names compile() accepts.
    std::cout << "list_backends():";
    std::vector<std::string> names = jit::list_backends();
    for (const std::string& n : names) std::cout << " " << n;
    std::cout << "\n";
    auto has = [&](const std::string& n) {
        return std::find(names.begin(), names.end(), n) != names.end();
    };
    check(has("eager") && has("aot_eager") && has("inductor") && has("print_tabular"),
          "eager, aot_eager, inductor and our print_tabular are listed");

    std::cout << (failures ? "lesson 02: FAILED\n" : "lesson 02: all checks passed\n");
    return failures ? 1 : 0;
}
