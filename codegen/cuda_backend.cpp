// The CUDA backend's runner mirrors the CPU one (cpu_backend.cpp): values live in a flat
// array by id; stored values get fresh device buffers from kiln's caching allocator; a
// generated kernel is launched with its buffers and the symbols as arguments; host kernels
// go through dispatch_eager, which runs CUDA tensors on the eager CUDA kernels.
#include "codegen/cuda_backend.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <map>
#include <sstream>
#include <thread>
#include <utility>

#include "autograd/node.h"
#include "codegen/emit_cuda.h"
#include "codegen/graph_runtime.h"
#include "jit/backends.h"
#include "tensor/cuda.h"
#include "tensor/cuda_runtime.h"
#include "tensor/kernels.h"

namespace kiln::codegen {

using namespace detail;

namespace {
std::string device_text(Device d) {
    std::ostringstream os;
    os << d;
    return os.str();
}
}  // namespace

int nvrtc_programs_for(size_t source_bytes) {
    size_t cores = std::max(1u, std::thread::hardware_concurrency());
    return int(std::clamp<size_t>(source_bytes / kNvrtcProgramBytes, 1, cores));
}

CompiledCudaGraph::CompiledCudaGraph(Schedule schedule, std::string source, int nvrtc_programs)
    : schedule_(std::move(schedule)), source_(std::move(source)) {
    // The kernels in `nvrtc_programs` translation units, compiled at once, a module each.
    if (nvrtc_programs == 0) nvrtc_programs = nvrtc_programs_for(source_.size());
    std::vector<CudaUnit> units = split_cuda_source(source_, nvrtc_programs);
    std::vector<cuda::detail::NvrtcProgram> nvrtc;
    std::map<std::string, const std::string*> unit_of;  // kernel -> the source defining it
    for (const CudaUnit& unit : units) {
        nvrtc.push_back({unit.source, unit.kernels.front()});
        for (const std::string& name : unit.kernels) unit_of[name] = &unit.source;
    }
    cuda::detail::load_modules(nvrtc);
    nvrtc_programs_ = int(units.size());
    for (size_t k = 0; k < schedule_.kernels.size(); ++k) {
        KernelKind kind = schedule_.kernels[k].kind;
        bool generated = kind == KernelKind::pointwise || kind == KernelKind::row;
        std::string entry =
            generated ? cuda_kernel_entry(source_, schedule_.kernel_name(int(k))) : "";
        kernels_.push_back(generated ? cuda::detail::kernel(*unit_of.at(entry), entry) : nullptr);
        kernel_args_.push_back(schedule_.kernels[k].args());
        split_reductions_.push_back(generated ? cuda_split_reductions(schedule_, int(k)) : 0);
        max_block_.push_back(generated ? cuda::detail::max_threads_per_block(kernels_.back()) : 0);
    }
    for (const LValue& v : schedule_.graph.inputs) num_value_ids_ = std::max(num_value_ids_, v.id + 1);
    returned_.insert(schedule_.graph.outputs.begin(), schedule_.graph.outputs.end());
    for (const LNode& n : schedule_.graph.nodes) num_value_ids_ = std::max(num_value_ids_, n.out.id + 1);
    release_ = release_plan(schedule_);
}

std::vector<Tensor> CompiledCudaGraph::run(std::span<const Tensor> inputs) const {
    const LGraph& graph = schedule_.graph;
    std::vector<int64_t> symbols = bind_symbols(graph, inputs, schedule_.num_symbols);
    autograd::NoGradGuard no_grad;
    std::vector<Tensor> env(static_cast<size_t>(num_value_ids_));
    std::vector<Tensor> moved(static_cast<size_t>(num_value_ids_));  // device copies of 0-d CPU values
    std::span<Tensor> owned = jit::take_handed_over(inputs);  // AOT's saved tensors, freed after their last reader
    for (size_t i = 0; i < inputs.size(); ++i) env[graph.inputs[i].id] = contiguous_input(inputs[i]);
    for (Tensor& t : owned) t = Tensor();  // env holds them now, and drops each after its last reader
    std::vector<void*> pointers;  // the kernel's buffer pointers, then its symbols
    std::vector<void*> args;      // what cuLaunchKernel takes: the address of each argument
    std::vector<long long> syms(symbols.begin(), symbols.end());
    int sms = 0;
    for (size_t k = 0; k < schedule_.kernels.size(); ++k) {
        if (k > 0)  // what no later kernel reads goes back to the allocator (stream-ordered reuse)
            for (int v : release_[k - 1]) env[v] = Tensor(), moved[v] = Tensor();
        const Kernel& kernel = schedule_.kernels[k];
        if (!kernels_[k]) {
            const LNode& n = graph.nodes[kernel.nodes[0]];
            std::vector<Tensor> in;
            for (int v : n.inputs) in.push_back(value_of(schedule_, v, env, symbols));
            if (n.op == OpId::full && n.attrs.device != graph.device && !returned_.count(n.out.id)) {
                // A constant a derivative made on the CPU (scalar_tensor) that only kernels read:
                // made on the device instead, so no copy from host memory (a CUDA graph can hold it).
                LNode on_device = n;
                on_device.attrs.device = graph.device;
                env[n.out.id] = eval_node(on_device, in, symbols);
                continue;
            }
            env[n.out.id] = contiguous_input(eval_node(n, in, symbols));  // kernels index it as contiguous
            continue;
        }
        for (int v : kernel.stores) env[v] = empty(concrete(schedule_.value(v).shape, symbols), schedule_.value(v).dtype, graph.device);
        const std::vector<int>& ids = kernel_args_[k];
        pointers.resize(ids.size());
        args.clear();
        for (size_t a = 0; a < ids.size(); ++a) {
            // A 0-d CPU value (a scalar a host kernel made, as eager allows) is read from a
            // device copy: generated kernels read device memory only. The value itself stays
            // on the CPU, as eager would return it.
            if (env[ids[a]].device() != graph.device) {
                if (!moved[ids[a]].defined()) moved[ids[a]] = cuda::to_device(env[ids[a]], graph.device);
                pointers[a] = moved[ids[a]].raw_data();
                args.push_back(&pointers[a]);
                continue;
            }
            pointers[a] = env[ids[a]].numel() ? env[ids[a]].raw_data() : nullptr;
            args.push_back(&pointers[a]);
        }
        for (long long& s : syms) args.push_back(&s);
        Shape domain = concrete(kernel.domain, symbols);
        if (kernel.kind == KernelKind::pointwise) {
            int64_t n = shape_numel(domain);
            cuda::detail::launch(kernels_[k], (n + 3) / 4, args.data());  // up to four elements per thread
        } else {
            int64_t rows = shape_numel(Shape(domain.begin(), domain.begin() + kernel.outer_dims));
            int64_t row_size = shape_numel(Shape(domain.begin() + kernel.outer_dims, domain.end()));
            if (rows == 0) continue;
            if (!sms) sms = cuda::detail::multiprocessor_count();
            // Few long rows: each row split over blocks of >= 4K elements, up to ~16 blocks per SM
            // (enough loads in flight to reach the memory's bandwidth);
            // the slices' partials and a per-row count of finished slices live in scratch memory.
            long long splits = 1;
            Tensor partials, counters;
            void* partials_ptr = nullptr;
            void* counters_ptr = nullptr;
            if (int r = split_reductions_[k]) {
                if (rows < sms && row_size >= 32768)
                    splits = std::max<int64_t>(1, std::min<int64_t>(row_size / 4096, 16 * int64_t(sms) / rows));
                if (splits > 1) {
                    partials = empty({rows * splits * r}, DType::float32, graph.device);
                    counters = empty({rows}, DType::float32, graph.device);  // 4-byte unsigned counts
                    cuda::detail::memset_zero(counters.raw_data(), counters.nbytes());
                    partials_ptr = partials.raw_data(), counters_ptr = counters.raw_data();
                }
                args.push_back(&partials_ptr);
                args.push_back(&counters_ptr);
                args.push_back(&splits);
            }
            unsigned grid = unsigned(std::min<int64_t>(rows * splits, int64_t(sms) * 32));
            // A kernel with many fused values uses many registers: a block no larger than it allows.
            int block = std::min(cuda_row_block(rows * splits, row_size / splits, sms), max_block_[k] / 32 * 32);
            cuda::detail::launch_grid(kernels_[k], grid, unsigned(std::max(block, 32)), 0, args.data());
        }
    }
    std::vector<Tensor> outputs;
    outputs.reserve(graph.outputs.size());
    for (int id : graph.outputs) outputs.push_back(value_of(schedule_, id, env, symbols));
    return outputs;
}

namespace {
std::atomic<int64_t> g_captures{0}, g_replays{0}, g_not_captured{0}, g_inside_outer{0};
std::mutex g_reason_mu;
std::string g_reason;
}

CudaGraphStats cuda_graph_stats() {
    std::lock_guard lock(g_reason_mu);
    return {g_captures.load(), g_replays.load(), g_not_captured.load(), g_reason,
            g_inside_outer.load()};
}

CudaGraphReplay::CudaGraphReplay(const CompiledCudaGraph& graph) : graph_(graph) {}
CudaGraphReplay::~CudaGraphReplay() = default;

std::vector<Tensor> CudaGraphReplay::run(std::span<const Tensor> inputs) {
    std::lock_guard lock(mu_);  // one capture, one set of static buffers
    // Under a capture of the caller's own (cuda::GraphedStep, a whole training step): the
    // launches go into that capture as they are; a CUDA graph is not captured inside another.
    if (cuda::detail::capturing()) {
        ++g_inside_outer;
        return graph_.run(inputs);
    }
    const LGraph& g = graph_.schedule().graph;
    for (const Tensor& t : inputs)
        if (disabled_.empty() && t.device() != g.device) disabled_ = "an input on " + device_text(t.device());
    std::vector<const void*> addresses;
    for (const Tensor& t : inputs) addresses.push_back(t.raw_data());
    std::vector<const void*> before = std::exchange(last_addresses_, addresses);
    if (!disabled_.empty() || ++calls_ == 1) return graph_.run(inputs);  // not capturable, or the warm-up
    autograd::NoGradGuard no_grad;
    std::vector<Shape> shapes;
    for (const Tensor& t : inputs) shapes.push_back(t.shape());
    moved_.resize(inputs.size(), false);
    bool capture = !captured_ || shapes != shapes_;
    for (size_t i = 0; i < inputs.size() && !capture; ++i)
        if (aliased_[i] && (addresses[i] != alias_addresses_[i] || !inputs[i].is_contiguous()))
            moved_[i] = true, capture = true;  // the graph reads the old address: copy this input from now on
    if (capture) {
        captured_.reset();
        static_outputs_.clear();
        static_inputs_.clear();
        aliased_.assign(inputs.size(), false);
        alias_addresses_.assign(inputs.size(), nullptr);
        for (size_t i = 0; i < inputs.size(); ++i) {
            const Tensor& t = inputs[i];
            aliased_[i] = !moved_[i] && i < before.size() && before[i] == addresses[i] && t.is_contiguous();
            if (aliased_[i]) {
                static_inputs_.push_back(t);  // for the capture only: the graph keeps its address
                alias_addresses_[i] = addresses[i];
                continue;
            }
            static_inputs_.push_back(empty(t.shape(), t.dtype(), g.device));
            strided_copy(static_inputs_.back(), t);
        }
        auto graph = std::make_unique<cuda::Graph>();
        try {
            graph->capture([&] { static_outputs_ = graph_.run(static_inputs_); });
        } catch (const Error& e) {
            disabled_ = e.what();
            static_outputs_.clear();
            static_inputs_.clear();
            ++g_not_captured;
            std::lock_guard reason_lock(g_reason_mu);
            g_reason = disabled_;
            return graph_.run(inputs);
        }
        // No reference to the caller's tensors: each replay checks that the input is at the
        // captured address, and the stream orders the replay's reads before any later reuse.
        for (size_t i = 0; i < inputs.size(); ++i)
            if (aliased_[i]) static_inputs_[i] = Tensor();
        captured_ = std::move(graph);
        shapes_ = shapes;
        ++g_captures;
    } else {
        for (size_t i = 0; i < inputs.size(); ++i)
            if (!aliased_[i]) strided_copy(static_inputs_[i], inputs[i]);
    }
    captured_->replay();
    ++g_replays;
    std::vector<Tensor> outputs;
    for (size_t k = 0; k < g.outputs.size(); ++k) {
        auto in = std::find_if(g.inputs.begin(), g.inputs.end(), [&](const LValue& v) { return v.id == g.outputs[k]; });
        if (in != g.inputs.end()) {  // an input returned as it is
            outputs.push_back(contiguous_input(inputs[size_t(in - g.inputs.begin())]));
            continue;
        }
        const Tensor& s = static_outputs_[k];
        outputs.push_back(empty(s.shape(), s.dtype(), s.device()));
        strided_copy(outputs.back(), s);
    }
    return outputs;
}

std::vector<Schedule> schedule_many(const std::vector<LGraph>& graphs) {
    std::vector<Schedule> schedules;
    for (size_t i = 0; i < graphs.size(); ++i) {
        schedules.push_back(schedule(graphs[i]));
        if (graphs.size() > 1) schedules.back().prefix = "g" + std::to_string(i) + "_";
    }
    return schedules;
}

std::string emit_cuda_many(const std::vector<Schedule>& schedules) {
    std::vector<const Schedule*> pointers;
    for (const Schedule& s : schedules) pointers.push_back(&s);
    return emit_cuda(pointers);
}

std::vector<CompiledCudaGraph> compile_cuda_many(const std::vector<LGraph>& graphs) {
    cuda::detail::require("compiling a graph for CUDA");
    std::vector<Schedule> schedules = schedule_many(graphs);
    std::string source = emit_cuda_many(schedules);
    std::vector<CompiledCudaGraph> compiled;
    for (Schedule& s : schedules) compiled.emplace_back(std::move(s), source);
    return compiled;
}

CompiledCudaGraph compile_cuda(const LGraph& graph) { return std::move(compile_cuda_many({graph}).front()); }

CompiledCudaGraph build_cuda(Schedule schedule, std::string source, int nvrtc_programs) {
    cuda::detail::require("compiling a graph for CUDA");
    return CompiledCudaGraph(std::move(schedule), std::move(source), nvrtc_programs);
}

}  // namespace kiln::codegen
