// Internal to codegen/: the statement of one op, as both dialects and both CUDA rungs write
// it (docs/codegen.md, "One emitter core, two dialects"). It needs no Schedule, only the op
// table, so the eager CUDA kernels (codegen/emit_eager_cuda.h) take their math from here too.
#pragma once
#include <string>
#include <vector>

#include "tensor/ops.h"

namespace kiln::codegen {

// The text of one op's math with its operands filled in: math_text("x + y", "a", "b") is
// "a + b". The text comes from the op table (OpInfo::math), never from the emitter.
std::string math_text(const std::string& math, const std::string& x, const std::string& y);

// A finite double as a literal both emitters' compilers read back exactly ("%.17g", ".0"
// added to an integer, parenthesized when negative).
std::string finite_double_literal(double value);

namespace emit_detail {

// One step of a reduction: `acc` combined with `v` (sum: +; amax/amin: maximum/minimum,
// which propagate NaN as eager's reductions do), from tensor/reductions.def.
std::string reduction_combine(OpId op, const std::string& acc, const std::string& v);

// The dtype operand `i` of `op` is converted to before the op reads it (where's condition:
// bool; everything else: the dtype the op computes in).
inline DType operand_dtype(OpId op, size_t i, DType compute) {
    return op == OpId::where && i == 0 ? DType::boolean : compute;
}

// How a dialect spells the pieces of one op's statement.
struct Spelling {
    virtual ~Spelling() = default;
    virtual std::string convert(const std::string& x, DType to) const = 0;
    virtual std::string select(const std::string& c, const std::string& a,
                               const std::string& b) const = 0;
    // The operands of an op running in `compute` (int64 on the CPU: wrapping), and its
    // result (cast back where the math's type is not the compute dtype).
    virtual void prepare_operands(std::vector<std::string>& xs, OpId op, DType compute) const {
        (void)xs, (void)op, (void)compute;
    }
    virtual std::string result(const std::string& math, OpId op, DType compute) const = 0;
};

// An operand as text and the dtype it holds: converted to the dtype the op reads unless it
// holds that dtype already (a scalar literal of the compute dtype, say).
struct Operand {
    std::string text;
    DType dtype;
};

// The statement of `op` over its operands in order (a scalar operand in its place): each
// converted to the dtype the op reads, then the op table's math (where: a select; cast,
// contiguous and full: the converted operand itself).
std::string op_expression(const Spelling& spelling, OpId op, const std::vector<Operand>& operands,
                          DType compute);

}  // namespace emit_detail
}  // namespace kiln::codegen
