// Assignment 3: the reference solution (not shipped to students: make assignment-release).
#include "assignments/a3/student.h"

namespace student {

using namespace kiln;

SegmentRecorder::SegmentRecorder(const std::vector<Tensor>& args)
    : builder_(std::make_unique<jit::GraphBuilder>()) {
    for (size_t i = 0; i < args.size(); ++i) {
        refs_[args[i].impl()] = {-1, int(i)};
        alive_.push_back(args[i]);
    }
}

Tensor SegmentRecorder::call(OpId op, std::span<const Tensor> inputs, const Attrs& attrs) {
    std::vector<int> args;
    for (const Tensor& t : inputs) {
        auto here = ids_.find(t.impl());
        if (here != ids_.end()) {
            args.push_back(here->second);
            continue;
        }
        auto earlier = refs_.find(t.impl());
        KILN_CHECK(earlier != refs_.end(), "record: ", op_info(op).name,
                   " reads a tensor that is neither an argument nor computed by fn; pass it as an "
                   "argument");
        int id = builder_->placeholder("in" + std::to_string(inputs_.size()), jit::meta_of(t),
                                       "earlier value");
        ids_[t.impl()] = id;
        inputs_.push_back(earlier->second);
        args.push_back(id);
    }
    Tensor out;
    {
        NoDispatchHook off;
        out = dispatch_eager(op, inputs, attrs);
    }
    int id = builder_->call(op, attrs, std::move(args), out, autograd::grad_enabled());
    ids_[out.impl()] = id;
    computed_.push_back(id);
    computed_tensors_.push_back(out.impl());
    alive_.push_back(out);
    return out;
}

void SegmentRecorder::end_segment() {
    int k = int(trace_.segments.size());
    trace_.segments.push_back({builder_->build(computed_), inputs_});
    for (size_t i = 0; i < computed_tensors_.size(); ++i) refs_[computed_tensors_[i]] = {k, int(i)};
    builder_ = std::make_unique<jit::GraphBuilder>();
    ids_.clear(), computed_.clear(), computed_tensors_.clear(), inputs_.clear();
}

void SegmentRecorder::escape(const Tensor& t, Escape kind, const std::source_location& loc) {
    KILN_CHECK(kind == Escape::bool_conversion, "record: fn reads a tensor's value at ",
               loc.file_name(), ":", loc.line(),
               " other than as an `if` condition; only bool branches split the recording");
    end_segment();
    auto it = refs_.find(t.impl());
    KILN_CHECK(it != refs_.end(),
               "record: the condition is neither an argument nor computed by fn");
    bool outcome;
    {
        NoDispatchHook off;
        outcome = bool(t);
    }
    trace_.conditions.push_back(it->second);
    trace_.outcomes.push_back(outcome);
}

void SegmentRecorder::assign(const Tensor& target, const Tensor& value) {
    (void)target, (void)value;
    throw Error("record: an in-place write; this recorder records out-of-place ops only");
}

Trace SegmentRecorder::finish(const Tensor& result) {
    end_segment();
    auto it = refs_.find(result.impl());
    KILN_CHECK(it != refs_.end(),
               "record: fn returned a tensor it did not compute from its arguments");
    trace_.result = it->second;
    trace_.value = result;
    return std::move(trace_);
}

namespace {
struct HookScope {
    DispatchHook* prev;
    explicit HookScope(DispatchHook* hook) : prev(dispatch_hook()) { set_dispatch_hook(hook); }
    ~HookScope() { set_dispatch_hook(prev); }
};
}  // namespace

Trace record(const Fn& fn, const std::vector<Tensor>& args) {
    SegmentRecorder recorder(args);
    Tensor out;
    {
        HookScope scope(&recorder);
        out = fn(args);
    }
    return recorder.finish(out);
}

int graft(std::unique_ptr<ProgramNode>& root, const Trace& trace, const jit::Backend& backend) {
    int compiled = 0;
    std::unique_ptr<ProgramNode>* slot = &root;
    for (size_t k = 0; k < trace.segments.size(); ++k) {
        if (!*slot) {
            auto node = std::make_unique<ProgramNode>();
            node->segment = trace.segments[k];
            // Example inputs: placeholders' shapes are all a backend needs to read here.
            std::vector<Tensor> examples;
            for (const jit::Node& n : node->segment.graph->nodes())
                if (n.kind == jit::NodeKind::placeholder)
                    examples.push_back(zeros(n.meta.shape, {.dtype = n.meta.dtype}));
            node->code = jit::backend_compile(backend, node->segment.graph, examples);
            node->ends_in_branch = k < trace.conditions.size();
            if (node->ends_in_branch)
                node->condition = trace.conditions[k];
            else
                node->result = trace.result;
            *slot = std::move(node);
            ++compiled;
        }
        if (k < trace.outcomes.size()) slot = &(*slot)->next[trace.outcomes[k]];
    }
    return compiled;
}

std::optional<Tensor> run_program(const ProgramNode& root, const std::vector<Tensor>& args) {
    std::vector<std::vector<Tensor>> outputs;  // per segment of this run
    auto value = [&](ValueRef r) -> const Tensor& {
        return r.segment < 0 ? args.at(r.index) : outputs.at(r.segment).at(r.index);
    };
    for (const ProgramNode* node = &root;;) {
        std::vector<Tensor> inputs;
        for (ValueRef r : node->segment.inputs) inputs.push_back(value(r));
        outputs.push_back(node->code(inputs));
        if (!node->ends_in_branch) return value(node->result);
        node = node->next[bool(value(node->condition))].get();
        if (!node) return std::nullopt;
    }
}

Tensor CompiledFunction::operator()(const std::vector<Tensor>& args) {
    if (root_)
        if (std::optional<Tensor> out = run_program(*root_, args)) return *out;
    Trace trace = record(fn_, args);
    ++recordings_;
    graphs_ += graft(root_, trace, backend_);
    return trace.value;
}

}  // namespace student
