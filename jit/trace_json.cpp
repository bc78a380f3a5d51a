// The compile log's JSON writer (jit/trace_log.h): escaped strings, arrays, objects.
#include <cmath>
#include <cstdio>

#include "jit/trace_log.h"

namespace kiln::jit::trace_log {

std::string quote(std::string_view s) {
    std::string out = "\"";
    for (unsigned char c : s) {
        switch (c) {
            case '"':
                out += "\\\"";
                break;
            case '\\':
                out += "\\\\";
                break;
            case '\n':
                out += "\\n";
                break;
            case '\t':
                out += "\\t";
                break;
            case '\r':
                out += "\\r";
                break;
            default:
                if (c < 0x20) {
                    char buf[8];
                    std::snprintf(buf, sizeof buf, "\\u%04x", c);
                    out += buf;
                } else {
                    out += char(c);
                }
        }
    }
    return out + "\"";
}

std::string array(const std::vector<std::string>& items) {
    std::string out = "[";
    for (size_t i = 0; i < items.size(); ++i) out += (i ? "," : "") + items[i];
    return out + "]";
}

std::string string_array(const std::vector<std::string>& items) {
    std::vector<std::string> q;
    for (const std::string& s : items) q.push_back(quote(s));
    return array(q);
}

Json& Json::raw(std::string_view key, std::string_view json) {
    if (!body_.empty()) body_ += ",";
    body_ += quote(key);
    body_ += ":";
    body_ += json;
    return *this;
}
Json& Json::raw_fields(std::string_view fields) {
    if (fields.empty()) return *this;
    if (!body_.empty()) body_ += ",";
    body_ += fields;
    return *this;
}
Json& Json::str(std::string_view key, std::string_view value) { return raw(key, quote(value)); }
Json& Json::num(std::string_view key, double value) {
    if (!std::isfinite(value)) return raw(key, "null");
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.6g", value);
    return raw(key, buf);
}

}  // namespace kiln::jit::trace_log
