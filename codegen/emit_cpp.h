// The C++ (SIMD) emitter (docs/codegen.md): a Schedule -> one readable translation unit with
// one extern "C" entry per generated kernel; the C++ dialect of the emitter core
// (codegen/emit_core.h). See docs/codegen.md for a walk through it.
#pragma once
#include <string>
#include <vector>

#include "codegen/emit_core.h"  // math_text, finite_double_literal
#include "codegen/schedule.h"

namespace kiln::codegen {

// Every generated kernel has this signature. `buffers` holds Kernel::args() in order (a
// graph input, a stored value or a view's base, as float32 contiguous data); `symbols`
// holds s0, s1, ... The kernel never starts threads itself: it hands its loop body to
// `parallel`, which the host implements with kiln's thread pool (tensor/parallel.h), so
// generated code needs nothing from libkiln.
using ParallelFn = void (*)(int64_t n, int64_t grain, void* ctx, void (*body)(void* ctx, int64_t begin, int64_t end));
using KernelFn = void (*)(float* const* buffers, const int64_t* symbols, ParallelFn parallel);
// A matmul's epilogue kernel (Kernel::epilogue_of) has a second entry, `<name>_rows`: its loop
// over rows [row_begin, row_end) of the GEMM output, run on the calling thread; the host calls
// it after BLAS writes each block of rows (codegen/cpu_epilogue.cpp).
using EpilogueRowsFn = void (*)(float* const* buffers, const int64_t* symbols, int64_t row_begin,
                                int64_t row_end);

// The whole translation unit for one schedule, or for several (their prefixes must differ).
std::string emit(const Schedule& schedule);
std::string emit(const std::vector<const Schedule*>& schedules);
// The same kernels split over several translation units, so that as many compilers can build
// them at once: about one unit per `min_unit_bytes` of kernel text, at most `max_units`, the
// kernels spread so that the units' sizes are close; a kernel repeating another's code (its
// entry calls the first's) goes with that one. Every unit has the prelude the whole set needs
// (the one emit() picks), so each kernel compiles to the same code as in emit()'s unit. One
// unit: emit()'s text.
std::vector<std::string> emit_units(const std::vector<const Schedule*>& schedules, size_t max_units,
                                    size_t min_unit_bytes);

}  // namespace kiln::codegen
