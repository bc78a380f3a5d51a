// The process group of dist/dist.h: the environment, the rendezvous, the shape check that
// precedes each collective, and the choice of engine by the tensor's device.
#include "dist/dist.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <sstream>

#include "autograd/node.h"
#include "dist/backend.h"
#include "tensor/error.h"
#include "tensor/ops.h"
#include "tensor/storage.h"

namespace kiln::dist {
namespace detail {

[[noreturn]] void fail_timeout(const std::string& engine, const std::string& what,
                               std::chrono::milliseconds t) {
    fail("dist (", engine, "): ", what, " did not complete within ", t.count() / 1000.0,
         " s: a rank died, exited early or never called it (every rank must call the same "
         "collectives in the "
         "same order). The timeout is KILN_DIST_TIMEOUT (seconds).");
}

}  // namespace detail

namespace {

using detail::Backend;

std::atomic<int64_t> g_engine_calls{0};
void count_engine_call() { g_engine_calls.fetch_add(1, std::memory_order_relaxed); }

struct Group {
    detail::GroupInfo info;
    std::unique_ptr<Store> store;
    std::unique_ptr<Backend> mpi, nccl;
    std::string mpi_error;  // why CPU collectives cannot run, when mpi is null
    int64_t barriers = 0;
    ~Group() {
        if (mpi) detail::mpi_finalize(*mpi);
    }
};
std::unique_ptr<Group>& group_slot() {
    static std::unique_ptr<Group> g;
    return g;
}
Group& group(const char* op) {
    auto& g = group_slot();
    KILN_CHECK(g, "dist.", op,
               ": the process group is not initialized (call dist::init_process_group() first)");
    return *g;
}

int env_int(const char* name, int fallback, const char* fallback_name = nullptr) {
    const char* v = std::getenv(name);
    if (!v && fallback_name) v = std::getenv(fallback_name);
    if (!v || !*v) return fallback;
    char* end = nullptr;
    long x = std::strtol(v, &end, 10);
    KILN_CHECK(end && *end == '\0', "dist.init_process_group: ", name, "='", v,
               "' is not an integer");
    return int(x);
}
std::string env_str(const char* name) {
    const char* v = std::getenv(name);
    return v ? v : "";
}

// Every rank says it is here, then waits for each of the others: the one that never comes is named.
void rendezvous(Group& g) {
    const auto& i = g.info;
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    g.store->set("join/" + std::to_string(i.rank),
                 std::string(host) + " pid " + std::to_string(getpid()));
    for (int r = 0; r < i.world_size; ++r)
        g.store->get(
            "join/" + std::to_string(r), i.timeout,
            "rank " + std::to_string(r) + " of " + std::to_string(i.world_size) + " to join");
}

const char* op_name(ReduceOp op) {
    return op == ReduceOp::sum ? "sum" : op == ReduceOp::avg ? "avg" : "max";
}

Backend& backend_for(Group& g, const Tensor& t, const char* op) {
    if (t.device().type == DeviceType::cuda) {
        if (!g.nccl) g.nccl = detail::make_nccl_backend(g.info);
        return *g.nccl;
    }
    KILN_CHECK(g.mpi, "dist.", op, " of a CPU tensor needs MPI: ", g.mpi_error);
    return *g.mpi;
}

void check_tensor(const Tensor& t, const char* op, bool in_place) {
    KILN_CHECK(t.defined(), "dist.", op, ": the tensor is undefined");
    KILN_CHECK(t.dtype() != DType::boolean, "dist.", op, ": bool tensors are not supported (shape ",
               t.shape(), "); cast to int64 first");
    KILN_CHECK(!in_place || t.is_contiguous(), "dist.", op,
               ": the tensor must be contiguous (shape ", t.shape(), ", strides ", t.strides(),
               "); call .contiguous(), then copy_ the result back");
}

std::string describe(const Tensor& t) {
    std::ostringstream s;
    s << t.numel() << " " << t.dtype() << " on " << t.device();
    return s.str();
}

// All ranks' (collective, argument, dtype, shape), gathered through the same engine, compared
// with rank 0's: a mismatch raises naming the ranks, before any data moves.
enum : int64_t {
    kMetaOp,
    kMetaArg,
    kMetaDType,
    kMetaRank,
    kMetaDims,
    kMaxDims = 8,
    kMeta = kMetaDims + kMaxDims
};
void check_same_everywhere(Group& g, Backend& b, const Tensor& t, int64_t op_code, int64_t arg,
                           const char* op) {
    Shape s = t.shape();
    KILN_CHECK(int64_t(s.size()) <= kMaxDims, "dist.", op, ": at most ", kMaxDims, " dims, got ",
               s);
    std::vector<int64_t> meta(kMeta, -1);
    meta[kMetaOp] = op_code, meta[kMetaArg] = arg, meta[kMetaDType] = int64_t(t.dtype());
    meta[kMetaRank] = int64_t(s.size());
    for (size_t d = 0; d < s.size(); ++d) meta[kMetaDims + d] = s[d];
    int world = g.info.world_size;
    Tensor mine = empty({kMeta}, DType::int64);
    std::copy(meta.begin(), meta.end(), mine.data_ptr<int64_t>());
    mine = mine.to(t.device());
    Tensor all = empty({world, kMeta}, DType::int64, t.device());
    count_engine_call();
    b.all_gather(mine.raw_data(), all.raw_data(), kMeta, DType::int64, {mine, all},
                 std::string("the shape check before ") + op)
        ->wait();
    std::vector<int64_t> v = all.to(kiln::cpu).to_vector<int64_t>();
    static const char* names[] = {"all_reduce", "broadcast", "all_gather", "reduce_scatter"};
    auto text = [&](int r) {
        const int64_t* m = &v[size_t(r * kMeta)];
        std::ostringstream o;
        o << "rank " << r << " called " << names[m[kMetaOp]] << " with "
          << dtype_name(DType(m[kMetaDType])) << " [";
        for (int64_t d = 0; d < m[kMetaRank]; ++d) o << (d ? ", " : "") << m[kMetaDims + d];
        o << "]";
        if (m[kMetaOp] == 1) o << " from src " << m[kMetaArg];
        if (m[kMetaOp] == 0 || m[kMetaOp] == 3) o << " (" << op_name(ReduceOp(m[kMetaArg])) << ")";
        return o.str();
    };
    for (int r = 1; r < world; ++r)
        KILN_CHECK(std::equal(v.begin(), v.begin() + kMeta, v.begin() + r * kMeta), "dist.", op,
                   ": ranks disagree: ", text(0), ", but ", text(r),
                   " (every rank must pass the same shape and dtype to the same collective)");
}

void touched(const Tensor& t) { ++t.impl()->storage->version; }

// Under compile(), a collective is host code reading and writing a tensor's memory: a graph
// break (a data access), and the function's host code re-runs on every call, collective
// included (docs/jit.md). No-op outside a recording.
void leave_graph(const Tensor& t) {
    report_escape(t, Escape::data_access, std::source_location::current());
}

}  // namespace

void init_process_group(const InitOptions& o) {
    auto& slot = group_slot();
    KILN_CHECK(!slot, "dist.init_process_group: already initialized (rank ", slot->info.rank,
               " of ", slot->info.world_size, ")");
    auto g = std::make_unique<Group>();
    auto& i = g->info;
    i.rank = o.rank >= 0 ? o.rank : env_int("RANK", 0, "OMPI_COMM_WORLD_RANK");
    i.world_size =
        o.world_size >= 0 ? o.world_size : env_int("WORLD_SIZE", 1, "OMPI_COMM_WORLD_SIZE");
    i.local_rank = env_int("LOCAL_RANK", 0, "OMPI_COMM_WORLD_LOCAL_RANK");
    double seconds = o.timeout_s;
    if (seconds < 0) {
        std::string t = env_str("KILN_DIST_TIMEOUT");
        seconds = t.empty() ? 300.0 : std::atof(t.c_str());
        KILN_CHECK(seconds > 0, "dist.init_process_group: KILN_DIST_TIMEOUT='", t,
                   "' is not a positive number of seconds");
    }
    i.timeout = std::chrono::milliseconds(int64_t(seconds * 1000));
    KILN_CHECK(i.world_size >= 1 && i.rank >= 0 && i.rank < i.world_size,
               "dist.init_process_group: RANK ", i.rank, " is not in [0, WORLD_SIZE ", i.world_size,
               ")");
    if (i.world_size > 1) {
        const std::string& m = o.init_method;
        if (m.rfind("file://", 0) == 0) {
            g->store = make_file_store(m.substr(7));
        } else {
            KILN_CHECK(m == "env://", "dist.init_process_group: init_method '", m,
                       "' is neither env:// nor file:///a/directory");
            std::string addr = env_str("MASTER_ADDR"), port = env_str("MASTER_PORT");
            KILN_CHECK(!addr.empty() && !port.empty(), "dist.init_process_group: WORLD_SIZE is ",
                       i.world_size, " but MASTER_ADDR='", addr, "' and MASTER_PORT='", port,
                       "': set both (rank 0's address and a free port), or start with `kiln launch "
                       "--nproc N`");
            g->store = make_tcp_store(addr, env_int("MASTER_PORT", 0), i.rank == 0, i.timeout);
        }
        i.store = g->store.get();
        rendezvous(*g);
    }
    // MPI's world is mpirun's: only a process mpirun started can join one.
    if (i.world_size == 1) {
        g->mpi_error = "";
    } else if (!detail::mpi_built()) {
        g->mpi_error = detail::mpi_summary();
    } else if (env_str("OMPI_COMM_WORLD_SIZE").empty()) {
        g->mpi_error =
            "this process was not started by mpirun (start it with `kiln launch --nproc N`, which "
            "uses "
            "mpirun when kiln is built with MPI)";
    } else {
        g->mpi = detail::make_mpi_backend(i);
    }
    slot = std::move(g);
}

bool is_initialized() { return group_slot() != nullptr; }
void destroy_process_group() { group_slot().reset(); }
int get_rank() { return group("get_rank").info.rank; }
int get_world_size() { return group("get_world_size").info.world_size; }
int get_local_rank() { return group("get_local_rank").info.local_rank; }
std::chrono::milliseconds timeout() { return group("timeout").info.timeout; }
std::string backend_summary() {
    return "CPU: " + detail::mpi_summary() + "; CUDA: " + detail::nccl_summary();
}

namespace {
struct Done final : Work {
    void wait() override {}
    bool poll() override { return true; }
};
}  // namespace

WorkHandle all_reduce_async(const Tensor& t, ReduceOp op) {
    Group& g = group("all_reduce");
    check_tensor(t, "all_reduce", true);
    KILN_CHECK(op != ReduceOp::avg || is_floating(t.dtype()),
               "dist.all_reduce: avg needs a floating tensor, got ", t.dtype());
    if (g.info.world_size == 1) return std::make_shared<Done>();
    leave_graph(t);
    touched(t);
    count_engine_call();
    return backend_for(g, t, "all_reduce")
        .all_reduce(t.raw_data(), t.numel(), t.dtype(), op, {t},
                    std::string("all_reduce (") + op_name(op) + ") of " + describe(t));
}

void all_reduce(const Tensor& t, ReduceOp op) {
    Group& g = group("all_reduce");
    check_tensor(t, "all_reduce", true);
    if (g.info.world_size > 1)
        check_same_everywhere(g, backend_for(g, t, "all_reduce"), t, 0, int64_t(op), "all_reduce");
    all_reduce_async(t, op)->wait();
}

namespace {
Group& broadcast_group(const Tensor& t, int src) {
    Group& g = group("broadcast");
    check_tensor(t, "broadcast", true);
    KILN_CHECK(src >= 0 && src < g.info.world_size, "dist.broadcast: src ", src,
               " is not a rank of [0, ", g.info.world_size, ")");
    if (g.info.world_size > 1) leave_graph(t);
    return g;
}
WorkHandle start_broadcast(Group& g, const Tensor& t, int src) {
    touched(t);
    count_engine_call();
    return backend_for(g, t, "broadcast")
        .broadcast(t.raw_data(), t.numel(), t.dtype(), src, {t},
                   "broadcast from rank " + std::to_string(src) + " of " + describe(t));
}
}  // namespace

void broadcast(const Tensor& t, int src) {
    Group& g = broadcast_group(t, src);
    if (g.info.world_size == 1) return;
    check_same_everywhere(g, backend_for(g, t, "broadcast"), t, 1, src, "broadcast");
    start_broadcast(g, t, src)->wait();
}

WorkHandle broadcast_async(const Tensor& t, int src) {
    Group& g = broadcast_group(t, src);
    if (g.info.world_size == 1) return std::make_shared<Done>();
    return start_broadcast(g, t, src);
}

namespace {
// broadcast_coalesced where the engine cannot group: one flat tensor per dtype (rank src's
// values concatenated; the others' only receive), one broadcast each; wait() copies the
// received values back into the tensors (not on src, whose tensors hold them already).
class FlattenedBroadcast final : public Work {
   public:
    struct Part {
        Tensor flat;
        std::vector<Tensor> targets;
        WorkHandle work;
    };
    FlattenedBroadcast(std::vector<Part> parts, bool copy_back)
        : parts_(std::move(parts)), copy_back_(copy_back) {}
    void wait() override {
        if (done_) return;
        for (Part& p : parts_) p.work->wait();
        copy_back();
        parts_.clear();
        done_ = true;
    }
    // The copies back queue behind the broadcasts on kiln's stream (NCCL); MPI waits.
    void wait_on_stream() override {
        if (done_ || copied_) return;
        for (Part& p : parts_) p.work->wait_on_stream();
        copy_back();
    }
    bool poll() override {
        if (done_) return true;
        for (Part& p : parts_)
            if (!p.work->poll()) return false;
        wait();
        return true;
    }

   private:
    void copy_back() {
        if (copied_) return;
        copied_ = true;
        if (!copy_back_) return;
        NoGradGuard no_grad;
        NoDispatchHook eager;  // host code of the collective, never recorded by compile()
        for (Part& p : parts_) {
            int64_t offset = 0;
            for (const Tensor& t : p.targets) {
                Tensor(t).copy_(p.flat.narrow(0, offset, t.numel()).reshape(t.shape()));
                offset += t.numel();
            }
        }
    }
    std::vector<Part> parts_;
    bool copy_back_, done_ = false, copied_ = false;
};
}  // namespace

WorkHandle broadcast_coalesced(const std::vector<Tensor>& tensors, int src) {
    if (tensors.empty()) {
        group("broadcast");
        return std::make_shared<Done>();
    }
    Group& g = broadcast_group(tensors[0], src);
    for (const Tensor& t : tensors) {
        check_tensor(t, "broadcast", true);
        KILN_CHECK(t.device() == tensors[0].device(),
                   "dist.broadcast_coalesced: the tensors are on ", tensors[0].device(), " and ",
                   t.device(), "; one device per call");
    }
    if (g.info.world_size == 1) return std::make_shared<Done>();
    for (const Tensor& t : tensors) leave_graph(t);
    Backend& b = backend_for(g, tensors[0], "broadcast");
    std::vector<detail::Backend::Buffer> bufs;
    int64_t total = 0;
    for (const Tensor& t : tensors) {
        bufs.push_back({t.raw_data(), t.numel(), t.dtype()});
        total += t.numel();
    }
    std::ostringstream what;
    what << "broadcast from rank " << src << " of " << tensors.size() << " tensors (" << total
         << " elements) on " << tensors[0].device();
    // KILN_DIST_GROUP=0: flattened per dtype even where the engine groups (to compare them).
    static const bool group_them = [] {
        const char* v = std::getenv("KILN_DIST_GROUP");
        return !v || std::string(v) != "0";
    }();
    if (WorkHandle w = group_them ? b.broadcast_group(bufs, src, tensors, what.str()) : nullptr) {
        for (const Tensor& t : tensors) touched(t);
        count_engine_call();
        return w;
    }
    // Flattened per dtype, in the order each dtype first appears (the same on every rank).
    NoGradGuard no_grad;
    NoDispatchHook eager;
    std::vector<FlattenedBroadcast::Part> parts;
    std::vector<DType> dtypes;
    for (const Tensor& t : tensors)
        if (std::find(dtypes.begin(), dtypes.end(), t.dtype()) == dtypes.end())
            dtypes.push_back(t.dtype());
    bool mine = g.info.rank == src;
    for (DType dt : dtypes) {
        FlattenedBroadcast::Part p;
        std::vector<Tensor> pieces;
        int64_t n = 0;
        for (const Tensor& t : tensors)
            if (t.dtype() == dt) {
                p.targets.push_back(t);
                pieces.push_back(t.reshape({-1}));
                n += t.numel();
            }
        p.flat = !mine                ? empty({n}, dt, tensors[0].device())
                 : pieces.size() == 1 ? pieces[0].clone()
                                      : cat(pieces, 0);
        p.work = start_broadcast(g, p.flat, src);
        parts.push_back(std::move(p));
    }
    return std::make_shared<FlattenedBroadcast>(std::move(parts), !mine);
}

Tensor all_gather(const Tensor& t) {
    Group& g = group("all_gather");
    check_tensor(t, "all_gather", false);
    if (g.info.world_size > 1) leave_graph(t);
    Tensor in = t.detach().contiguous();
    Shape s = in.shape();
    s.insert(s.begin(), g.info.world_size);
    if (g.info.world_size == 1) return in.clone().reshape(s);
    Backend& b = backend_for(g, t, "all_gather");
    check_same_everywhere(g, b, in, 2, 0, "all_gather");
    Tensor out = empty(s, in.dtype(), in.device());
    count_engine_call();
    b.all_gather(in.raw_data(), out.raw_data(), in.numel(), in.dtype(), {in, out},
                 "all_gather of " + describe(in))
        ->wait();
    return out;
}

Tensor reduce_scatter(const Tensor& t, ReduceOp op) {
    Group& g = group("reduce_scatter");
    check_tensor(t, "reduce_scatter", false);
    if (g.info.world_size > 1) leave_graph(t);
    int world = g.info.world_size;
    KILN_CHECK(t.dim() >= 1 && t.size(0) % world == 0, "dist.reduce_scatter: dim 0 of shape ",
               t.shape(), " must be a multiple of the world size ", world);
    KILN_CHECK(op != ReduceOp::avg || is_floating(t.dtype()),
               "dist.reduce_scatter: avg needs a floating tensor, got ", t.dtype());
    Tensor in = t.detach().contiguous();
    if (world == 1) return in.clone();
    Backend& b = backend_for(g, t, "reduce_scatter");
    check_same_everywhere(g, b, in, 3, int64_t(op), "reduce_scatter");
    Shape s = in.shape();
    s[0] /= world;
    Tensor out = empty(s, in.dtype(), in.device());
    count_engine_call();
    b.reduce_scatter(in.raw_data(), out.raw_data(), out.numel(), in.dtype(), op, {in, out},
                     std::string("reduce_scatter (") + op_name(op) + ") of " + describe(in))
        ->wait();
    return out;
}

int64_t engine_calls() { return g_engine_calls.load(std::memory_order_relaxed); }

void barrier() {
    Group& g = group("barrier");
    if (g.info.world_size == 1) return;
    std::string key = "barrier/" + std::to_string(g.barriers++) + "/";
    g.store->set(key + std::to_string(g.info.rank), "1");
    for (int r = 0; r < g.info.world_size; ++r)
        g.store->get(
            key + std::to_string(r), g.info.timeout,
            "rank " + std::to_string(r) + " to reach barrier " + std::to_string(g.barriers - 1));
}

}  // namespace kiln::dist
