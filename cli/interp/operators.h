// Operators of kiln script over Values: Python's rules for numbers, strings and lists,
// kiln ops (through the dispatcher) as soon as a Tensor is involved.
#pragma once
#include <optional>
#include <vector>

#include "cli/interp/interp.h"

namespace kiln::interp {

Value binary_op(Interp& in, script::BinaryOperator op, const Value& a, const Value& b);
Value unary_op(Interp& in, script::UnaryOperator op, const Value& a);
Value compare_op(Interp& in, script::CompareOperator op, const Value& a, const Value& b);

// One part of an evaluated index: x[i], x[a:b:c], or each part of x[i, a:b].
struct IndexPart {
    bool is_slice = false;
    Value value;                                 // when not a slice
    std::optional<int64_t> lower, upper, step;  // when a slice; nullopt when omitted
};
Value subscript(Interp& in, const Value& object, const std::vector<IndexPart>& index);
void subscript_assign(Interp& in, const Value& object, const std::vector<IndexPart>& index, const Value& v);

// The elements a `for` loop visits: list and tuple items, dict keys, string characters,
// the rows of a tensor.
std::vector<Value> iterate(Interp& in, const Value& v);

}  // namespace kiln::interp
