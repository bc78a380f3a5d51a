// The JIT's IR: a Graph is an immutable, topologically ordered list of nodes, each an op
// of the table (OpId + inputs + Attrs) exactly as the dispatcher saw it. Like an FX graph:
// placeholders first, then calls, then one output node. Printable one line per node.
#pragma once
#include <iosfwd>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "tensor/ops.h"

namespace kiln::jit {

// A size derived from the symbolic input sizes: a product of symbols, or its reciprocal
// (mean's 1/n scale).
struct SymExpr {
    std::vector<int> syms;    // symbol ids, multiplied together
    int64_t coeff = 1;        // times this constant (the static dims of a numel)
    bool reciprocal = false;  // 1 / (coeff * product)
    double eval(std::span<const int64_t> values) const;
    std::string str() const;  // s0*s1, 1/s0
};

// An attribute that is not a constant but a SymExpr, re-evaluated on every run.
using kiln::AttrField;
struct AttrPatch {
    AttrField field;
    int index = 0;  // element of attrs.shape, for AttrField::shape
    SymExpr expr;
};

// Shape and dtype of a value; dims that are symbols carry their symbol id.
struct ValueMeta {
    Shape shape;           // sizes seen when recording
    std::vector<int> sym;  // per dim: symbol id, or -1 for a static size
    DType dtype = DType::float32;
    bool requires_grad = false;
    Device device = cpu;
    std::string str() const;  // float32[s0, 3], with " cuda:0" appended off the CPU
};
ValueMeta meta_of(const Tensor& t);  // all dims static

enum class NodeKind : uint8_t { placeholder, call, detach, output };

struct Node {
    NodeKind kind = NodeKind::call;
    std::string name;                // unique in its graph: a, abs, add_1 ...
    OpId op{};                       // call: the op of the table
    Attrs attrs;                     // call: as recorded
    std::vector<AttrPatch> patches;  // call: attrs that follow symbolic sizes
    std::vector<int> args;           // node indices (output: the returned values)
    ValueMeta meta;
    bool grad_enabled = true;        // grad mode when recorded (a NoGradGuard inside fn)
    std::string source;              // placeholder: argument, lifted tensor, earlier graph ...
};

class Graph {
   public:
    const std::vector<Node>& nodes() const { return nodes_; }
    int num_inputs() const { return num_inputs_; }
    const std::vector<int>& outputs() const { return nodes_.back().args; }
    int num_ops() const { return int(nodes_.size()) - num_inputs_ - 1; }
    int num_symbols() const { return num_symbols_; }
    std::vector<std::string> op_names() const;  // "abs", "add" ... in order

    // Symbol values read from the inputs' sizes (the graph is self-contained).
    std::vector<int64_t> bind_symbols(std::span<const Tensor> inputs) const;
    // The node's attrs with its patches evaluated; `scratch` holds the copy if needed.
    const Attrs& attrs(const Node& n, std::span<const int64_t> syms, Attrs& scratch) const;

    // Unique for the process's life, copies included: side tables keyed by graph (AOT's memory
    // report, the backend's notes) must not find a dead graph's entry at a reused address.
    uint64_t uid() const { return uid_.value; }

    std::string str() const;      // one line per node
    std::string tabular() const;  // FX's print_tabular: opcode, name, target, args, kwargs
    void print_tabular(std::ostream& os) const;
    void print_tabular() const;   // to stdout
    std::string to_dot() const;   // Graphviz

   private:
    friend class GraphBuilder;
    struct SymSource {
        int input, dim, sym;
    };
    std::vector<Node> nodes_;
    int num_inputs_ = 0;
    int num_symbols_ = 0;
    std::vector<SymSource> sym_sources_;
    struct Uid {
        uint64_t value = next();
        Uid() = default;
        Uid(const Uid&) : value(next()) {}
        Uid& operator=(const Uid&) { return value = next(), *this; }
        static uint64_t next();
    } uid_;
};
std::ostream& operator<<(std::ostream& os, const Graph& g);

// Builds a Graph node by node while recording. Ids returned are builder ids; build()
// puts placeholders first and renumbers. Symbolic sizes are given, never guessed: the
// tracer passes each value's symbols (jit/sym_shapes.h) and each size-derived attribute's
// expression (AttrPatch); `num_symbols` is how many the entry has.
class GraphBuilder {
   public:
    explicit GraphBuilder(int num_symbols = 0) : num_symbols_(num_symbols) {}
    int placeholder(const std::string& name, ValueMeta meta, std::string source);
    int call(OpId op, const Attrs& attrs, std::vector<int> args, const Tensor& out, bool grad_enabled);
    int call(OpId op, const Attrs& attrs, std::vector<int> args, ValueMeta meta, bool grad_enabled,
             std::vector<AttrPatch> patches = {});
    const ValueMeta& meta(int id) const { return nodes_[id].meta; }
    int detach(int arg, const Tensor& out);
    int detach(int arg, ValueMeta meta);
    int size() const { return int(nodes_.size()); }
    int num_ops() const { return num_ops_; }
    bool is_placeholder(int id) const { return nodes_[id].kind == NodeKind::placeholder; }
    int final_index(int id) const;  // the node's index in build()'s graph (placeholders first)
    std::shared_ptr<const Graph> build(const std::vector<int>& outputs) const;

   private:
    std::string unique_name(std::string base);
    std::vector<Node> nodes_;
    // Names taken, and per base the first suffix not yet tried (names are never freed, so
    // the smallest free suffix only grows): a name costs O(1), not a scan of every name.
    std::unordered_set<std::string> names_;
    std::unordered_map<std::string, int> next_suffix_;
    int num_symbols_ = 0;
    int num_ops_ = 0;
};

}  // namespace kiln::jit
