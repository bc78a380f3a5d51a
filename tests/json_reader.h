// JSON for tests (the trace log, docs/trace.md): parse_json() reads a text with kiln's own
// reader (cli/report/json.h) into a Json whose accessors throw on a missing field or a wrong
// kind, so a test checks each field it reads; malformed input throws std::runtime_error.
#pragma once
#include <cstdlib>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

#include "cli/report/json.h"
#include "tensor/error.h"

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

// The tree of kiln's own reader (cli/report/json.h, the one `kiln report` uses), seen through
// the strict accessors above.
inline Json from_report(const kiln::report::Json& j) {
    Json v;
    if (j.is_object()) {
        v.kind = Json::Kind::object;
        for (const auto& [k, x] : j.object()) v.fields.emplace(k, from_report(x));
    } else if (j.is_array()) {
        v.kind = Json::Kind::array;
        for (const auto& x : j.array()) v.items.push_back(from_report(x));
    } else if (j.is_string()) {
        v.kind = Json::Kind::string, v.str = j.str();
    } else if (j.is_number()) {
        v.kind = Json::Kind::number, v.num = j.num();
    } else if (!j.is_null()) {
        v.kind = Json::Kind::boolean, v.b = std::get<bool>(j.value);
    }
    return v;
}

inline Json parse_json(const std::string& text) {
    try {
        return from_report(kiln::report::json_parse(text));
    } catch (const kiln::Error& e) {
        throw std::runtime_error(std::string("json: ") + e.what());
    }
}

}  // namespace kiln_test
