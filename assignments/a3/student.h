// Assignment 3: graph breaks (assignments/a3/README.md). A function whose host code reads a
// tensor's value (`if (b.sum() < 0)`) can't be one graph. You split its recording at each
// such read (task 3.1), keep the pieces in a program tree with one child per outcome of
// each branch (3.2), and run the tree, recording again when an outcome is new (3.3).
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "jit/backends.h"
#include "jit/graph.h"
#include "kiln.h"

namespace student {

using kiln::Tensor;
using kiln::jit::Graph;
using Fn = std::function<Tensor(const std::vector<Tensor>& args)>;

// Where a value comes from: argument `index` of fn (segment == -1), or output `index` of
// segment number `segment` of the same run (0 = the first segment, ...).
struct ValueRef {
    int segment = -1;
    int index = 0;
    bool operator==(const ValueRef&) const = default;
};

// One graph between two breaks. Its outputs are every value it computed, in recording
// order (kiln keeps only the values still alive; returning all of them is simpler and
// still correct). `inputs` says where each placeholder's value comes from.
struct Segment {
    std::shared_ptr<const Graph> graph;
    std::vector<ValueRef> inputs;
};

// What one run of fn under the recorder saw: segment k ends at break k, which read the
// value `conditions[k]` as a bool and got `outcomes[k]`; the last segment ends at return.
struct Trace {
    std::vector<Segment> segments;
    std::vector<ValueRef> conditions;
    std::vector<bool> outcomes;
    ValueRef result;
    Tensor value;  // fn's result on this run (the recorder ran every op eagerly)
};

// --- Task 3.1: a recorder that splits at breaks. Like assignment 2's, it runs each op
// eagerly and records it; a tensor from an earlier segment (or an argument) becomes a
// placeholder of the current one the first time the current one reads it. escape() of
// kind bool_conversion ends the current segment (its graph is built), notes the condition
// and its outcome, and starts a new segment. Other escapes (item, data access) and in-place
// writes are refused with a kiln::Error.
class SegmentRecorder final : public kiln::DispatchHook {
   public:
    explicit SegmentRecorder(const std::vector<Tensor>& args);
    Tensor call(kiln::OpId op, std::span<const Tensor> inputs, const kiln::Attrs& attrs) override;
    void escape(const Tensor& t, kiln::Escape kind, const std::source_location& loc) override;
    void assign(const Tensor& target, const Tensor& value) override;
    Trace finish(const Tensor& result);  // ends the last segment

   private:
    void end_segment();
    Trace trace_;
    std::unordered_map<const kiln::TensorImpl*, ValueRef>
        refs_;                                              // args and earlier segments' values
    std::unique_ptr<kiln::jit::GraphBuilder> builder_;      // the current segment
    std::unordered_map<const kiln::TensorImpl*, int> ids_;  // tensor -> id in builder_
    std::vector<int> computed_;                             // builder ids of its calls, in order
    std::vector<const kiln::TensorImpl*> computed_tensors_;
    std::vector<ValueRef> inputs_;  // its placeholders' sources
    std::vector<Tensor> alive_;
};

// Task 3.1 too: runs fn(args) under a SegmentRecorder (removed again on return or throw).
Trace record(const Fn& fn, const std::vector<Tensor>& args);

// --- Task 3.2: the program tree. A node runs one segment; a node whose segment ended at a
// break has up to two children, next[outcome]. graft() adds a trace's path to the tree
// (making the root if there is none), compiling with `backend` only the segments the tree
// does not have yet; it returns how many it compiled. (A path already in the tree is
// assumed to record the same graphs: kiln checks this on replay, you may trust it.)
struct ProgramNode {
    Segment segment;
    kiln::jit::CompiledFn code;
    bool ends_in_branch = false;
    ValueRef condition;                    // when ends_in_branch
    ValueRef result;                       // when not
    std::unique_ptr<ProgramNode> next[2];  // next[false], next[true]
};
int graft(std::unique_ptr<ProgramNode>& root, const Trace& trace,
          const kiln::jit::Backend& backend);

// --- Task 3.3: running the tree. run_program runs the root's code on its inputs, then
// follows the branch outcomes; it returns the result, or nothing when it reaches an
// outcome never recorded. CompiledFunction calls it, and on nothing (or no tree yet)
// records fn, grafts the trace and returns the recorded run's value.
std::optional<Tensor> run_program(const ProgramNode& root, const std::vector<Tensor>& args);

class CompiledFunction {
   public:
    explicit CompiledFunction(Fn fn, kiln::jit::Backend backend = "eager")
        : fn_(std::move(fn)), backend_(std::move(backend)) {}
    Tensor operator()(const std::vector<Tensor>& args);
    int graphs_compiled() const { return graphs_; }
    int recordings() const { return recordings_; }  // calls that ran fn under the recorder
    const ProgramNode* root() const { return root_.get(); }

   private:
    Fn fn_;
    kiln::jit::Backend backend_;
    std::unique_ptr<ProgramNode> root_;
    int graphs_ = 0, recordings_ = 0;
};

}  // namespace student
