// Conv epilogue fusion, a rewrite of the LGraph before scheduling: a conv2d followed by a
// chain of pointwise ops that oneDNN runs as post-ops — per-channel add/sub/mul/div (bias,
// eval-mode batch norm), a residual add, relu — becomes one conv2d_fused node, which writes
// the chain's final value in one primitive (tensor/kernels_conv_dnnl.cpp).
#pragma once
#include <string>
#include <vector>

#include "codegen/lower_input.h"

namespace kiln::codegen {

struct ConvFusion {
    LGraph graph;
    int fused = 0;                   // conv2d nodes that took at least one op
    std::vector<std::string> notes;  // one per conv2d: what fused into it, or why nothing did
};

// Checked exactly: float32 values of the conv's shape, per-channel operands [C, 1, 1] or
// [1, C, 1, 1], one residual of the output's shape, no intermediate value returned or read
// by another node. CPU graphs only; KILN_CONV_FUSE=0 leaves every conv2d alone.
// Then each conv2d_fused whose output is not returned and is read only by other
// conv2d_fused nodes, as their input or their residual, gets attrs.keepdim: its output may
// stay in oneDNN's channels-last layout, which those readers take without a reorder
// (tensor/kernels_conv_dnnl.cpp); its note says "channels-last out".
ConvFusion fuse_conv(const LGraph& graph);

}  // namespace kiln::codegen
