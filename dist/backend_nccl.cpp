// The NCCL engine for CUDA tensors: libnccl.so.2 opened at run time (as tensor/cuda_runtime.cpp
// opens cuBLAS), so kiln builds without nccl.h and starts without NCCL. Collectives run on a
// stream of their own, after the work kiln's stream has queued so far (an event between the
// two); wait() polls the finishing event against the deadline, and a timeout aborts the
// communicator (ncclCommAbort) rather than hang; wait_on_stream() only makes kiln's stream
// wait for that event (DDP), the host goes on.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

#include "dist/backend.h"
#include "dist/watchdog.h"
#include "tensor/cuda_runtime.h"
#include "tensor/error.h"
#include "tensor/symbol_table.h"

namespace kiln::dist::detail {
namespace {

using Clock = std::chrono::steady_clock;
using cuda::detail::LibrarySymbols;
using cuda::detail::open_library;

// --- the C signatures kiln uses (nccl.h 2.x, cuda.h)
using ncclResult_t = int;
using ncclComm_t = void*;
using CUstream = void*;
using CUevent = void*;
using CUresult = int;
struct ncclUniqueId {
    char internal[128];  // NCCL_UNIQUE_ID_BYTES
};
enum : int { ncclInt64 = 4, ncclFloat32 = 7, ncclFloat64 = 8 };  // ncclDataType_t
enum : int { ncclSum = 0, ncclMax = 2, ncclAvg = 4 };  // ncclRedOp_t (ncclAvg: NCCL >= 2.10)
constexpr int kInProgress = 7;                         // ncclInProgress
constexpr CUresult kNotReady = 600;                    // CUDA_ERROR_NOT_READY
constexpr unsigned kStreamNonBlocking = 1, kEventDisableTiming = 2;

// NCCL's entry points kiln calls, as a table (tensor/symbol_table.h).
#define KILN_NCCL_SYMBOLS(X)                                                                       \
    X(ncclGetVersion, "ncclGetVersion", ncclResult_t (*)(int*))                                    \
    X(ncclGetUniqueId, "ncclGetUniqueId", ncclResult_t (*)(ncclUniqueId*))                         \
    X(ncclCommInitRank, "ncclCommInitRank", ncclResult_t (*)(ncclComm_t*, int, ncclUniqueId, int)) \
    X(ncclCommAbort, "ncclCommAbort", ncclResult_t (*)(ncclComm_t))                                \
    X(ncclCommGetAsyncError, "ncclCommGetAsyncError", ncclResult_t (*)(ncclComm_t, ncclResult_t*)) \
    X(ncclGetErrorString, "ncclGetErrorString", const char* (*)(ncclResult_t))                     \
    X(ncclAllReduce, "ncclAllReduce",                                                              \
      ncclResult_t (*)(const void*, void*, size_t, int, int, ncclComm_t, CUstream))                \
    X(ncclBroadcast, "ncclBroadcast",                                                              \
      ncclResult_t (*)(const void*, void*, size_t, int, int, ncclComm_t, CUstream))                \
    X(ncclAllGather, "ncclAllGather",                                                              \
      ncclResult_t (*)(const void*, void*, size_t, int, ncclComm_t, CUstream))                     \
    X(ncclReduceScatter, "ncclReduceScatter",                                                      \
      ncclResult_t (*)(const void*, void*, size_t, int, int, ncclComm_t, CUstream))                \
    X(ncclGroupStart, "ncclGroupStart", ncclResult_t (*)())                                        \
    X(ncclGroupEnd, "ncclGroupEnd", ncclResult_t (*)())
struct Nccl {
    KILN_NCCL_SYMBOLS(KILN_SYMBOL_FIELD)
    void bind(const LibrarySymbols& symbols) { KILN_NCCL_SYMBOLS(KILN_SYMBOL_BIND) }
};

// The driver's, for the backend's own streams and events.
#define KILN_NCCL_CUDA_SYMBOLS(X)                                                        \
    X(cuStreamCreate, "cuStreamCreate", CUresult (*)(CUstream*, unsigned))               \
    X(cuEventCreate, "cuEventCreate", CUresult (*)(CUevent*, unsigned))                  \
    X(cuEventRecord, "cuEventRecord", CUresult (*)(CUevent, CUstream))                   \
    X(cuEventQuery, "cuEventQuery", CUresult (*)(CUevent))                               \
    X(cuEventDestroy, "cuEventDestroy_v2", CUresult (*)(CUevent))                        \
    X(cuStreamWaitEvent, "cuStreamWaitEvent", CUresult (*)(CUstream, CUevent, unsigned)) \
    X(cuCtxGetCurrent, "cuCtxGetCurrent", CUresult (*)(void**))                          \
    X(cuCtxSetCurrent, "cuCtxSetCurrent", CUresult (*)(void*))
struct Cuda {
    KILN_NCCL_CUDA_SYMBOLS(KILN_SYMBOL_FIELD)
    void bind(const LibrarySymbols& symbols) { KILN_NCCL_CUDA_SYMBOLS(KILN_SYMBOL_BIND) }
};

// Where libnccl.so.2 may be: KILN_NCCL_LIB (the file or its folder), the loader's path, then
// PyTorch's CUDA wheels (site-packages/nvidia/nccl/lib).
std::vector<std::string> nccl_candidates() {
    std::vector<std::string> c;
    if (const char* e = std::getenv("KILN_NCCL_LIB"); e && *e) {
        std::string p = e;
        c.push_back(std::filesystem::is_directory(p) ? p + "/libnccl.so.2" : p);
    }
    c.push_back("libnccl.so.2");
    std::vector<std::string> roots = {"/usr/local/lib", "/usr/lib", "/opt/conda/lib"};
    if (const char* v = std::getenv("VIRTUAL_ENV"))
        roots.insert(roots.begin(), std::string(v) + "/lib");
    if (const char* v = std::getenv("CONDA_PREFIX"))
        roots.insert(roots.begin(), std::string(v) + "/lib");
    if (const char* h = std::getenv("HOME")) roots.push_back(std::string(h) + "/.local/lib");
    std::error_code ec;
    for (const auto& root : roots) {
        if (!std::filesystem::is_directory(root, ec)) continue;
        for (const auto& py : std::filesystem::directory_iterator(root, ec)) {
            if (py.path().filename().string().rfind("python3", 0) != 0) continue;
            for (const char* pkgs : {"site-packages", "dist-packages"}) {
                auto lib = py.path() / pkgs / "nvidia/nccl/lib/libnccl.so.2";
                if (std::filesystem::exists(lib, ec)) c.push_back(lib.string());
            }
        }
    }
    return c;
}

struct Library {
    Nccl nccl{};
    Cuda cu{};
    std::string error, path;
    int version = 0;
    Library() { error = load(); }
    std::string load() {
        std::string tried;
        void* lib = nullptr;
        for (const auto& p : nccl_candidates()) {
            if ((lib = open_library({p.c_str()}, tried))) {
                path = p;
                break;
            }
        }
        if (!lib)
            return "libnccl.so.2 (NCCL) not found: " + tried +
                   ". Install it (pip install nvidia-nccl-cu12, or PyTorch's CUDA wheels) or point "
                   "KILN_NCCL_LIB "
                   "at the file or its folder";
        try {
            nccl.bind(LibrarySymbols(lib, path));
            nccl.ncclGetVersion(&version);
            std::string why;
            void* driver = open_library({"libcuda.so.1"}, why);
            if (!driver) return "libcuda.so.1 (the NVIDIA driver) not found: " + why;
            cu.bind(LibrarySymbols(driver, "libcuda.so.1"));
        } catch (const Error& e) {
            return e.what();
        }
        return "";
    }
};
Library& library() {
    static Library l;
    return l;
}

int nccl_type(DType t) {
    switch (t) {
        case DType::float32:
            return ncclFloat32;
        case DType::float64:
            return ncclFloat64;
        case DType::int64:
            return ncclInt64;
        default:
            fail("dist (NCCL): no NCCL type for ", t);
    }
}
int nccl_op(ReduceOp op) {
    return op == ReduceOp::sum ? ncclSum : op == ReduceOp::max ? ncclMax : ncclAvg;
}

class NcclBackend;

// A collective's finishing event, shared by its Work and the watchdog; destroyed through the
// library, not the backend: a DDP may hold a Work past destroy_process_group().
struct DoneEvent {
    CUevent e = nullptr;
    ~DoneEvent();
};

class NcclWork final : public Work {
   public:
    NcclWork(NcclBackend& b, CUevent done, std::vector<Tensor> keep, std::string what)
        : b_(b),
          done_(std::make_shared<DoneEvent>()),
          keep_(std::move(keep)),
          what_(std::move(what)),
          captured_(cuda::detail::capturing()) {
        done_->e = done;
        done_event_ = done;
    }
    void wait() override;
    bool poll() override;
    void wait_on_stream() override;

   private:
    NcclBackend& b_;
    std::shared_ptr<DoneEvent> done_;
    CUevent done_event_;
    std::vector<Tensor> keep_;
    std::string what_;
    bool finished_ = false;
    bool joined_ = false;  // kiln's stream waits for done_event_ already
    // Issued while a CUDA graph was captured: recorded, not run; only a replay runs it, so
    // the host never waits for or polls this Work (NcclBackend::watch_replay watches replays).
    bool captured_ = false;
    void refuse_host_wait(const char* how) const {
        fail("dist (NCCL): ", what_, " was captured into a CUDA graph, so the host cannot ", how,
             " it (it runs only when the graph is replayed); join it with wait_on_stream()");
    }
};

class NcclBackend final : public Backend {
   public:
    explicit NcclBackend(const GroupInfo& g) : group(g), lib(library()) {
        KILN_CHECK(lib.error.empty(), "dist: CUDA collectives need NCCL: ", lib.error);
        KILN_CHECK(g.world_size == 1 || g.store,
                   "dist (NCCL): no rendezvous store to pass NCCL's id");
        main_stream = cuda::detail::library_stream("dist (NCCL)");  // also makes cuda:0's context current
        check_cu(lib.cu.cuCtxGetCurrent(&context), "cuCtxGetCurrent");
        check_cu(lib.cu.cuStreamCreate(&comm_stream, kStreamNonBlocking), "cuStreamCreate");
        ncclUniqueId id{};
        std::string key = "nccl/id";
        if (g.rank == 0) {
            check(lib.nccl.ncclGetUniqueId(&id), "ncclGetUniqueId");
            g.store->set(key, std::string(id.internal, sizeof id.internal));
        } else {
            std::string v = g.store->get(key, g.timeout, "rank 0's NCCL id");
            std::memcpy(id.internal, v.data(), std::min(v.size(), sizeof id.internal));
        }
        // Everyone is known to be alive before the blocking init (it has no timeout of its own).
        g.store->set("nccl/ready/" + std::to_string(g.rank), "1");
        for (int r = 0; r < g.world_size; ++r)
            g.store->get("nccl/ready/" + std::to_string(r), g.timeout,
                         "rank " + std::to_string(r) + " to start NCCL");
        ncclResult_t rc = lib.nccl.ncclCommInitRank(&comm, g.world_size, id, g.rank);
        KILN_CHECK(rc == 0, "dist (NCCL): ncclCommInitRank (rank ", g.rank, " of ", g.world_size,
                   ") failed: ", lib.nccl.ncclGetErrorString(rc),
                   ". Each rank needs its own GPU as cuda:0: kiln launch sets CUDA_VISIBLE_DEVICES "
                   "to LOCAL_RANK");
    }
    GroupInfo group;
    Library& lib;
    ncclComm_t comm = nullptr;
    CUstream main_stream = nullptr, comm_stream = nullptr;
    void* context = nullptr;             // cuda:0's, current on the watchdog's thread too
    std::unique_ptr<Watchdog> watchdog;  // started by the first collective the host leaves

    // A collective the host does not wait for (Work::wait_on_stream): still pending after the
    // timeout, it is reported, the communicator aborted and this process ended with status 1,
    // as PyTorch's NCCL watchdog does: the host may be blocked in a synchronisation behind it,
    // where no error can reach it. `kiln launch` then stops the other ranks.
    void watch(std::shared_ptr<DoneEvent> done, const std::string& what) {
        if (!watchdog) {
            auto period = std::clamp(group.timeout / 20, std::chrono::milliseconds(10),
                                     std::chrono::milliseconds(1000));
            watchdog = std::make_unique<Watchdog>(
                std::chrono::duration_cast<std::chrono::milliseconds>(period),
                [this] { lib.cu.cuCtxSetCurrent(context); });
        }
        watchdog->watch([this, done] { return lib.cu.cuEventQuery(done->e) != kNotReady; },
                        Clock::now() + group.timeout,
                        [this, what] {
                            // The host's own wait raised and aborted already: nothing to add.
                            if (broken.exchange(true)) return;
                            std::fprintf(
                                stderr,
                                "dist (NCCL) watchdog, rank %d: %s did not complete within %g s: a "
                                "rank died, exited early or never called it (every rank must call "
                                "the same collectives in the same order; the timeout is "
                                "KILN_DIST_TIMEOUT, seconds). Aborting the communicator and "
                                "exiting.\n",
                                group.rank, what.c_str(), double(group.timeout.count()) / 1000);
                            std::fflush(stderr);
                            lib.nccl.ncclCommAbort(comm);
                            std::_Exit(1);
                        });
    }
    ~NcclBackend() override { watchdog.reset(); }

    // A collective captured into a CUDA graph has no Work of its own on replay: after each
    // replay an event on kiln's stream (behind the graph's collectives) goes to the watchdog,
    // so a rank that dies mid-replay still ends the others within the timeout.
    void watch_replay() {
        CUevent done = nullptr;
        if (lib.cu.cuEventCreate(&done, kEventDisableTiming) != 0) return;
        auto d = std::make_shared<DoneEvent>();
        d->e = done;
        if (lib.cu.cuEventRecord(done, main_stream) != 0) return;
        watch(d, "a replay of a CUDA graph with captured collectives");
    }

    void check(ncclResult_t rc, const char* what) {
        KILN_CHECK(rc == 0 || rc == kInProgress, "dist (NCCL): ", what,
                   " failed: ", lib.nccl.ncclGetErrorString(rc));
    }
    void check_cu(CUresult rc, const char* what) {
        KILN_CHECK(rc == 0, "dist (NCCL): ", what, " failed (CUDA error ", rc, ")");
    }
    // The collective `issue` runs on comm_stream after what kiln's stream has queued.
    template <class F>
    WorkHandle run(F issue, std::vector<Tensor> keep, const std::string& what) {
        main_stream = cuda::detail::library_stream("dist (NCCL)");
        // Captured: comm_stream joins the capture through `ready` and leaves it through `done`
        // (the Work's wait_on_stream), a fork and a join the graph keeps as edges.
        cuda::detail::on_each_replay(this, [this] { watch_replay(); });
        CUevent ready = nullptr, done = nullptr;
        check_cu(lib.cu.cuEventCreate(&ready, kEventDisableTiming), "cuEventCreate");
        check_cu(lib.cu.cuEventCreate(&done, kEventDisableTiming), "cuEventCreate");
        check_cu(lib.cu.cuEventRecord(ready, main_stream), "cuEventRecord");
        check_cu(lib.cu.cuStreamWaitEvent(comm_stream, ready, 0), "cuStreamWaitEvent");
        lib.cu.cuEventDestroy(ready);
        check(issue(), what.c_str());
        check_cu(lib.cu.cuEventRecord(done, comm_stream), "cuEventRecord");
        return std::make_shared<NcclWork>(*this, done, std::move(keep), what);
    }

    WorkHandle all_reduce(void* buf, int64_t n, DType dtype, ReduceOp op, std::vector<Tensor> keep,
                          const std::string& what) override {
        return run(
            [&] {
                return lib.nccl.ncclAllReduce(buf, buf, size_t(n), nccl_type(dtype), nccl_op(op),
                                              comm, comm_stream);
            },
            std::move(keep), what);
    }
    WorkHandle broadcast(void* buf, int64_t n, DType dtype, int src, std::vector<Tensor> keep,
                         const std::string& what) override {
        return run(
            [&] {
                return lib.nccl.ncclBroadcast(buf, buf, size_t(n), nccl_type(dtype), src, comm,
                                              comm_stream);
            },
            std::move(keep), what);
    }
    // One group (ncclGroupStart/End): NCCL launches the broadcasts together, one round trip.
    WorkHandle broadcast_group(const std::vector<Buffer>& bufs, int src, std::vector<Tensor> keep,
                               const std::string& what) override {
        for (const Buffer& b : bufs) nccl_type(b.dtype);  // raises before the group opens
        return run(
            [&] {
                ncclResult_t rc = lib.nccl.ncclGroupStart();
                if (rc != 0) return rc;
                for (const Buffer& b : bufs) {
                    rc = lib.nccl.ncclBroadcast(b.data, b.data, size_t(b.n), nccl_type(b.dtype),
                                                src, comm, comm_stream);
                    if (rc != 0 && rc != kInProgress) {
                        lib.nccl.ncclGroupEnd();
                        return rc;
                    }
                }
                return lib.nccl.ncclGroupEnd();
            },
            std::move(keep), what);
    }
    WorkHandle all_gather(const void* in, void* out, int64_t n, DType dtype,
                          std::vector<Tensor> keep, const std::string& what) override {
        return run(
            [&] {
                return lib.nccl.ncclAllGather(in, out, size_t(n), nccl_type(dtype), comm,
                                              comm_stream);
            },
            std::move(keep), what);
    }
    WorkHandle reduce_scatter(const void* in, void* out, int64_t n_out, DType dtype, ReduceOp op,
                              std::vector<Tensor> keep, const std::string& what) override {
        return run(
            [&] {
                return lib.nccl.ncclReduceScatter(in, out, size_t(n_out), nccl_type(dtype),
                                                  nccl_op(op), comm, comm_stream);
            },
            std::move(keep), what);
    }
};

DoneEvent::~DoneEvent() {
    if (e) library().cu.cuEventDestroy(e);
}

bool NcclWork::poll() {
    if (captured_) refuse_host_wait("poll");
    return finished_ || b_.lib.cu.cuEventQuery(done_event_) == 0;
}

// kiln's stream waits for the collective; the host goes on. The tensors kept alive for it can
// go now: kiln's caching allocator hands a freed block only to work queued on kiln's stream
// (after this wait) or to a later collective (which waits for kiln's stream first).
void NcclWork::wait_on_stream() {
    if (finished_ || joined_) return;
    KILN_CHECK(!b_.broken, "dist (NCCL): ", what_,
               ": the communicator was aborted after an earlier collective failed");
    CUresult rc =
        b_.lib.cu.cuStreamWaitEvent(cuda::detail::library_stream("dist (NCCL)"), done_event_, 0);
    KILN_CHECK(rc == 0, "dist (NCCL): cuStreamWaitEvent for ", what_, " failed (CUDA error ", rc,
               ")");
    joined_ = true;
    keep_.clear();
    if (!captured_) b_.watch(done_, what_);  // a captured event never fires: replays are watched
}

// The host waits for the collective (polling, so a dead peer becomes an error), then kiln's
// stream is ordered after it, so kernels queued next read the result.
void NcclWork::wait() {
    if (finished_) return;
    if (captured_) refuse_host_wait("wait for");
    KILN_CHECK(!b_.broken, "dist (NCCL): ", what_,
               ": the communicator was aborted after an earlier collective failed");
    auto deadline = Clock::now() + b_.group.timeout;
    for (int spins = 0;; ++spins) {
        CUresult q = b_.lib.cu.cuEventQuery(done_event_);
        if (q == 0) break;
        KILN_CHECK(q == kNotReady, "dist (NCCL): ", what_, " failed (CUDA error ", q, ")");
        ncclResult_t async = 0;
        b_.lib.nccl.ncclCommGetAsyncError(b_.comm, &async);
        if (async != 0 && async != kInProgress) {
            if (!b_.broken.exchange(true)) b_.lib.nccl.ncclCommAbort(b_.comm);
            fail("dist (NCCL): ", what_, " failed: ", b_.lib.nccl.ncclGetErrorString(async));
        }
        if (Clock::now() >= deadline) {
            if (!b_.broken.exchange(true)) b_.lib.nccl.ncclCommAbort(b_.comm);
            fail_timeout("NCCL", what_, b_.group.timeout);
        }
        if (spins > 1000) std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
    if (!joined_)
        b_.lib.cu.cuStreamWaitEvent(cuda::detail::library_stream("dist (NCCL)"), done_event_, 0);
    finished_ = true;
    keep_.clear();
}

}  // namespace

std::string nccl_summary() {
    Library& l = library();
    if (!l.error.empty()) return l.error;
    return "NCCL " + std::to_string(l.version / 10000) + "." +
           std::to_string(l.version / 100 % 100) + "." + std::to_string(l.version % 100) + " (" +
           l.path + ")";
}

std::unique_ptr<Backend> make_nccl_backend(const GroupInfo& group) {
    return std::make_unique<NcclBackend>(group);
}

}  // namespace kiln::dist::detail
