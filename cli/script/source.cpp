// Formatting of source locations for SyntaxError and the interpreter's runtime errors.
#include "cli/script/source.h"

#include <algorithm>
#include <utility>

namespace kiln::script {

namespace {

// The text of 1-based line `line`, without its newline; empty when there is no such line.
std::string_view source_line(std::string_view source, int line) {
    size_t start = 0;
    for (int i = 1; i < line; ++i) {
        size_t newline = source.find('\n', start);
        if (newline == std::string_view::npos) return {};
        start = newline + 1;
    }
    size_t end = std::min(source.find('\n', start), source.size());
    std::string_view text = source.substr(start, end - start);
    if (!text.empty() && text.back() == '\r') text.remove_suffix(1);
    return text;
}

}  // namespace

std::string format_location(std::string_view filename, std::string_view source, Pos pos) {
    std::string out = "  File \"" + std::string(filename) + "\", line " + std::to_string(pos.line) +
                      ", column " + std::to_string(pos.column) + "\n";
    std::string_view text = source_line(source, pos.line);
    // Like Python, show the line without its indentation and move the caret to match.
    size_t indent = std::min(text.find_first_not_of(" \t\f"), text.size());
    std::string shown(text.substr(indent));
    if (shown.empty()) return out;
    std::replace(shown.begin(), shown.end(), '\t', ' ');  // one column each, so the caret lines up
    size_t caret = size_t(std::max(pos.column - 1, 0));
    caret = std::min(caret > indent ? caret - indent : 0, shown.size());
    // A NUL byte would end the message wherever it is printed as a C string (what()):
    // show it as \0, and move the caret past the extra character.
    std::string escaped;
    size_t shifted_caret = caret;
    for (size_t i = 0; i < shown.size(); ++i) {
        if (shown[i] != '\0') {
            escaped += shown[i];
            continue;
        }
        escaped += "\\0";
        if (i < caret) ++shifted_caret;
    }
    shown = std::move(escaped);
    caret = shifted_caret;
    out += "    " + shown + "\n";
    out += "    " + std::string(caret, ' ') + "^\n";
    return out;
}

SyntaxError::SyntaxError(const std::string& message, std::string_view filename,
                         std::string_view source, Pos pos, EndOfInput eof)
    : SyntaxError("SyntaxError", message, filename, source, pos, eof) {}

SyntaxError::SyntaxError(std::string kind, const std::string& message, std::string_view filename,
                         std::string_view source, Pos pos, EndOfInput eof)
    : kiln::Error(format_location(filename, source, pos) + kind + ": " + message),
      kind_(std::move(kind)),
      message_(message),
      pos_(pos),
      eof_(eof) {}

IndentationError::IndentationError(const std::string& message, std::string_view filename,
                                   std::string_view source, Pos pos)
    : SyntaxError("IndentationError", message, filename, source, pos, EndOfInput::no) {}

}  // namespace kiln::script
