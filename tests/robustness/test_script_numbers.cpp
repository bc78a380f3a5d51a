// kiln script's numbers as hostile input (issue 10): 64-bit ints that raise OverflowError
// instead of wrapping, Python's floor division, modulo and rounding, exact int-float
// comparison, ranges and slices with extreme steps. Never a wrong number or a SIGFPE.
#include <boost/test/unit_test.hpp>

#include "script_run.h"

using namespace kiln;
using namespace kiln::interp;
using script_run::run;
using script_run::kMin;

BOOST_AUTO_TEST_SUITE(script_numbers)

BOOST_AUTO_TEST_CASE(int_floor_division_and_modulo_follow_python) {
    BOOST_TEST(run("print(-7 // 2, -7 % 3, 7 % -3, 7 // -2, -5.5 // 2, 5 % -2.5, 1 // 0.1, 1 % 0.1)\n") ==
               "-4 2 -2 -4 -3.0 -0.0 9.0 0.09999999999999995\n");
    BOOST_TEST(run(kMin + "print(m % -1)\n") == "0\n");  // was SIGFPE
    BOOST_TEST(run(kMin + "print(m // -1)\n") == "OverflowError: integer overflow in // (kiln script ints are 64-bit)\n");
    BOOST_TEST(run("print(5 % 0)\n") == "ZeroDivisionError: integer division or modulo by zero\n");
    BOOST_TEST(run("print(5.0 // 0)\n") == "ZeroDivisionError: float floor division by zero\n");
    BOOST_TEST(run("print(9007199254740993 // 1, 9007199254740993 % 10)\n") == "9007199254740993 3\n");  // no detour through double
}

BOOST_AUTO_TEST_CASE(int_overflow_raises_instead_of_wrapping) {
    BOOST_TEST(run("x = 0\nx += 1\nprint(x, 2 + 3, 7 * 6, 10 - 4, -3 * 5, 3037000499 * 3037000499)\n") == "1 5 42 6 -15 9223372030926249001\n");
    BOOST_TEST(run("print(9223372036854775807 + 1)\n") == "OverflowError: integer overflow in + (kiln script ints are 64-bit)\n");
    BOOST_TEST(run(kMin + "print(m - 1)\n") == "OverflowError: integer overflow in - (kiln script ints are 64-bit)\n");
    BOOST_TEST(run("print(4294967296 * 4294967296)\n") == "OverflowError: integer overflow in * (kiln script ints are 64-bit)\n");
    BOOST_TEST(run(kMin + "print(-m)\n") == "OverflowError: integer overflow in unary - (kiln script ints are 64-bit)\n");
    BOOST_TEST(run("x = 9223372036854775807\nx += 1\n") == "OverflowError: integer overflow in + (kiln script ints are 64-bit)\n");
    BOOST_TEST(run("print(9223372036854775808)\n") == "SyntaxError: integer literal too large for a 64-bit integer\n");
}

BOOST_AUTO_TEST_CASE(int_power_is_exact_or_overflows) {
    BOOST_TEST(run("print((-1)**65, (-1)**64, 2**62, (-2)**63, 0**0, 1**100000, 2**-1, 10**18)\n") ==
               "-1 1 4611686018427387904 -9223372036854775808 1 1 0.5 1000000000000000000\n");
    BOOST_TEST(run("print(10**100000)\n") == "OverflowError: integer overflow in ** (kiln script ints are 64-bit)\n");
    BOOST_TEST(run("print(2**63)\n") == "OverflowError: integer overflow in ** (kiln script ints are 64-bit)\n");
    BOOST_TEST(run("print(0**-1)\n") == "ZeroDivisionError: 0.0 cannot be raised to a negative power\n");
    BOOST_TEST(run("print(2.0**10000)\n") == "OverflowError: (34, 'Numerical result out of range')\n");
    BOOST_TEST(run("print((-8.0)**0.5)\n") ==
               "ValueError: a negative number cannot be raised to a fractional power (kiln script has no complex numbers)\n");
}

BOOST_AUTO_TEST_CASE(int_true_division_is_correctly_rounded) {
    // The values Python prints: int / int rounds once, from the exact quotient.
    BOOST_TEST(run("print(9007199254740993 / 1, 9007199254740995 / 1, 4611686018427387905 / 3)\n") ==
               "9007199254740992.0 9007199254740996.0 1.5372286728091292e+18\n");
    BOOST_TEST(run(kMin + "print(m / 7, 9223372036854775807 / 9223372036854775806)\n") == "-1.3176245766935393e+18 1.0\n");
    BOOST_TEST(run("print(1 / 0)\n") == "ZeroDivisionError: division by zero\n");
}

BOOST_AUTO_TEST_CASE(int_float_comparison_is_exact) {
    BOOST_TEST(run("print(9007199254740993 == 9007199254740992.0, 9007199254740992 == 9007199254740992.0)\n") == "False True\n");
    BOOST_TEST(run("print(9223372036854775807 < 9223372036854775808.0, 9223372036854775807 >= 9223372036854775808.0)\n") ==
               "True False\n");
    BOOST_TEST(run("n = float('nan')\nprint(n == n, n < 1, 1 < n, n != n, 1 in [n])\n") == "False False False True False\n");
    BOOST_TEST(run("print(2 < 2.5, 3 > 2.5, -1 < -0.5, 1 == 1.0, True == 1)\n") == "True True True True True\n");
}

BOOST_AUTO_TEST_CASE(int_conversions_refuse_what_python_refuses) {
    BOOST_TEST(run("print(int(float('nan')))\n") == "ValueError: cannot convert float NaN to integer\n");
    BOOST_TEST(run("print(int(float('inf')))\n") == "OverflowError: cannot convert float infinity to integer\n");
    BOOST_TEST(run("print(int(1e19))\n") == "OverflowError: int() of a float outside the 64-bit range (kiln script ints are 64-bit)\n");
    BOOST_TEST(run("print(round(float('nan')))\n") == "ValueError: cannot convert float NaN to integer\n");
    BOOST_TEST(run("print(int(' 42 '), int('-1_000'), int(-2.7), float(' 1e3 '), float('-inf'), round(2.5))\n") ==
               "42 -1000 -2 1000.0 -inf 2\n");
    BOOST_TEST(run("print(int('12abc'))\n") == "ValueError: invalid literal for int() with base 10: '12abc'\n");
    BOOST_TEST(run("print(float('1.5x'))\n") == "ValueError: could not convert '1.5x' to float\n");
    BOOST_TEST(run("print(int('99999999999999999999'))\n") ==
               "OverflowError: int() of '99999999999999999999' does not fit in 64 bits (kiln script ints are 64-bit)\n");
    BOOST_TEST(run("print(int(tensor([9007199254740993])))\n") == "9007199254740993\n");
}

BOOST_AUTO_TEST_CASE(ranges_and_slices_with_extreme_steps) {
    BOOST_TEST(run("print(range(4, 5, 9223372036854775807), len(range(-9223372036854775807 - 1, 9223372036854775807, 4611686018427387904)))\n") ==
               "[4] 4\n");
    BOOST_TEST(run("print([1, 2, 3, 4, 5][3::9223372036854775807], 'abcde'[4::-9223372036854775807])\n") == "[4] e\n");
    BOOST_TEST(run("print(len(range(10**18)))\n").rfind("MemoryError: range() would need 40000000000000000000 bytes", 0) == 0);
}

BOOST_AUTO_TEST_SUITE_END()
