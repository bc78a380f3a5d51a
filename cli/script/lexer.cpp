// The kiln script lexer (see lexer.h): one pass over the text, tracking the indentation stack
// and the open brackets, which decide whether a newline ends a statement.
#include "cli/script/lexer.h"

#include <array>
#include <cstdio>
#include <optional>

namespace kiln::script {

namespace {

struct Spelled {
    Tok kind;
    std::string_view text;
};

#define KILN_SCRIPT_SPELLED(name, spelling) Spelled{Tok::name, spelling},
constexpr std::array kAllTokens = {KILN_SCRIPT_TOKENS(KILN_SCRIPT_SPELLED)
                                       KILN_SCRIPT_KEYWORDS(KILN_SCRIPT_SPELLED)
                                           KILN_SCRIPT_OPERATORS(KILN_SCRIPT_SPELLED)};
constexpr std::array kKeywords = {KILN_SCRIPT_KEYWORDS(KILN_SCRIPT_SPELLED)};
constexpr std::array kOperators = {KILN_SCRIPT_OPERATORS(KILN_SCRIPT_SPELLED)};
#undef KILN_SCRIPT_SPELLED

// Python keywords with no kiln script meaning: reserved so that using one gets a clear
// "not supported" error instead of a confusing one further on.
constexpr std::array<std::string_view, 3> kReserved = {"yield", "async", "await"};

// Limits like Python's: hand-written code never nests deeper, and the parser recurses once
// per level, so a deeper input could only overflow the C++ stack.
constexpr size_t kMaxBrackets = 100;
constexpr size_t kMaxIndentLevels = 100;

bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }
bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\f'; }
bool is_string_prefix(std::string_view text) {  // f"..", r"..", b"..", u"..", rb"..", ...
    return text.size() <= 2 && text.find_first_not_of("fFrRbBuU") == std::string_view::npos;
}

std::optional<Tok> find_spelling(auto& table, std::string_view text) {
    for (const Spelled& entry : table)
        if (entry.text == text) return entry.kind;
    return std::nullopt;
}

class Lexer {
   public:
    Lexer(std::string_view source, std::string_view filename)
        : source_(source), filename_(filename) {}

    std::vector<Token> run() {
        while (true) {
            if (at_line_start_ && brackets_.empty() && !read_indentation()) continue;
            at_line_start_ = false;
            while (!at_end() && is_blank(peek())) advance();
            if (at_end()) break;
            lex_one();
        }
        finish();
        return std::move(tokens_);
    }

   private:
    std::string_view source_;
    std::string_view filename_;
    size_t index_ = 0;  // next byte of source_
    Pos here_;          // position of source_[index_]
    bool at_line_start_ = true;
    bool line_has_tokens_ = false;
    std::vector<int> indents_{0};  // columns of the open blocks, innermost last
    struct Open {
        char bracket;
        Pos pos;
    };
    std::vector<Open> brackets_;
    Pos last_end_;  // end of the last real token: where "unexpected end of input" points
    std::vector<Token> tokens_;

    bool at_end() const { return index_ >= source_.size(); }
    char peek(size_t ahead = 0) const {
        return index_ + ahead < source_.size() ? source_[index_ + ahead] : '\0';
    }
    char advance() {
        char c = source_[index_++];
        if (c == '\n') {
            here_.line++;
            here_.column = 1;
        } else {
            here_.column++;
        }
        return c;
    }

    [[noreturn]] void fail(const std::string& message, Pos pos, EndOfInput eof = EndOfInput::no) {
        throw SyntaxError(message, filename_, source_, pos, eof);
    }

    void emit(Tok kind, Pos start, std::string text = {}) {
        tokens_.push_back(Token{kind, std::move(text), start, here_});
        if (kind != Tok::newline && kind != Tok::indent && kind != Tok::dedent) {
            last_end_ = here_;
            line_has_tokens_ = true;
        }
    }

    // At the start of a line outside brackets: measures its indentation and emits indents or
    // dedents. Returns false for a blank or comment-only line, which it consumes whole.
    bool read_indentation() {
        int width = 0;
        std::optional<Pos> tab;
        while (peek() == ' ' || peek() == '\t' || peek() == '\f') {
            if (peek() == '\t' && !tab) tab = here_;
            if (peek() == ' ') width++;
            advance();
        }
        if (at_end()) return true;
        if (peek() == '#') skip_comment();
        if (peek() == '\r') advance();
        if (peek() == '\n') {
            advance();
            return false;
        }
        if (at_end()) return true;
        if (tab) fail("tabs are not allowed in indentation; indent with spaces", *tab);
        change_indentation(width);
        return true;
    }

    void change_indentation(int width) {
        if (width > indents_.back()) {
            if (indents_.size() > kMaxIndentLevels)
                throw IndentationError("too many levels of indentation", filename_, source_, here_);
            indents_.push_back(width);
            emit(Tok::indent, here_);
            return;
        }
        while (width < indents_.back()) {
            indents_.pop_back();
            emit(Tok::dedent, here_);
        }
        if (width != indents_.back())
            throw IndentationError("unindent does not match any outer indentation level", filename_,
                                   source_, here_);
    }

    void skip_comment() {
        while (!at_end() && peek() != '\n') advance();
    }

    void lex_one() {
        char c = peek();
        if (c == '#') return skip_comment();
        if (c == '\\') return line_continuation();
        if (c == '\n') return end_of_line();
        if (is_digit(c) || (c == '.' && is_digit(peek(1)))) return lex_number();
        if (is_name_start(c)) return lex_name();
        if (c == '"' || c == '\'') return lex_string(here_, false, false);
        lex_operator();
    }

    // A '\' at the end of a line joins the next line to this one, as in Python.
    void line_continuation() {
        Pos pos = here_;
        advance();
        if (peek() == '\r') advance();
        if (at_end())
            fail("unexpected end of input after the line continuation '\\'", pos,
                 EndOfInput::open_bracket);
        if (peek() != '\n') fail("unexpected character after the line continuation '\\'", pos);
        advance();
        if (at_end())  // the REPL's next line will continue this one
            fail("unexpected end of input after the line continuation '\\'", pos,
                 EndOfInput::open_bracket);
    }

    void end_of_line() {
        Pos pos = here_;
        advance();
        if (!brackets_.empty()) return;  // implicit line joining
        if (line_has_tokens_) emit(Tok::newline, pos);
        line_has_tokens_ = false;
        at_line_start_ = true;
    }

    void lex_number() {
        Pos start = here_;
        size_t first = index_;
        while (is_digit(peek())) advance();
        if (peek() == '.') {
            advance();
            while (is_digit(peek())) advance();
        }
        if (peek() == 'e' || peek() == 'E') {
            size_t sign = (peek(1) == '+' || peek(1) == '-') ? 1 : 0;
            if (!is_digit(peek(1 + sign))) fail("invalid decimal literal", start);
            for (size_t i = 0; i < 1 + sign; ++i) advance();
            while (is_digit(peek())) advance();
        }
        if (is_name_char(peek()) || peek() == '.') fail("invalid decimal literal", start);
        emit(Tok::number, start, std::string(source_.substr(first, index_ - first)));
    }

    void lex_name() {
        Pos start = here_;
        size_t first = index_;
        while (is_name_char(peek())) advance();
        std::string text(source_.substr(first, index_ - first));
        if ((peek() == '"' || peek() == '\'') && is_string_prefix(text)) {
            // f"..", r"..", u"..", rf"..": formatted and raw strings; b".." has no meaning here.
            if (text.find_first_of("bB") != std::string::npos)
                fail("bytes literals (prefix '" + text + "') are not supported in kiln script", start);
            bool formatted = text.find_first_of("fF") != std::string::npos;
            bool raw = text.find_first_of("rR") != std::string::npos;
            if (formatted && text.find_first_of("uU") != std::string::npos)
                fail("string prefix '" + text + "' is not valid", start);
            return lex_string(start, formatted, raw);
        }
        if (auto keyword = find_spelling(kKeywords, text)) return emit(*keyword, start);
        for (std::string_view reserved : kReserved)
            if (text == reserved) return emit(Tok::reserved, start, text);
        emit(Tok::name, start, text);
    }

    // `start` is where the string's prefix (f, r) begins, if it has one.
    void lex_string(Pos start, bool formatted, bool raw) {
        char quote = advance();
        bool triple = peek() == quote && peek(1) == quote;
        if (triple) advance(), advance();
        std::string value;
        bool continued = false;  // the last line ended in a '\', so the REPL can add one
        while (true) {
            if (at_end())
                unterminated_string(start, triple,
                                    continued ? EndOfInput::open_bracket : EndOfInput::no);
            char c = peek();
            if (c == '\n' && !triple) unterminated_string(start, triple);
            if (c == quote && (!triple || (peek(1) == quote && peek(2) == quote))) break;
            advance();
            if (c == '\\' && raw) {
                value += c;  // a raw string keeps the backslash and the character after it
                if (!at_end() && (peek() == quote || peek() == '\\' || peek() == '\n')) value += advance();
                continued = false;
            } else if (c == '\\') {
                continued = read_escape(value, start, triple);
            } else {
                value += c;
                continued = false;
            }
        }
        for (int i = 0; i < (triple ? 3 : 1); ++i) advance();
        emit(formatted ? Tok::fstring : Tok::string, start, std::move(value));
    }

    // After a '\' in a string; returns true for a '\' that ends the line (the string goes on).
    bool read_escape(std::string& value, Pos start, bool triple) {
        if (at_end()) unterminated_string(start, triple, EndOfInput::open_bracket);
        char c = advance();
        switch (c) {
            case 'n': value += '\n'; break;
            case 't': value += '\t'; break;
            case 'r': value += '\r'; break;
            case '0': value += '\0'; break;
            case '\\': case '\'': case '"': value += c; break;
            case '\n': return true;
            default: value += '\\', value += c;  // unknown escapes stay as written, as in Python
        }
        return false;
    }

    [[noreturn]] void unterminated_string(Pos start, bool triple,
                                          EndOfInput eof = EndOfInput::no) {
        // Only a triple-quoted string may span lines, so only it can still be finished.
        if (triple)
            fail("unterminated triple-quoted string literal (it starts at line " +
                     std::to_string(start.line) + ")",
                 start, EndOfInput::open_bracket);
        fail("unterminated string literal", start, eof);
    }

    void lex_operator() {
        Pos start = here_;
        for (size_t length = 3; length >= 1; --length) {
            if (index_ + length > source_.size()) continue;
            auto kind = find_spelling(kOperators, source_.substr(index_, length));
            if (!kind) continue;
            for (size_t i = 0; i < length; ++i) advance();
            track_bracket(*kind, start);
            return emit(*kind, start);
        }
        invalid_character(start);
    }

    void track_bracket(Tok kind, Pos pos) {
        char c = source_[index_ - 1];
        if (kind == Tok::lparen || kind == Tok::lbracket || kind == Tok::lbrace) {
            if (brackets_.size() >= kMaxBrackets) fail("too many nested parentheses", pos);
            brackets_.push_back({c, pos});
            return;
        }
        if (kind != Tok::rparen && kind != Tok::rbracket && kind != Tok::rbrace) return;
        if (brackets_.empty()) fail(std::string("unmatched '") + c + "'", pos);
        Open open = brackets_.back();
        char expected = open.bracket == '(' ? ')' : open.bracket == '[' ? ']' : '}';
        if (c != expected)
            fail(std::string("closing '") + c + "' does not match '" + open.bracket +
                     "' opened at line " + std::to_string(open.pos.line),
                 pos);
        brackets_.pop_back();
    }

    [[noreturn]] void invalid_character(Pos pos) {
        char c = peek();
        std::string shown(1, c);
        if (c == '&' || c == '|' || c == '^' || c == '~')
            fail("operator '" + shown + "' is not supported in kiln script", pos);
        if (c == ';') fail("';' is not supported: put each statement on its own line", pos);
        if (c == '!') fail("invalid syntax: '!' (use 'not', or '!=' to compare)", pos);
        if (c < ' ' || c > '~') {
            char hex[8];
            std::snprintf(hex, sizeof hex, "0x%02x", unsigned(static_cast<unsigned char>(c)));
            fail(std::string("invalid character (byte ") + hex +
                     "): only ASCII is allowed outside strings and comments",
                 pos);
        }
        fail("invalid character '" + shown + "'", pos);
    }

    void finish() {
        if (!brackets_.empty()) {
            Open open = brackets_.back();
            fail(std::string("unexpected end of input: '") + open.bracket + "' opened at line " +
                     std::to_string(open.pos.line) + " is never closed",
                 last_end_, EndOfInput::open_bracket);
        }
        here_ = last_end_;  // the closing tokens point at the end of the last real token
        if (line_has_tokens_) emit(Tok::newline, last_end_);
        for (size_t i = 1; i < indents_.size(); ++i) emit(Tok::dedent, last_end_);
        tokens_.push_back(Token{Tok::end, {}, last_end_, last_end_});
    }
};

}  // namespace

std::string_view spelling(Tok kind) {
    for (const Spelled& entry : kAllTokens)
        if (entry.kind == kind) return entry.text;
    return "?";
}

std::vector<Token> tokenize(std::string_view source, std::string_view filename) {
    return Lexer(source, filename).run();
}

}  // namespace kiln::script
