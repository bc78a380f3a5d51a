// The faster of a graph's generated kernels and the interpreter, per graph
// ("compiled is never slower than eager"). The first call runs the kernels untimed (it pays
// for first-touch allocations); the next 2 * samples calls alternate kernels, eager,
// kernels, eager ..., each timed with steady_clock; then the faster path serves every later
// call. Each path is judged by its fastest timed call (other processes only ever add time),
// and eager wins only when it beats the kernels by more than `margin`, so noise does not
// flip a choice the kernels nearly win. A call runs the graph once, through one
// path, so random ops draw once and writes happen once, as in eager.
//
// A graph with symbolic sizes serves many sizes, and which path wins depends on the size:
// it keeps one choice per size class (the inputs' total elements, by power of two).
#pragma once
#include <functional>
#include <string>

#include "jit/backends.h"

namespace kiln::codegen {

struct ChoiceOptions {
    bool enabled = true;
    int samples = 3;       // timed calls of each path before choosing
    double margin = 0.10;  // eager must be faster than the kernels by more than this fraction
};
// KILN_CHOOSE: unset, "1" or "on": measure; "0" or "off": always the generated kernels.
// KILN_CHOOSE_SAMPLES=N (1..100, default 3): timed calls of each path.
ChoiceOptions choice_options_from_env();

enum class Choice { measuring, generated, eager };

struct ChoiceReport {
    Choice choice = Choice::measuring;
    double generated_ms = 0;  // the fastest timed call of the generated kernels
    double eager_ms = 0;      // ... of the interpreter
    int samples = 0;          // timed calls of each path
    int size_class =
        -1;  // graphs with symbols: inputs of 2^(size_class-1) .. 2^size_class elements
    // "generated kernels 0.412 ms vs eager 0.950 ms (best of 3) -> generated kernels"
    std::string str() const;
};

// Wraps `generated` (the kernels) and `eager` (the interpreter) of graph `graph_id` (the
// inductor's N, as in output_code_N.cpp) into one CompiledFn that measures, chooses, then
// runs the chosen one. `on_report` runs when a size class starts
// measuring and when it has chosen (from the calling thread; not under any lock).
using OnChoiceReport = std::function<void(const ChoiceReport&)>;
jit::CompiledFn choose_faster(int graph_id, jit::CompiledFn generated, jit::CompiledFn eager,
                              ChoiceOptions options, bool symbolic, OnChoiceReport on_report);

// Test hook: when set, a timed call takes its time from `timer` instead of the clock
// (`graph_id`: as given to choose_faster; `generated`: which path ran; `measured_ms`: the
// clock's reading), so tests choose deterministically. An empty function restores the clock.
using ChoiceTimer = std::function<double(int graph_id, bool generated, double measured_ms)>;
void set_choice_timer_for_testing(ChoiceTimer timer);

}  // namespace kiln::codegen
