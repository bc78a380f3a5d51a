// Symbolic sizes at record time (dynamic shapes, docs/jit.md): which dims of an op's
// output are symbols, derived from its inputs' symbols and its symbolic attributes by
// the op's shape rule — never by comparing numbers.
//
// A size that one symbol cannot say (s0 - 1, 3*s0, s0 + s1), or an agreement between
// sizes that holds only for today's values (s0 broadcast against a static 5, a literal
// reshape that happens to fit), *pins* the symbols involved: the entry then guards their
// values, and the recording stays exact for every call it serves.
#pragma once
#include <span>
#include <vector>

#include "jit/graph.h"

namespace kiln::jit {

struct SymShape {
    std::vector<int> sym;  // per output dim: symbol id, or -1 (static)
    std::vector<int> pin;  // symbols whose values the recording now depends on
};

// `in`: the inputs' metas (pinned symbols already -1); `patches`: the node's symbolic
// attributes; `out`: the shape the eager kernel produced; `values`: the symbols' values.
SymShape infer_sym_shape(OpId op, const Attrs& attrs, std::span<const AttrPatch> patches,
                         std::span<const ValueMeta> in, const Shape& out, std::span<const int64_t> values);

}  // namespace kiln::jit
