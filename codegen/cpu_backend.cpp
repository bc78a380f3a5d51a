// The CPU backend: builds the generated translation unit once, then runs the kernels in
// schedule order over buffers allocated from kiln's pool. Host kernels (blas, fallback)
// and views that leave the graph go through dispatch_eager, not dispatch: a tracer hook
// must not record the inside of a compiled graph, and no autograd history is wanted here.
#include "codegen/cpu_backend.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <functional>
#include <map>
#include <filesystem>
#include <functional>
#include <span>
#include <unordered_map>

#include "autograd/node.h"
#include "codegen/graph_runtime.h"
#include "codegen/toolchain.h"
#include "jit/backends.h"
#include "tensor/parallel.h"

namespace kiln::codegen {
namespace {

// What generated kernels call to spread a loop over kiln's thread pool.
void run_parallel(int64_t n, int64_t grain, void* ctx, void (*body)(void*, int64_t, int64_t)) {
    parallel_for(n, grain, [&](int64_t begin, int64_t end) { body(ctx, begin, end); });
}

}  // namespace

namespace detail {

Shape concrete(const Shape& shape, const std::vector<int64_t>& symbols) {
    Shape out = shape;
    for (int64_t& d : out)
        if (is_symbol(d)) d = symbols.at(symbol_index(d));
    return out;
}

std::string shape_text(const Shape& shape) {
    std::string out = "[";
    for (size_t i = 0; i < shape.size(); ++i)
        out += (i ? ", " : "") + (is_symbol(shape[i]) ? "s" + std::to_string(symbol_index(shape[i])) : std::to_string(shape[i]));
    return out + "]";
}

// Binds s0, s1, ... from the input shapes and checks every input against the graph.
std::vector<int64_t> bind_symbols(const LGraph& graph, std::span<const Tensor> inputs, int num_symbols) {
    return bind_symbols(graph, inputs, num_symbols, graph.device);
}

std::vector<int64_t> bind_symbols(const LGraph& graph, std::span<const Tensor> inputs, int num_symbols, Device device) {
    KILN_CHECK(inputs.size() == graph.inputs.size(), "compiled graph: expected ", graph.inputs.size(), " inputs, got ", inputs.size());
    std::vector<int64_t> symbols(size_t(num_symbols), -1);
    for (size_t i = 0; i < inputs.size(); ++i) {
        const LValue& want = graph.inputs[i];
        const Tensor& t = inputs[i];
        bool ok = t.defined() && t.dtype() == want.dtype && t.dim() == int64_t(want.shape.size());
        KILN_CHECK(!t.defined() || t.device() == device || t.dim() == 0, "compiled graph: input ", i, " is on ", t.device(),
                   ", the graph was compiled for ", device, " (hint: the caller's guards should have sent this call elsewhere)");
        for (size_t d = 0; ok && d < want.shape.size(); ++d) {
            int64_t size = want.shape[d];
            if (!is_symbol(size)) ok = t.shape()[d] == size;
            else if (symbols[symbol_index(size)] < 0) symbols[symbol_index(size)] = t.shape()[d];
            else ok = symbols[symbol_index(size)] == t.shape()[d];
        }
        KILN_CHECK(ok, "compiled graph: input ", i, " should be ", want.dtype, " of shape ", shape_text(want.shape), ", got ",
                   t.defined() ? dtype_name(t.dtype()) : "undefined", " of shape ", t.defined() ? t.shape() : Shape{},
                   " (hint: the caller's guards should have sent this call elsewhere)");
    }
    return symbols;
}

Tensor eval_node(const LNode& n, std::span<const Tensor> inputs, const std::vector<int64_t>& symbols) {
    Attrs attrs = n.attrs;
    if (n.op == OpId::reshape || n.op == OpId::expand) attrs.shape = concrete(n.out.shape, symbols);
    return dispatch_eager(n.op, inputs, attrs);
}

Tensor contiguous_input(const Tensor& t) { return t.is_contiguous() ? t : dispatch_eager(OpId::contiguous, {&t, 1}, {}); }

// Views are index math inside kernels; the host builds a value only when it needs it, from
// its (recursively built) inputs. `env` is indexed by value id; undefined = not built yet.
Tensor value_of(const Schedule& schedule, int id, std::span<Tensor> env, const std::vector<int64_t>& symbols) {
    if (env[id].defined()) return env[id];
    const LNode& n = schedule.graph.nodes[schedule.producer.at(id)];
    std::array<Tensor, 4> small;  // no allocation for the usual one or two operands
    std::vector<Tensor> big(n.inputs.size() > small.size() ? n.inputs.size() : 0);
    std::span<Tensor> in = big.empty() ? std::span<Tensor>(small.data(), n.inputs.size()) : std::span<Tensor>(big);
    for (size_t i = 0; i < n.inputs.size(); ++i) in[i] = value_of(schedule, n.inputs[i], env, symbols);
    return env[id] = eval_node(n, in, symbols);
}


std::vector<std::vector<int>> release_plan(const Schedule& schedule) {
    const LGraph& graph = schedule.graph;
    // The slots reading value v touches: v, and for a value value_of builds on demand (a view
    // or a value no kernel stores) the slots its producer's inputs touch.
    std::map<int, std::vector<int>> touched;
    std::function<const std::vector<int>&(int)> touches = [&](int v) -> const std::vector<int>& {
        if (auto it = touched.find(v); it != touched.end()) return it->second;
        std::vector<int> out = {v};
        Home home = schedule.values.at(v).home;
        if (home != Home::input && home != Home::stored && schedule.producer.count(v))
            for (int in : graph.nodes[schedule.producer.at(v)].inputs)
                for (int t : touches(in)) out.push_back(t);
        return touched[v] = out;
    };
    size_t steps = schedule.kernels.size();
    std::map<int, size_t> last;  // slot -> last kernel touching it; steps = the outputs
    auto touch = [&](int v, size_t step) {
        for (int t : touches(v)) last[t] = std::max(last.count(t) ? last[t] : 0, step);
    };
    for (size_t k = 0; k < steps; ++k) {
        const Kernel& kernel = schedule.kernels[k];
        bool generated = kernel.kind == KernelKind::pointwise || kernel.kind == KernelKind::row;
        if (generated) {
            for (int v : kernel.args()) touch(v, k);
        } else {
            const LNode& n = graph.nodes[kernel.nodes[0]];
            for (int v : n.inputs) touch(v, k);
            touch(n.out.id, k);
        }
    }
    for (int v : graph.outputs) touch(v, steps);
    std::vector<std::vector<int>> plan(steps);
    for (const auto& [slot, step] : last)
        if (step < steps) plan[step].push_back(slot);
    return plan;
}

}  // namespace detail

CompiledCpuGraph::CompiledCpuGraph(Schedule schedule, std::string source,
                                   std::vector<std::shared_ptr<CompiledLibrary>> libraries)
    : schedule_(std::move(schedule)), source_(std::move(source)), libraries_(std::move(libraries)) {
    KILN_CHECK(!libraries_.empty(), "codegen: a compiled CPU graph needs at least one library");
    // A kernel's entry is in the unit emit_units put it in: the first library that has it.
    auto symbol = [&](const std::string& name) -> void* {
        for (const auto& library : libraries_)
            if (void* address = library->find_symbol(name)) return address;
        return libraries_.front()->symbol(name);  // throws, naming it and the source
    };
    for (size_t k = 0; k < schedule_.kernels.size(); ++k) {
        KernelKind kind = schedule_.kernels[k].kind;
        bool generated = kind == KernelKind::pointwise || kind == KernelKind::row;
        kernels_.push_back(generated ? reinterpret_cast<KernelFn>(symbol(schedule_.kernel_name(int(k)))) : nullptr);
        bool epilogue = schedule_.kernels[k].epilogue_of >= 0;
        epilogues_.push_back(
            epilogue ? reinterpret_cast<EpilogueRowsFn>(symbol(schedule_.kernel_name(int(k)) + "_rows"))
                     : nullptr);
        kernel_args_.push_back(schedule_.kernels[k].args());
    }
    for (const LValue& v : schedule_.graph.inputs) num_value_ids_ = std::max(num_value_ids_, v.id + 1);
    for (const LNode& n : schedule_.graph.nodes) num_value_ids_ = std::max(num_value_ids_, n.out.id + 1);
    release_ = detail::release_plan(schedule_);
    // An input read only by permutes the host makes (an NHWC copy, codegen/channels_last.h)
    // is handed to them as it comes: a channels-last input's copy is then a free view.
    std::map<int, bool> host_layout_only;
    for (const LNode& n : schedule_.graph.nodes)
        for (int v : n.inputs) {
            bool host = n.op == OpId::permute && n.attrs.keepdim;
            auto [it, first] = host_layout_only.emplace(v, host);
            if (!first) it->second = it->second && host;
        }
    for (int id : schedule_.graph.outputs) host_layout_only[id] = false;
    for (const LValue& v : schedule_.graph.inputs) {
        auto it = host_layout_only.find(v.id);
        any_layout_input_.push_back(it != host_layout_only.end() && it->second);
    }
}

// The per-call cost matters for small graphs (a JIT cache hit runs this): values live in a
// flat array by id, and small graphs keep it and the kernels' buffer list on the stack.
using namespace detail;

std::vector<Tensor> CompiledCpuGraph::run(std::span<const Tensor> inputs) const {
    const LGraph& graph = schedule_.graph;
    std::vector<int64_t> symbols = bind_symbols(graph, inputs, schedule_.num_symbols);
    autograd::NoGradGuard no_grad;
    std::array<Tensor, 16> small_env;
    std::vector<Tensor> big_env(size_t(num_value_ids_) > small_env.size() ? size_t(num_value_ids_) : 0);
    std::span<Tensor> env = big_env.empty() ? std::span<Tensor>(small_env.data(), size_t(num_value_ids_)) : std::span<Tensor>(big_env);
    std::span<Tensor> owned = jit::take_handed_over(inputs);  // AOT's saved tensors, freed after their last reader
    for (size_t i = 0; i < inputs.size(); ++i)
        env[graph.inputs[i].id] = any_layout_input_[i] ? inputs[i] : contiguous_input(inputs[i]);
    for (Tensor& t : owned) t = Tensor();  // env holds them now, and drops each after its last reader
    std::array<float*, 16> small_buffers;
    std::vector<float*> big_buffers;
    for (size_t k = 0; k < schedule_.kernels.size(); ++k) {
        const Kernel& kernel = schedule_.kernels[k];
        if (schedule_.has_epilogue(int(k))) {  // the matmul and its epilogue: one step
            run_gemm_with_epilogue(schedule_, int(k), epilogues_[k + 1], env, symbols);
            for (int v : release_[k]) env[v] = Tensor();
            ++k;
        } else if (kernels_[k]) {
            for (int v : kernel.stores)
                env[v] =
                    empty(concrete(schedule_.value(v).shape, symbols), schedule_.value(v).dtype);
            const std::vector<int>& args = kernel_args_[k];
            float** buffers = small_buffers.data();
            if (args.size() > small_buffers.size()) {
                big_buffers.resize(args.size());
                buffers = big_buffers.data();
            }
            for (size_t a = 0; a < args.size(); ++a) buffers[a] = static_cast<float*>(env[args[a]].raw_data());
            kernels_[k](buffers, symbols.data(), run_parallel);
        } else {
            const LNode& n = graph.nodes[kernel.nodes[0]];
            std::vector<Tensor> in;
            for (int v : n.inputs) in.push_back(value_of(schedule_, v, env, symbols));
            Tensor out = eval_node(n, in, symbols);
            // kernels index it as contiguous; a conv2d_fused with attrs.keepdim is read only by
            // other conv2d_fused nodes, which take oneDNN's channels-last layout as it is
            // (codegen/fuse_conv.h)
            bool any_layout = n.op == OpId::conv2d_fused && n.attrs.keepdim;
            env[n.out.id] = any_layout ? out : contiguous_input(out);
        }
        for (int v : release_[k]) env[v] = Tensor();
    }
    std::vector<Tensor> outputs;
    outputs.reserve(graph.outputs.size());
    for (int id : graph.outputs) outputs.push_back(value_of(schedule_, id, env, symbols));
    return outputs;
}

// Where generated kernels find kiln's math headers (tensor/pointwise_math.h ...):
// KILN_INCLUDE_DIR when set (an installed kiln: <prefix>/include/kiln), else the source
// tree the library was built from, else the install prefix chosen at configure time.
static std::string kernel_include_dir() {
    if (const char* env = std::getenv("KILN_INCLUDE_DIR"); env && *env) return env;
    namespace fs = std::filesystem;
    std::error_code ec;
    if (fs::exists(fs::path(KILN_SOURCE_DIR) / "tensor" / "pointwise_math.h", ec)) return KILN_SOURCE_DIR;
    return KILN_INSTALL_INCLUDE_DIR;
}

namespace {

BuildOptions build_options(const CpuCompileOptions& options) {
    BuildOptions build;
    build.include_dirs = {kernel_include_dir()};
    build.extra_flags = options.extra_flags;
    return build;
}

// The translation units of `schedules`: one (`source`, their emit() text) unless their kernels
// are long enough to be worth more than one compiler (emit_units, kMinUnitBytes each).
std::vector<std::string> cpu_units(const std::vector<const Schedule*>& schedules, std::string source) {
    size_t jobs = compile_jobs();
    if (jobs <= 1 || source.size() < 2 * kMinUnitBytes) return {std::move(source)};
    std::vector<std::string> units = emit_units(schedules, jobs, kMinUnitBytes);
    if (units.size() == 1) return {std::move(source)};
    return units;
}

}  // namespace

std::shared_ptr<CompiledLibrary> build_cpu_library(const std::string& source, const CpuCompileOptions& options) {
    return build_library(source, build_options(options));
}

CompiledCpuGraph build_cpu(Schedule schedule, std::string source, const CpuCompileOptions& options) {
    std::vector<std::string> units = cpu_units({&schedule}, source);
    auto libraries = build_libraries(units, build_options(options));
    return CompiledCpuGraph(std::move(schedule), std::move(source), std::move(libraries));
}

std::vector<CompiledCpuGraph> compile_cpu_many(const std::vector<LGraph>& graphs, const CpuCompileOptions& options) {
    std::vector<Schedule> schedules;
    std::vector<const Schedule*> pointers;
    for (size_t i = 0; i < graphs.size(); ++i) {
        schedules.push_back(fuse_epilogues(schedule(graphs[i])));  // the pipeline's stages 2 and 3
        if (graphs.size() > 1) schedules.back().prefix = "g" + std::to_string(i) + "_";
    }
    for (const Schedule& s : schedules) pointers.push_back(&s);
    std::string source = emit(pointers);
    auto libraries = build_libraries(cpu_units(pointers, source), build_options(options));
    std::vector<CompiledCpuGraph> compiled;
    for (Schedule& s : schedules) compiled.emplace_back(std::move(s), source, libraries);
    return compiled;
}

CompiledCpuGraph compile_cpu(const LGraph& graph, const CpuCompileOptions& options) {
    return std::move(compile_cpu_many({graph}, options).front());
}

std::vector<Tensor> run_eager(const LGraph& graph, const std::vector<Tensor>& inputs) {
    std::vector<int64_t> symbols = bind_symbols(graph, inputs, 64, inputs.empty() ? cpu : inputs[0].device());
    std::unordered_map<int, Tensor> env;
    for (size_t i = 0; i < inputs.size(); ++i) env[graph.inputs[i].id] = inputs[i];
    for (const LNode& n : graph.nodes) {
        std::vector<Tensor> in;
        for (int v : n.inputs) in.push_back(env.at(v));
        env[n.out.id] = eval_node(n, in, symbols);
    }
    std::vector<Tensor> outputs;
    for (int id : graph.outputs) outputs.push_back(env.at(id));
    return outputs;
}

}  // namespace kiln::codegen
