// Assignment 2: tracing and guards (assignments/a2/README.md). You build a small Dynamo:
// a recorder on kiln's dispatch hook that captures a jit::Graph (task 2.1), guards that say
// when a recorded graph may be reused (2.2), and the cache of guarded entries (2.3).
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "jit/backends.h"
#include "jit/graph.h"
#include "kiln.h"

namespace student {

using kiln::Tensor;
using kiln::jit::Graph;

// The functions this assignment compiles: tensors and numbers in, one tensor out.
using Fn =
    std::function<Tensor(const std::vector<Tensor>& tensors, const std::vector<double>& scalars)>;

// --- Task 2.1: the recorder. While installed (kiln::set_dispatch_hook), every op fn runs
// arrives at call(): run it eagerly (kiln::dispatch_eager, under kiln::NoDispatchHook) and
// record it as a node of a jit::GraphBuilder whose placeholders are the traced tensors.
// A tensor that is neither an argument nor recorded (one captured from outside) is
// refused with a kiln::Error; so is a graph break (escape) and an in-place write (assign).
class Recorder final : public kiln::DispatchHook {
   public:
    explicit Recorder(const std::vector<Tensor>& inputs);
    Tensor call(kiln::OpId op, std::span<const Tensor> inputs, const kiln::Attrs& attrs) override;
    void escape(const Tensor& t, kiln::Escape kind, const std::source_location& loc) override;
    void assign(const Tensor& target, const Tensor& value) override;
    // The graph: placeholders (the inputs), the recorded calls, and `output` as its output.
    std::shared_ptr<const Graph> finish(const Tensor& output);

   private:
    kiln::jit::GraphBuilder builder_;
    std::unordered_map<const kiln::TensorImpl*, int> ids_;  // tensor -> builder id
    std::vector<Tensor> alive_;  // keeps recorded tensors alive: an address is never reused
};

// Task 2.1 too: runs fn(tensors, scalars) with a Recorder installed and returns its graph.
// The hook is removed again when fn returns or throws.
std::shared_ptr<const Graph> trace(const Fn& fn, const std::vector<Tensor>& tensors,
                                   const std::vector<double>& scalars);

// --- Task 2.2: guards. A graph recorded for some arguments is valid for other arguments
// when every tensor has the same dtype, sizes and requires_grad, and every number is the
// same value (bit for bit: the graph baked it into an attribute).
struct TensorGuard {
    kiln::DType dtype = kiln::DType::float32;
    kiln::Shape shape;
    bool requires_grad = false;
};
struct Guard {
    std::vector<TensorGuard> tensors;
    std::vector<double> scalars;
};
Guard guard_build(const std::vector<Tensor>& tensors, const std::vector<double>& scalars);
// "" when the arguments pass, else the first failure, naming it: "tensors[1]: ..." or
// "scalars[0]: ..." (or "number of tensors ..." / "number of scalars ...").
std::string guard_check(const Guard& guard, const std::vector<Tensor>& tensors,
                        const std::vector<double>& scalars);
std::string guard_print(const Guard& guard);  // given: one line per guard

// --- Task 2.3: the cache. A call checks each entry's guard in order; on a hit it runs that
// entry's compiled code (fn does not run); on a miss it traces fn, compiles the graph with
// the backend (kiln::jit::backend_compile) and appends a new entry.
class CompiledFunction {
   public:
    struct Entry {
        Guard guard;
        std::shared_ptr<const Graph> graph;
        kiln::jit::CompiledFn code;
    };
    explicit CompiledFunction(Fn fn, kiln::jit::Backend backend = "eager")
        : fn_(std::move(fn)), backend_(std::move(backend)) {}
    Tensor operator()(const std::vector<Tensor>& tensors, const std::vector<double>& scalars = {});
    const std::vector<Entry>& entries() const { return entries_; }
    int num_hits() const { return hits_; }

   private:
    Fn fn_;
    kiln::jit::Backend backend_;
    std::vector<Entry> entries_;
    int hits_ = 0;
};

}  // namespace student
