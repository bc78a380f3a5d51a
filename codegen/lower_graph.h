// Lowering: the JIT's Graph -> codegen's LGraph (codegen/lower_input.h). Placeholders become
// inputs, call nodes become LNodes, detach nodes become aliases (no autograd inside
// generated code), and dims that are symbols s_k become the negative sizes -(k+1).
#pragma once
#include <optional>
#include <string>

#include "codegen/lower_input.h"
#include "jit/graph.h"

namespace kiln::codegen {

struct Lowered {
    std::optional<LGraph> graph;  // empty when the graph cannot be lowered exactly
    std::string why_not;          // then: which node, and why (the graph is interpreted)
};

// LGraph can say "this dim is s0" but not "this scalar is 1/s0" or "this dim is s0*s1", so a
// symbolic attribute other than a reshape/expand dim that is one symbol is refused.
Lowered lower(const jit::Graph& graph);

// permute(matmul(a, b), [.., 1, 0]) -> matmul(b^T, a^T) (^T: the last two dims swapped), for
// matmuls whose operands have their batch dims (no broadcasting) and whose result (through
// reshapes to the same shape) only that permute reads: the GEMM writes the transposed layout
// itself (its operands' transposes are BLAS flags) and the permute's readers get a
// contiguous value. A linear layer's weight gradient is such a permute in every AOT
// backward (as a strided output it was cloned by the autograd engine before SGD read it), and
// attention's key gradient (copied to contiguous, transposing, before its reshape):
// docs/perf-models.md, "GPT at 2 threads". Returns how many it rewrote.
int transpose_gemm_outputs(LGraph& graph);

// add(slice_backward(g0), add(slice_backward(g1), ...)) -> cat(g0, g1, ...) when the slices
// (step 1, one dim) tile that dim exactly and each slice_backward and inner add is read only
// by the tree: the gradient of values cut from one tensor (chunk, split, select of each
// index) is written once, instead of each piece scattered into zeros of the whole and the
// zeros added (Inductor lowers slice_scatter sums the same way). Returns how many it rewrote.
int slice_backwards_to_cat(LGraph& graph);

// permute(attention(q, k, v), [0, 2, 1, 3]) -> attention(q, k, v) with attrs.keepdim: the
// kernel writes [B, L, H, dv] itself (a strided store), so the heads' usual way back,
// `out.transpose(1, 2).reshape({B, L, E})`, is a view instead of a copy. Only where the permute
// is the attention's one reader. Returns how many it rewrote.
int attention_heads_last(LGraph& graph);

}  // namespace kiln::codegen
