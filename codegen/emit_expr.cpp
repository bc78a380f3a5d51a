// The statement of one op (codegen/emit_expr.h): the op table's math with its operands
// converted as eager converts them.
#include "codegen/emit_expr.h"

#include <cctype>
#include <cstdio>

#include "tensor/reductions.h"

namespace kiln::codegen {

std::string finite_double_literal(double value) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.17g", value);
    std::string text = buf;
    if (text.find_first_of(".en") == std::string::npos) text += ".0";
    return value < 0 ? "(" + text + ")" : text;
}

std::string math_text(const std::string& math, const std::string& x, const std::string& y) {
    std::string out;
    size_t i = 0;
    auto word_char = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
    while (i < math.size()) {
        char c = math[i];
        size_t j = i + 1;
        if (std::isdigit(static_cast<unsigned char>(c))) {  // a literal such as 1.f: copy whole
            while (j < math.size() && (word_char(math[j]) || math[j] == '.')) ++j;
            out += math.substr(i, j - i);
        } else if (word_char(c)) {
            while (j < math.size() && word_char(math[j])) ++j;
            std::string word = math.substr(i, j - i);
            out += word == "x" ? x : word == "y" ? y : word;
        } else {
            out += c;
        }
        i = j;
    }
    return out;
}

namespace emit_detail {

std::string reduction_combine(OpId op, const std::string& acc, const std::string& v) {
    return math_text(kiln::reduction_combine(op), acc, v);  // tensor/reductions.def
}

std::string op_expression(const Spelling& spelling, OpId op, const std::vector<Operand>& operands,
                          DType compute) {
    std::vector<std::string> xs;
    for (size_t i = 0; i < operands.size(); ++i) {
        DType want = operand_dtype(op, i, compute);
        xs.push_back(operands[i].dtype == want ? operands[i].text
                                               : spelling.convert(operands[i].text, want));
    }
    spelling.prepare_operands(xs, op, compute);
    if (op == OpId::where) return spelling.select(xs[0], xs[1], xs[2]);
    const char* math = op_info(op).math;
    if (!math) return xs[0];  // contiguous / cast / full: the (converted) value itself
    return spelling.result(math_text(math, xs[0], xs.size() > 1 ? xs[1] : ""), op, compute);
}

}  // namespace emit_detail
}  // namespace kiln::codegen
