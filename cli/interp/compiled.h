// compile() and explain() for kiln script: a script function (or module) compiled through
// the JIT's type-erased core (jit/cache.h), with a host callable that runs the function in
// the interpreter. The JIT records the dispatcher calls the interpreter makes, so a script
// `if` on a tensor is a graph break exactly as `if (t)` is in C++.
#pragma once
#include <deque>
#include <string>
#include <vector>

#include "cli/interp/interp.h"

namespace kiln::interp {

struct ClassObj;

// Arguments as the JIT's guards see them: Tensors, numbers and object identities; a dict of
// tensors becomes one argument per key (the walk-through's `inputs["x"]`), a list one per
// element, a script object its identity plus its attributes and its class's data attributes.
struct Flattener {
    Interp& in;
    jit::Args args;
    std::deque<std::string> keys;  // stable addresses for ArgValue::key
    std::vector<const void*> objects_seen;

    void add(const Value& v, int pos, const std::string* key);
    // A global is guarded as an argument is, except that a list or dict is guarded by
    // identity, not item by item: fn may append to it, and each call would then recompile.
    void add_global(const Value& v, int pos, const std::string* key);
    void add_class(const std::shared_ptr<ClassObj>& cls, int pos, const std::string* key);
};

struct CompiledObj {
    std::string name;
    Value target;  // the function or module compiled
    std::shared_ptr<jit::CompiledCore> core;
    // How fn's tensors come back; learnt when it first runs (a cache hit runs no host code).
    enum class Result { tensor, tuple, list, none } result = Result::tensor;
    std::vector<bool> result_none;  // a tuple or list result: which items are None (mha's (out, None))
};

struct ExplainObj {
    jit::ExplainOutput output;
    std::vector<std::string> sites;  // the script line of each tensor condition, in order
};
// PyTorch-style explain text, with each graph break's location given as its script line.
std::string explain_text(const ExplainObj& e);

// compile(backend=fn): fn(gm, example_inputs) is a script function returning a callable.
jit::Backend script_backend(Interp& in, const Value& fn);
// compile(target, backend=..., fullgraph=..., dynamic=..., mode=...)
Value compile_value(Interp& in, const Value& target, const std::vector<std::pair<std::string, Value>>& options);
Value call_compiled(Interp& in, CompiledObj& compiled, CallArgs args);
// explain(f)(args): compiles f afresh (eager backend), calls it once, reports.
Value explain_call(Interp& in, const Value& target, CallArgs args);

// Host code under a recording did something to a non-tensor value that replaying graphs
// would not redo (list.append, d[k] = v, x.grad = None, print): the JIT then re-runs the
// host code on every call, so the effect happens each call as in eager. A mutation of a
// list or dict made by this very call is not reported (the re-run remakes it anyway).
void note_host_effect(Interp& in, const Value& object, const std::string& what);

// For the REPL's :graph and :guards, and explain of what a compiled function holds now.
std::string graphs_text(const CompiledObj& c);
// What the backend generated for each graph: schedule and C++ source (inductor), or why
// the graph runs in the interpreter.
std::string code_text(const CompiledObj& c);
std::string guards_text(const CompiledObj& c);

}  // namespace kiln::interp
