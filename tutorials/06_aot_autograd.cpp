// Lesson 06: AOT autograd — what backward keeps, and how a compiler keeps less.
//
// Mirrors "A Walk Through Example of torch.compile", sections "AOTAutograd: generate
// backward computation graph from forward graph" (Cosine, OptimizedTwoCosine) and
// "Backend: compile and optimize computation graph" (the eager / aot_eager / inductor
// summary table).
//
// Eager autograd saves, op by op, what each derivative needs: cos(cos(x)) keeps x (the
// inner cos's derivative is -sin(x)) and cos(x) (the outer one's is -sin(cos(x))). With the whole
// graph known ahead of time, one can keep x alone and recompute cos(x) in backward. kiln's AOT
// autograd does this for every compiled graph whose inputs need gradients: it traces the derivative
// formulas into a joint forward+backward graph, cuts it (a min-cut over bytes) into a forward graph
// that returns the saved values and a backward graph that uses them.
//
// Build and run: make demo, or build/tutorial_06_aot_autograd (tutorials/README.md).
#include <cstdio>
#include <iostream>

#include "kiln.h"
// The AOT pieces themselves: plan() builds the joint graph and cuts it; aot_compile()
// runs the two halves as one tape node. They are what the "aot_eager" and "inductor"
// backends are made of, and what a custom backend uses to get backward graphs.
#include "jit/aot/aot.h"

using namespace kiln;

int saves = 0;  // how many tensors the Functions below saved, to check the tutorial's counts

// --- The tutorial's Cosine: forward and backward by hand, saving its input.
struct Cosine : autograd::Function<Cosine> {
    static Tensor forward(const Tensor& x0) { return cos(x0); }
    static void setup_context(autograd::Ctx& ctx, const std::vector<Tensor>& inputs,
                              const Tensor&) {
        const Tensor& x = inputs[0];
        std::cout << "saving tensor of size " << x.shape() << "\n";
        ctx.save_for_backward(x);
        ++saves;
    }
    static std::vector<Tensor> backward(autograd::Ctx& ctx, const Tensor& grad_output) {
        const Tensor& x = ctx.saved_tensors()[0];
        return {-sin(x) * grad_output};
    }
};
Tensor cosine(const Tensor& x) { return Cosine::apply(x); }
Tensor naive_two_cosine(const Tensor& x0) {
    Tensor x1 = cosine(x0);
    Tensor x2 = cosine(x1);
    return x2;
}

// --- The hand-optimized version: save x0 only, recompute cos(x0) in backward.
struct OptimizedTwoCosine : autograd::Function<OptimizedTwoCosine> {
    static Tensor forward(const Tensor& x0) { return cos(cos(x0)); }
    static void setup_context(autograd::Ctx& ctx, const std::vector<Tensor>& inputs,
                              const Tensor&) {
        const Tensor& x = inputs[0];
        std::cout << "saving tensor of size " << x.shape() << "\n";
        ctx.save_for_backward(x);
        ++saves;
    }
    static std::vector<Tensor> backward(autograd::Ctx& ctx, const Tensor& grad_x2) {
        const Tensor& x0 = ctx.saved_tensors()[0];
        Tensor x1 = cos(x0);  // re-computed in backward
        Tensor grad_x1 = -sin(x1) * grad_x2;
        Tensor grad_x0 = -sin(x0) * grad_x1;
        return {grad_x0};
    }
};
Tensor optimized_two_cosine(const Tensor& x) { return OptimizedTwoCosine::apply(x); }

// What kiln compiles: plain ops, no hand-written backward.
Tensor two_cosine(Tensor x) { return cos(cos(x)); }

int main() {
    int failures = 0;
    auto check = [&](bool ok, const std::string& fact) {
        std::cout << "  check: " << fact << ": " << (ok ? "yes" : "NO") << "\n";
        failures += !ok;
    };
    manual_seed(0);
    Tensor input = randn({5, 5, 5}, {.requires_grad = true});
    Tensor grad_output = randn({5, 5, 5});

    // --- By hand: two saves, then one.
    std::cout << "naive_two_cosine(input):\n";
    saves = 0;
    Tensor output2 = naive_two_cosine(input);
    check(saves == 2, "naive_two_cosine saved 2 tensors");
    std::cout << "optimized_two_cosine(input):\n";
    saves = 0;
    Tensor output3 = optimized_two_cosine(input);
    check(saves == 1, "optimized_two_cosine saved 1 tensor");
    // saved_report walks the tape from an output and adds up what each node keeps alive.
    std::cout << "naive:\n"
              << autograd::saved_report(output2) << "optimized:\n"
              << autograd::saved_report(output3);

    // The tutorial's correctness check against the built-in cos.
    Tensor output1 = cos(cos(input));
    (output1 * grad_output).sum().backward();
    Tensor grad_input1 = input.grad();
    input.zero_grad();
    (output2 * grad_output).sum().backward();
    Tensor grad_input2 = input.grad();
    input.zero_grad();
    (output3 * grad_output).sum().backward();
    Tensor grad_input3 = input.grad();
    input.zero_grad();
    check(allclose(output1, output2) && allclose(output1, output3), "outputs of all three agree");
    check(allclose(grad_input1, grad_input2, 1e-5, 1e-6) &&
              allclose(grad_input1, grad_input3, 1e-5, 1e-6),
          "gradients of all three agree");

    // --- kiln's AOT autograd doing it automatically. A custom backend (lesson 02) gets
    // the forward graph; this one asks aot::plan for what AOT autograd makes of it and
    // prints every stage, then hands the graph to aot_compile with an inner compiler —
    // the part a real backend writes (here: print what it is given and interpret it).
    // That is the seed's remark: custom backends work with AOTAutograd and only deal
    // with graph optimization, forward graph or backward graph alike.
    int inner_graphs = 0;
    jit::aot::GraphCompiler inner = [&inner_graphs](std::shared_ptr<const jit::Graph> g,
                                                    std::span<const Tensor> ex) {
        ++inner_graphs;
        std::cout << "inner compiler got a graph: " << g->num_inputs() << " inputs, "
                  << g->outputs().size() << " outputs\n";
        return jit::aot::interpret_compiler(g, ex);
    };
    size_t eager_saved_bytes = 0, compiled_saved_bytes = 0;
    auto my_aot_backend = [&](const jit::Graph& graph,
                              std::span<const Tensor> examples) -> jit::CompiledFn {
        jit::aot::AotPlan plan = jit::aot::plan(graph, examples);
        std::cout
            << "joint graph (forward, then the derivative formulas of tensor/ops.def backwards):\n"
            << plan.joint.graph->str()
            << "forward graph (returns the output, then what it saves):\n"
            << plan.forward->str()
            << "backward graph (saved values + tangents -> input gradients):\n"
            << plan.backward->str() << "the cut:\n"
            << plan.memory.str();
        eager_saved_bytes = plan.memory.eager_bytes();
        compiled_saved_bytes = plan.memory.compiled_bytes();
        std::shared_ptr<const jit::Graph> g(
            &graph, [](const jit::Graph*) {});  // the caller keeps graph alive
        return jit::aot::aot_compile(g, examples, inner);
    };
    auto opt_two_cosine = compile(two_cosine, {.backend = my_aot_backend});
    opt_two_cosine(input);                 // records, compiles and runs: the plan prints
    Tensor out = opt_two_cosine(input);    // a hit: the forward half runs
    (out * grad_output).sum().backward();  // the backward half runs
    check(eager_saved_bytes == 1000 && compiled_saved_bytes == 500,
          "the cut keeps 500 bytes (x) where eager keeps 1000");
    check(inner_graphs == 2, "the inner compiler got two graphs: forward and backward");
    check(allclose(out, output1) && allclose(input.grad(), grad_input1, 1e-5, 1e-6),
          "output and gradient equal eager");
    input.zero_grad();

    // --- The summary table: the same function under the three built-in backends.
    //   eager:     graph captured; backward by the eager tape (interpreted ops record as usual)
    //   aot_eager: + AOT autograd: joint graph, cut, forward/backward graphs, interpreted
    //   inductor:  + both halves compiled to fused C++ kernels (lesson 07)
    std::cout << "\nbackend    saved tensors  saved bytes  grad_fn\n";
    for (const char* backend : {"eager", "aot_eager", "inductor"}) {
        jit::reset();
        auto f = compile(two_cosine, {.backend = backend});
        f(input);  // the first call records, compiles and runs the graphs; later ones only run them
        Tensor y = f(input);
        autograd::SavedReport r = autograd::saved_report(y);
        std::printf("%-9s  %13zu  %11zu  %s\n", backend, r.total_tensors, r.total_bytes,
                    r.nodes.at(0).node.c_str());
        (y * grad_output).sum().backward();
        bool same = allclose(y, output1) && allclose(input.grad(), grad_input1, 1e-5, 1e-6);
        input.zero_grad();
        bool expected_saves =
            std::string(backend) == "eager" ? r.total_tensors == 2 : r.total_tensors == 1;
        check(same && expected_saves,
              std::string(backend) + ": equals eager, saves " + std::to_string(r.total_tensors));
    }
    // An autograd::Function inside a compiled function, with an input that needs grad, is a
    // graph break: it runs eagerly between two graphs, so the gradient is its own backward's
    // (docs/jit.md, "What compile guarantees", Custom autograd Functions).

    // --- See it drawn: KILN_TRACE=DIR logs every compile of a run (docs/trace.md), and
    // `kiln report DIR` turns the log into pages to open in a browser (docs/report.md).
    std::cout << "\nthe compile report of this lesson (each joint graph cut into forward and "
                 "backward, side by side, the saved tensors and their bytes):\n"
                 "  KILN_TRACE=/tmp/trace06 build/tutorial_06_aot_autograd && build/kiln report "
                 "/tmp/trace06\n";

    std::cout << (failures ? "lesson 06: FAILED\n" : "lesson 06: all checks passed\n");
    return failures ? 1 : 0;
}
