// Choosing the prelude of a generated CPU translation unit (codegen/prelude.h).
#include "codegen/prelude.h"

#include <cctype>
#include <cstdlib>
#include <cstring>
#include <set>

#include "codegen/emit_cpp_prelude.h"
#include "tensor/pointwise_math.h"

namespace kiln::codegen {

namespace {

// The math table's functions the lean prelude has no SIMD form of. It has those of `cpu`
// column fast (tensor/fast_math.h, shared with the eager kernels) and abs, sqrt, fmod; the
// helpers it also has (maximum, minimum, sign, neg, remainder, select) are not in the table's
// function list. Everything else in the list needs xsimd.
const std::set<std::string, std::less<>>& xsimd_only_functions() {
    static const std::set<std::string, std::less<>> names = [] {
        std::set<std::string, std::less<>> all{"pow"};
#define KILN_MATH(name, arity, cpu, cuda_float, cuda_double, ints) \
    if (std::string_view(#cpu) != "fast") all.insert(#name);
#include "tensor/math_functions.def"
        for (const char* lean : {"abs", "sqrt", "fmod"}) all.erase(lean);  // the lean prelude has these
        return all;
    }();
    return names;
}

bool word_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

}  // namespace

bool needs_full_prelude(std::string_view body) {
    const auto& names = xsimd_only_functions();
    for (size_t i = 0; i < body.size();) {
        if (!word_char(body[i]) || (i > 0 && (word_char(body[i - 1]) || body[i - 1] == '.'))) {
            ++i;
            continue;
        }
        size_t j = i;
        while (j < body.size() && word_char(body[j])) ++j;
        size_t k = j;
        while (k < body.size() && body[k] == ' ') ++k;
        if (k < body.size() && body[k] == '(' && names.count(body.substr(i, j - i)) != 0)
            return true;
        i = j;
    }
    return false;
}

std::string cpu_prelude_for(std::string_view body) {
    const char* setting = std::getenv("KILN_LEAN_PRELUDE");
    bool lean_allowed = setting == nullptr || std::strcmp(setting, "0") != 0;
    bool lean = lean_allowed && !needs_full_prelude(body);
    return std::string(lean ? kPreludeLean : kPreludeFull) + kPreludeCommon;
}

}  // namespace kiln::codegen
