// CUDA convolutions through cuDNN's backend (graph) API, opened with dlopen (tensor/cudnn.h).
// Per geometry and direction, once (tensor/cudnn_plan.cpp): an operation graph of one convolution,
// an engine config (cuDNN's heuristics, or the fastest candidate timed), its execution plan
// finalized and cached. Per call: a variant pack (the data pointers and a workspace from kiln's
// caching allocator) executed on kiln's stream. cuDNN's legacy cudnnConvolution* entry points build
// and finalize such a plan on every call, which made a small convolution host-bound.
#include "tensor/cudnn.h"

#include <glob.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string_view>
#include <vector>

#include "tensor/cuda.h"
#include "tensor/cuda_runtime.h"
#include "tensor/cudnn_internal.h"
#include "tensor/error.h"

namespace kiln::cuda::detail {

void cudnn_api::Api::bind(const LibrarySymbols& symbols) { KILN_CUDNN_SYMBOLS(KILN_SYMBOL_BIND) }

namespace cudnn_internal {
namespace {

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
        "/usr/local/lib/python3*/dist-packages",   "/usr/local/lib/python3*/site-packages",
        "/usr/lib/python3/dist-packages",          "/opt/conda/lib/python3*/site-packages",
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

}  // namespace

void* Library::open(std::string& why) {
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

std::string Library::load() {
    if (!is_available()) return "CUDA is not available: " + unavailable_reason();
    if (std::string why = bind_api(); !why.empty()) return why;
    void* stream = nullptr;
    try {
        stream =
            library_stream("cuDNN");  // the device's context current before cuDNN makes its handle
    } catch (const Error& e) {
        return e.what();
    }
    if (cudnnStatus_t s = api.cudnnCreate(&handle))
        return std::string("cudnnCreate failed (") + api.cudnnGetErrorString(s) + ")";
    if (cudnnStatus_t s = api.cudnnSetStream(handle, stream))
        return std::string("cudnnSetStream failed (") + api.cudnnGetErrorString(s) + ")";
    return "";
}

std::string Library::bind_api() {
    std::string why;
    void* lib = open(why);
    if (!lib)
        return "cuDNN (libcudnn.so.9) not found: " + why +
               " (set KILN_CUDNN_LIB to its path, e.g. "
               "site-packages/nvidia/cudnn/lib/libcudnn.so.9)";
    Api& a = api;
    try {
        LibrarySymbols symbols(lib, "libcudnn");
        a.bind(symbols);
        // cuDNN 9.0 may lack it: error messages then give the status only
        symbols.bind_optional(a.cudnnGetLastErrorString, "cudnnGetLastErrorString");
    } catch (const Error& e) {
        return e.what();
    }
    version = int64_t(a.cudnnGetVersion());
    if (version < 90000)
        return "libcudnn: version " + std::to_string(version) + " found, kiln needs cuDNN 9";
    bound = true;
    return "";
}

Library& library() {
    static Library* lib = new Library;  // leaked: cuDNN's handle is used until exit
    return *lib;
}

std::atomic<int64_t> g_calls{0}, g_plans{0}, g_plan_reuses{0};
std::mutex g_mu;

std::string geometry_text(const CudnnConv& g) {
    auto s = [](int64_t v) { return std::to_string(v); };
    return "input [" + s(g.n) + ", " + s(g.c) + ", " + s(g.h) + ", " + s(g.w) + "], weight [" +
           s(g.o) + ", " + s(g.c / g.groups) + ", " + s(g.kh) + ", " + s(g.kw) + "], stride " +
           s(g.sh) + "x" + s(g.sw) + ", padding " + s(g.ph) + "x" + s(g.pw) + ", dilation " +
           s(g.dh) + "x" + s(g.dw) + ", groups " + s(g.groups) +
           (g.f64 ? ", float64" : ", float32");
}

// cuDNN's name for a status, and its own message for the last failure where it has one.
std::string status_text(cudnnStatus_t s) {
    const Api& a = library().api;
    std::string out = std::string(a.cudnnGetErrorString(s)) + ", status " + std::to_string(s);
    if (a.cudnnGetLastErrorString) {
        char message[512] = {};
        a.cudnnGetLastErrorString(message, sizeof message);
        if (message[0]) out += ": " + std::string(message);
    }
    return out;
}

// Runs a finalized plan on kiln's stream over the tensors `by_uid` (x, w, y or gradients).
cudnnStatus_t execute(const Descriptor& plan, void* const by_uid[3], void* workspace) {
    const Api& a = library().api;
    Descriptor pack;
    const int64_t uids[3] = {kUidX, kUidW, kUidY};
    cudnnStatus_t s =
        a.cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, pack.out());
    if (s == CUDNN_STATUS_SUCCESS)
        s = a.cudnnBackendSetAttribute(pack.get(), CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS,
                                       CUDNN_TYPE_INT64, 3, uids);
    if (s == CUDNN_STATUS_SUCCESS)
        s = a.cudnnBackendSetAttribute(pack.get(), CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS,
                                       CUDNN_TYPE_VOID_PTR, 3, by_uid);
    if (s == CUDNN_STATUS_SUCCESS)
        s = a.cudnnBackendSetAttribute(pack.get(), CUDNN_ATTR_VARIANT_PACK_WORKSPACE,
                                       CUDNN_TYPE_VOID_PTR, 1, &workspace);
    if (s == CUDNN_STATUS_SUCCESS) s = a.cudnnBackendFinalize(pack.get());
    if (s == CUDNN_STATUS_SUCCESS)
        s = a.cudnnBackendExecute(library().handle, plan.get(), pack.get());
    return s;
}

namespace {

int as_int(int64_t v, const CudnnConv& g) {
    KILN_CHECK(v >= 0 && v < (int64_t(1) << 31), "conv2d on CUDA: size ", v,
               " passes cuDNN's int range (", geometry_text(g), ")");
    return int(v);
}

// y += bias[o] broadcast over [n, ., oh, ow], by cudnnAddTensor (legacy descriptors, made once
// per forward plan).
void add_bias(ExecPlan& p, const CudnnConv& g, const void* bias, void* y) {
    const Api& a = library().api;
    auto check = [&](cudnnStatus_t s, const char* what) {
        KILN_CHECK(s == CUDNN_STATUS_SUCCESS, "conv2d on CUDA: cuDNN ", what, " failed (",
                   status_text(s), ") adding the bias of ", geometry_text(g));
    };
    int dt = g.f64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
    if (!p.bias) {
        cudnnTensorDescriptor_t b = nullptr, out = nullptr;
        check(a.cudnnCreateTensorDescriptor(&b), "cudnnCreateTensorDescriptor");
        check(a.cudnnCreateTensorDescriptor(&out), "cudnnCreateTensorDescriptor");
        check(a.cudnnSetTensor4dDescriptor(b, CUDNN_TENSOR_NCHW, dt, 1, as_int(g.o, g), 1, 1),
              "cudnnSetTensor4dDescriptor (bias)");
        check(
            a.cudnnSetTensor4dDescriptor(out, CUDNN_TENSOR_NCHW, dt, as_int(g.n, g), as_int(g.o, g),
                                         as_int(g.out_h(), g), as_int(g.out_w(), g)),
            "cudnnSetTensor4dDescriptor (output)");
        p.bias = b;
        p.y = out;
    }
    const float one_f = 1;
    const double one_d = 1;
    const void* one = g.f64 ? static_cast<const void*>(&one_d) : &one_f;
    check(a.cudnnAddTensor(library().handle, one, p.bias, bias, one, p.y, y), "cudnnAddTensor");
}

// Runs one direction: out = op(a, b). False, having run nothing, when cuDNN cannot plan this
// geometry (a note the first time): the caller runs im2col + GEMM. A failing call raises.
bool run(Direction d, const CudnnConv& g, const void* in_a, const void* in_b, void* out,
         const void* bias) {
    Library& lib = library();
    KILN_CHECK(lib.error.empty(), "conv2d on CUDA: ", lib.error);
    std::lock_guard lock(g_mu);
    library_stream("conv2d (cuDNN)");  // the handle was given kiln's stream when made
    void* by_uid[3] = {};
    const void* operands[3] = {in_a, in_b, out};
    for (int i = 0; i < 3; ++i) by_uid[kOperandUids[d][i]] = const_cast<void*>(operands[i]);
    ExecPlan& p = plan_for(d, g, by_uid);
    if (!p.usable) return false;
    Workspace ws{size_t(p.workspace_bytes)};
    ++g_calls;
    cudnnStatus_t s = execute(p.plan, by_uid, ws.ptr);
    KILN_CHECK(s == CUDNN_STATUS_SUCCESS, "conv2d on CUDA: cuDNN cudnnBackendExecute failed (",
               status_text(s), ") running the ", kDirectionNames[d], " of ", geometry_text(g),
               " with ", p.engine);
    if (bias) add_bias(p, g, bias, out);
    return true;
}

}  // namespace
}  // namespace cudnn_internal

using namespace cudnn_internal;

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

CudnnStats cudnn_stats() { return {g_calls.load(), g_plans.load(), g_plan_reuses.load()}; }

}  // namespace kiln::cuda::detail