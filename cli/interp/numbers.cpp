// Exact int arithmetic with overflow checks, Python's float floor division and modulo, and
// exact int/float comparison (see numbers.h).
#include "cli/interp/numbers.h"

#include <cerrno>
#include <charconv>
#include <climits>
#include <cmath>
#include <cctype>
#include <cstdlib>

#include "cli/interp/limits.h"

namespace kiln::interp {

using script::BinaryOperator;

namespace {

[[noreturn]] void overflow(const char* what) {
    throw RaisedError("OverflowError", std::string("integer overflow in ") + what + " (kiln script ints are 64-bit)");
}

// a op b, or OverflowError when the exact result does not fit in 64 bits.
int64_t checked_add(int64_t a, int64_t b) {
    int64_t r;
    if (__builtin_add_overflow(a, b, &r)) overflow("+");
    return r;
}
int64_t checked_sub(int64_t a, int64_t b) {
    int64_t r;
    if (__builtin_sub_overflow(a, b, &r)) overflow("-");
    return r;
}
int64_t checked_mul(int64_t a, int64_t b, const char* what) {
    int64_t r;
    if (__builtin_mul_overflow(a, b, &r)) overflow(what);
    return r;
}

// Python: the quotient rounded toward negative infinity; INT64_MIN // -1 is 2**63.
int64_t floor_div(int64_t a, int64_t b) {
    if (a == INT64_MIN && b == -1) overflow("//");
    int64_t q = a / b;
    if (a % b != 0 && ((a < 0) != (b < 0))) --q;
    return q;
}

// Python: the remainder has the sign of the divisor; INT64_MIN % -1 is 0.
int64_t floor_mod(int64_t a, int64_t b) {
    if (b == -1) return 0;  // a % -1 would trap on INT64_MIN (SIGFPE) and is 0 anyway
    int64_t r = a % b;
    if (r != 0 && ((r < 0) != (b < 0))) r += b;
    return r;
}

// Repeated squaring; every product is checked.
int64_t int_pow(int64_t base, int64_t exp) {
    int64_t result = 1;
    while (exp > 0) {
        if (exp & 1) result = checked_mul(result, base, "**");
        exp >>= 1;
        if (exp > 0) base = checked_mul(base, base, "**");
    }
    return result;
}

int bit_length(uint64_t x) { return x ? 64 - __builtin_clzll(x) : 0; }

}  // namespace

double int_true_divide(int64_t a, int64_t b) {
    if (b == 0) throw RaisedError("ZeroDivisionError", "division by zero");
    constexpr int64_t exact = int64_t(1) << 53;  // both exact as doubles: one rounding, correct
    if (a > -exact && a < exact && b > -exact && b < exact) return double(a) / double(b);
    bool negative = (a < 0) != (b < 0);
    uint64_t n = a < 0 ? uint64_t(0) - uint64_t(a) : uint64_t(a);
    uint64_t d = b < 0 ? uint64_t(0) - uint64_t(b) : uint64_t(b);
    if (n == 0) return negative ? -0.0 : 0.0;
    // Scale so the integer quotient has 55 to 57 bits: 53 for the mantissa, a rounding bit
    // and a sticky bit (set when the remainder is not zero). Converting that quotient to
    // double then rounds exactly as the true quotient would.
    int shift = 56 - (bit_length(n) - bit_length(d));
    unsigned __int128 num = n, den = d;
    if (shift >= 0) num <<= shift;
    else den <<= -shift;
    unsigned __int128 q = num / den, r = num % den;
    uint64_t q64 = uint64_t(q) | (r != 0 ? 1 : 0);
    double result = std::ldexp(double(q64), -shift);
    return negative ? -result : result;
}

NumberResult int_binary(BinaryOperator op, int64_t a, int64_t b) {
    auto zero_check = [&] {
        if (b == 0) throw RaisedError("ZeroDivisionError", "integer division or modulo by zero");
    };
    switch (op) {
        case BinaryOperator::add: return {.int_result = checked_add(a, b)};
        case BinaryOperator::sub: return {.int_result = checked_sub(a, b)};
        case BinaryOperator::mul: return {.int_result = checked_mul(a, b, "*")};
        case BinaryOperator::div: return {.is_float = true, .float_result = int_true_divide(a, b)};
        case BinaryOperator::floordiv: zero_check(); return {.int_result = floor_div(a, b)};
        case BinaryOperator::mod: zero_check(); return {.int_result = floor_mod(a, b)};
        case BinaryOperator::pow:
            if (b >= 0) return {.int_result = int_pow(a, b)};
            // A negative exponent gives a float, as in Python: 2 ** -1 == 0.5.
            if (a == 0) throw RaisedError("ZeroDivisionError", "0.0 cannot be raised to a negative power");
            return {.is_float = true, .float_result = float_binary(op, double(a), double(b))};
        case BinaryOperator::matmul: break;
    }
    throw RaisedError("TypeError", "unsupported operand type(s) for @: 'int' and 'int'");
}

double float_binary(BinaryOperator op, double a, double b) {
    switch (op) {
        case BinaryOperator::add: return a + b;
        case BinaryOperator::sub: return a - b;
        case BinaryOperator::mul: return a * b;
        case BinaryOperator::div:
            if (b == 0) throw RaisedError("ZeroDivisionError", "float division by zero");
            return a / b;
        case BinaryOperator::floordiv:
        case BinaryOperator::mod: {
            // CPython's float_divmod: the remainder from fmod, then the quotient from it,
            // so 1 // 0.1 == 9.0 and 1 % 0.1 == 0.09999999999999995.
            if (b == 0) throw RaisedError("ZeroDivisionError", op == BinaryOperator::mod ? "float modulo" : "float floor division by zero");
            double mod = std::fmod(a, b);
            double div = (a - mod) / b;
            if (mod != 0) {
                if ((b < 0) != (mod < 0)) mod += b, div -= 1.0;
            } else {
                mod = std::copysign(0.0, b);
            }
            double floordiv;
            if (div != 0) {
                floordiv = std::floor(div);
                if (div - floordiv > 0.5) floordiv += 1.0;
            } else {
                floordiv = std::copysign(0.0, a / b);
            }
            return op == BinaryOperator::mod ? mod : floordiv;
        }
        case BinaryOperator::pow: {
            if (a == 0 && b < 0) throw RaisedError("ZeroDivisionError", "0.0 cannot be raised to a negative power");
            if (a < 0 && std::isfinite(b) && b != std::floor(b))
                throw RaisedError("ValueError", "a negative number cannot be raised to a fractional power (kiln script has no complex numbers)");
            double r = std::pow(a, b);
            if (std::isinf(r) && std::isfinite(a) && std::isfinite(b)) throw RaisedError("OverflowError", "(34, 'Numerical result out of range')");
            return r;
        }
        case BinaryOperator::matmul: break;
    }
    throw RaisedError("TypeError", "unsupported operand type(s) for @: 'float' and 'float'");
}

int64_t int_negate(int64_t a) {
    if (a == INT64_MIN) overflow("unary -");
    return -a;
}

std::optional<int> compare_int_float(int64_t i, double f) {
    if (std::isnan(f)) return std::nullopt;
    // Every int64 lies in [-2**63, 2**63); a float outside that range decides by its sign.
    constexpr double two63 = 9223372036854775808.0;
    if (f >= two63) return -1;
    if (f < -two63) return 1;
    double whole = std::trunc(f);  // exact, and now within int64's range
    int64_t w = int64_t(whole);
    if (i != w) return i < w ? -1 : 1;
    double frac = f - whole;
    return frac > 0 ? -1 : frac < 0 ? 1 : 0;
}

int64_t float_to_int(double x) {
    if (std::isnan(x)) throw RaisedError("ValueError", "cannot convert float NaN to integer");
    if (std::isinf(x)) throw RaisedError("OverflowError", "cannot convert float infinity to integer");
    double whole = std::trunc(x);
    if (whole >= 9223372036854775808.0 || whole < -9223372036854775808.0)
        throw RaisedError("OverflowError", "int() of a float outside the 64-bit range (kiln script ints are 64-bit)");
    return int64_t(whole);
}

namespace {

std::string strip(const std::string& text) {
    size_t first = text.find_first_not_of(" \t\n\r\f\v");
    if (first == std::string::npos) return "";
    size_t last = text.find_last_not_of(" \t\n\r\f\v");
    return text.substr(first, last - first + 1);
}

}  // namespace

std::optional<int64_t> parse_int(const std::string& text) {
    std::string s = strip(text);
    std::string digits;  // Python allows one '_' between digits: 1_000
    size_t start = (!s.empty() && (s[0] == '+' || s[0] == '-')) ? 1 : 0;
    if (start == s.size()) return std::nullopt;
    for (size_t i = start; i < s.size(); ++i) {
        if (s[i] == '_' && i > start && i + 1 < s.size() && std::isdigit((unsigned char)s[i - 1]) && std::isdigit((unsigned char)s[i + 1])) continue;
        if (!std::isdigit((unsigned char)s[i])) return std::nullopt;
        digits += s[i];
    }
    int64_t v = 0;
    std::string signed_digits = (s[0] == '-' ? "-" : "") + digits;
    auto [ptr, ec] = std::from_chars(signed_digits.data(), signed_digits.data() + signed_digits.size(), v);
    if (ec == std::errc::result_out_of_range) throw RaisedError("OverflowError", "int() of '" + s + "' does not fit in 64 bits (kiln script ints are 64-bit)");
    if (ec != std::errc() || ptr != signed_digits.data() + signed_digits.size()) return std::nullopt;
    return v;
}

std::optional<double> parse_float(const std::string& text) {
    std::string s = strip(text);
    if (s.empty() || s.find('\0') != std::string::npos) return std::nullopt;
    // strtod also reads hex floats and "nan(...)"; Python's float() reads neither.
    if (s.find_first_of("xX(") != std::string::npos) return std::nullopt;
    errno = 0;
    char* end = nullptr;
    double v = std::strtod(s.c_str(), &end);
    if (end != s.c_str() + s.size()) return std::nullopt;
    return v;  // an overflowing literal is inf, as in Python ("1e999")
}

}  // namespace kiln::interp
