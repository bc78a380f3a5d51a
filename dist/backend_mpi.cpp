// The MPI engine for CPU tensors (Open MPI; docs/distributed.md). Every collective is MPI's
// non-blocking one, waited for by polling MPI_Test against the deadline: a rank that died
// turns into an error, never a hang. Without MPI at configure time this file only explains.
#include <functional>
#include <thread>

#include "dist/backend.h"
#include "tensor/error.h"

#ifdef KILN_HAVE_MPI
#define OMPI_SKIP_MPICXX 1  // the C API only
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

namespace kiln::dist::detail {

#ifndef KILN_HAVE_MPI

bool mpi_built() { return false; }
std::string mpi_summary() {
    return "kiln was built without MPI (CMake found no MPI): install Open MPI (`make deps`, or "
           "apt-get install "
           "libopenmpi-dev openmpi-bin) and configure again";
}
std::unique_ptr<Backend> make_mpi_backend(const GroupInfo&) { fail("dist: ", mpi_summary()); }
void mpi_finalize(Backend&) {}

#else

bool mpi_built() { return true; }
std::string mpi_summary() {
    char v[MPI_MAX_LIBRARY_VERSION_STRING] = {};
    int n = 0;
    MPI_Get_library_version(v, &n);
    std::string s(v, size_t(n));
    if (auto nl = s.find_first_of(",\n"); nl != std::string::npos) s.resize(nl);
    return "MPI (" + s + ")";
}

namespace {

using Clock = std::chrono::steady_clock;

MPI_Datatype mpi_type(DType t) {
    switch (t) {
        case DType::float32:
            return MPI_FLOAT;
        case DType::float64:
            return MPI_DOUBLE;
        case DType::int64:
            return MPI_INT64_T;
        default:
            fail("dist (MPI): no MPI type for ", t);
    }
}
MPI_Op mpi_op(ReduceOp op) {
    return op == ReduceOp::max ? MPI_MAX : MPI_SUM;
}  // avg: sum, then divide

class MpiBackend;

class MpiWork final : public Work {
   public:
    MpiWork(MpiBackend& b, MPI_Request r, std::vector<Tensor> keep, std::string what)
        : b_(b), request_(r), keep_(std::move(keep)), what_(std::move(what)) {}
    std::function<void()> after;  // avg's division, once the sum is in
    void wait() override;
    bool poll() override;

   private:
    MpiBackend& b_;
    MPI_Request request_;
    std::vector<Tensor> keep_;
    std::string what_;
    bool done_ = false;
};

class MpiBackend final : public Backend {
   public:
    explicit MpiBackend(const GroupInfo& g) : group(g) {
        int inited = 0;
        MPI_Initialized(&inited);
        if (!inited) MPI_Init(nullptr, nullptr);
        MPI_Comm_dup(MPI_COMM_WORLD, &comm);
        MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
        int size = 0, rank = 0;
        MPI_Comm_size(comm, &size);
        MPI_Comm_rank(comm, &rank);
        KILN_CHECK(size == g.world_size && rank == g.rank, "dist (MPI): mpirun's world (rank ",
                   rank, " of ", size, ") is not the group's (RANK ", g.rank, ", WORLD_SIZE ",
                   g.world_size, ")");
    }
    GroupInfo group;
    MPI_Comm comm = MPI_COMM_NULL;

    WorkHandle start(MPI_Request r, int rc, std::vector<Tensor> keep, const std::string& what) {
        KILN_CHECK(rc == MPI_SUCCESS, "dist (MPI): ", what, " failed to start (", error_text(rc),
                   ")");
        return std::make_shared<MpiWork>(*this, r, std::move(keep), what);
    }
    static std::string error_text(int rc) {
        char s[MPI_MAX_ERROR_STRING] = {};
        int n = 0;
        MPI_Error_string(rc, s, &n);
        return std::string(s, size_t(n));
    }

    WorkHandle all_reduce(void* buf, int64_t n, DType dtype, ReduceOp op, std::vector<Tensor> keep,
                          const std::string& what) override {
        MPI_Request r;
        int rc = MPI_Iallreduce(MPI_IN_PLACE, buf, int(n), mpi_type(dtype), mpi_op(op), comm, &r);
        auto w = start(r, rc, std::move(keep), what);
        if (op == ReduceOp::avg)
            static_cast<MpiWork&>(*w).after = [=, world = group.world_size] {
                divide(buf, n, dtype, world);
            };
        return w;
    }
    WorkHandle broadcast(void* buf, int64_t n, DType dtype, int src, std::vector<Tensor> keep,
                         const std::string& what) override {
        MPI_Request r;
        int rc = MPI_Ibcast(buf, int(n), mpi_type(dtype), src, comm, &r);
        return start(r, rc, std::move(keep), what);
    }
    WorkHandle all_gather(const void* in, void* out, int64_t n, DType dtype,
                          std::vector<Tensor> keep, const std::string& what) override {
        MPI_Request r;
        int rc =
            MPI_Iallgather(in, int(n), mpi_type(dtype), out, int(n), mpi_type(dtype), comm, &r);
        return start(r, rc, std::move(keep), what);
    }
    WorkHandle reduce_scatter(const void* in, void* out, int64_t n_out, DType dtype, ReduceOp op,
                              std::vector<Tensor> keep, const std::string& what) override {
        MPI_Request r;
        int rc =
            MPI_Ireduce_scatter_block(in, out, int(n_out), mpi_type(dtype), mpi_op(op), comm, &r);
        auto w = start(r, rc, std::move(keep), what);
        if (op == ReduceOp::avg)
            static_cast<MpiWork&>(*w).after = [=, world = group.world_size] {
                divide(out, n_out, dtype, world);
            };
        return w;
    }
    static void divide(void* buf, int64_t n, DType dtype, int world) {
        if (dtype == DType::float32)
            for (float* p = static_cast<float*>(buf); n-- > 0;) *p++ /= float(world);
        else
            for (double* p = static_cast<double*>(buf); n-- > 0;) *p++ /= double(world);
    }
};

// Polls: MPI progresses a non-blocking collective only inside MPI calls, and a rank that
// never arrives must become an error.
void MpiWork::wait() {
    if (done_) return;
    auto deadline = Clock::now() + b_.group.timeout;
    for (int spins = 0;; ++spins) {
        int flag = 0;
        int rc = MPI_Test(&request_, &flag, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) {
            b_.broken = true;
            fail("dist (MPI): ", what_, " failed (", MpiBackend::error_text(rc), ")");
        }
        if (flag) break;
        if (Clock::now() >= deadline) {
            b_.broken = true;
            fail_timeout("MPI", what_, b_.group.timeout);
        }
        if (spins > 1000) std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    done_ = true;
    if (after) after();
    keep_.clear();
}

bool MpiWork::poll() {
    if (done_) return true;
    int flag = 0;
    if (MPI_Test(&request_, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS || !flag)
        return false;  // wait() reports errors
    done_ = true;
    if (after) after();
    keep_.clear();
    return true;
}

}  // namespace

std::unique_ptr<Backend> make_mpi_backend(const GroupInfo& group) {
    return std::make_unique<MpiBackend>(group);
}

void mpi_finalize(Backend& b) {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (b.broken || finalized) return;  // a rank is stuck or gone: MPI_Finalize would wait for it
    auto& m = static_cast<MpiBackend&>(b);
    MPI_Comm_free(&m.comm);
    MPI_Finalize();
}

#endif

}  // namespace kiln::dist::detail
