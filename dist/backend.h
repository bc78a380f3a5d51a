// Internal to dist/: what an engine (MPI, NCCL) does for the process group. Buffers are
// contiguous memory of the engine's device; counts are in elements.
#pragma once
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "dist/dist.h"
#include "dist/store.h"

namespace kiln::dist::detail {

struct Backend {
    virtual ~Backend() = default;
    // Each returns at once; the Work keeps `keep` alive until it completes. `op_name` is for
    // messages ("all_reduce of 1024 float32").
    virtual WorkHandle all_reduce(void* buf, int64_t n, DType dtype, ReduceOp op,
                                  std::vector<Tensor> keep, const std::string& what) = 0;
    virtual WorkHandle broadcast(void* buf, int64_t n, DType dtype, int src,
                                 std::vector<Tensor> keep, const std::string& what) = 0;
    virtual WorkHandle all_gather(const void* in, void* out, int64_t n, DType dtype,
                                  std::vector<Tensor> keep, const std::string& what) = 0;
    virtual WorkHandle reduce_scatter(const void* in, void* out, int64_t n_out, DType dtype,
                                      ReduceOp op, std::vector<Tensor> keep,
                                      const std::string& what) = 0;
    // Several in-place broadcasts from `src` as one engine operation, or null when the engine
    // cannot group them (dist flattens them per dtype instead).
    struct Buffer {
        void* data;
        int64_t n;
        DType dtype;
    };
    virtual WorkHandle broadcast_group(const std::vector<Buffer>& /*bufs*/, int /*src*/,
                                       std::vector<Tensor> /*keep*/, const std::string& /*what*/) {
        return nullptr;
    }
    // After a timeout the engine's state is unknown: no clean shutdown (MPI_Finalize would wait).
    // Atomic: NCCL's watchdog thread (dist/watchdog.h) reads and sets it too.
    std::atomic<bool> broken{false};
};

struct GroupInfo {
    int rank = 0, world_size = 1, local_rank = 0;
    std::chrono::milliseconds timeout{300000};
    Store* store = nullptr;  // null in a world of one
};

// Whether kiln was built with MPI, and the library's version or why not.
bool mpi_built();
std::string mpi_summary();
// MPI_Init over mpirun's world; raises naming MPI when kiln was built without it or the
// process was not started by mpirun.
std::unique_ptr<Backend> make_mpi_backend(const GroupInfo& group);
void mpi_finalize(Backend& b);

// libnccl.so.2 through dlopen; the unique id travels through the store.
std::string nccl_summary();
std::unique_ptr<Backend> make_nccl_backend(const GroupInfo& group);

// Raises "dist: <what> did not complete within N s ..." (the same words for every engine).
[[noreturn]] void fail_timeout(const std::string& engine, const std::string& what,
                               std::chrono::milliseconds t);

}  // namespace kiln::dist::detail
