// Python's arithmetic on kiln script's numbers. Ints are 64-bit, not arbitrary precision:
// every int operation is exact, and one whose true result does not fit raises
// OverflowError instead of wrapping or going through a double. Errors are RaisedError
// (limits.h), which the interpreter turns into a traceback.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "cli/script/ast.h"

namespace kiln::interp {

// a op b for two ints, exactly as Python computes it (floor division and modulo take the
// sign of the divisor; a negative exponent gives a float; a true division is correctly
// rounded). Returns an int or a float in `is_float`/`float_result`.
struct NumberResult {
    bool is_float = false;
    int64_t int_result = 0;
    double float_result = 0;
};
NumberResult int_binary(script::BinaryOperator op, int64_t a, int64_t b);
double float_binary(script::BinaryOperator op, double a, double b);
int64_t int_negate(int64_t a);

// Exact comparison of an int with a float, as Python does (2**53 + 1 != 2.0**53):
// -1, 0 or 1; nullopt when f is NaN (every ordering is false).
std::optional<int> compare_int_float(int64_t i, double f);
// Exact int/int true division, correctly rounded (Python's int.__truediv__).
double int_true_divide(int64_t a, int64_t b);

// int(x) of a float: truncates toward zero; ValueError for NaN, OverflowError for
// infinities and values outside the 64-bit range.
int64_t float_to_int(double x);
// int("12") and float(" 1e3 "): the whole text must be a number, as in Python; nullopt
// when it is not. An int literal too large for 64 bits raises OverflowError.
std::optional<int64_t> parse_int(const std::string& text);
std::optional<double> parse_float(const std::string& text);

}  // namespace kiln::interp
