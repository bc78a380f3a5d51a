// Compiled DDP: a graph recorded while a DistributedDataParallel forward runs is cut at
// gradient-bucket boundaries into consecutive subgraphs, each compiled on its own (Dynamo's
// DDPOptimizer, torch/_dynamo/backends/distributed.py). Each subgraph the backend compiles
// with AOT autograd becomes its own node of the tape, so backward runs them last to first and
// the parameters of the last subgraph have their gradients (and DDP's hooks start their
// all-reduce) while the earlier subgraphs' backward still runs. docs/distributed.md.
//
//   nn::DistributedDataParallel ddp(net, {.bucket_cap_mb = 1, .forward = compiled_net});
//   // ddp's forward sets an ActiveDDPScope; the compiled forward's graph is recorded under it
//   // and compiled with ddp_split_compile: explain shows "DDP split" with each bucket.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "jit/backends.h"

namespace kiln::jit {

// What a DDP tells the JIT while its forward runs (PyTorch:
// DistributedDataParallel._get_active_ddp_module(), read by Dynamo).
struct DDPBuckets {
    double cap_bytes = 0;            // the DDP's bucket size
    std::vector<Tensor> params;      // its parameters
    std::vector<std::string> names;  // per parameter: "module.0.weight", as DDP names them
    // Per parameter: its bucket (launch order), as the DDP assigned them. When set, the cut
    // follows it instead of cap_bytes: an op whose parameters belong to a later bucket than
    // the current subgraph's starts the next subgraph.
    std::vector<size_t> bucket_of;
};

// Makes `buckets` the active DDP of this thread while it lives (nested scopes restore the outer).
class ActiveDDPScope {
   public:
    explicit ActiveDDPScope(std::shared_ptr<const DDPBuckets> buckets);
    ~ActiveDDPScope();
    ActiveDDPScope(const ActiveDDPScope&) = delete;
    ActiveDDPScope& operator=(const ActiveDDPScope&) = delete;

   private:
    std::shared_ptr<const DDPBuckets> prev_;
};
// The innermost DDP whose forward is running on this thread, or null.
const std::shared_ptr<const DDPBuckets>& active_ddp();

// How a graph was cut: subgraphs in forward order, each with the DDP parameters it reads.
// Backward produces the last subgraph's gradients first.
struct DDPSplit {
    double cap_bytes = 0;
    struct Piece {
        std::shared_ptr<const Graph> graph;
        std::vector<std::string>
            params;        // DDP names, in the order the walk met their first readers
        size_t bytes = 0;  // their size
    };
    std::vector<Piece> pieces;
    std::string why_whole;    // set when the graph was left whole (one piece): why
    std::string str() const;  // explain's lines
};

// Cuts `graph` at bucket boundaries and compiles each subgraph with `backend`: walking the ops
// from the last back, each op joins the current subgraph, and the DDP parameters it is the
// first reader of (in forward order: where a tied parameter's gradient is complete) are added
// to that subgraph's bucket; an op that reads a parameter of a later DDP bucket than
// the subgraph's (bucket_of), or, without bucket_of, whose parameters would take the bucket
// past cap_bytes (when it already holds some), starts the next subgraph. The result runs the
// subgraphs in order, passing values between them. A graph whose parameters fit one bucket, or with
// symbolic sizes, is compiled whole. The split is recorded for explain (ddp_split_of).
CompiledFn ddp_split_compile(const Backend& backend, std::shared_ptr<const Graph> graph,
                             std::span<const Tensor> examples, const BackendOptions& options,
                             const DDPBuckets& ddp);

// The split ddp_split_compile made of `graph`, or null (not compiled under a DDP).
std::shared_ptr<const DDPSplit> ddp_split_of(const Graph& graph);

}  // namespace kiln::jit
