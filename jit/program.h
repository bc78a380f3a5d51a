// An entry's compiled code: a tree of graph segments joined by branch points (docs/jit.md).
//
//   root segment ──(escape: bool)──► child[true]  ──► ... return
//                                └─► child[false] ──► ... return
//
// Values flow between segments through *slots*: fn's tensor arguments first, then
// lifted outside tensors (closures, parameters), then segment outputs. A cache hit runs
// the tree with no host code: it reads each branch's bool and follows that child.
#pragma once
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "jit/backends.h"
#include "jit/guards.h"

namespace kiln::jit {

// Why and where a graph ended early.
struct BreakInfo {
    Escape kind = Escape::bool_conversion;
    std::string reason;
    std::string location;
    std::string hint;
};
std::string escape_name(Escape kind);  // "operator bool", "item()", "data access"

struct Segment {
    std::shared_ptr<const Graph> graph;  // null when the segment has no ops
    CompiledFn run;
    std::vector<int> input_slots;   // placeholder i reads this slot
    std::vector<int> output_slots;  // graph output j writes this slot
    int id = 0;                     // 1-based, in recording order within its entry

    bool is_return = true;          // else: ends at an escape (a graph break)
    std::vector<int> return_slots;  // return: fn's results
    int escape_slot = -1;           // escape: the tensor whose value left
    BreakInfo brk;

    // In-place ops recorded here, in order; replay checks each against the recording.
    struct Assign {
        int ops_before;   // ops of this segment recorded before it
        int value_node;   // graph node holding the new value
        int target_slot;  // the slot written (argument, lifted, earlier output), or -1
        int target_node;  // else: the graph node whose value was overwritten
    };
    std::vector<Assign> assigns;
    // Outputs j that are written back into the storage of slot output_slots[j] (a mutated
    // argument, captured tensor or earlier value: functionalization's write-back).
    std::vector<int> writeback_outputs;
    bool is_writeback(int j) const;

    // outcome: 0/1 for a bool escape; -1 for item/data (re-run entries keep one child per
    // distinct recording that followed).
    struct Child {
        int outcome;
        std::unique_ptr<Segment> seg;
    };
    std::vector<Child> children;
    Segment* child(int outcome) const;
    int num_ops() const { return graph ? graph->num_ops() : 0; }
};

enum class SlotKind : uint8_t { argument, lifted, output };

// A non-tensor value the recording read (a module's training flag, a script global):
// the entry holds only while `read()` still returns `value`.
struct ValueGuard {
    std::string what;
    std::function<int64_t()> read;
    int64_t value = 0;
};

// An output slot whose value is a view of an argument or lifted tensor (fn returned
// x.slice(...), x.t() or x.detach() of an input, mutated or not). AOTAutograd's rule: the
// result is regenerated as that view of the caller's tensor, so a later write to one shows
// in the other, as in eager. The graph's own copy of the value is not returned.
struct SlotView {
    int base = -1;  // the argument/lifted slot viewed; -1: not a view of an input
    struct Step {
        std::shared_ptr<const Graph> graph;
        int node;  // a view op (or detach) of `graph`, applied to the previous step's result
    };
    std::vector<Step> chain;
};

struct Entry {
    GuardSet guards;
    std::vector<ValueGuard> value_guards;
    std::vector<int> mutated_slots;    // argument and lifted slots that in-place ops write
    std::string rerun_reason;          // why host code re-runs every call (first reason)
    std::string eager_reason;          // set: fn runs eagerly on every call (could not be functionalized)
    std::string fake_fallback;         // set: shape-only tracing stopped here, real tensors from then on
    std::unique_ptr<Segment> root;
    std::vector<SlotKind> slot_kinds;
    std::vector<Tensor> held;          // per slot: the lifted tensor (others undefined)
    std::vector<std::vector<int>> slot_syms;  // per slot: an earlier graph's output's symbols (others empty)
    std::vector<SlotView> slot_views;  // per slot: a view of an input (output slots only)
    bool returns_views = false;        // some return slot has a SlotView
    bool rerun = false;                // host code consumed a raw value: re-run fn every call
    std::vector<BreakInfo> breaks;     // in recording order
    int num_segments = 0;
    int id = 0;

    int add_slot(SlotKind kind, Tensor held_tensor = {});
    bool values_hold() const;                  // every value guard still reads its value
    bool aliasing_ok(const Args& args) const;  // no mutated input shares storage with another input
    std::vector<const Segment*> segments() const;  // pre-order
};

// Runs the program of a non-rerun entry for a cache hit. Returns false (having done
// nothing visible) when a branch outcome has no child yet: the caller replays fn.
bool program_run(const Entry& entry, const Args& args, std::span<const int64_t> syms, std::vector<Tensor>& results);

// The view `slot` is of an input (entry.slot_views), applied to the tensor its base slot
// holds now: the eager view ops, so strides and aliasing are eager's for this call's layout.
Tensor regenerate_view(const Entry& entry, int slot, std::span<const Tensor> slots, std::span<const int64_t> syms);

// The value of a one-element tensor as a condition (no escape report).
bool truth_value(const Tensor& t);

// Runs one segment's compiled graph on `slots`; returns its outputs (output_slots order).
std::vector<Tensor> segment_call(const Segment& seg, std::span<const Tensor> slots);

}  // namespace kiln::jit
