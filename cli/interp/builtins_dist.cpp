// torch.distributed and torch.nn.parallel.DistributedDataParallel in kiln script, over
// dist/dist.h and nn/ddp.h: init_process_group, get_rank/get_world_size, the collectives
// (in place, as PyTorch's) and DDP. `kiln launch --nproc N script.kn` starts the ranks.
#include "cli/interp/builtins.h"
#include "cli/interp/classes.h"
#include "dist/dist.h"
#include "nn/ddp.h"

namespace kiln::interp {
namespace {

// ReduceOp.SUM / AVG / MAX are the strings "sum", "avg", "max" (dist_reduce_op).
dist::ReduceOp reduce_op(Bound& b, size_t i) {
    std::string op = b.has(i) ? b.string(i) : "sum";
    if (op == "sum") return dist::ReduceOp::sum;
    if (op == "avg") return dist::ReduceOp::avg;
    if (op == "max") return dist::ReduceOp::max;
    b.in.raise("ValueError",
               "dist: op must be ReduceOp.SUM, ReduceOp.AVG or ReduceOp.MAX, got '" + op + "'");
}

Value b_init_process_group(Bound& b) {
    dist::InitOptions o;
    if (b.has(0)) {  // backend: "gloo"/"mpi" for CPU tensors, "nccl" for CUDA ones; kiln picks by
                     // device
        std::string backend = b.string(0);
        if (backend != "mpi" && backend != "nccl" && backend != "gloo")
            b.in.raise("ValueError",
                       "init_process_group: backend '" + backend + "' is not mpi, nccl or gloo");
    }
    if (b.has(1)) o.init_method = b.string(1);
    o.rank = int(b.integer_or(2, -1));
    o.world_size = int(b.integer_or(3, -1));
    o.timeout_s = b.number_or(4, -1);
    dist::init_process_group(o);
    return None{};
}
Value b_get_rank(Bound&) { return int64_t(dist::get_rank()); }
Value b_get_world_size(Bound&) { return int64_t(dist::get_world_size()); }
Value b_is_initialized(Bound&) { return dist::is_initialized(); }
Value b_destroy_process_group(Bound&) {
    dist::destroy_process_group();
    return None{};
}
Value b_barrier(Bound&) {
    dist::barrier();
    return None{};
}
Value b_all_reduce(Bound& b) {
    dist::all_reduce(b.tensor(0), reduce_op(b, 1));
    return None{};
}
Value b_broadcast(Bound& b) {
    dist::broadcast(b.tensor(0), int(b.integer_or(1, 0)));
    return None{};
}
// all_gather(tensor_list, tensor): fills the list's tensors with every rank's, as PyTorch's.
Value b_all_gather(Bound& b) {
    auto list = as_sequence(b.value(0));
    if (!list) b.type_error(0, "a list of tensors");
    Tensor all = dist::all_gather(b.tensor(1));
    if (int64_t(list->size()) != all.size(0))
        b.in.raise("ValueError", "all_gather: tensor_list has " + std::to_string(list->size()) +
                                     " tensors, the world has " + std::to_string(all.size(0)) +
                                     " ranks");
    for (size_t r = 0; r < list->size(); ++r) {
        auto t = (*list)[r].as<Tensor>();
        if (!t) b.type_error(0, "a list of tensors");
        Tensor(*t).copy_(all[int64_t(r)]);
    }
    return None{};
}
Value b_ddp(Bound& b) {
    ModulePtr m;
    if (auto p = b.value(0).as<ModulePtr>())
        m = *p;
    else if (auto o = b.value(0).object<InstanceObj>(); o && o->module)
        m = o->module;
    else
        b.type_error(0, "an nn.Module");
    nn::DDPOptions o;
    o.bucket_cap_mb = b.number_or(2, 25);
    o.broadcast_buffers = b.flag_or(3, true);
    return ModulePtr(std::make_shared<nn::DistributedDataParallel>(m, o));
}

// ddp.no_sync(): a context manager; while inside, backward accumulates gradients locally and
// the first backward after it all-reduces what accumulated (nn/ddp.h, PyTorch's no_sync()).
struct NoSyncObj : Object {
    std::shared_ptr<nn::DistributedDataParallel> ddp;
    std::vector<std::unique_ptr<nn::DistributedDataParallel::NoSync>> guards;  // one per __enter__
    explicit NoSyncObj(std::shared_ptr<nn::DistributedDataParallel> d) : ddp(std::move(d)) {}
    std::string type_name() const override { return "no_sync"; }
    std::string repr() const override { return "<DistributedDataParallel.no_sync>"; }
    std::optional<Value> attr(Interp&, const ObjectPtr& self, const std::string& name) override {
        if (name == "__enter__" || name == "__exit__")
            return Value(std::make_shared<BoundMethod>(BoundMethod{Value(self), find_builtin("no_sync." + name)}));
        return std::nullopt;
    }
};
Value m_no_sync(Bound& b) {
    auto ddp = std::dynamic_pointer_cast<nn::DistributedDataParallel>(*b.self.as<ModulePtr>());
    if (!ddp)
        b.in.raise("AttributeError", "no_sync() belongs to DistributedDataParallel; this module is a " +
                                         (*b.self.as<ModulePtr>())->type_name());
    return std::make_shared<NoSyncObj>(ddp);
}
Value m_no_sync_enter(Bound& b) {
    auto g = b.self.object<NoSyncObj>();
    g->guards.push_back(std::make_unique<nn::DistributedDataParallel::NoSync>(*g->ddp));
    return None{};
}
Value m_no_sync_exit(Bound& b) {
    auto g = b.self.object<NoSyncObj>();
    if (!g->guards.empty()) g->guards.pop_back();
    return false;  // never swallows an exception
}

const Builtin kDist[] = {
    {"dist.init_process_group",
     "backend=None, init_method=None, rank=-1, world_size=-1, timeout=None", b_init_process_group,
     "join the ranks (RANK, WORLD_SIZE, MASTER_ADDR/PORT; kiln launch sets them): MPI for CPU "
     "tensors, NCCL for CUDA"},
    {"dist.get_rank", "", b_get_rank, "this process's rank"},
    {"dist.get_world_size", "", b_get_world_size, "how many ranks"},
    {"dist.is_initialized", "", b_is_initialized, "whether init_process_group ran"},
    {"dist.destroy_process_group", "", b_destroy_process_group, "leave the group"},
    {"dist.barrier", "", b_barrier, "wait for every rank"},
    {"dist.all_reduce", "tensor, op=None", b_all_reduce,
     "in place: the sum (ReduceOp.AVG, .MAX) over ranks"},
    {"dist.broadcast", "tensor, src=0", b_broadcast, "in place: rank src's values"},
    {"dist.all_gather", "tensor_list, tensor", b_all_gather, "tensor_list[r] = rank r's tensor"},
    {"parallel.DistributedDataParallel",
     "module, device_ids=None, bucket_cap_mb=25, broadcast_buffers=True", b_ddp,
     "gradients averaged over ranks during backward (nn/ddp.h)"},
    {"Module.no_sync", "", m_no_sync,
     "DistributedDataParallel: with ddp.no_sync(): backward accumulates locally, the next "
     "backward after it all-reduces"},
    {"no_sync.__enter__", "", m_no_sync_enter, "stop all-reducing"},
    {"no_sync.__exit__", "*exc", m_no_sync_exit, "all-reduce again"},
};

}  // namespace

std::span<const Builtin> dist_builtins() { return kDist; }

std::optional<Value> dist_reduce_op(const std::string& name) {
    if (name == "SUM") return Value(std::string("sum"));
    if (name == "AVG") return Value(std::string("avg"));
    if (name == "MAX") return Value(std::string("max"));
    return std::nullopt;
}

}  // namespace kiln::interp
