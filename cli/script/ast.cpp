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

namespace {
thread_local std::vector<ExprPtr> g_pending_release;  // left operands waiting to be freed
thread_local bool g_releasing = false;
}  // namespace

Expr::~Expr() {
    // The object is being destroyed, so its node may be emptied even though it was const.
    if (auto* op = std::get_if<BinOp>(&node); op && op->left) g_pending_release.push_back(std::move(op->left));
    if (g_releasing) return;
    g_releasing = true;
    while (!g_pending_release.empty()) {
        ExprPtr next = std::move(g_pending_release.back());
        g_pending_release.pop_back();
    }  // freeing `next` may queue its own left operand
    g_releasing = false;
}

}  // namespace kiln::script
