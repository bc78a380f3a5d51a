// What the code generator (CPU and CUDA) consumes: a flat SSA list of ops over values with known
// shapes and dtypes. The JIT fills it from its Graph; tests build it by hand. codegen/
// does not include jit/, so this is the whole contract between them.
#pragma once
#include <string>
#include <vector>

#include "tensor/ops.h"

namespace kiln::codegen {

// A size in a shape is either concrete (>= 0) or the symbol s_k, written -(k+1); symbols
// are bound from the input shapes at run time (docs/jit.md: 0 and 1 stay concrete).
inline bool is_symbol(int64_t size) { return size < 0; }
inline int symbol_index(int64_t size) { return int(-size - 1); }
inline int64_t symbol_size(int k) { return -int64_t(k) - 1; }

struct LValue {
    int id = -1;           // unique over inputs and node outputs
    Shape shape;           // sizes; negative entries are symbols
    DType dtype = DType::float32;
    std::string name;      // optional: names the C++ variable (`x` -> x_0); else the op's name
};

struct LNode {
    OpId op;
    Attrs attrs;              // as for dispatch; for reshape/expand, out.shape is authoritative
    std::vector<int> inputs;  // value ids (tensor operands only; scalars live in attrs)
    LValue out;
};

struct LGraph {
    Device device = cpu;       // where its tensors live: cuda builds it with the CUDA emitter
    std::vector<LValue> inputs;
    std::vector<LNode> nodes;  // in a valid execution order
    std::vector<int> outputs;  // value ids, in the order run() returns them

    // One line per node, "cos_2 float32[10000] = cos(x_0)", between a line of inputs and one
    // of outputs (codegen/lower_graph.cpp; KILN_LOGS=passes shows it).
    std::string print() const;
};

}  // namespace kiln::codegen
