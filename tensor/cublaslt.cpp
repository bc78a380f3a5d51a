// cublasLt's matmul with an epilogue through dlopen (tensor/cublaslt.h): descriptors, layouts
// and the heuristic's algorithm made once per shape and epilogue, each call put on kiln's
// stream with its workspace from kiln's caching allocator.
#include "tensor/cublaslt.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string_view>
#include <tuple>
#include <type_traits>

#include "tensor/cuda.h"
#include "tensor/cuda_runtime.h"
#include "tensor/error.h"
#include "tensor/symbol_table.h"

namespace kiln::cuda::detail {
namespace {

// --- The C declarations kiln uses, with the values of cublasLt.h, cublas_api.h and
// library_types.h (CUDA 12 and 13 agree on them).
using cublasStatus_t = int;  // CUBLAS_STATUS_SUCCESS = 0
using Handle = void*;
using Desc = void*;
using Layout = void*;
using Preference = void*;
constexpr int kCudaR32F = 0;     // cudaDataType: CUDA_R_32F
constexpr int kComputeF32 = 68;  // cublasComputeType_t: CUBLAS_COMPUTE_32F (exact float32, no TF32)
constexpr int kOpN = 0, kOpT = 1;  // cublasOperation_t
constexpr int kDescTransA = 3, kDescTransB = 4, kDescEpilogue = 7,
              kDescBiasPointer = 8;        // cublasLtMatmulDescAttributes_t
constexpr int kPrefMaxWorkspaceBytes = 1;  // cublasLtMatmulPreferenceAttributes_t
// cublasLtEpilogue_t
constexpr uint32_t kEpilogueBias = 4, kEpilogueReluBias = 2 | 4, kEpilogueGeluBias = 32 | 4;

struct Algo {
    uint64_t data[8];  // cublasLtMatmulAlgo_t
};
struct HeuristicResult {  // cublasLtMatmulHeuristicResult_t
    Algo algo;
    size_t workspace_size;
    cublasStatus_t state;
    float waves_count;
    int reserved[4];
};

// The entry points kiln calls, as a table (tensor/symbol_table.h).
#define KILN_CUBLASLT_SYMBOLS(X)                                                                 \
    X(cublasLtCreate, "cublasLtCreate", cublasStatus_t (*)(Handle*))                             \
    X(cublasLtGetStatusString, "cublasLtGetStatusString", const char* (*)(cublasStatus_t))       \
    X(cublasLtMatmulDescCreate, "cublasLtMatmulDescCreate", cublasStatus_t (*)(Desc*, int, int)) \
    X(cublasLtMatmulDescSetAttribute, "cublasLtMatmulDescSetAttribute",                          \
      cublasStatus_t (*)(Desc, int, const void*, size_t))                                        \
    X(cublasLtMatrixLayoutCreate, "cublasLtMatrixLayoutCreate",                                  \
      cublasStatus_t (*)(Layout*, int, uint64_t, uint64_t, int64_t))                             \
    X(cublasLtMatmulPreferenceCreate, "cublasLtMatmulPreferenceCreate",                          \
      cublasStatus_t (*)(Preference*))                                                           \
    X(cublasLtMatmulPreferenceSetAttribute, "cublasLtMatmulPreferenceSetAttribute",              \
      cublasStatus_t (*)(Preference, int, const void*, size_t))                                  \
    X(cublasLtMatmulAlgoGetHeuristic, "cublasLtMatmulAlgoGetHeuristic",                          \
      cublasStatus_t (*)(Handle, Desc, Layout, Layout, Layout, Layout, Preference, int,          \
                         HeuristicResult*, int*))                                                \
    X(cublasLtMatmul, "cublasLtMatmul",                                                          \
      cublasStatus_t (*)(Handle, Desc, const void*, const void*, Layout, const void*, Layout,    \
                         const void*, const void*, Layout, void*, Layout, const Algo*, void*,    \
                         size_t, void*))
struct Api {
    KILN_CUBLASLT_SYMBOLS(KILN_SYMBOL_FIELD)
    void bind(const LibrarySymbols& symbols) { KILN_CUBLASLT_SYMBOLS(KILN_SYMBOL_BIND) }
};

struct Library {
    Api api{};
    Handle handle = nullptr;
    std::string error;

    Library() { error = load(); }

    std::string load() {
        if (!is_available()) return "CUDA is not available: " + unavailable_reason();
        std::string why;
        void* lib = open_library(
            {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so",
             "/usr/local/cuda/lib64/libcublasLt.so.13", "/usr/local/cuda/lib64/libcublasLt.so"},
            why);
        if (!lib) return "cublasLt (libcublasLt.so) not found: " + why;
        Api& a = api;
        try {
            a.bind(LibrarySymbols(lib, "libcublasLt"));
            library_stream("cublasLt");  // cuda:0's context current before the handle is made
        } catch (const Error& e) {
            return e.what();
        }
        if (cublasStatus_t s = a.cublasLtCreate(&handle))
            return std::string("cublasLtCreate failed (") + a.cublasLtGetStatusString(s) + ")";
        return "";
    }
};

Library& library() {
    static Library* lib = new Library;  // leaked: the handle is used until exit
    return *lib;
}

std::atomic<int64_t> g_calls{0};

// Descriptors of one shape and epilogue, and the heuristic's first algorithm.
struct Plan {
    Desc desc = nullptr;
    Layout a = nullptr, b = nullptr, c = nullptr;
    Algo algo{};
    size_t workspace_bytes = 0;
};
std::mutex g_mu;
std::map<std::tuple<int64_t, int64_t, int64_t, int>, Plan>& plans() {
    static auto* m = new std::map<std::tuple<int64_t, int64_t, int64_t, int>, Plan>;
    return *m;
}

constexpr size_t kMaxWorkspaceBytes = size_t(32) << 20;

void check(cublasStatus_t s, const char* what, int64_t m, int64_t n, int64_t k) {
    KILN_CHECK(s == 0, "linear on CUDA: cublasLt ", what, " failed (",
               library().api.cublasLtGetStatusString(s), ", status ", s, ") for [", m, ", ", k,
               "] @ [", n, ", ", k, "]^T");
}

uint32_t code(Epilogue e) {
    switch (e) {
        case Epilogue::bias:
            return kEpilogueBias;
        case Epilogue::bias_relu:
            return kEpilogueReluBias;
        case Epilogue::bias_gelu:
            return kEpilogueGeluBias;
    }
    return kEpilogueBias;
}

// Column-major, as cublasLt sees it: out^T [n, m] = w [n, k] @ a^T [k, m], where row-major
// w [n, k] is column-major [k, n] (so transposed) and row-major a [m, k] is column-major
// [k, m]. The bias runs along out^T's rows: one value per output feature.
Plan& plan_for(int64_t m, int64_t n, int64_t k, Epilogue e) {
    auto [it, fresh] = plans().try_emplace({m, n, k, int(e)});
    Plan& p = it->second;
    if (!fresh) return p;
    const Api& a = library().api;
    try {
        check(a.cublasLtMatmulDescCreate(&p.desc, kComputeF32, kCudaR32F),
              "cublasLtMatmulDescCreate", m, n, k);
        int32_t trans_a = kOpT, trans_b = kOpN;
        uint32_t epilogue = code(e);
        check(a.cublasLtMatmulDescSetAttribute(p.desc, kDescTransA, &trans_a, sizeof trans_a),
              "set TRANSA", m, n, k);
        check(a.cublasLtMatmulDescSetAttribute(p.desc, kDescTransB, &trans_b, sizeof trans_b),
              "set TRANSB", m, n, k);
        check(a.cublasLtMatmulDescSetAttribute(p.desc, kDescEpilogue, &epilogue, sizeof epilogue),
              "set EPILOGUE", m, n, k);
        check(a.cublasLtMatrixLayoutCreate(&p.a, kCudaR32F, uint64_t(k), uint64_t(n), k),
              "layout (weight)", m, n, k);
        check(a.cublasLtMatrixLayoutCreate(&p.b, kCudaR32F, uint64_t(k), uint64_t(m), k),
              "layout (input)", m, n, k);
        check(a.cublasLtMatrixLayoutCreate(&p.c, kCudaR32F, uint64_t(n), uint64_t(m), n),
              "layout (output)", m, n, k);
        Preference pref = nullptr;
        check(a.cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate", m, n, k);
        uint64_t most = kMaxWorkspaceBytes;
        check(a.cublasLtMatmulPreferenceSetAttribute(pref, kPrefMaxWorkspaceBytes, &most,
                                                     sizeof most),
              "set MAX_WORKSPACE_BYTES", m, n, k);
        HeuristicResult result{};
        int returned = 0;
        check(a.cublasLtMatmulAlgoGetHeuristic(library().handle, p.desc, p.a, p.b, p.c, p.c, pref,
                                               1, &result, &returned),
              "cublasLtMatmulAlgoGetHeuristic", m, n, k);
        KILN_CHECK(returned > 0 && result.state == 0,
                   "linear on CUDA: cublasLt has no algorithm for [", m, ", ", k, "] @ [", n, ", ",
                   k, "]^T with this epilogue; KILN_CUBLASLT=0 runs matmul and add");
        p.algo = result.algo;
        p.workspace_bytes = result.workspace_size;
    } catch (...) {
        plans().erase(it);
        throw;
    }
    return p;
}

}  // namespace

bool cublaslt_enabled() {
    const char* e = std::getenv("KILN_CUBLASLT");
    if (e && std::string_view(e) == "0") return false;
    static std::once_flag noted;
    const std::string& why = library().error;
    if (!why.empty())
        std::call_once(noted, [&] {
            std::fprintf(stderr, "kiln: CUDA Linear layers run as matmul and add: %s\n",
                         why.c_str());
        });
    return why.empty();
}

std::string cublaslt_unavailable_reason() { return library().error; }

void gemm_epilogue(int64_t m, int64_t n, int64_t k, const float* a, const float* w,
                   const float* bias, float* out, Epilogue e) {
    Library& lib = library();
    KILN_CHECK(lib.error.empty(), "linear on CUDA: ", lib.error);
    constexpr int64_t kIntMax = (int64_t(1) << 31) - 1;
    KILN_CHECK(m > 0 && n > 0 && k > 0 && m <= kIntMax && n <= kIntMax && k <= kIntMax,
               "linear on CUDA: sizes [", m, ", ", k, "] @ [", n, ", ", k,
               "]^T outside cublasLt's range");
    std::lock_guard lock(g_mu);
    void* stream = library_stream("linear (cublasLt)");
    Plan& p = plan_for(m, n, k, e);
    check(lib.api.cublasLtMatmulDescSetAttribute(p.desc, kDescBiasPointer, &bias, sizeof bias),
          "set BIAS_POINTER", m, n, k);
    size_t block = 0;
    void* workspace = p.workspace_bytes ? allocate(p.workspace_bytes, block) : nullptr;
    const float one = 1, zero = 0;
    cublasStatus_t s =
        lib.api.cublasLtMatmul(lib.handle, p.desc, &one, w, p.a, a, p.b, &zero, out, p.c, out, p.c,
                               &p.algo, workspace, p.workspace_bytes, stream);
    if (workspace) release(workspace, block);  // stream-ordered: the next user runs after this GEMM
    check(s, "cublasLtMatmul", m, n, k);
    ++g_calls;
}

int64_t cublaslt_calls() { return g_calls.load(); }

}  // namespace kiln::cuda::detail
