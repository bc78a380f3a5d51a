// HTML escaping and the C++/CUDA highlighter of the report (cli/report/html.h).
#include "cli/report/html.h"

#include <cctype>
#include <set>

namespace kiln::report {
namespace {

const std::set<std::string> kKeywords = {
    "if",         "else",     "for",        "while",           "do",
    "return",     "break",    "continue",   "switch",          "case",
    "default",    "const",    "constexpr",  "static",          "inline",
    "extern",     "struct",   "class",      "namespace",       "using",
    "template",   "typename", "auto",       "sizeof",          "true",
    "false",      "nullptr",  "restrict",   "__restrict__",    "__global__",
    "__device__", "__host__", "__shared__", "__forceinline__", "__syncthreads",
    "#pragma",    "typedef",  "volatile",   "noexcept",        "operator",
    "new",        "delete"};
const std::set<std::string> kTypes = {
    "void",     "bool",     "char",   "short",   "int",      "long",    "float",
    "double",   "unsigned", "signed", "size_t",  "int64_t",  "int32_t", "uint8_t",
    "uint32_t", "uint64_t", "int8_t", "int16_t", "half",     "__half",  "__nv_bfloat16",
    "dim3",     "float4",   "float2", "batch",   "ptrdiff_t"};

bool ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

struct Token {
    std::string klass, text;  // klass empty: plain text
};

std::vector<Token> tokenize(const std::string& s) {
    std::vector<Token> out;
    size_t i = 0;
    auto plain = [&](const std::string& t) {
        if (!out.empty() && out.back().klass.empty())
            out.back().text += t;
        else
            out.push_back({"", t});
    };
    bool line_start = true;
    while (i < s.size()) {
        char c = s[i];
        size_t j = i;
        if (c == '/' && i + 1 < s.size() && s[i + 1] == '/') {
            j = s.find('\n', i);
            if (j == std::string::npos) j = s.size();
            out.push_back({"com", s.substr(i, j - i)});
        } else if (c == '/' && i + 1 < s.size() && s[i + 1] == '*') {
            j = s.find("*/", i + 2);
            j = j == std::string::npos ? s.size() : j + 2;
            out.push_back({"com", s.substr(i, j - i)});
        } else if (c == '#' && line_start) {
            j = s.find('\n', i);
            if (j == std::string::npos) j = s.size();
            out.push_back({"pre", s.substr(i, j - i)});
        } else if (c == '"' || c == '\'') {
            j = i + 1;
            while (j < s.size() && s[j] != c && s[j] != '\n') j += s[j] == '\\' ? 2 : 1;
            j = std::min(s.size(), j + 1);
            out.push_back({"str", s.substr(i, j - i)});
        } else if (std::isdigit(static_cast<unsigned char>(c)) ||
                   (c == '.' && i + 1 < s.size() &&
                    std::isdigit(static_cast<unsigned char>(s[i + 1])))) {
            while (j < s.size() &&
                   (ident_char(s[j]) || s[j] == '.' ||
                    ((s[j] == '+' || s[j] == '-') && (s[j - 1] == 'e' || s[j - 1] == 'E'))))
                ++j;
            out.push_back({"num", s.substr(i, j - i)});
        } else if (ident_char(c)) {
            while (j < s.size() && ident_char(s[j])) ++j;
            std::string word = s.substr(i, j - i);
            out.push_back({kKeywords.count(word) ? "kw" : kTypes.count(word) ? "ty" : "", word});
            if (out.back().klass.empty()) out.pop_back(), plain(word);
        } else {
            j = i + 1;
            plain(std::string(1, c));
        }
        if (c == '\n')
            line_start = true;
        else if (!std::isspace(static_cast<unsigned char>(c)))
            line_start = false;
        i = j;
    }
    return out;
}

}  // namespace

std::string html_escape(const std::string& text) {
    std::string out;
    out.reserve(text.size());
    for (char c : text) {
        switch (c) {
            case '&':
                out += "&amp;";
                break;
            case '<':
                out += "&lt;";
                break;
            case '>':
                out += "&gt;";
                break;
            case '"':
                out += "&quot;";
                break;
            case '\'':
                out += "&#39;";
                break;
            default:
                out += c;
        }
    }
    return out;
}

std::vector<std::string> highlight_cpp(const std::string& source) {
    std::vector<std::string> lines(1);
    for (const Token& t : tokenize(source)) {
        size_t start = 0;
        while (true) {
            size_t nl = t.text.find('\n', start);
            std::string piece =
                t.text.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
            if (!piece.empty())
                lines.back() += t.klass.empty() ? html_escape(piece)
                                                : "<span class=\"tok-" + t.klass + "\">" +
                                                      html_escape(piece) + "</span>";
            if (nl == std::string::npos) break;
            lines.emplace_back();
            start = nl + 1;
        }
    }
    if (lines.size() > 1 && lines.back().empty() && !source.empty() && source.back() == '\n')
        lines.pop_back();
    return lines;
}

}  // namespace kiln::report
