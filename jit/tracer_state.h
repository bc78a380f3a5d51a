// The tracer's state while fn runs: one Tracer per trace_entry call (jit/tracer.h). This
// header is that state; each idea working on it has its own file and one entry function:
//   file                   idea                                              entry
//   jit/tracer.cpp         the state: which slot or graph value a tensor is  Tracer(), bind()
//   jit/record.cpp         an op fn runs becomes a node of the open graph    record_call()
//   jit/sym_record.cpp     symbolic sizes of each recorded value; pins       sym_meta()
//   jit/functionalize.cpp  an in-place op: functional op + write-back        assign()
//   jit/segments.cpp       a graph break closes the open graph as a segment  end_record()
//   jit/tracer_replay.cpp  a later call checked against the recording        match()
//   jit/fake_record.cpp    shape-only recording (fake tensors) and its exit  fake_op()
// Internal to jit/: include jit/tracer.h instead.
#pragma once
#include <map>
#include <memory>
#include <unordered_map>

#include "jit/ddp_split.h"
#include "jit/sym_shapes.h"
#include "jit/trace_log.h"
#include "jit/tracer.h"

namespace kiln::jit::tracing {

// One op (or detach) of fn as replay logs it, and as recording reads it.
struct Step {
    bool is_detach = false;
    std::vector<Tensor> aliases;  // other tensors that took this value (in-place targets)
    OpId op{};
    Attrs attrs;
    std::vector<AttrPatch> patches;    // size-derived attributes (dispatch_sized)
    std::vector<Tensor> size_sources;  // the tensors whose symbols the patches read
    std::vector<Tensor> inputs;
    Tensor out;
    bool grad = true;
};

// "12x3": a tensor's shape for an explanation.
std::string shape_str(const Tensor& t);

class Tracer final : public DispatchHook {
   public:
    // jit/tracer.cpp
    Tracer(Entry& e, const Args& args, const std::vector<int64_t>& syms, const TraceConfig& cfg,
           TraceStats& st);
    void host_effect(const std::string& what, const std::source_location& loc) override;
    void guard_value(const std::string& what, std::function<int64_t()> read) override;
    // jit/record.cpp
    Tensor call(OpId op, std::span<const Tensor> inputs, const Attrs& attrs) override {
        return call_sized(op, inputs, attrs, {});
    }
    Tensor call_sized(OpId op, std::span<const Tensor> inputs, const Attrs& attrs,
                      std::span<const SizeOrigin> origins) override;
    void detached(const Tensor& src, const Tensor& out) override;
    // jit/sym_record.cpp
    void size_read(const Tensor& t, int64_t dim, const std::source_location& loc) override;
    // jit/functionalize.cpp
    void assign(const Tensor& target, const Tensor& value) override;
    // jit/segments.cpp
    void escape(const Tensor& t, Escape kind, const std::source_location& loc) override;
    bool custom_function(const Tensor& input, const std::source_location& loc) override;
    void finish(const std::vector<Tensor>& results);

   private:
    enum class RefKind {
        slot,
        op
    };  // op: a builder id when recording, a step index when replaying
    struct Ref {
        std::weak_ptr<TensorImpl> w;
        RefKind kind;
        int id;
    };

    bool matching() const { return b_ == nullptr; }

    // --- the state (jit/tracer.cpp)
    const Ref* resolve(const Tensor& t);
    void bind(const Tensor& t, RefKind k, int id);
    Tensor eager(OpId op, std::span<const Tensor> inputs, const Attrs& attrs);
    // The rest of this call runs eagerly, and so does every later call of this entry.
    void go_eager(const std::string& why);
    void mark_rerun(const std::string& why);

    // --- recording (jit/record.cpp)
    void start_record();
    int record_node(int id, const Tensor& out);
    // The slot holding `t`, lifting an outside tensor (closure, parameter) into a new one.
    int slot_of(const Tensor& t);
    int value_of(const Tensor& t);
    int record_call(const Step& s, const std::vector<int>& ids, const Tensor& out);
    int record_detach(int arg, const Tensor& out);

    // --- symbolic sizes (jit/sym_record.cpp, over jit/sym_shapes.h)
    void pin(int k, const std::string& why);
    std::vector<int> masked(std::vector<int> sym, size_t rank) const;
    // The symbols of t's dims as this recording knows them (-1: static or pinned).
    std::vector<int> sym_dims(const Tensor& t);
    // An in-place write needs target and value to have the same sizes on every call.
    void same_symbols(const Tensor& target, const Tensor& value);
    // A composite's size-derived attributes (SizeOrigin) as expressions over the symbols.
    std::vector<AttrPatch> patches_of(std::span<const SizeOrigin> origins, const Attrs& attrs,
                                      std::vector<Tensor>& sources);
    // The meta of a recorded op's output with its symbols, pinning what the shape rule
    // cannot say.
    ValueMeta sym_meta(const Step& s, const std::vector<int>& ids, const Tensor& out);

    // --- in-place ops (jit/functionalize.cpp)
    // Why `target <- value` can't be functionalized ("" when it can).
    std::string functionalize_blocker(const Tensor& target, const Tensor& value);
    bool reads_written_storage(std::span<const Tensor> inputs) const;
    // Ops recorded (or replayed) earlier read `target` before the write: keep its old value.
    void snapshot_inputs(const Tensor& target, int slot);
    bool writes_back(int slot) const;
    void record_assign(const Tensor& target, int old_id, int slot, int value_id);
    bool match_assign(const Tensor& target, const Ref* tr, int slot, int value_id);

    // --- segments (jit/segments.cpp)
    // Closes the open recording as a segment (graph breaks at an escape, or fn returned).
    Segment* end_record(bool is_return, const std::vector<Tensor>& ts, const BreakInfo* brk);
    void compile_into(Segment& seg, const std::vector<int>& outs);
    Segment* graft(std::unique_ptr<Segment> seg);
    // The eager run drew random numbers; the compiled run must draw the same ones, leaving
    // the generator where eager left it.
    void rewind_rng();

    // --- shape-only recording (jit/fake_record.cpp, over jit/fake.h)
    // The op's fake output, or (no shape rule) its real one after materialize().
    Tensor fake_op(OpId op, std::span<const Tensor> inputs, const Attrs& attrs);
    // Shape-only recording stops: the open graph so far runs (interpreted) on the real
    // inputs, its live fake tensors take the values, the in-place writes it deferred are
    // done; the rest of the call records with real tensors, as real tracing would.
    void materialize(const std::string& why);
    // Fake tensors of the open graph that are not its outputs but outlive it (host state
    // holds them: an optimizer's buffer): before the graph's run, what computing them
    // needs; after, their values (the graph's prefix interpreted again, off the record).
    struct Strays {
        std::vector<Tensor> inputs;  // in_examples_ as they were before the write-backs
        RngState rng;
        bool any = false;
    };
    Strays strays_before(const std::vector<int>& outs);
    void fill_strays(const Strays& st);
    // Every fake tensor the open graph made, with its builder id.
    std::vector<std::pair<std::weak_ptr<TensorImpl>, int>> fake_made_;

    // --- replaying (jit/tracer_replay.cpp)
    // The inputs of a replayed candidate, read off the ops that used them.
    std::vector<Tensor> replay_inputs(const Segment& c) const;
    bool arg_matches(const Segment& c, int arg, const Tensor& t);
    bool step_matches(const Segment& c, const Step& s);
    Tensor match(Step s);
    // The slot a candidate assigns to `t` at its end, or -1 if it disagrees.
    bool end_matches(const Segment& c, const Tensor& t, int expected);
    Segment* choose(bool is_return, Escape kind, const std::vector<Tensor>& ts);
    // Ends a replayed segment: binds its outputs to their slots. Null when it diverged
    // (then recording has taken over).
    Segment* end_match(bool is_return, Escape kind, const std::vector<Tensor>& ts);
    // The replay went where no recording did. For a re-run entry that is a new variant
    // (host code decided on data): record it as a sibling. Otherwise fn is not deterministic.
    void diverge(const std::string& where);

    Entry& e_;
    std::vector<int64_t> syms_;
    const TraceConfig& cfg_;
    TraceStats& stats_;
    std::vector<const ArgValue*> slot_arg_;
    std::vector<const ArgGuard*> slot_guard_;
    std::unordered_map<const TensorImpl*, Ref> refs_;
    bool in_eager_ = false;
    Segment* parent_ = nullptr;  // where the next segment is grafted
    int outcome_ = -1;
    // recording (b_ set)
    std::unique_ptr<GraphBuilder> b_;
    std::vector<int> in_slots_;
    std::vector<Tensor> in_examples_;
    std::unordered_map<int, int> slot_ph_;
    std::vector<std::weak_ptr<TensorImpl>> node_out_;  // per builder id: liveness
    std::vector<Segment::Assign> assigns_;  // in-place ops of the open graph (builder ids)
    std::map<int, int> mutations_;          // argument/lifted slot -> builder id of its new value
    // A DDP forward ran while this graph was recorded: it is split at its buckets
    // (jit/ddp_split.h).
    std::shared_ptr<const DDPBuckets> ddp_;
    // replaying (b_ null)
    std::vector<Segment*> cands_;
    std::vector<Step> log_;
    struct LoggedAssign {
        int ops_before;
        Tensor target;
        int old_step;  // step whose value the target held, or -1
        int slot;      // the target's slot, or -1
        int value_step;
    };
    std::vector<LoggedAssign> alog_;  // in-place ops matched in the open segment
    int assigns_seen_ = 0;
    // both
    bool rng_saved_ = false;  // rng_ holds the generator before the open segment's first random op
    RngState rng_;
    bool fake_ = false;  // recording with fake tensors (jit/fake.h)
    std::vector<std::pair<Tensor, int>> fake_writes_;  // real targets of deferred in-place writes
    bool passthrough_ = false;  // fn runs eagerly from here on (entry.eager_reason says why)
    std::unordered_map<int, Tensor> slot_tensor_;  // the tensor each bound slot holds
    std::unordered_map<const TensorImpl*, int>
        written_slot_;  // in-place targets -> the slot written back
};

}  // namespace kiln::jit::tracing
