// Printing the kiln script AST for tests and debugging: one line per statement, blocks
// indented by two spaces, each expression as one S-expression:
//   def foo (x y=1 *args)
//     assign a = (call (. torch sin) x)
//     return (+ a (neg (** b 2)))
// Expressions: names and literals as written ("strings" quoted, floats always with a '.' or
// an exponent); (op left right) for binary operators; (neg x) (pos x) (not x); (< a b) for one
// comparison and (chain a < b <= c) for more, with not-in and is-not; (and a b c);
// (if test if_true if_false); (. object name); (call f arg *unpacked name=value); (index x i);
// (slice lower upper step) with _ for an omitted part; (list ...) (tuple ...)
// (dict (key value) ...).
#pragma once
#include <string>

#include "cli/script/ast.h"

namespace kiln::script {

std::string dump(const Module& module);
std::string dump(const Stmt& stmt);  // with its nested blocks; each line ends in '\n'
std::string dump(const Expr& expr);  // one line, no '\n'

}  // namespace kiln::script
