// Which prelude a generated CPU translation unit starts with (codegen/emit_cpp_prelude.h):
// the lean one unless one of its kernels calls a function that needs xsimd.
#pragma once
#include <string>
#include <string_view>

namespace kiln::codegen {

// Whether `body` (the emitted kernels, without a prelude) calls a function of the math
// table (tensor/math_functions.def, and pow) that the lean prelude
// has no exact SIMD form of. A function added to the table counts as such until the lean
// prelude gains it (and test_prelude compares the two).
bool needs_full_prelude(std::string_view body);
// The prelude text for `body`: kPreludeLean or kPreludeFull, then kPreludeCommon.
// $KILN_LEAN_PRELUDE=0 always gives the full one (to compare the two).
std::string cpu_prelude_for(std::string_view body);

}  // namespace kiln::codegen
