// A small JSON reader for tests (the trace log, docs/trace.md): parse() a text into a Json
// value; throws std::runtime_error naming the offset on malformed input.
#pragma once
#include <cstdlib>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace kiln_test {

struct Json {
    enum class Kind { null, boolean, number, string, array, object } kind = Kind::null;
    bool b = false;
    double num = 0;
    std::string str;
    std::vector<Json> items;
    std::map<std::string, Json> fields;

    bool has(const std::string& k) const { return kind == Kind::object && fields.count(k) > 0; }
    const Json& operator[](const std::string& k) const {
        auto it = fields.find(k);
        if (kind != Kind::object || it == fields.end())
            throw std::runtime_error("json: no field '" + k + "'");
        return it->second;
    }
    const Json& operator[](size_t i) const { return items.at(i); }
    size_t size() const { return kind == Kind::array ? items.size() : fields.size(); }
    const std::string& s() const {
        if (kind != Kind::string) throw std::runtime_error("json: not a string");
        return str;
    }
    double n() const {
        if (kind != Kind::number) throw std::runtime_error("json: not a number");
        return num;
    }
};

class JsonParser {
   public:
    explicit JsonParser(const std::string& text) : t_(text) {}
    Json parse() {
        Json v = value();
        ws();
        if (i_ != t_.size()) fail("trailing text");
        return v;
    }

   private:
    [[noreturn]] void fail(const std::string& what) {
        throw std::runtime_error("json: " + what + " at offset " + std::to_string(i_));
    }
    void ws() {
        while (i_ < t_.size() &&
               (t_[i_] == ' ' || t_[i_] == '\n' || t_[i_] == '\t' || t_[i_] == '\r'))
            ++i_;
    }
    char peek() {
        ws();
        if (i_ >= t_.size()) fail("unexpected end");
        return t_[i_];
    }
    void expect(char c) {
        if (peek() != c) fail(std::string("expected '") + c + "'");
        ++i_;
    }
    bool word(const char* w) {
        std::string s(w);
        if (t_.compare(i_, s.size(), s) != 0) return false;
        i_ += s.size();
        return true;
    }
    std::string string() {
        expect('"');
        std::string out;
        while (true) {
            if (i_ >= t_.size()) fail("unterminated string");
            char c = t_[i_++];
            if (c == '"') return out;
            if (static_cast<unsigned char>(c) < 0x20) fail("control character in string");
            if (c != '\\') {
                out += c;
                continue;
            }
            if (i_ >= t_.size()) fail("unterminated escape");
            char e = t_[i_++];
            switch (e) {
                case '"':
                    out += '"';
                    break;
                case '\\':
                    out += '\\';
                    break;
                case '/':
                    out += '/';
                    break;
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
                case 'u': {
                    if (i_ + 4 > t_.size()) fail("short \\u escape");
                    unsigned code = unsigned(std::stoul(t_.substr(i_, 4), nullptr, 16));
                    i_ += 4;
                    if (code < 0x80)
                        out += char(code);
                    else if (code < 0x800)
                        out += char(0xC0 | (code >> 6)), out += char(0x80 | (code & 0x3F));
                    else
                        out += char(0xE0 | (code >> 12)), out += char(0x80 | ((code >> 6) & 0x3F)),
                            out += char(0x80 | (code & 0x3F));
                    break;
                }
                default:
                    fail("bad escape");
            }
        }
    }
    Json value() {
        Json v;
        char c = peek();
        if (c == '{') {
            v.kind = Json::Kind::object;
            ++i_;
            if (peek() == '}') return ++i_, v;
            while (true) {
                std::string k = string();
                expect(':');
                if (v.fields.count(k)) fail("duplicate key '" + k + "'");
                v.fields[k] = value();
                if (peek() == ',') {
                    ++i_;
                    continue;
                }
                expect('}');
                return v;
            }
        }
        if (c == '[') {
            v.kind = Json::Kind::array;
            ++i_;
            if (peek() == ']') return ++i_, v;
            while (true) {
                v.items.push_back(value());
                if (peek() == ',') {
                    ++i_;
                    continue;
                }
                expect(']');
                return v;
            }
        }
        if (c == '"') {
            v.kind = Json::Kind::string;
            v.str = string();
            return v;
        }
        if (word("true")) return v.kind = Json::Kind::boolean, v.b = true, v;
        if (word("false")) return v.kind = Json::Kind::boolean, v;
        if (word("null")) return v;
        size_t start = i_;
        while (i_ < t_.size() && std::string("+-0123456789.eE").find(t_[i_]) != std::string::npos)
            ++i_;
        if (start == i_) fail("unexpected character");
        v.kind = Json::Kind::number;
        v.num = std::strtod(t_.substr(start, i_ - start).c_str(), nullptr);
        return v;
    }
    const std::string& t_;
    size_t i_ = 0;
};

inline Json parse_json(const std::string& text) { return JsonParser(text).parse(); }

}  // namespace kiln_test
