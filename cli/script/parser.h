// The kiln script parser: recursive descent over the tokens of lexer.h, with Python's
// grammar and precedence, building the AST of ast.h.
#pragma once
#include <string>
#include <string_view>

#include "cli/script/ast.h"
#include "cli/script/source.h"

namespace kiln::script {

using ParseResult = Module;

// A whole file or REPL entry. Throws SyntaxError, whose what() reads like Python's.
ParseResult parse_program(std::string_view source, std::string filename = "<input>");

// One expression, e.g. the f(x) of the REPL's `:explain f(x)`. Throws SyntaxError.
ExprPtr parse_expression(std::string_view source, std::string filename = "<input>");

// For the REPL, given the lines read so far, each ending in '\n': false while they could
// still grow into a valid input, so it should show a '...' prompt and read another line.
// That is when the text ends inside a bracket, a triple-quoted string or after a '\', or
// inside a block (after a line ending in ':', or a def, if, for or while not yet closed by
// an empty line). True for an input with a real syntax error, so the REPL reports it now.
bool is_complete_input(std::string_view source);

}  // namespace kiln::script
