// Positions in kiln script source and SyntaxError, which prints the offending line with a
// caret the way Python does. The interpreter reuses format_location for its runtime errors.
#pragma once
#include <string>
#include <string_view>

#include "tensor/error.h"

namespace kiln::script {

// 1-based; columns count bytes, so a tab is one column.
struct Pos {
    int line = 1;
    int column = 1;
};

// Whether an error was caused by the input ending early: the REPL then asks for more lines
// instead of printing the error (see is_complete_input).
enum class EndOfInput {
    no,            // a real error: more input cannot fix it
    open_block,    // a block or a decorator waits for its body: an empty line ends it
    open_bracket,  // inside (), [], {}, a triple-quoted string or after a '\': keep reading
};

class SyntaxError : public kiln::Error {
   public:
    SyntaxError(const std::string& message, std::string_view filename, std::string_view source,
                Pos pos, EndOfInput eof = EndOfInput::no);

    const std::string& kind() const { return kind_; }        // Python's class name
    const std::string& message() const { return message_; }  // without the location lines
    Pos pos() const { return pos_; }
    EndOfInput end_of_input() const { return eof_; }

   protected:
    SyntaxError(std::string kind, const std::string& message, std::string_view filename,
                std::string_view source, Pos pos, EndOfInput eof);

   private:
    std::string kind_;
    std::string message_;
    Pos pos_;
    EndOfInput eof_;
};

// Python's IndentationError: an unexpected indent, an unindent that matches no block, a
// missing indented block. A SyntaxError (in C++ and in script), so catching that catches it.
class IndentationError : public SyntaxError {
   public:
    IndentationError(const std::string& message, std::string_view filename, std::string_view source,
                     Pos pos);
};

// The lines that locate an error, ending in '\n':
//   File "demo.ks", line 3, column 9
//     y = (x +
//             ^
std::string format_location(std::string_view filename, std::string_view source, Pos pos);

}  // namespace kiln::script
