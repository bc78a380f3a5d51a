// kiln::dist — several processes training one model (torch.distributed): a process group
// met through the environment, and collectives on tensors of their device (docs/distributed.md).
//
//   dist::init_process_group();          // RANK, WORLD_SIZE, MASTER_ADDR/MASTER_PORT (kiln launch
//   sets them) dist::all_reduce(grad, dist::ReduceOp::avg);   // in place, every rank the same
//   values
//
// CPU tensors travel through MPI (OpenMPI, started by `kiln launch` through mpirun), CUDA
// tensors through NCCL (libnccl.so.2, opened at run time). Every rank must call the same
// collectives in the same order with tensors of the same shape and dtype: a mismatch is an
// error naming the ranks, and a rank that dies or never comes makes the others raise within
// KILN_DIST_TIMEOUT seconds (default 300) instead of hanging.
#pragma once
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace kiln::dist {

enum class ReduceOp { sum, avg, max };

struct InitOptions {
    // "env://" reads MASTER_ADDR and MASTER_PORT (rank 0 serves a TCP store there);
    // "file:///some/dir" meets through files in a directory all ranks of one host see.
    std::string init_method = "env://";
    int rank = -1, world_size = -1;  // -1: RANK and WORLD_SIZE (or mpirun's own variables)
    double timeout_s = -1;           // -1: KILN_DIST_TIMEOUT, else 300
};

// Joins the group: every rank checks in at the store and waits (up to the timeout) for all
// the others, then starts MPI when kiln was launched through mpirun. A world of one needs
// no environment at all.
void init_process_group(const InitOptions& options = {});
bool is_initialized();
// Leaves the group (MPI_Finalize, NCCL communicators destroyed); done at exit otherwise.
void destroy_process_group();
int get_rank();
int get_world_size();
int get_local_rank();  // LOCAL_RANK: which GPU of this host is this rank's
std::chrono::milliseconds timeout();
// Which engines this process can use: "MPI (Open MPI 4.1.4)" or why not, and likewise NCCL.
std::string backend_summary();

// A collective in flight (async): wait() returns when the result is in the tensor, or
// raises after the timeout naming the collective.
class Work {
   public:
    virtual ~Work() = default;
    virtual void wait() = 0;
    // Whether it has completed, without waiting. MPI moves a non-blocking collective on only
    // inside MPI calls: DDP polls its buckets in flight from each gradient hook.
    virtual bool poll() = 0;
    // Orders the device's later work after the collective without the host waiting (PyTorch's
    // Work.wait() on NCCL): on CUDA kiln's stream waits for the collective's event, so kernels
    // queued next read its result. A failure or timeout then shows at a later wait() or
    // poll() (DDP calls them at its next forwards). CPU engines have no stream: the host
    // waits, as wait().
    virtual void wait_on_stream() { wait(); }
};
using WorkHandle = std::shared_ptr<Work>;

// In place: every rank's `t` ends as the sum (average, maximum) over ranks. `t` must be
// contiguous. The shapes and dtypes of all ranks are compared first.
void all_reduce(const Tensor& t, ReduceOp op = ReduceOp::sum);
// The same without the comparison, returning at once (DDP's buckets: their layout is
// compared once, when DDP is built).
WorkHandle all_reduce_async(const Tensor& t, ReduceOp op = ReduceOp::sum);
// In place: every rank's `t` gets rank `src`'s values.
void broadcast(const Tensor& t, int src = 0);
// The same without the comparison, returning at once (DDP's buffers, flattened into one
// tensor per dtype: their layout is compared once, when DDP is built).
WorkHandle broadcast_async(const Tensor& t, int src = 0);
// Every rank's `tensors` (contiguous, one device) get rank `src`'s values as one operation where
// the engine groups collectives (NCCL: one ncclGroupStart/End, in place, no copies), else
// flattened into one tensor per dtype, one broadcast each, copied back by the Work's wait()
// (MPI). Without the shape comparison and returning at once: DDP's buffers, whose layout DDP
// compares when it is built and when it changes.
WorkHandle broadcast_coalesced(const std::vector<Tensor>& tensors, int src = 0);
// Every rank's `t`, stacked: shape [world_size, ...t.shape].
Tensor all_gather(const Tensor& t);
// `t` (dim 0 = world_size * k) reduced over ranks; rank r keeps rows [r*k, (r+1)*k).
Tensor reduce_scatter(const Tensor& t, ReduceOp op = ReduceOp::sum);
// Returns when every rank has called it.
void barrier();
// How many operations this process has handed to an engine (MPI, NCCL) so far, the shape
// comparisons before all_reduce, broadcast, all_gather and reduce_scatter included. Each is
// at least one round trip between the ranks (and, for a comparison, a wait for the device):
// tests and KILN_LOGS=ddp count them.
int64_t engine_calls();

}  // namespace kiln::dist
