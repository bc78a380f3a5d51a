// Compiled DDP's graph split (jit/ddp_split.h): the active DDP, the cut at bucket boundaries,
// the subgraphs and the function that runs them in order.
#include "jit/ddp_split.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <sstream>

#include "jit/log.h"
#include "tensor/error.h"

namespace kiln::jit {

namespace {

thread_local std::shared_ptr<const DDPBuckets> t_active;

struct SplitTable {
    std::mutex mu;
    std::map<uint64_t, std::pair<std::weak_ptr<const Graph>, std::shared_ptr<const DDPSplit>>>
        by_graph;
};
SplitTable& table() {
    static SplitTable t;
    return t;
}

void remember(const std::shared_ptr<const Graph>& graph, std::shared_ptr<const DDPSplit> split) {
    std::lock_guard lock(table().mu);
    auto& m = table().by_graph;
    for (auto it = m.begin(); it != m.end();)
        it = it->second.first.expired() ? m.erase(it) : std::next(it);
    m[graph->uid()] = {graph, std::move(split)};
}

// One subgraph: the nodes [begin, end) of the whole graph, what it reads from outside
// (whole-graph ids, in its placeholder order) and what later subgraphs or the result read.
struct PieceCode {
    int begin = 0, end = 0;
    std::vector<int> inputs, outputs;
    CompiledFn run;
};

// Per op node (by whole-graph index): which subgraph, counted from the end, holds it.
// Also fills `pieces` (last subgraph first) with the parameters each bucket holds.
std::vector<int> assign_ops(const Graph& g, std::span<const Tensor> examples, const DDPBuckets& ddp,
                            std::vector<DDPSplit::Piece>& pieces) {
    const auto& nodes = g.nodes();
    std::vector<int> param_of(g.num_inputs(), -1);  // per placeholder: index into ddp.params
    for (int i = 0; i < g.num_inputs(); ++i)
        for (size_t k = 0; k < ddp.params.size(); ++k)
            if (examples[i].same(ddp.params[k])) param_of[i] = int(k);
    // A parameter's gradient is complete when the backward reaches its first reader in forward
    // order (a tied weight, GPT's token embedding that the LM head reads again at the end, gets
    // its last contribution there): its bucket counts at that op, not at its last reader, or
    // the whole graph would join the bucket of the tied weight.
    std::vector<int> first_reader(g.num_inputs(), -1);
    for (int v = g.num_inputs(); v < int(nodes.size()) - 1; ++v)
        for (int a : nodes[v].args)
            if (a < g.num_inputs() && first_reader[a] < 0) first_reader[a] = v;
    std::vector<int> piece_of(nodes.size(), -1);
    pieces.assign(1, {});
    const bool by_bucket = ddp.bucket_of.size() == ddp.params.size() && !ddp.params.empty();
    size_t piece_bucket = 0;  // by_bucket: the latest DDP bucket the current subgraph holds
    for (int v = int(nodes.size()) - 2; v >= g.num_inputs(); --v) {
        std::vector<int> fresh;  // parameters this op is the first reader of
        size_t bytes = 0, bucket = 0;
        for (int a : nodes[v].args)
            if (a < g.num_inputs() && param_of[a] >= 0 && first_reader[a] == v &&
                std::find(fresh.begin(), fresh.end(), a) == fresh.end()) {
                fresh.push_back(a), bytes += examples[a].nbytes();
                if (by_bucket) bucket = std::max(bucket, ddp.bucket_of[size_t(param_of[a])]);
            }
        bool next =
            by_bucket ? bucket > piece_bucket : double(pieces.back().bytes + bytes) > ddp.cap_bytes;
        if (!fresh.empty() && pieces.back().bytes > 0 && next) pieces.emplace_back();
        if (!fresh.empty()) piece_bucket = std::max(piece_bucket, bucket);
        for (int a : fresh) pieces.back().params.push_back(ddp.names[param_of[a]]);
        pieces.back().bytes += bytes;
        piece_of[v] = int(pieces.size()) - 1;
    }
    return piece_of;
}

}  // namespace

ActiveDDPScope::ActiveDDPScope(std::shared_ptr<const DDPBuckets> buckets)
    : prev_(std::move(t_active)) {
    t_active = std::move(buckets);
}
ActiveDDPScope::~ActiveDDPScope() { t_active = std::move(prev_); }
const std::shared_ptr<const DDPBuckets>& active_ddp() { return t_active; }

std::string DDPSplit::str() const {
    std::ostringstream os;
    os << pieces.size() << " subgraph" << (pieces.size() == 1 ? "" : "s") << " (bucket cap "
       << size_t(cap_bytes) << " bytes)";
    if (!why_whole.empty()) os << ": left whole, " << why_whole;
    os << "\n";
    if (pieces.size() < 2) return os.str();
    for (size_t i = 0; i < pieces.size(); ++i) {
        const Piece& p = pieces[i];
        os << "    subgraph " << i + 1 << ": " << p.graph->num_ops() << " ops, bucket of "
           << p.params.size() << " parameter" << (p.params.size() == 1 ? "" : "s") << " ("
           << p.bytes << " bytes)";
        for (size_t k = 0; k < p.params.size(); ++k) os << (k ? ", " : ": ") << p.params[k];
        os << (i + 1 == pieces.size() ? "  <- its backward runs first\n" : "\n");
    }
    return os.str();
}

namespace {

// Builds subgraph `p` of `graph` (its nodes pc.begin..pc.end) and compiles it: what it reads
// from outside becomes its placeholders (pc.inputs), what a later subgraph or the result
// reads its outputs (pc.outputs).
std::shared_ptr<const Graph> build_piece(const Graph& graph, std::span<const Tensor> examples,
                                         const std::vector<int>& piece_of_node,
                                         const std::vector<int>& last_reader, int p, PieceCode& pc,
                                         const Backend& backend, const BackendOptions& options) {
    const auto& nodes = graph.nodes();
    const int ni = graph.num_inputs();
    GraphBuilder b(0);
    std::map<int, int> local;  // whole-graph id -> builder id
    std::vector<Tensor> piece_examples;
    auto read = [&](int a) {
        if (auto it = local.find(a); it != local.end()) return it->second;
        const Node& src = nodes[a];
        std::string source =
            a < ni ? src.source : "output of subgraph " + std::to_string(piece_of_node[a] + 1);
        int id = b.placeholder(src.name, src.meta, source);
        local[a] = id;
        pc.inputs.push_back(a);
        if (a < ni) {
            piece_examples.push_back(examples[a]);
        } else {  // an earlier subgraph's output: its shape, dtype and requires_grad are what
                  // counts
            Tensor ex = zeros(src.meta.shape, {.dtype = src.meta.dtype, .device = src.meta.device});
            if (src.meta.requires_grad) ex.requires_grad_(true);
            piece_examples.push_back(ex);
        }
        return id;
    };
    for (int v = pc.begin; v < pc.end; ++v) {
        const Node& nd = nodes[v];
        std::vector<int> args;
        for (int a : nd.args) args.push_back(read(a));
        local[v] = nd.kind == NodeKind::detach
                       ? b.detach(args.at(0), nd.meta)
                       : b.call(nd.op, nd.attrs, args, nd.meta, nd.grad_enabled);
    }
    std::vector<int> outs;
    for (int v = pc.begin; v < pc.end; ++v)
        if (last_reader[v] > p) pc.outputs.push_back(v), outs.push_back(local[v]);
    std::shared_ptr<const Graph> sub = b.build(outs);
    pc.run = backend_compile(backend, sub, piece_examples, options);
    return sub;
}

// Runs the subgraphs in order; each value is dropped after its last reader, as in eager code.
CompiledFn run_in_order(std::shared_ptr<const std::vector<PieceCode>> pieces,
                        std::vector<int> last_reader, std::vector<int> result_ids, int ni) {
    return [=](std::span<const Tensor> inputs) {
        std::vector<Tensor> values(last_reader.size());
        for (int i = 0; i < ni; ++i) values[i] = inputs[i];
        std::vector<Tensor> in;
        for (int p = 0; p < int(pieces->size()); ++p) {
            const PieceCode& pc = (*pieces)[p];
            in.clear();
            for (int a : pc.inputs) in.push_back(values[a]);
            std::vector<Tensor> out = pc.run(in);
            for (size_t j = 0; j < pc.outputs.size(); ++j)
                values[pc.outputs[j]] = std::move(out[j]);
            for (int a : pc.inputs)
                if (a >= ni && last_reader[a] == p) values[a] = Tensor();
        }
        std::vector<Tensor> result;
        for (int a : result_ids) result.push_back(values[a]);
        return result;
    };
}

}  // namespace

CompiledFn ddp_split_compile(const Backend& backend, std::shared_ptr<const Graph> graph,
                             std::span<const Tensor> examples, const BackendOptions& options,
                             const DDPBuckets& ddp) {
    KILN_CHECK(int(examples.size()) == graph->num_inputs(), "compile: DDP split of a graph with ",
               graph->num_inputs(), " inputs was given ", examples.size(), " examples");
    auto split = std::make_shared<DDPSplit>();
    split->cap_bytes = ddp.cap_bytes;
    std::vector<DDPSplit::Piece> reversed;
    std::vector<int> reverse_piece = assign_ops(*graph, examples, ddp, reversed);
    const int n = int(reversed.size());
    if (n < 2 || graph->num_symbols() > 0) {
        split->why_whole = n >= 2                       ? "a graph with symbolic sizes is not split"
                           : reversed[0].params.empty() ? "it reads no parameter of the DDP"
                                                        : "its parameters fit one bucket";
        reversed.resize(1);
        reversed[0].graph = graph;
        split->pieces = std::move(reversed);
        remember(graph, split);
        log_event("graphs", "DDP split: " + split->str());
        return backend_compile(backend, graph, examples, options);
    }
    const auto& nodes = graph->nodes();
    const int ni = graph->num_inputs(), no = int(nodes.size()) - 1;  // `no`: the output node
    // Forward order: subgraph p holds the op nodes the walk put in piece n - 1 - p.
    std::vector<int> piece_of_node(nodes.size(), -1);
    auto pieces = std::make_shared<std::vector<PieceCode>>(n);
    for (int v = ni; v < no; ++v) {
        piece_of_node[v] = n - 1 - reverse_piece[v];
        PieceCode& pc = (*pieces)[piece_of_node[v]];
        if (pc.end == 0) pc.begin = v;
        pc.end = v + 1;
    }
    // The last subgraph that reads each value (n: the result does).
    std::vector<int> last_reader(nodes.size(), -1);
    for (int v = ni; v < no; ++v)
        for (int a : nodes[v].args) last_reader[a] = std::max(last_reader[a], piece_of_node[v]);
    for (int a : graph->outputs()) last_reader[a] = n;
    for (int p = 0; p < n; ++p) {
        DDPSplit::Piece info = std::move(reversed[n - 1 - p]);
        info.graph = build_piece(*graph, examples, piece_of_node, last_reader, p, (*pieces)[p],
                                 backend, options);
        split->pieces.push_back(std::move(info));
    }
    remember(graph, split);
    log_event("graphs", "DDP split: " + split->str());
    return run_in_order(pieces, std::move(last_reader), graph->outputs(), ni);
}

std::shared_ptr<const DDPSplit> ddp_split_of(const Graph& graph) {
    std::lock_guard lock(table().mu);
    auto it = table().by_graph.find(graph.uid());
    return it == table().by_graph.end() ? nullptr : it->second.second;
}

}  // namespace kiln::jit
