// Internal to codegen/: what a CUDA row kernel keeps in registers when its row fits
// (docs/cuda.md, "Row kernels"). The CUDA dialect (emit_cuda.cpp) writes such a kernel in two
// variants; in the register one, a fill loop reads the row once (float4 where aligned) and
// computes the fused prologue (attention's scale and mask), every pass then reads registers,
// and the last pass writes the row once.
#pragma once
#include <set>
#include <vector>

#include "codegen/emit_core.h"

namespace kiln::codegen::emit_detail {

// Threads per block for many rows of `row_size` elements: the smallest power of two from 32
// to 1024 that gives each thread at most kRowValues of the row.
constexpr int kRowValues = 8;
int cuda_row_block_for(int64_t row_size);

struct RegisterRow {
    // Float4 groups of the row each thread holds (4 * groups elements a value); 0: the
    // kernel has no register variant (no value is read by two passes, a split row, or a
    // static row too long for a block's registers).
    int groups = 0;
    // Values the fill loop puts in registers before any pass: the row's loads, or the
    // prologue computed from them (values that need no per-row result), that two or more
    // passes read.
    std::set<int> cache;
    // Element values a pass computes that a later pass computes again (softmax's exp): the
    // first pass keeps them in registers, the later one reads them.
    std::set<int> kept;
};

// `steps` are the kernel's row steps (KernelEmitterCore::row_steps).
RegisterRow plan_register_row(const Schedule& s, int kernel, const std::vector<Step>& steps);

}  // namespace kiln::codegen::emit_detail
