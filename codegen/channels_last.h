// Channels-last training graphs, a rewrite of the LGraph after fuse_conv: the activations
// around each (unfused) conv2d, conv2d_input_grad and conv2d_weight_grad become NHWC values
// [N, H, W, C], so oneDNN reads and writes them without a reorder, and the pointwise ops and
// reductions between the convolutions (batch norm, ReLU, residual adds and their gradients)
// run on the same NHWC values.
#pragma once
#include <string>
#include <vector>

#include "codegen/lower_input.h"

namespace kiln::codegen {

// What changed, for explain and KILN_LOGS=passes (one line; empty when nothing did).
struct ChannelsLast {
    int convs = 0;  // conv2d / conv2d_input_grad / conv2d_weight_grad nodes made NHWC
    int nodes = 0;  // pointwise and reduction nodes that run on NHWC values
    // Permutes added between the two layouts (not the reshapes where only size-1 dims move).
    int layout_ops = 0;
    std::string note() const;
};

// The rewrite, in place. CPU float32 convolutions on oneDNN only (not under KILN_CONV=im2col),
// in graphs whose largest conv activation has at least 2^20 elements and no symbolic size
// (ResNet-18 224x224 gains, 32x32 loses: channels_last.cpp); KILN_CONV_NHWC=always rewrites
// any such graph, KILN_CONV_NHWC=0 none.
// - Each conv2d (with a 4-D input) and its two gradients get attrs.keepdim: their activations
//   are NHWC (tensor/kernels_conv_dnnl.cpp) and their outputs keep the value id with the
//   NHWC shape.
// - A pointwise node of rank 4 with an operand of its own shape that is NHWC (or a 4-D graph
//   input) runs on NHWC: its full-shape operands are taken NHWC, per-channel and other
//   broadcast operands reshaped (a [1, C, 1, 1] value is [1, 1, 1, C] in the same memory
//   order), `full` and `expand` operands remade in the NHWC shape.
// - A reduction of an NHWC value reduces the permuted dims; with keepdim its result is NHWC,
//   without it the result is the same value when the kept dims keep their order (else the
//   reduction reads the NCHW value).
// - Every other reader gets the NCHW value: one contiguous copy the host makes (a permute
//   with attrs.keepdim, which the scheduler leaves to the host), however many read it. A
//   returned value is the channels-last strided view of the NHWC one, no copy.
// - Where an NCHW value is read as NHWC (a node above on it), the host makes one contiguous
//   NHWC copy the same way. For a 4-D graph input whose every reader is such a copy, the
//   runner does not make the input contiguous first, so an input that arrives channels-last
//   (the saved activations an AOT forward returns) costs no copy: the two halves of a
//   training step hand NHWC memory across.
// Only dims of size 1 moving (a per-channel [1, C, 1, 1] value), a layout change is a reshape.
ChannelsLast channels_last(LGraph& graph);

}  // namespace kiln::codegen
