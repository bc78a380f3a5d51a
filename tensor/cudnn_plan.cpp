// cuDNN's planner (tensor/cudnn_internal.h): per direction and geometry, once, an operation
// graph of one convolution, the engine configs cuDNN's heuristics rank (or the fastest one
// timed), each checked for kiln's numbers, and the finalized execution plan, cached.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string_view>
#include <vector>

#include "jit/log.h"
#include "tensor/cuda.h"
#include "tensor/cudnn_internal.h"
#include "tensor/error.h"

namespace kiln::cuda::detail {
namespace cudnn_internal {
namespace {

// KILN_CUDNN_TF32=1 lets float32 convolutions use tensor cores (TF32 inputs, as PyTorch's
// default torch.backends.cudnn.allow_tf32); by default they are exact float32 (no engine that
// cuDNN notes as using tensor cores), as kiln's cuBLAS matmuls.
bool tf32() {
    const char* e = std::getenv("KILN_CUDNN_TF32");
    return e && std::string_view(e) == "1";
}
// KILN_CUDNN_BENCHMARK=1 times the candidate engine configs once per geometry and direction
// (as torch.backends.cudnn.benchmark); by default the first that heuristics mode A ranks and
// that finalizes is taken.
bool benchmark() {
    const char* e = std::getenv("KILN_CUDNN_BENCHMARK");
    return e && std::string_view(e) == "1";
}

// gradients), the convolution, alpha and beta.
struct OperationNames {
    int type, x, w, y, conv, alpha, beta;
};
constexpr OperationNames kOperations[3] = {
    {CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
     CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W,
     CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
     CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA},
    {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W,
     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY,
     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA,
     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA},
    {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR,
     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW,
     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY,
     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA,
     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA},
};

// The most workspace an engine config may ask for; above it the next candidate is taken.
constexpr size_t kMaxWorkspaceBytes = size_t(1) << 30;
// KILN_CUDNN_BENCHMARK=1 times at most this many candidates (PyTorch's default limit is 10).
constexpr size_t kMaxTimedCandidates = 10;

// The largest power of two (at most 16) dividing the address: cuDNN needs each tensor's byte
// alignment, and a view's data may start anywhere in its storage.
int64_t alignment(const void* p) {
    int64_t a = 1;
    while (a < 16 && reinterpret_cast<uintptr_t>(p) % (a * 2) == 0) a *= 2;
    return a;
}

// Builds one plan: its calls check cuDNN's status and raise a kiln::Error naming the
// direction, the geometry and cuDNN's message.
struct Planner {
    const Api& a = library().api;
    cudnnHandle_t handle = library().handle;
    Direction d;
    const CudnnConv& g;
    bool tf32;
    std::string last_failure;  // cuDNN's message for the last candidate it refused

    void check(cudnnStatus_t s, const std::string& what) const {
        KILN_CHECK(s == CUDNN_STATUS_SUCCESS, "conv2d on CUDA: cuDNN ", what, " failed (",
                   status_text(s), ") planning the ", kDirectionNames[d], " of ", geometry_text(g));
    }
    Descriptor create(int type) const {
        Descriptor out;
        check(a.cudnnBackendCreateDescriptor(type, out.out()),
              "cudnnBackendCreateDescriptor(type " + std::to_string(type) + ")");
        return out;
    }
    void set(const Descriptor& desc, int name, int type, int64_t count, const void* elems) const {
        check(a.cudnnBackendSetAttribute(desc.get(), name, type, count, elems),
              "cudnnBackendSetAttribute(attribute " + std::to_string(name) + ")");
    }
    void finalize(const Descriptor& desc, const char* what) const {
        check(a.cudnnBackendFinalize(desc.get()),
              std::string("cudnnBackendFinalize(") + what + ")");
    }
    int data_type() const { return g.f64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT; }

    // A contiguous NCHW (or OIHW) tensor.
    Descriptor tensor(int64_t uid, std::array<int64_t, 4> dims, int64_t align) const {
        Descriptor t = create(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
        std::array<int64_t, 4> strides = {dims[1] * dims[2] * dims[3], dims[2] * dims[3], dims[3],
                                          1};
        int dt = data_type();
        set(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt);
        set(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims.data());
        set(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides.data());
        set(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
        set(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align);
        finalize(t, "tensor");
        return t;
    }
    // Cross-correlation (what conv2d computes); padding on both sides, as PyTorch's. Groups
    // are not an attribute: cuDNN reads them from the weight's C / groups channels.
    Descriptor convolution() const {
        Descriptor c = create(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
        int dt = data_type(), mode = CUDNN_CROSS_CORRELATION;
        int64_t spatial = 2;
        int64_t dilation[2] = {g.dh, g.dw}, stride[2] = {g.sh, g.sw}, padding[2] = {g.ph, g.pw};
        set(c, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt);
        set(c, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode);
        set(c, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &spatial);
        set(c, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, dilation);
        set(c, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, stride);
        set(c, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, padding);
        set(c, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, padding);
        finalize(c, "convolution");
        return c;
    }

    // The operation graph of this direction's one convolution (out = 1 * conv + 0 * out);
    // its parts are appended to `parts`, the graph last.
    void graph(const int64_t align[3], std::vector<Descriptor>& parts) const {
        parts.push_back(tensor(kUidX, {g.n, g.c, g.h, g.w}, align[kUidX]));
        parts.push_back(tensor(kUidW, {g.o, g.c / g.groups, g.kh, g.kw}, align[kUidW]));
        parts.push_back(tensor(kUidY, {g.n, g.o, g.out_h(), g.out_w()}, align[kUidY]));
        parts.push_back(convolution());
        const OperationNames& names = kOperations[d];
        Descriptor op = create(names.type);
        cudnnBackendDescriptor_t x = parts[0].get(), w = parts[1].get(), y = parts[2].get(),
                                 conv = parts[3].get();
        set(op, names.x, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
        set(op, names.w, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &w);
        set(op, names.y, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
        set(op, names.conv, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &conv);
        // alpha and beta in the computation's type: double for float64, else float
        double one_d = 1, zero_d = 0;
        float one_f = 1, zero_f = 0;
        int scalar = g.f64 ? CUDNN_TYPE_DOUBLE : CUDNN_TYPE_FLOAT;
        set(op, names.alpha, scalar, 1, g.f64 ? static_cast<const void*>(&one_d) : &one_f);
        set(op, names.beta, scalar, 1, g.f64 ? static_cast<const void*>(&zero_d) : &zero_f);
        finalize(op, "operation");
        Descriptor graph = create(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
        cudnnBackendDescriptor_t op_raw = op.get();
        set(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &op_raw);
        if (handle)  // none in cudnn_check_graph without a GPU
            set(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
        finalize(graph, "operation graph");
        parts.push_back(std::move(op));
        parts.push_back(std::move(graph));
    }

    // The engine configs heuristics `mode` ranks for the graph, best first; none where the
    // mode does not support the graph.
    std::vector<Descriptor> candidates(cudnnBackendDescriptor_t graph, int mode) {
        Descriptor heur = create(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
        set(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph);
        set(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
        if (failed(a.cudnnBackendFinalize(heur.get()), "the heuristics' finalize")) return {};
        int64_t count = 0;
        if (failed(a.cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                              CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr),
                   "the heuristics' result count") ||
            count <= 0)
            return {};
        std::vector<Descriptor> configs;
        std::vector<cudnnBackendDescriptor_t> raw;
        for (int64_t i = 0; i < count; ++i) {
            configs.push_back(create(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR));
            raw.push_back(configs.back().get());
        }
        int64_t got = 0;
        if (failed(
                a.cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                           CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &got, raw.data()),
                "the heuristics' results"))
            return {};
        configs.resize(size_t(std::min(got, count)));
        return configs;
    }

    // Whether a candidate's failure is skipped: true, and cuDNN's message kept for the refusal
    // note, when `s` is not success.
    bool failed(cudnnStatus_t s, const char* what) {
        if (s == CUDNN_STATUS_SUCCESS) return false;
        last_failure = std::string(what) + ": " + status_text(s);
        return true;
    }

    // Whether the config keeps kiln's numbers (its engine's number in `engine`, for logs): no
    // engine that rounds inputs to a narrower type; for exact float32 (TF32 off) none on tensor
    // cores (TF32) and none with reduced-precision reductions. float64 on tensor cores is exact.
    bool keeps_numbers(const Descriptor& config, int64_t& engine_index) {
        Descriptor engine = create(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
        cudnnBackendDescriptor_t engine_raw = engine.get();
        int64_t n = 0;
        if (failed(a.cudnnBackendGetAttribute(config.get(), CUDNN_ATTR_ENGINECFG_ENGINE,
                                              CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &engine_raw),
                   "the engine config's engine"))
            return false;
        // Room for more note kinds than cuDNN 9.19 has (a newer library may add some).
        constexpr int64_t kMaxNotes = 4 * CUDNN_NUMERICAL_NOTE_TYPE_COUNT;
        int notes[kMaxNotes] = {};
        if (failed(a.cudnnBackendGetAttribute(engine.get(), CUDNN_ATTR_ENGINE_NUMERICAL_NOTE,
                                              CUDNN_TYPE_NUMERICAL_NOTE, kMaxNotes, &n, notes),
                   "the engine's numerical notes"))
            return false;
        for (int64_t i = 0; i < std::min(n, kMaxNotes); ++i) {
            if (notes[i] == CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS) return false;
            if (!tf32 && notes[i] == CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION) return false;
            if (!tf32 && !g.f64 && notes[i] == CUDNN_NUMERICAL_NOTE_TENSOR_CORE) return false;
        }
        engine_index = -1;
        a.cudnnBackendGetAttribute(engine.get(), CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64,
                                   1, &n, &engine_index);  // for logs only
        return true;
    }

    // The config's execution plan, finalized, and its workspace; false (nothing raised) when
    // cuDNN cannot finalize it for this device or it needs more than the workspace limit.
    bool finalize_plan(const Descriptor& config, Descriptor& plan, int64_t& workspace) {
        plan = create(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
        cudnnBackendDescriptor_t config_raw = config.get();
        set(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
        set(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
            &config_raw);
        if (failed(a.cudnnBackendFinalize(plan.get()), "the execution plan's finalize"))
            return false;
        int64_t n = 0;
        if (failed(a.cudnnBackendGetAttribute(plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                              CUDNN_TYPE_INT64, 1, &n, &workspace),
                   "the plan's workspace size"))
            return false;
        return workspace >= 0 && size_t(workspace) <= kMaxWorkspaceBytes;
    }
};

// Host seconds for 3 runs of `plan` after a warm-up (the GPU idle before and after), or a
// negative number when it fails to run.
double time_plan(const Descriptor& plan, int64_t workspace_bytes, void* const by_uid[3]) {
    Workspace ws{size_t(workspace_bytes)};
    synchronize();
    if (execute(plan, by_uid, ws.ptr) != CUDNN_STATUS_SUCCESS) return -1;
    synchronize();
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < 3; ++i)
        if (execute(plan, by_uid, ws.ptr) != CUDNN_STATUS_SUCCESS) return -1;
    synchronize();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Plans one direction of one geometry: the graph, then the candidates of heuristics mode A
// (then of the fallback list where A has none that finalizes), each checked for kiln's
// numbers and finalized; the first that finalizes is taken, or with KILN_CUDNN_BENCHMARK=1
// (outside a CUDA graph capture) the fastest of the first few, timed on this call's tensors.
ExecPlan make_plan(Planner& p, const int64_t align[3], void* const by_uid[3]) {
    ExecPlan out;
    p.graph(align, out.parts);
    cudnnBackendDescriptor_t graph = out.parts.back().get();
    bool measure = benchmark() && !capturing();
    double best_seconds = 0;
    int considered = 0, timed = 0;
    for (int mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
        std::vector<Descriptor> configs = p.candidates(graph, mode);
        for (size_t i = 0; i < configs.size(); ++i) {
            if (out.usable && (!measure || size_t(timed) >= kMaxTimedCandidates)) break;
            int64_t engine = -1;
            if (!p.keeps_numbers(configs[i], engine)) continue;
            ++considered;
            Descriptor plan;
            int64_t workspace = 0;
            if (!p.finalize_plan(configs[i], plan, workspace)) continue;
            double seconds = 0;
            if (measure) {
                seconds = time_plan(plan, workspace, by_uid);
                if (seconds < 0) continue;
                ++timed;
            }
            if (out.usable && seconds >= best_seconds) continue;
            if (out.usable) out.parts.pop_back();  // the config of the slower plan
            out.usable = true;
            best_seconds = seconds;
            out.plan = std::move(plan);
            out.workspace_bytes = workspace;
            out.parts.push_back(std::move(configs[i]));  // kept with its plan
            out.engine = "engine " + std::to_string(engine) + " (" +
                         (mode == CUDNN_HEUR_MODE_A ? "heuristics A" : "fallback list") +
                         ", candidate " + std::to_string(i + 1) + " of " +
                         std::to_string(configs.size()) + (measure ? ", fastest timed" : "") + ")";
        }
        if (out.usable) break;
    }
    if (!out.usable)
        out.refused = "conv2d on CUDA: cuDNN has no " + std::string(kDirectionNames[p.d]) +
                      " engine config that finalizes, keeps " + (p.tf32 ? "TF32" : "exact") +
                      " numbers and needs at most " + std::to_string(kMaxWorkspaceBytes >> 20) +
                      " MiB of workspace for " + geometry_text(p.g) + " (" +
                      std::to_string(considered) + " considered" +
                      (p.last_failure.empty() ? "" : "; the last refused: " + p.last_failure) + ")";
    return out;
}

// (direction, geometry, dtype, TF32, the operands' alignments): no allocation per call.
using PlanKey = std::array<int64_t, 20>;
std::map<PlanKey, ExecPlan>& plans() {
    static auto* m = new std::map<PlanKey, ExecPlan>;  // leaked with the handle
    return *m;
}

}  // namespace

ExecPlan& plan_for(Direction d, const CudnnConv& g, void* const by_uid[3]) {
    bool math_tf32 = !g.f64 && tf32();
    int64_t align[3] = {alignment(by_uid[0]), alignment(by_uid[1]), alignment(by_uid[2])};
    PlanKey key = {d,        g.n,   g.c,       g.h,      g.w,      g.o,     g.kh,
                   g.kw,     g.sh,  g.sw,      g.ph,     g.pw,     g.dh,    g.dw,
                   g.groups, g.f64, math_tf32, align[0], align[1], align[2]};
    auto [it, fresh] = plans().try_emplace(key);
    ExecPlan& plan = it->second;
    if (!fresh) {
        if (plan.usable) ++g_plan_reuses;
        return plan;
    }
    auto start = std::chrono::steady_clock::now();
    try {
        Planner planner{.d = d, .g = g, .tf32 = math_tf32};
        plan = make_plan(planner, align, by_uid);
    } catch (const Error& e) {
        plan = ExecPlan{};
        plan.refused = e.what();
    }
    double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (plan.usable) {
        ++g_plans;
        if (log_enabled("cudnn"))
            log_event("cudnn", std::string(kDirectionNames[d]) + " of " + geometry_text(g) +
                                   (math_tf32 ? ", TF32" : "") + ": " + plan.engine +
                                   ", workspace " + std::to_string(plan.workspace_bytes) +
                                   " bytes, planned in " + std::to_string(ms) + " ms");
        return plan;
    }
    log_event("cudnn", plan.refused);
    static std::once_flag noted;
    std::call_once(noted, [&] {
        std::fprintf(stderr, "kiln: %s; such convolutions run as im2col + GEMM\n",
                     plan.refused.c_str());
    });
    return plan;
}

}  // namespace cudnn_internal

using namespace cudnn_internal;

std::string cudnn_check_graph(const CudnnConv& g, int direction) {
    KILN_CHECK(direction >= 0 && direction < 3, "cudnn_check_graph: direction ", direction,
               " is not 0 (forward), 1 (input gradient) or 2 (weight gradient)");
    Library& lib = library();
    std::lock_guard lock(g_mu);
    if (!lib.bound) {
        std::string why = lib.bind_api();
        KILN_CHECK(why.empty(), "cudnn_check_graph: ", why);
    }
    Planner p{.d = Direction(direction), .g = g, .tf32 = false};
    std::vector<Descriptor> parts;
    const int64_t align[3] = {16, 16, 16};
    try {
        p.graph(align, parts);
    } catch (const Error& e) {
        return e.what();
    }
    return "";  // no heuristics query: without a device cuDNN 9.19's crashes (SIGFPE)
}

}  // namespace kiln::cuda::detail
