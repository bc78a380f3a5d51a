// The scheduler (DESIGN.md §8): groups the nodes of an LGraph into kernels, and decides
// which values live in memory and how each kernel indexes them. See docs/codegen.md.
#pragma once
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "codegen/lower_input.h"

namespace kiln::codegen {

// A size, stride or offset term: c * s_a * s_b * ... (symbols sorted). Sizes and strides of
// contiguous, permuted, expanded and sliced views are always such products.
struct SizeExpr {
    int64_t c = 1;
    std::vector<int> syms;
    bool operator==(const SizeExpr&) const = default;
};
SizeExpr size_expr(int64_t size);  // a shape entry (concrete or symbolic)
SizeExpr operator*(const SizeExpr& a, const SizeExpr& b);
std::string to_cpp(const SizeExpr& e);               // "8", "s0", "s0 * 8"
std::string to_cpp(const std::vector<SizeExpr>& sum);  // "0", "s0 * 3 + 2"
std::vector<SizeExpr> contiguous_stride_exprs(const Shape& shape);

// Where a value lives while the graph runs.
enum class Home {
    input,    // a graph input (made contiguous by run())
    stored,   // written to a fresh contiguous buffer by the kernel that computes it
    view,     // no memory of its own: strided index math over a stored or input buffer
    inlined,  // computed inside its kernel's loop and never written out
    constant, // a `full` that only generated kernels read: a literal in each, never in memory
};
inline std::ostream& operator<<(std::ostream& os, Home h) {
    const char* names[] = {"input", "stored", "view", "inlined", "constant"};
    return os << names[int(h)];
}

// How a kernel reads a value from memory: element idx of the value's own shape sits at
// buffer[offset + sum(idx[d] * strides[d])].
struct Access {
    int buffer = -1;  // value id of the input or stored buffer
    std::vector<SizeExpr> strides;
    std::vector<SizeExpr> offset;
};

struct ValueInfo {
    Home home = Home::inlined;
    int kernel = -1;          // kernel computing it; for views, the kernel of the base
    bool per_row = false;     // in a row kernel: one value per row (a reduction or its math)
    Access access;            // input, stored, view
};

enum class KernelKind {
    pointwise,  // one loop over the output shape
    row,        // reductions (over any dims, looped as the row's trailing dims), with their
                // producers and consumers
    blas,       // matmul through BLAS (tensor/gemm.h); its epilogue may be the next kernel
    fallback,   // one node run by the eager dispatcher
};
const char* kernel_kind_name(KernelKind k);
inline std::ostream& operator<<(std::ostream& os, KernelKind k) { return os << kernel_kind_name(k); }

struct Kernel {
    KernelKind kind = KernelKind::pointwise;
    std::vector<int> nodes;   // indices into graph.nodes, in execution order
    Shape domain;             // pointwise: the loop shape; row: the loop shape, rows first
    int outer_dims = 0;       // row: leading dims of domain that index rows
    // row: loop dim i is dim perm[i] of the element nodes' shape (the kept dims, then the
    // reduced ones); empty when that is the identity (a reduction over the trailing dims).
    std::vector<int> perm;
    std::vector<int> loads;   // buffers (value ids) read, in first-use order
    std::vector<int> stores;  // values written, in order
    std::string why;          // fallback: why the node runs its eager kernel instead of generated code
    // pointwise or row kernel: the blas kernel (always the one just before) whose output it
    // reads element by element; the two run as one step, this kernel over each block of GEMM
    // rows right after BLAS writes it (fuse_epilogues, codegen/epilogue.cpp).
    int epilogue_of = -1;
    int in_place = -1;  // an epilogue's store that takes the GEMM output's buffer, or -1
    // Generated kernels receive their buffers as one array: loads, then stores.
    std::vector<int> args() const;
};

struct Schedule {
    LGraph graph;
    std::vector<Kernel> kernels;
    std::map<int, ValueInfo> values;   // by value id
    std::map<int, int> producer;       // value id -> node index
    std::map<int, std::pair<int, int>> symbol_binding;  // symbol -> (input index, dim)
    int num_symbols = 0;
    std::string prefix;                // prepended to kernel names (several graphs per TU)

    const LValue& value(int id) const;
    std::string value_name(int id) const;  // the C++ name: cos_3, x_0
    std::string kernel_name(int k) const;  // kernel_2
    std::string print() const;       // one line per kernel (a blas kernel and its epilogue: one)
    bool has_epilogue(int k) const;  // kernel k is blas and kernel k + 1 is its epilogue
};

// Throws kiln::Error if the graph is malformed (unknown ids, unbound symbols). Epilogues are
// the next stage's (fuse_epilogues): a fresh schedule has none.
Schedule schedule(const LGraph& graph);

// The pipeline's stage after schedule (codegen/epilogue.cpp): makes the pointwise or row kernel
// that reads a CPU matmul's output element by element (rows of the GEMM are rows of its loop)
// that matmul's epilogue: moves the blas kernel down to just before it and links the two
// (Kernel::epilogue_of, Kernel::in_place). CPU schedules only; KILN_EPILOGUE=0 returns `s`
// unchanged.
Schedule fuse_epilogues(Schedule s);
bool epilogue_fusion_enabled();  // KILN_EPILOGUE is not "0"

}  // namespace kiln::codegen
