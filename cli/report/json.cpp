// The trace log's JSON reader (cli/report/json.h): recursive descent over one line.
#include "cli/report/json.h"

#include <cmath>
#include <cstdlib>

#include "tensor/error.h"

namespace kiln::report {
namespace {

const Json kNull;

struct Parser {
    const std::string& s;
    size_t i = 0;

    [[noreturn]] void fail_here(const std::string& what) const {
        std::string found = i < s.size() ? "'" + s.substr(i, 1) + "'" : "the end of the line";
        fail("column ", i + 1, ": expected ", what, ", found ", found);
    }
    void skip_space() {
        while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\n')) ++i;
    }
    void expect(char c) {
        skip_space();
        if (i >= s.size() || s[i] != c) fail_here(std::string("'") + c + "'");
        ++i;
    }
    bool literal(const char* word) {
        size_t n = std::char_traits<char>::length(word);
        if (s.compare(i, n, word) != 0) return false;
        i += n;
        return true;
    }
    static void append_utf8(std::string& out, unsigned code) {
        if (code < 0x80) {
            out += char(code);
        } else if (code < 0x800) {
            out += char(0xC0 | (code >> 6)), out += char(0x80 | (code & 0x3F));
        } else if (code < 0x10000) {
            out += char(0xE0 | (code >> 12)), out += char(0x80 | ((code >> 6) & 0x3F));
            out += char(0x80 | (code & 0x3F));
        } else {
            out += char(0xF0 | (code >> 18)), out += char(0x80 | ((code >> 12) & 0x3F));
            out += char(0x80 | ((code >> 6) & 0x3F)), out += char(0x80 | (code & 0x3F));
        }
    }
    unsigned hex4() {
        if (i + 4 > s.size()) fail_here("four hex digits after \\u");
        unsigned code = 0;
        for (int k = 0; k < 4; ++k, ++i) {
            char c = s[i];
            int d = c >= '0' && c <= '9'   ? c - '0'
                    : c >= 'a' && c <= 'f' ? c - 'a' + 10
                    : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                           : -1;
            if (d < 0) fail_here("a hex digit");
            code = code * 16 + unsigned(d);
        }
        return code;
    }
    std::string string() {
        expect('"');
        std::string out;
        while (true) {
            if (i >= s.size()) fail_here("'\"' to end the string");
            char c = s[i++];
            if (c == '"') return out;
            if (c != '\\') {
                out += c;
                continue;
            }
            if (i >= s.size()) fail_here("an escape");
            char e = s[i++];
            switch (e) {
                case 'n':
                    out += '\n';
                    break;
                case 't':
                    out += '\t';
                    break;
                case 'r':
                    out += '\r';
                    break;
                case 'b':
                    out += '\b';
                    break;
                case 'f':
                    out += '\f';
                    break;
                case '"':
                case '\\':
                case '/':
                    out += e;
                    break;
                case 'u': {
                    unsigned code = hex4();
                    if (code >= 0xD800 && code < 0xDC00 && s.compare(i, 2, "\\u") == 0) {
                        i += 2;
                        code = 0x10000 + ((code - 0xD800) << 10) + (hex4() - 0xDC00);
                    }
                    append_utf8(out, code);
                    break;
                }
                default:
                    --i, fail_here("an escape (\\n, \\\", \\u00e9, ...)");
            }
        }
    }
    Json value() {
        skip_space();
        if (i >= s.size()) fail_here("a value");
        char c = s[i];
        if (c == '{') return object();
        if (c == '[') return array();
        if (c == '"') return Json{string()};
        if (literal("true")) return Json{true};
        if (literal("false")) return Json{false};
        if (literal("null")) return Json{};
        if (c == '-' || (c >= '0' && c <= '9')) {
            const char* start = s.c_str() + i;
            char* end = nullptr;
            double d = std::strtod(start, &end);
            i += size_t(end - start);
            return Json{d};
        }
        fail_here("a value");
    }
    Json array() {
        expect('[');
        auto out = std::make_shared<Json::Array>();
        skip_space();
        if (i < s.size() && s[i] == ']') return ++i, Json{out};
        while (true) {
            out->push_back(value());
            skip_space();
            if (i < s.size() && s[i] == ']') return ++i, Json{out};
            if (i >= s.size() || s[i] != ',') fail_here("',' or ']'");
            ++i;
        }
    }
    Json object() {
        expect('{');
        auto out = std::make_shared<Json::Object>();
        skip_space();
        if (i < s.size() && s[i] == '}') return ++i, Json{out};
        while (true) {
            skip_space();
            if (i >= s.size() || s[i] != '"') fail_here("a key in quotes");
            std::string key = string();
            expect(':');
            (*out)[key] = value();
            skip_space();
            if (i < s.size() && s[i] == '}') return ++i, Json{out};
            if (i >= s.size() || s[i] != ',') fail_here("',' or '}'");
            ++i;
        }
    }
};

}  // namespace

const Json& Json::operator[](const std::string& key) const {
    if (!is_object()) return kNull;
    const Object& o = object();
    auto it = o.find(key);
    return it == o.end() ? kNull : it->second;
}
bool Json::has(const std::string& key) const { return is_object() && object().count(key); }
const Json::Array& Json::array() const {
    static const Array empty;
    return is_array() ? *std::get<4>(value) : empty;
}
const Json::Object& Json::object() const {
    static const Object empty;
    return is_object() ? *std::get<5>(value) : empty;
}
std::string Json::str() const {
    switch (value.index()) {
        case 1:
            return std::get<1>(value) ? "true" : "false";
        case 2: {
            double d = std::get<2>(value);
            if (std::floor(d) == d && std::fabs(d) < 1e15)
                return std::to_string(static_cast<long long>(d));
            std::string t = std::to_string(d);
            while (t.size() > 1 && t.back() == '0') t.pop_back();
            return t;
        }
        case 3:
            return std::get<3>(value);
        default:
            return "";
    }
}
double Json::num(double fallback) const { return is_number() ? std::get<2>(value) : fallback; }

Json json_parse(const std::string& text) {
    Parser p{text};
    Json v = p.value();
    p.skip_space();
    if (p.i != text.size()) p.fail_here("the end of the line after one JSON value");
    return v;
}

}  // namespace kiln::report
