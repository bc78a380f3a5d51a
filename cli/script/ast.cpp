// Spellings of the AST's operators, generated from the lists in ast.h.
#include "cli/script/ast.h"

namespace kiln::script {

#define KILN_SCRIPT_CASE(name, text) \
    case Op::name: return text;

std::string_view spelling(BinaryOperator op) {
    using Op = BinaryOperator;
    switch (op) { KILN_SCRIPT_BINARY_OPS(KILN_SCRIPT_CASE) }
    return "?";
}

std::string_view spelling(UnaryOperator op) {
    using Op = UnaryOperator;
    switch (op) { KILN_SCRIPT_UNARY_OPS(KILN_SCRIPT_CASE) }
    return "?";
}

std::string_view spelling(CompareOperator op) {
    using Op = CompareOperator;
    switch (op) { KILN_SCRIPT_COMPARE_OPS(KILN_SCRIPT_CASE) }
    return "?";
}

std::string_view spelling(BoolOperator op) {
    using Op = BoolOperator;
    switch (op) { KILN_SCRIPT_BOOL_OPS(KILN_SCRIPT_CASE) }
    return "?";
}

#undef KILN_SCRIPT_CASE

}  // namespace kiln::script
