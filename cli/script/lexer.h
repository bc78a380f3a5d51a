// The kiln script lexer: source text to tokens, with Python's rules for NEWLINE, INDENT and
// DEDENT (leading spaces open and close blocks; newlines inside (), [], {} are ignored).
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "cli/script/source.h"

namespace kiln::script {

// Every token kind, listed once with how it is spelled in errors and in source.
// clang-format off
#define KILN_SCRIPT_TOKENS(X)     \
    X(end, "end of input")        \
    X(newline, "end of line")     \
    X(indent, "indent")           \
    X(dedent, "dedent")           \
    X(name, "name")               \
    X(number, "number")           \
    X(string, "string")           \
    X(fstring, "f-string")        /* text: the raw body, escapes decoded, braces kept */ \
    X(reserved, "reserved word") /* a Python keyword kiln script does not support */

#define KILN_SCRIPT_KEYWORDS(X)                                                               \
    X(kw_def, "def") X(kw_return, "return") X(kw_if, "if") X(kw_elif, "elif")                 \
    X(kw_else, "else") X(kw_for, "for") X(kw_in, "in") X(kw_while, "while")                   \
    X(kw_break, "break") X(kw_continue, "continue") X(kw_pass, "pass") X(kw_and, "and")       \
    X(kw_or, "or") X(kw_not, "not") X(kw_is, "is") X(kw_none, "None") X(kw_true, "True")      \
    X(kw_false, "False") X(kw_import, "import") X(kw_from, "from") X(kw_as, "as")             \
    X(kw_assert, "assert") X(kw_class, "class") X(kw_try, "try") X(kw_except, "except")   \
    X(kw_finally, "finally") X(kw_raise, "raise") X(kw_with, "with") X(kw_lambda, "lambda")  \
    X(kw_global, "global") X(kw_nonlocal, "nonlocal") X(kw_del, "del")

#define KILN_SCRIPT_OPERATORS(X)                                                              \
    X(plus, "+") X(minus, "-") X(star, "*") X(slash, "/") X(slash_slash, "//")                \
    X(percent, "%") X(star_star, "**") X(at, "@") X(eq, "==") X(ne, "!=") X(lt, "<")          \
    X(le, "<=") X(gt, ">") X(ge, ">=") X(assign, "=") X(plus_assign, "+=")                    \
    X(minus_assign, "-=") X(star_assign, "*=") X(slash_assign, "/=")                          \
    X(slash_slash_assign, "//=") X(percent_assign, "%=") X(star_star_assign, "**=")           \
    X(at_assign, "@=") X(dot, ".") X(comma, ",") X(colon, ":") X(lparen, "(") X(rparen, ")") \
    X(lbracket, "[") X(rbracket, "]") X(lbrace, "{") X(rbrace, "}") X(arrow, "->") \
    X(semicolon, ";")
// clang-format on

enum class Tok {
#define KILN_SCRIPT_ENUM(name, spelling) name,
    KILN_SCRIPT_TOKENS(KILN_SCRIPT_ENUM) KILN_SCRIPT_KEYWORDS(KILN_SCRIPT_ENUM)
        KILN_SCRIPT_OPERATORS(KILN_SCRIPT_ENUM)
#undef KILN_SCRIPT_ENUM
};

std::string_view spelling(Tok kind);  // "def", "+=", "end of line"

struct Token {
    Tok kind = Tok::end;
    std::string text;  // a name or reserved word as written, a number's digits, a string's
                       // value with escapes decoded; empty for the rest
    Pos pos;           // the first character
    Pos end;           // just past the last character
};

// The whole token stream, ending in Tok::end. Every line with tokens ends in a newline token,
// and every indent is matched by a dedent before the end. Throws SyntaxError.
std::vector<Token> tokenize(std::string_view source, std::string_view filename);

}  // namespace kiln::script
