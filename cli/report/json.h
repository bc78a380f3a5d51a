// A small JSON reader for the trace log (docs/trace.md): one value per line, parsed into a
// tree. Errors say where (column) and what was expected; the caller adds the file and line.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

namespace kiln::report {

struct Json {
    using Array = std::vector<Json>;
    using Object = std::map<std::string, Json>;
    std::variant<std::monostate, bool, double, std::string, std::shared_ptr<Array>,
                 std::shared_ptr<Object>>
        value;

    bool is_null() const { return value.index() == 0; }
    bool is_number() const { return value.index() == 2; }
    bool is_string() const { return value.index() == 3; }
    bool is_array() const { return value.index() == 4; }
    bool is_object() const { return value.index() == 5; }

    // Members of an object; a missing key (or a non-object) reads as null.
    const Json& operator[](const std::string& key) const;
    bool has(const std::string& key) const;
    const Array& array() const;    // empty when not an array
    const Object& object() const;  // empty when not an object
    // Scalars as text: a string as is, a whole number without ".0", null as "".
    std::string str() const;
    double num(double fallback = 0) const;
};

// Parses one JSON text; throws kiln::Error "column N: expected X" on bad input.
Json json_parse(const std::string& text);

}  // namespace kiln::report
