// Recording one whole graph (trace and export): no guards, no segments.
#include "jit/trace.h"

#include <mutex>
#include <set>
#include <unordered_map>

#include "autograd/node.h"

namespace kiln::jit {
namespace {

class OneGraphRecorder final : public DispatchHook {
   public:
    OneGraphRecorder(const Args& args, const OneGraphOptions& options)
        : fail_(options.fail_on_escape), options_(options) {
        int ordinal = 0;
        for (const ArgValue& a : args)
            if (a.kind == ArgKind::tensor) arg_ordinal_[a.tensor.impl()] = {ordinal++, &a};
    }

    Tensor call(OpId op, std::span<const Tensor> inputs, const Attrs& attrs) override {
        std::vector<int> ids;
        for (const Tensor& t : inputs) ids.push_back(value_of(t));
        in_eager_ = true;
        Tensor out = dispatch_eager(op, inputs, attrs);
        in_eager_ = false;
        ids_[out.impl()] = {out.impl_ptr(), b_.call(op, attrs, ids, out, autograd::grad_enabled())};
        return out;
    }

    void detached(const Tensor& src, const Tensor& out) override {
        if (in_eager_ || !ids_.count(src.impl())) return;
        ids_[out.impl()] = {out.impl_ptr(), b_.detach(value_of(src), out)};
    }

    void escape(const Tensor&, Escape kind, const std::source_location& loc) override {
        if (in_eager_) return;
        BreakInfo brk = describe_escape(kind, loc);
        if (fail_) {
            if (options_.failed_at) *options_.failed_at = brk;
            fail(options_.caller, ": ", options_.fn_name,
                 " cannot be recorded as one graph: graph break: ", brk.reason, "\n  at ",
                 brk.location,
                 "\n  hint: one graph cannot hold what the host code does with the value; keep it "
                 "a tensor (where() for a branch), or use compile(), which breaks the graph there");
        }
        out_.escapes.push_back(brk);  // trace: the value read now is baked into the recording
    }

    // export has no way to hold a user-written backward; trace records forward's ops.
    bool custom_function(const Tensor& input, const std::source_location& loc) override {
        if (fail_) escape(input, Escape::autograd_function, loc);
        return false;
    }

    // In-place on a value of the graph: the target takes the value's node. Inputs and
    // captured tensors would need a write-back, which a single graph can't express.
    void assign(const Tensor& target, const Tensor& value) override {
        if (in_eager_) return assign_eager(target, value);
        auto t = ids_.find(target.impl());
        auto v = ids_.find(value.impl());
        bool is_value = t != ids_.end() && t->second.first.lock().get() == target.impl();
        KILN_CHECK(is_value && v != ids_.end() && !target.requires_grad() && !value.requires_grad(),
                   options_.caller,
                   ": an in-place op on an input, a captured tensor or a tensor that requires "
                   "grad (shape ",
                   target.shape(),
                   ") can't be expressed in one graph; use compile(), which functionalizes it");
        {
            NoDispatchHook plain;
            assign_eager(target, value);
        }
        ids_[target.impl()] = {target.impl_ptr(), v->second.second};
    }

    OneGraph finish(const std::vector<Tensor>& results) {
        std::vector<int> outs;
        for (const Tensor& t : results) outs.push_back(value_of(t));
        out_.graph = b_.build(outs);
        return std::move(out_);
    }

   private:
    int value_of(const Tensor& t) {
        auto it = ids_.find(t.impl());
        if (it != ids_.end() && it->second.first.lock().get() == t.impl()) return it->second.second;
        auto arg = arg_ordinal_.find(t.impl());
        bool is_arg = arg != arg_ordinal_.end();
        std::string name = is_arg ? arg_name(*arg->second.second, options_.arg_names) : "constant";
        int id = b_.placeholder(name, meta_of(t), is_arg ? "argument" : "lifted constant");
        out_.input_args.push_back(is_arg ? arg->second.first : -1);
        out_.constants.push_back(is_arg ? Tensor() : t);
        ids_[t.impl()] = {t.impl_ptr(), id};
        return id;
    }

    bool fail_;
    bool in_eager_ = false;
    const OneGraphOptions& options_;
    GraphBuilder b_;
    OneGraph out_;
    std::unordered_map<const TensorImpl*, std::pair<int, const ArgValue*>> arg_ordinal_;
    std::unordered_map<const TensorImpl*, std::pair<std::weak_ptr<TensorImpl>, int>> ids_;
};

}  // namespace

OneGraph record_one_graph(const Args& args, const HostFn& host, const OneGraphOptions& options) {
    OneGraphRecorder rec(args, options);
    std::vector<Tensor> results;
    {
        DispatchHook* prev = dispatch_hook();
        set_dispatch_hook(&rec);
        struct Restore { DispatchHook* p; ~Restore() { set_dispatch_hook(p); } } restore{prev};
        results = host();
    }
    return rec.finish(results);
}

std::string trace_warning(const BreakInfo& escape, const std::string& language) {
    std::string what;
    switch (escape.kind) {
        case Escape::bool_conversion:
            what = "a " + language + " boolean";
            break;
        case Escape::item:
            what = "a " + language + " number";
            break;
        case Escape::data_access:
            what = language == "Python" ? "a Python list" : "host values (to_vector, data_ptr)";
            break;
        default:
            return "";
    }
    static std::mutex mutex;
    static std::set<std::string> warned;  // sites, for the whole process
    std::lock_guard lock(mutex);
    if (!warned.insert(escape.location + " " + what).second) return "";
    return escape.location + ": TracerWarning: Converting a tensor to " + what +
           " might cause the trace to be incorrect. We can't record the data flow of " + language +
           " values, so this value will be treated as a constant in the future. This means that "
           "the trace might not generalize to other inputs!\n";
}

std::vector<Tensor> run_one_graph(const OneGraph& g, const Args& args) {
    std::vector<Tensor> tensors;
    for (const ArgValue& a : args)
        if (a.kind == ArgKind::tensor) tensors.push_back(a.tensor);
    std::vector<Tensor> inputs;
    for (size_t i = 0; i < g.input_args.size(); ++i) {
        int k = g.input_args[i];
        KILN_CHECK(k < int(tensors.size()), "traced graph: expected at least ", k + 1, " tensor arguments, got ", tensors.size());
        inputs.push_back(k >= 0 ? tensors[k] : g.constants[i]);
    }
    return interpret(*g.graph, inputs);
}

}  // namespace kiln::jit
