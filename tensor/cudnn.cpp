// cuDNN's legacy convolution API through dlopen (tensor/cudnn.h): descriptors and algorithms
// made once per convolution geometry, each call put on kiln's stream with its workspace from
// kiln's caching allocator.
#include "tensor/cudnn.h"

#include <glob.h>
#include <sys/stat.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string_view>
#include <type_traits>
#include <vector>

#include "tensor/cuda.h"
#include "tensor/cuda_runtime.h"
#include "tensor/error.h"

namespace kiln::cuda::detail {
namespace {

// --- The C declarations kiln uses, with the values of cuDNN 9's public headers
// (cudnn_graph.h, cudnn_ops.h, cudnn_cnn.h).
using cudnnStatus_t = int;  // CUDNN_STATUS_SUCCESS = 0
using cudnnHandle_t = void*;
using cudnnTensorDescriptor_t = void*;
using cudnnFilterDescriptor_t = void*;
using cudnnConvolutionDescriptor_t = void*;
constexpr int kDataFloat = 0,
              kDataDouble = 1;        // cudnnDataType_t: CUDNN_DATA_FLOAT, CUDNN_DATA_DOUBLE
constexpr int kNchw = 0;              // cudnnTensorFormat_t: CUDNN_TENSOR_NCHW
constexpr int kCrossCorrelation = 1;  // cudnnConvolutionMode_t: CUDNN_CROSS_CORRELATION
// cudnnMathType_t: CUDNN_TENSOR_OP_MATH, CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION, CUDNN_FMA_MATH
constexpr int kTensorOpMath = 1, kAllowConversion = 2, kFmaMath = 3;

// cudnnConvolution{Fwd,BwdData,BwdFilter}AlgoPerf_t: one layout for the three directions.
struct AlgoPerf {
    int algo;
    cudnnStatus_t status;
    float time;
    size_t memory;
    int determinism;
    int math_type;
    int reserved[3];
};

using Describe = cudnnStatus_t (*)(void*);
struct Api {
    cudnnStatus_t (*cudnnCreate)(cudnnHandle_t*);
    cudnnStatus_t (*cudnnSetStream)(cudnnHandle_t, void*);
    const char* (*cudnnGetErrorString)(cudnnStatus_t);
    size_t (*cudnnGetVersion)();
    cudnnStatus_t (*cudnnCreateTensorDescriptor)(cudnnTensorDescriptor_t*);
    cudnnStatus_t (*cudnnSetTensor4dDescriptor)(cudnnTensorDescriptor_t, int, int, int, int, int,
                                                int);
    cudnnStatus_t (*cudnnCreateFilterDescriptor)(cudnnFilterDescriptor_t*);
    cudnnStatus_t (*cudnnSetFilter4dDescriptor)(cudnnFilterDescriptor_t, int, int, int, int, int,
                                                int);
    cudnnStatus_t (*cudnnCreateConvolutionDescriptor)(cudnnConvolutionDescriptor_t*);
    cudnnStatus_t (*cudnnSetConvolution2dDescriptor)(cudnnConvolutionDescriptor_t, int, int, int,
                                                     int, int, int, int, int);
    cudnnStatus_t (*cudnnSetConvolutionGroupCount)(cudnnConvolutionDescriptor_t, int);
    cudnnStatus_t (*cudnnSetConvolutionMathType)(cudnnConvolutionDescriptor_t, int);
    // (handle, the three operand descriptors in the direction's order, conv, requested, returned,
    // perf)
    using Choose = cudnnStatus_t (*)(cudnnHandle_t, void*, void*, cudnnConvolutionDescriptor_t,
                                     void*, int, int*, AlgoPerf*);
    Choose cudnnGetConvolutionForwardAlgorithm_v7, cudnnGetConvolutionBackwardDataAlgorithm_v7,
        cudnnGetConvolutionBackwardFilterAlgorithm_v7;
    Choose cudnnFindConvolutionForwardAlgorithm, cudnnFindConvolutionBackwardDataAlgorithm,
        cudnnFindConvolutionBackwardFilterAlgorithm;
    // (handle, the three operand descriptors, conv, algo, bytes)
    using Workspace = cudnnStatus_t (*)(cudnnHandle_t, void*, void*, cudnnConvolutionDescriptor_t,
                                        void*, int, size_t*);
    Workspace cudnnGetConvolutionForwardWorkspaceSize, cudnnGetConvolutionBackwardDataWorkspaceSize,
        cudnnGetConvolutionBackwardFilterWorkspaceSize;
    // (handle, alpha, desc a, a, desc b, b, conv, algo, workspace, bytes, beta, desc out, out)
    using Run = cudnnStatus_t (*)(cudnnHandle_t, const void*, void*, const void*, void*,
                                  const void*, cudnnConvolutionDescriptor_t, int, void*, size_t,
                                  const void*, void*, void*);
    Run cudnnConvolutionForward, cudnnConvolutionBackwardData, cudnnConvolutionBackwardFilter;
    cudnnStatus_t (*cudnnAddTensor)(cudnnHandle_t, const void*, cudnnTensorDescriptor_t,
                                    const void*, const void*, cudnnTensorDescriptor_t, void*);
};

bool is_folder(const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// cuDNN 9's libcudnn.so.9 is a shim that dlopens its sub-libraries (libcudnn_cnn.so.9, ...)
// by bare name; from a folder outside the loader's path (a Python wheel) they are found only
// when already loaded. Each is loaded here, in passes, until no more load (their own
// dependencies on each other decide the order).
void preload_sublibraries(const std::string& folder) {
    glob_t found{};
    if (::glob((folder + "/libcudnn_*.so.9").c_str(), 0, nullptr, &found) != 0) return;
    std::vector<std::string> left(found.gl_pathv, found.gl_pathv + found.gl_pathc);
    ::globfree(&found);
    for (bool progress = true; progress && !left.empty();) {
        progress = false;
        std::vector<std::string> still;
        for (const std::string& path : left) {
            std::string why;
            if (open_library({path.c_str()}, why))
                progress = true;
            else
                still.push_back(path);
        }
        left = std::move(still);
    }
}

// libcudnn.so.9 in the site-packages folders PyTorch's CUDA wheels install it to.
std::vector<std::string> wheel_candidates() {
    std::vector<std::string> roots = {
        "/usr/local/lib/python3*/dist-packages", "/usr/local/lib/python3*/site-packages",
        "/usr/lib/python3/dist-packages", "/opt/conda/lib/python3*/site-packages",
        "/opt/*/.venv/lib/python3*/site-packages", "/opt/*/lib/python3*/site-packages"};
    for (const char* var : {"VIRTUAL_ENV", "CONDA_PREFIX"})
        if (const char* v = std::getenv(var))
            roots.push_back(std::string(v) + "/lib/python3*/site-packages");
    if (const char* home = std::getenv("HOME"))
        roots.push_back(std::string(home) + "/.local/lib/python3*/site-packages");
    std::vector<std::string> out;
    for (const std::string& root : roots) {
        glob_t found{};
        if (::glob((root + "/nvidia/cudnn/lib/libcudnn.so.9").c_str(), 0, nullptr, &found) == 0)
            out.insert(out.end(), found.gl_pathv, found.gl_pathv + found.gl_pathc);
        ::globfree(&found);
    }
    return out;
}

std::string folder_of(const std::string& path) {
    size_t slash = path.rfind('/');
    return slash == std::string::npos ? "." : path.substr(0, slash);
}

struct Library {
    Api api{};
    cudnnHandle_t handle = nullptr;
    std::string error;  // why cuDNN cannot be used ("" when it can)
    int64_t version = 0;

    Library() { error = load(); }

    // Opens the library from where it is found first; a path given in the environment (or
    // found in a wheel) also has its sub-libraries preloaded.
    void* open(std::string& why) {
        if (const char* env = std::getenv("KILN_CUDNN_LIB"); env && *env) {
            std::string path = env;
            if (is_folder(path)) path += "/libcudnn.so.9";
            if (void* lib = open_library({path.c_str()}, why)) {
                preload_sublibraries(folder_of(path));
                return lib;
            }
            why = "KILN_CUDNN_LIB=" + std::string(env) + ": " + why;
        }
        if (void* lib = open_library({"libcudnn.so.9"}, why)) return lib;
        for (const std::string& path : wheel_candidates())
            if (void* lib = open_library({path.c_str()}, why)) {
                preload_sublibraries(folder_of(path));
                return lib;
            }
        return nullptr;
    }

    std::string load() {
        if (!is_available()) return "CUDA is not available: " + unavailable_reason();
        std::string why;
        void* lib = open(why);
        if (!lib)
            return "cuDNN (libcudnn.so.9) not found: " + why +
                   " (set KILN_CUDNN_LIB to its path, e.g. "
                   "site-packages/nvidia/cudnn/lib/libcudnn.so.9)";
        Api& a = api;
        try {
            LibrarySymbols symbols(lib, "libcudnn");
            symbols.bind(a.cudnnCreate, "cudnnCreate");
            symbols.bind(a.cudnnSetStream, "cudnnSetStream");
            symbols.bind(a.cudnnGetErrorString, "cudnnGetErrorString");
            symbols.bind(a.cudnnGetVersion, "cudnnGetVersion");
            symbols.bind(a.cudnnCreateTensorDescriptor, "cudnnCreateTensorDescriptor");
            symbols.bind(a.cudnnSetTensor4dDescriptor, "cudnnSetTensor4dDescriptor");
            symbols.bind(a.cudnnCreateFilterDescriptor, "cudnnCreateFilterDescriptor");
            symbols.bind(a.cudnnSetFilter4dDescriptor, "cudnnSetFilter4dDescriptor");
            symbols.bind(a.cudnnCreateConvolutionDescriptor, "cudnnCreateConvolutionDescriptor");
            symbols.bind(a.cudnnSetConvolution2dDescriptor, "cudnnSetConvolution2dDescriptor");
            symbols.bind(a.cudnnSetConvolutionGroupCount, "cudnnSetConvolutionGroupCount");
            symbols.bind(a.cudnnSetConvolutionMathType, "cudnnSetConvolutionMathType");
            symbols.bind(a.cudnnGetConvolutionForwardAlgorithm_v7,
                         "cudnnGetConvolutionForwardAlgorithm_v7");
            symbols.bind(a.cudnnGetConvolutionBackwardDataAlgorithm_v7,
                         "cudnnGetConvolutionBackwardDataAlgorithm_v7");
            symbols.bind(a.cudnnGetConvolutionBackwardFilterAlgorithm_v7,
                         "cudnnGetConvolutionBackwardFilterAlgorithm_v7");
            symbols.bind(a.cudnnFindConvolutionForwardAlgorithm,
                         "cudnnFindConvolutionForwardAlgorithm");
            symbols.bind(a.cudnnFindConvolutionBackwardDataAlgorithm,
                         "cudnnFindConvolutionBackwardDataAlgorithm");
            symbols.bind(a.cudnnFindConvolutionBackwardFilterAlgorithm,
                         "cudnnFindConvolutionBackwardFilterAlgorithm");
            symbols.bind(a.cudnnGetConvolutionForwardWorkspaceSize,
                         "cudnnGetConvolutionForwardWorkspaceSize");
            symbols.bind(a.cudnnGetConvolutionBackwardDataWorkspaceSize,
                         "cudnnGetConvolutionBackwardDataWorkspaceSize");
            symbols.bind(a.cudnnGetConvolutionBackwardFilterWorkspaceSize,
                         "cudnnGetConvolutionBackwardFilterWorkspaceSize");
            symbols.bind(a.cudnnConvolutionForward, "cudnnConvolutionForward");
            symbols.bind(a.cudnnConvolutionBackwardData, "cudnnConvolutionBackwardData");
            symbols.bind(a.cudnnConvolutionBackwardFilter, "cudnnConvolutionBackwardFilter");
            symbols.bind(a.cudnnAddTensor, "cudnnAddTensor");
        } catch (const Error& e) {
            return e.what();
        }
        version = int64_t(a.cudnnGetVersion());
        if (version < 90000)
            return "libcudnn: version " + std::to_string(version) + " found, kiln needs cuDNN 9";
        void* stream = nullptr;
        try {
            stream = library_stream(
                "cuDNN");  // the device's context current before cuDNN makes its handle
        } catch (const Error& e) {
            return e.what();
        }
        if (cudnnStatus_t s = a.cudnnCreate(&handle))
            return std::string("cudnnCreate failed (") + a.cudnnGetErrorString(s) + ")";
        if (cudnnStatus_t s = a.cudnnSetStream(handle, stream))
            return std::string("cudnnSetStream failed (") + a.cudnnGetErrorString(s) + ")";
        return "";
    }
};

Library& library() {
    static Library* lib = new Library;  // leaked: cuDNN's handle is used until exit
    return *lib;
}

std::atomic<int64_t> g_calls{0}, g_plans{0};

void check(cudnnStatus_t s, const char* what, const CudnnConv& g) {
    KILN_CHECK(s == 0, "conv2d on CUDA: cuDNN ", what, " failed (",
               library().api.cudnnGetErrorString(s), ", status ", s, ") for input [", g.n, ", ",
               g.c, ", ", g.h, ", ", g.w, "], weight [", g.o, ", ", g.c / g.groups, ", ", g.kh,
               ", ", g.kw, "], stride ", g.sh, "x", g.sw, ", padding ", g.ph, "x", g.pw,
               ", dilation ", g.dh, "x", g.dw, ", groups ", g.groups);
}

// KILN_CUDNN_TF32=1 lets float32 convolutions use tensor cores (TF32 inputs, as PyTorch's
// default torch.backends.cudnn.allow_tf32); by default they are exact float32 (FMA), as
// kiln's cuBLAS matmuls.
bool tf32() {
    const char* e = std::getenv("KILN_CUDNN_TF32");
    return e && std::string_view(e) == "1";
}
// KILN_CUDNN_BENCHMARK=1 times the candidate algorithms once per geometry (cudnnFind*, as
// torch.backends.cudnn.benchmark); by default cuDNN's heuristics choose (cudnnGet*_v7).
bool benchmark() {
    const char* e = std::getenv("KILN_CUDNN_BENCHMARK");
    return e && std::string_view(e) == "1";
}

enum Direction { kForward = 0, kData = 1, kFilter = 2 };
struct Choice {
    bool made = false;
    int algo = 0;
    int math_type = kFmaMath;  // set on the convolution descriptor before each call
    size_t workspace_bytes = 0;
};
// Descriptors of one geometry, and the algorithm chosen for each direction.
struct Plan {
    cudnnTensorDescriptor_t x = nullptr, y = nullptr, bias = nullptr;
    cudnnFilterDescriptor_t w = nullptr;
    cudnnConvolutionDescriptor_t conv = nullptr;
    Choice choice[3];
    bool tf32 = false;  // float32 may run on tensor cores (KILN_CUDNN_TF32=1 when planned)
};

std::mutex g_mu;  // the plans, and the handle's use (one stream)
std::map<std::vector<int64_t>, Plan>& plans() {
    static auto* m = new std::map<std::vector<int64_t>, Plan>;  // leaked with the handle
    return *m;
}

int as_int(int64_t v, const CudnnConv& g) {
    KILN_CHECK(v >= 0 && v < (int64_t(1) << 31), "conv2d on CUDA: size ", v,
               " passes cuDNN's int range (input [", g.n, ", ", g.c, ", ", g.h, ", ", g.w, "])");
    return int(v);
}

Plan& plan_for(const CudnnConv& g) {
    bool math_tf32 = !g.f64 && tf32();
    std::vector<int64_t> key = {g.n,  g.c,  g.h,  g.w,  g.o,  g.kh,     g.kw,           g.sh,
                                g.sw, g.ph, g.pw, g.dh, g.dw, g.groups, int64_t(g.f64), math_tf32};
    auto [it, fresh] = plans().try_emplace(key);
    Plan& p = it->second;
    if (!fresh) return p;
    p.tf32 = math_tf32;
    const Api& a = library().api;
    int dt = g.f64 ? kDataDouble : kDataFloat;
    try {
        check(a.cudnnCreateTensorDescriptor(&p.x), "cudnnCreateTensorDescriptor", g);
        check(a.cudnnCreateTensorDescriptor(&p.y), "cudnnCreateTensorDescriptor", g);
        check(a.cudnnCreateTensorDescriptor(&p.bias), "cudnnCreateTensorDescriptor", g);
        check(a.cudnnCreateFilterDescriptor(&p.w), "cudnnCreateFilterDescriptor", g);
        check(a.cudnnCreateConvolutionDescriptor(&p.conv), "cudnnCreateConvolutionDescriptor", g);
        check(a.cudnnSetTensor4dDescriptor(p.x, kNchw, dt, as_int(g.n, g), as_int(g.c, g),
                                           as_int(g.h, g), as_int(g.w, g)),
              "cudnnSetTensor4dDescriptor (input)", g);
        check(a.cudnnSetTensor4dDescriptor(p.y, kNchw, dt, as_int(g.n, g), as_int(g.o, g),
                                           as_int(g.out_h(), g), as_int(g.out_w(), g)),
              "cudnnSetTensor4dDescriptor (output)", g);
        check(a.cudnnSetTensor4dDescriptor(p.bias, kNchw, dt, 1, as_int(g.o, g), 1, 1),
              "cudnnSetTensor4dDescriptor (bias)", g);
        check(
            a.cudnnSetFilter4dDescriptor(p.w, dt, kNchw, as_int(g.o, g), as_int(g.c / g.groups, g),
                                         as_int(g.kh, g), as_int(g.kw, g)),
            "cudnnSetFilter4dDescriptor", g);
        check(a.cudnnSetConvolution2dDescriptor(p.conv, as_int(g.ph, g), as_int(g.pw, g),
                                                as_int(g.sh, g), as_int(g.sw, g), as_int(g.dh, g),
                                                as_int(g.dw, g), kCrossCorrelation, dt),
              "cudnnSetConvolution2dDescriptor", g);
        check(a.cudnnSetConvolutionGroupCount(p.conv, as_int(g.groups, g)),
              "cudnnSetConvolutionGroupCount", g);
        check(a.cudnnSetConvolutionMathType(p.conv, math_tf32 ? kTensorOpMath : kFmaMath),
              "cudnnSetConvolutionMathType", g);
    } catch (...) {
        plans().erase(it);  // descriptors leak on this error path only; the geometry is refused
        throw;
    }
    ++g_plans;
    return p;
}

// The most workspace an algorithm may ask for; above it the next candidate is taken.
constexpr size_t kMaxWorkspaceBytes = size_t(1) << 30;

// The direction's algorithm, chosen on first use: cuDNN's heuristic order (or, with
// KILN_CUDNN_BENCHMARK=1 outside a CUDA graph capture, measured), the first candidate that
// is supported and fits the workspace limit.
const Choice& choose(Plan& p, Direction d, const CudnnConv& g) {
    Choice& c = p.choice[d];
    if (c.made) return c;
    const Api& a = library().api;
    // Each direction's descriptors in the order its functions take them.
    void* operands[3][3] = {{p.x, p.w, p.y}, {p.w, p.y, p.x}, {p.x, p.y, p.w}};
    void** o = operands[d];
    bool measure = benchmark() && !capturing();
    Api::Choose get[3] = {a.cudnnGetConvolutionForwardAlgorithm_v7,
                          a.cudnnGetConvolutionBackwardDataAlgorithm_v7,
                          a.cudnnGetConvolutionBackwardFilterAlgorithm_v7};
    Api::Choose find[3] = {a.cudnnFindConvolutionForwardAlgorithm,
                           a.cudnnFindConvolutionBackwardDataAlgorithm,
                           a.cudnnFindConvolutionBackwardFilterAlgorithm};
    Api::Workspace size[3] = {a.cudnnGetConvolutionForwardWorkspaceSize,
                              a.cudnnGetConvolutionBackwardDataWorkspaceSize,
                              a.cudnnGetConvolutionBackwardFilterWorkspaceSize};
    AlgoPerf perf[16] = {};
    int returned = 0;
    if (measure) synchronize();  // cudnnFind* runs on its own: kiln's queued work first
    check(
        (measure ? find : get)[d](library().handle, o[0], o[1], p.conv, o[2], 16, &returned, perf),
        measure ? "cudnnFindConvolution*Algorithm" : "cudnnGetConvolution*Algorithm_v7", g);
    for (int i = 0; i < returned; ++i) {
        if (perf[i].status != 0) continue;
        // cuDNN lists candidates of every math type and leaves setting it to the caller: exact
        // float32 (and float64) takes FMA math whatever the candidate says, as PyTorch does
        // without allow_tf32; with TF32 allowed each candidate runs with its own.
        int math = p.tf32 ? perf[i].math_type : kFmaMath;
        if (!p.tf32 && perf[i].math_type != kFmaMath && perf[i].math_type != 0)
            continue;                                         // 0: default math
        if (perf[i].math_type == kAllowConversion) continue;  // may round float32 to half
        check(a.cudnnSetConvolutionMathType(p.conv, math), "cudnnSetConvolutionMathType", g);
        size_t bytes = 0;
        if (size[d](library().handle, o[0], o[1], p.conv, o[2], perf[i].algo, &bytes) != 0)
            continue;
        if (bytes > kMaxWorkspaceBytes) continue;
        c = {true, perf[i].algo, math, bytes};
        return c;
    }
    const char* names[3] = {"forward", "input gradient", "weight gradient"};
    fail("conv2d on CUDA: cuDNN has no ", names[d], " algorithm for input [", g.n, ", ", g.c, ", ",
         g.h, ", ", g.w, "], weight [", g.o, ", ", g.c / g.groups, ", ", g.kh, ", ", g.kw,
         "] within ", kMaxWorkspaceBytes >> 20, " MiB of workspace (", returned,
         " candidates); KILN_CUDNN=0 runs im2col + GEMM");
}

// A workspace from kiln's allocator for the length of one call (stream-ordered: the next user
// of the block runs after this call on the same stream).
struct Workspace {
    void* ptr = nullptr;
    size_t block = 0;
    explicit Workspace(size_t bytes) {
        if (bytes) ptr = allocate(bytes, block);
    }
    ~Workspace() {
        if (ptr) release(ptr, block);
    }
    Workspace(const Workspace&) = delete;
    Workspace& operator=(const Workspace&) = delete;
};

// Runs one direction: out = op(a, b), alpha 1 and beta 0 of the data's type. False, with a
// note the first time, when cuDNN cannot plan this geometry (a descriptor it refuses, no
// algorithm): the caller runs im2col + GEMM. A failure of the call itself raises.
bool run(Direction d, const CudnnConv& g, const void* in_a, const void* in_b, void* out,
         const void* bias) {
    Library& lib = library();
    KILN_CHECK(lib.error.empty(), "conv2d on CUDA: ", lib.error);
    std::lock_guard lock(g_mu);
    library_stream("conv2d (cuDNN)");  // the handle was given kiln's stream when made
    const Api& a = lib.api;
    Plan* plan = nullptr;
    const Choice* choice = nullptr;
    try {
        plan = &plan_for(g);
        choice = &choose(*plan, d, g);
    } catch (const Error& e) {
        static std::once_flag noted;
        std::call_once(noted, [&] {
            std::fprintf(stderr, "kiln: %s; such convolutions run as im2col + GEMM\n", e.what());
        });
        return false;
    }
    Plan& p = *plan;
    const Choice& c = *choice;
    check(a.cudnnSetConvolutionMathType(p.conv, c.math_type), "cudnnSetConvolutionMathType", g);
    Workspace ws(c.workspace_bytes);
    const float one_f = 1, zero_f = 0;
    const double one_d = 1, zero_d = 0;
    const void* one = g.f64 ? static_cast<const void*>(&one_d) : &one_f;
    const void* zero = g.f64 ? static_cast<const void*>(&zero_d) : &zero_f;
    ++g_calls;
    switch (d) {
        case kForward:
            check(a.cudnnConvolutionForward(lib.handle, one, p.x, in_a, p.w, in_b, p.conv, c.algo,
                                            ws.ptr, c.workspace_bytes, zero, p.y, out),
                  "cudnnConvolutionForward", g);
            if (bias)
                check(a.cudnnAddTensor(lib.handle, one, p.bias, bias, one, p.y, out),
                      "cudnnAddTensor (bias)", g);
            break;
        case kData:  // (w, dy) -> dx
            check(a.cudnnConvolutionBackwardData(lib.handle, one, p.w, in_a, p.y, in_b, p.conv,
                                                 c.algo, ws.ptr, c.workspace_bytes, zero, p.x, out),
                  "cudnnConvolutionBackwardData", g);
            break;
        case kFilter:  // (x, dy) -> dw
            check(
                a.cudnnConvolutionBackwardFilter(lib.handle, one, p.x, in_a, p.y, in_b, p.conv,
                                                 c.algo, ws.ptr, c.workspace_bytes, zero, p.w, out),
                "cudnnConvolutionBackwardFilter", g);
            break;
    }
    return true;
}

}  // namespace

int64_t CudnnConv::out_h() const { return (h + 2 * ph - dh * (kh - 1) - 1) / sh + 1; }
int64_t CudnnConv::out_w() const { return (w + 2 * pw - dw * (kw - 1) - 1) / sw + 1; }

bool cudnn_enabled() {
    const char* e = std::getenv("KILN_CUDNN");
    if (e && std::string_view(e) == "0") return false;
    static std::once_flag noted;
    const std::string& why = library().error;
    if (!why.empty())
        std::call_once(noted, [&] {
            std::fprintf(stderr, "kiln: CUDA convolutions run as im2col + GEMM: %s\n", why.c_str());
        });
    return why.empty();
}

std::string cudnn_unavailable_reason() { return library().error; }
int64_t cudnn_version() { return library().error.empty() ? library().version : 0; }

bool cudnn_conv_forward(const CudnnConv& g, const void* x, const void* w, const void* bias,
                        void* y) {
    return run(kForward, g, x, w, y, bias);
}
bool cudnn_conv_input_grad(const CudnnConv& g, const void* dy, const void* w, void* dx) {
    return run(kData, g, w, dy, dx, nullptr);
}
bool cudnn_conv_weight_grad(const CudnnConv& g, const void* x, const void* dy, void* dw) {
    return run(kFilter, g, x, dy, dw, nullptr);
}

CudnnStats cudnn_stats() { return {g_calls.load(), g_plans.load()}; }

}  // namespace kiln::cuda::detail
