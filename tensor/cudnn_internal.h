// Internal to tensor/cudnn*.cpp: what cuDNN's loader and runner (cudnn.cpp) and its planner
// (cudnn_plan.cpp: operation graph, engine config, cache of execution plans) share.
#pragma once
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "tensor/cuda_runtime.h"
#include "tensor/cudnn.h"
#include "tensor/cudnn_api.h"

namespace kiln::cuda::detail::cudnn_internal {

using namespace cudnn_api;

struct Library {
    Api api{};
    cudnnHandle_t handle = nullptr;
    std::string error;  // why cuDNN cannot be used ("" when it can)
    int64_t version = 0;
    bool bound = false;  // the entry points (cudnn_check_graph binds them without a GPU too)

    Library() { error = load(); }

    // Opens the library from where it is found first; a path given in the environment (or
    // found in a wheel) also has its sub-libraries preloaded.
    void* open(std::string& why);
    std::string load();
    // Opens the library and binds the entry points (no GPU needed): "" when they are bound.
    std::string bind_api();
};

Library& library();  // made on first use

// cudnn_stats()'s counters: convolutions run, plans made, calls that reused a plan.
extern std::atomic<int64_t> g_calls, g_plans, g_plan_reuses;
extern std::mutex g_mu;  // the plans, and the handle's use (one stream)

enum Direction { kForward = 0, kData = 1, kFilter = 2 };
inline const char* const kDirectionNames[3] = {"forward", "input gradient", "weight gradient"};

std::string geometry_text(const CudnnConv& g);
// cuDNN's name for a status, and its own message for the last failure where it has one.
std::string status_text(cudnnStatus_t s);

// One backend descriptor, destroyed with its owner. Cached plans are never destroyed: like
// the handle, they live until exit.
class Descriptor {
   public:
    Descriptor() = default;
    Descriptor(Descriptor&& o) noexcept : d_(o.d_) { o.d_ = nullptr; }
    Descriptor& operator=(Descriptor&& o) noexcept {
        std::swap(d_, o.d_);
        return *this;
    }
    ~Descriptor() {
        if (d_) library().api.cudnnBackendDestroyDescriptor(d_);
    }
    cudnnBackendDescriptor_t get() const { return d_; }
    cudnnBackendDescriptor_t* out() { return &d_; }

   private:
    cudnnBackendDescriptor_t d_ = nullptr;
};

// The unique ids of the three tensors in a graph and in each call's variant pack.
constexpr int64_t kUidX = 0, kUidW = 1, kUidY = 2;
// Each direction's (a, b, out) operands of run(), as tensor ids.
constexpr int64_t kOperandUids[3][3] = {{kUidX, kUidW, kUidY},   // (x, w) -> y
                                        {kUidW, kUidY, kUidX},   // (w, dy) -> dx
                                        {kUidX, kUidY, kUidW}};  // (x, dy) -> dw
// Each direction's operation descriptor and its attributes for the x, w, y tensors (or their

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

// One direction of one geometry, planned: the finalized execution plan and the descriptors it
// was built from (kept while it lives), or why cuDNN cannot run it (the caller then runs
// im2col + GEMM).
struct ExecPlan {
    bool usable = false;
    std::string refused;  // why not usable
    Descriptor plan;
    int64_t workspace_bytes = 0;
    std::vector<Descriptor> parts;  // tensors, convolution, operation, graph, engine config
    std::string engine;             // what was chosen, for KILN_LOGS=cudnn
    // The bias add after a forward plan (legacy descriptors, made on the first call with a bias).
    cudnnTensorDescriptor_t bias = nullptr, y = nullptr;
};

// Runs a finalized plan on kiln's stream over the tensors `by_uid` (x, w, y or gradients).
cudnnStatus_t execute(const Descriptor& plan, void* const by_uid[3], void* workspace);

// The cached plan of (direction, geometry, dtype, TF32, the operands' alignments), made on
// first use. A geometry cuDNN cannot plan is remembered as refused, with one note on stderr.
ExecPlan& plan_for(Direction d, const CudnnConv& g, void* const by_uid[3]);

}  // namespace kiln::cuda::detail::cudnn_internal
