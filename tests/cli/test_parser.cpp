// Tests for cli/script: the lexer, the parser (each construct, precedence, positions, the
// tutorial snippets), SyntaxError messages, is_complete_input, and the malformed/ corpus.
#include <boost/test/unit_test.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "cli/script/ast_print.h"
#include "cli/script/lexer.h"
#include "cli/script/parser.h"

namespace fs = std::filesystem;
using namespace kiln::script;

namespace {

const fs::path kSourceDir = KILN_SOURCE_DIR;  // CMake defines it for every target linking kiln

// Token kinds in a compact form: NAME(x) NUM(1) STR(a) NEWLINE INDENT DEDENT END, and the
// spelling of keywords and operators.
std::string tokens(std::string_view source) {
    std::string out;
    for (const Token& token : tokenize(source, "test.ks")) {
        if (!out.empty()) out += " ";
        switch (token.kind) {
            case Tok::name: out += "NAME(" + token.text + ")"; break;
            case Tok::number: out += "NUM(" + token.text + ")"; break;
            case Tok::string: out += "STR(" + token.text + ")"; break;
            case Tok::reserved: out += "RESERVED(" + token.text + ")"; break;
            case Tok::newline: out += "NEWLINE"; break;
            case Tok::indent: out += "INDENT"; break;
            case Tok::dedent: out += "DEDENT"; break;
            case Tok::end: out += "END"; break;
            default: out += spelling(token.kind);
        }
    }
    return out;
}

std::string expr(std::string_view source) { return dump(*parse_expression(source, "test.ks")); }
std::string program(std::string_view source) { return dump(parse_program(source, "test.ks")); }

struct Failure {
    std::string message;  // without the location lines
    Pos pos;
    EndOfInput eof = EndOfInput::no;
    std::string what;
    std::string kind;  // SyntaxError, IndentationError
};

Failure failure(std::string_view source, const std::string& filename = "test.ks") {
    try {
        parse_program(source, filename);
    } catch (const SyntaxError& error) {
        return {error.message(), error.pos(), error.end_of_input(), error.what(), error.kind()};
    }
    return {"(no error)", {0, 0}, EndOfInput::no, ""};
}

// The rest of the line after `tag`, in a malformed file's header; empty when missing.
std::string header(const std::string& source, const std::string& tag) {
    size_t start = source.find(tag);
    if (start == std::string::npos) return "";
    start += tag.size();
    return source.substr(start, source.find('\n', start) - start);
}

std::string repeat(std::string_view text, int times) {
    std::string out;
    for (int i = 0; i < times; ++i) out += text;
    return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(lexer)

BOOST_AUTO_TEST_CASE(tokens_carry_line_and_column) {
    std::vector<Token> toks = tokenize("x = 10\n  # note\ny", "test.ks");
    BOOST_TEST(toks.size() == 7u);  // x = 10 NEWLINE y NEWLINE END
    BOOST_TEST(toks[2].text == "10");
    BOOST_TEST(toks[2].pos.line == 1);
    BOOST_TEST(toks[2].pos.column == 5);
    BOOST_TEST(toks[2].end.column == 7);
    BOOST_TEST(toks[4].text == "y");
    BOOST_TEST(toks[4].pos.line == 3);
    BOOST_TEST(toks[4].pos.column == 1);
}

BOOST_AUTO_TEST_CASE(indentation_makes_indent_and_dedent) {
    BOOST_TEST(tokens("if x:\n  y\n  if z:\n      w\nv\n") ==
               "if NAME(x) : NEWLINE INDENT NAME(y) NEWLINE if NAME(z) : NEWLINE INDENT NAME(w) "
               "NEWLINE DEDENT DEDENT NAME(v) NEWLINE END");
    BOOST_TEST(tokens("if x:\n  y") == "if NAME(x) : NEWLINE INDENT NAME(y) NEWLINE DEDENT END");
}

BOOST_AUTO_TEST_CASE(newlines_in_brackets_blank_lines_and_comments_make_no_tokens) {
    BOOST_TEST(tokens("f(1,\n      2)[\n0]\n") ==
               "NAME(f) ( NUM(1) , NUM(2) ) [ NUM(0) ] NEWLINE END");
    BOOST_TEST(tokens("d = {\n  'a': 1,\n}\n") == "NAME(d) = { STR(a) : NUM(1) , } NEWLINE END");
    BOOST_TEST(tokens("\n   \n# c\n    # indented comment\nx  # trailing\n\n") ==
               "NAME(x) NEWLINE END");
    BOOST_TEST(tokens("") == "END");
    BOOST_TEST(tokens("if x:\n  y\n\n# c\n  z\n") ==
               "if NAME(x) : NEWLINE INDENT NAME(y) NEWLINE NAME(z) NEWLINE DEDENT END");
}

BOOST_AUTO_TEST_CASE(numbers_keep_their_spelling) {
    BOOST_TEST(tokens("1 1.5 1. .5 1e-3 2E+4 007") ==
               "NUM(1) NUM(1.5) NUM(1.) NUM(.5) NUM(1e-3) NUM(2E+4) NUM(007) NEWLINE END");
}

BOOST_AUTO_TEST_CASE(strings_decode_escapes_and_triple_quoted_ones_span_lines) {
    std::vector<Token> toks = tokenize(R"('a\nb' "q\"\t\\" 'it\'s' '\d')", "test.ks");
    BOOST_TEST(toks[0].text == "a\nb");
    BOOST_TEST(toks[1].text == "q\"\t\\");
    BOOST_TEST(toks[2].text == "it's");
    BOOST_TEST(toks[3].text == "\\d");  // unknown escapes stay as written
    toks = tokenize("s = \"\"\"one\n'two' \"three\"\n\"\"\"\nx", "test.ks");
    BOOST_TEST(toks[2].text == "one\n'two' \"three\"\n");
    BOOST_TEST(toks[4].text == "x");
    BOOST_TEST(toks[4].pos.line == 4);
}

BOOST_AUTO_TEST_CASE(operators_take_the_longest_match_and_keywords_are_whole_words) {
    BOOST_TEST(tokens("a//=b**c->d<=e!=f**=g") ==
               "NAME(a) //= NAME(b) ** NAME(c) -> NAME(d) <= NAME(e) != NAME(f) **= NAME(g) "
               "NEWLINE END");
    BOOST_TEST(tokens("x@=y@z") == "NAME(x) @= NAME(y) @ NAME(z) NEWLINE END");
    BOOST_TEST(tokens("def defx None none is_ lambda yield") ==
               "def NAME(defx) None NAME(none) NAME(is_) lambda RESERVED(yield) NEWLINE END");
}

BOOST_AUTO_TEST_CASE(backslash_joins_lines_and_crlf_ends_them) {
    BOOST_TEST(tokens("x = 1 + \\\n    2\ny") ==
               "NAME(x) = NUM(1) + NUM(2) NEWLINE NAME(y) NEWLINE END");
    BOOST_TEST(tokenize("'ab\\\ncd'", "test.ks")[0].text == "abcd");
    BOOST_TEST(tokens("if x:\r\n  y\r\n") ==
               "if NAME(x) : NEWLINE INDENT NAME(y) NEWLINE DEDENT END");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(expressions)

BOOST_AUTO_TEST_CASE(literals) {
    BOOST_TEST(expr("42") == "42");
    BOOST_TEST(expr("1.5") == "1.5");
    BOOST_TEST(expr("3.") == "3.0");
    BOOST_TEST(expr("1e-3") == "0.001");
    BOOST_TEST(expr("'a\"b'") == R"("a\"b")");
    BOOST_TEST(expr("'a' \"b\"") == R"("ab")");
    BOOST_TEST(expr("[None, True, False, x_1]") == "(list None True False x_1)");
}

BOOST_AUTO_TEST_CASE(numbers_remember_int_or_float) {
    ExprPtr twelve = parse_expression("12"), two = parse_expression("2.");
    const Number *i = twelve->as<Number>(), *f = two->as<Number>();
    BOOST_TEST((i && !i->is_float && i->int_value == 12));
    BOOST_TEST((f && f->is_float && f->float_value == 2.0));
    BOOST_TEST(parse_expression("9223372036854775807")->as<Number>()->int_value == INT64_MAX);
}

BOOST_AUTO_TEST_CASE(lists_tuples_dicts) {
    BOOST_TEST(expr("[[], (), {}]") == "(list (list) (tuple) (dict))");
    BOOST_TEST(expr("[1, x, [2],]") == "(list 1 x (list 2))");
    BOOST_TEST(expr("(1)") == "1");
    BOOST_TEST(expr("(1,)") == "(tuple 1)");
    BOOST_TEST(expr("1, 2") == "(tuple 1 2)");
    BOOST_TEST(expr("(a, (b, c))") == "(tuple a (tuple b c))");
    BOOST_TEST(expr("{'x': 1, k: [2], 3: 4.0,}") == R"((dict ("x" 1) (k (list 2)) (3 4.0)))");
}

BOOST_AUTO_TEST_CASE(attributes_and_calls) {
    BOOST_TEST(expr("torch.nn.functional.relu") == "(. (. (. torch nn) functional) relu)");
    BOOST_TEST(expr("f()") == "(call f)");
    BOOST_TEST(expr("f(a, b,)") == "(call f a b)");
    BOOST_TEST(expr("torch.randn(10, requires_grad=True)") ==
               "(call (. torch randn) 10 requires_grad=True)");
    BOOST_TEST(expr("f(*inputs)") == "(call f *inputs)");
    BOOST_TEST(expr("f(a, *xs, *ys, k=1, *zs)") == "(call f a *xs *ys *zs k=1)");
    BOOST_TEST(expr("f(x)(y).z(w=g(1))") == "(call (. (call (call f x) y) z) w=(call g 1))");
}

BOOST_AUTO_TEST_CASE(subscripts_and_slices) {
    BOOST_TEST(expr("d['x']") == R"((index d "x"))");
    BOOST_TEST(expr("x[i + 1]") == "(index x (+ i 1))");
    BOOST_TEST(expr("x[:]") == "(index x (slice _ _ _))");
    BOOST_TEST(expr("x[1:]") == "(index x (slice 1 _ _))");
    BOOST_TEST(expr("x[:n]") == "(index x (slice _ n _))");
    BOOST_TEST(expr("x[::2]") == "(index x (slice _ _ 2))");
    BOOST_TEST(expr("x[a:b:c]") == "(index x (slice a b c))");
    BOOST_TEST(expr("x[:, 0]") == "(index x (tuple (slice _ _ _) 0))");
    BOOST_TEST(expr("x[1:3, ::2]") == "(index x (tuple (slice 1 3 _) (slice _ _ 2)))");
    BOOST_TEST(expr("x[0,]") == "(index x (tuple 0))");
    BOOST_TEST(expr("x[-1][0]") == "(index (index x (neg 1)) 0)");
}

BOOST_AUTO_TEST_CASE(comparisons) {
    BOOST_TEST(expr("a < b") == "(< a b)");
    BOOST_TEST(expr("a < b <= c") == "(chain a < b <= c)");
    BOOST_TEST(expr("a == b != c > d >= e") == "(chain a == b != c > d >= e)");
    BOOST_TEST(expr("k in d") == "(in k d)");
    BOOST_TEST(expr("k not in d") == "(not-in k d)");
    BOOST_TEST(expr("x is None") == "(is x None)");
    BOOST_TEST(expr("x is not None") == "(is-not x None)");
}

BOOST_AUTO_TEST_CASE(unary_boolean_and_conditional_operators) {
    BOOST_TEST(expr("a and b and c") == "(and a b c)");
    BOOST_TEST(expr("a or b or c") == "(or a b c)");
    BOOST_TEST(expr("not a") == "(not a)");
    BOOST_TEST(expr("not not a") == "(not (not a))");
    BOOST_TEST(expr("a if c else b") == "(if c a b)");
    BOOST_TEST(expr("a if c else b if d else e") == "(if c a (if d b e))");
    BOOST_TEST(expr("-x") == "(neg x)");
    BOOST_TEST(expr("+x") == "(pos x)");
    BOOST_TEST(expr("--x") == "(neg (neg x))");
    BOOST_TEST(expr("-1") == "(neg 1)");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(precedence)

BOOST_AUTO_TEST_CASE(power_is_right_associative_and_beats_a_unary_minus_on_its_left) {
    BOOST_TEST(expr("-x**2") == "(neg (** x 2))");
    BOOST_TEST(expr("-x**-y") == "(neg (** x (neg y)))");
    BOOST_TEST(expr("2**-1") == "(** 2 (neg 1))");
    BOOST_TEST(expr("a**b**c") == "(** a (** b c))");
}

BOOST_AUTO_TEST_CASE(arithmetic_is_left_associative_and_multiplies_first) {
    BOOST_TEST(expr("a - b - c") == "(- (- a b) c)");
    BOOST_TEST(expr("a / b * c // d % e") == "(% (// (* (/ a b) c) d) e)");
    BOOST_TEST(expr("a + b * c") == "(+ a (* b c))");
    BOOST_TEST(expr("a * b + c") == "(+ (* a b) c)");
    BOOST_TEST(expr("a @ b * c + d") == "(+ (* (@ a b) c) d)");
    BOOST_TEST(expr("-a * b") == "(* (neg a) b)");
    BOOST_TEST(expr("(a + b) * c") == "(* (+ a b) c)");
}

BOOST_AUTO_TEST_CASE(then_comparisons_not_and_or_and_the_conditional_last) {
    BOOST_TEST(expr("a + 1 < b * 2") == "(< (+ a 1) (* b 2))");
    BOOST_TEST(expr("not a == b") == "(not (== a b))");
    BOOST_TEST(expr("not a and b") == "(and (not a) b)");
    BOOST_TEST(expr("a or b and c") == "(or a (and b c))");
    BOOST_TEST(expr("a and b or c and d") == "(or (and a b) (and c d))");
    BOOST_TEST(expr("a + 1 if c or d else b") == "(if (or c d) (+ a 1) b)");
}

BOOST_AUTO_TEST_CASE(calls_attributes_and_subscripts_bind_tightest) {
    BOOST_TEST(expr("-f(x).y[0] ** 2") == "(neg (** (index (. (call f x) y) 0) 2))");
    BOOST_TEST(expr("a.b + c.d()") == "(+ (. a b) (call (. c d)))");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(statements)

BOOST_AUTO_TEST_CASE(assignments) {
    BOOST_TEST(program("x = 1\n") == "assign x = 1\n");
    BOOST_TEST(program("a, b = b, a\n") == "assign (tuple a b) = (tuple b a)\n");
    BOOST_TEST(program("(a, [b, c]) = f()\n") == "assign (tuple a (list b c)) = (call f)\n");
    BOOST_TEST(program("d['x'] = 2\n") == "assign (index d \"x\") = 2\n");
    BOOST_TEST(program("obj.x = y\n") == "assign (. obj x) = y\n");
    BOOST_TEST(program("a = b = 0\n") == "assign a = b = 0\n");
    BOOST_TEST(program("t = 1, 2\n") == "assign t = (tuple 1 2)\n");
}

BOOST_AUTO_TEST_CASE(augmented_assignments) {
    BOOST_TEST(program("x += 1\ny -= 2\nz *= 3\nw /= 4\n") ==
               "augassign x += 1\naugassign y -= 2\naugassign z *= 3\naugassign w /= 4\n");
    BOOST_TEST(program("a.b //= 2\nc[0] %= 3\nd **= 2\ne @= f\n") ==
               "augassign (. a b) //= 2\naugassign (index c 0) %= 3\naugassign d **= 2\n"
               "augassign e @= f\n");
}

BOOST_AUTO_TEST_CASE(if_elif_else_nested_and_on_one_line) {
    BOOST_TEST(program("if a:\n  x\nelif b:\n  y\nelif c:\n  pass\nelse:\n  z\n") ==
               "if a\n  expr x\nelif b\n  expr y\nelif c\n  pass\nelse\n  expr z\n");
    BOOST_TEST(program("if a:\n    if b:\n        x\n    else:\n        y\n") ==
               "if a\n  if b\n    expr x\n  else\n    expr y\n");
    BOOST_TEST(program("def f(x):\n    if x: return 1\n    else: return 2\n") ==
               "def f (x)\n  if x\n    return 1\n  else\n    return 2\n");
}

BOOST_AUTO_TEST_CASE(loops) {
    BOOST_TEST(program("for i in range(3):\n    print(i)\n") ==
               "for i in (call range 3)\n  expr (call print i)\n");
    BOOST_TEST(program("for i, (a, b) in enumerate(xs):\n    pass\n") ==
               "for (tuple i (tuple a b)) in (call enumerate xs)\n  pass\n");
    BOOST_TEST(program("for x in 1, 2:\n    pass\n") == "for x in (tuple 1 2)\n  pass\n");
    BOOST_TEST(program("while n > 0:\n    n -= 1\n    if n: continue\n    break\n") ==
               "while (> n 0)\n  augassign n -= 1\n  if n\n    continue\n  break\n");
}

BOOST_AUTO_TEST_CASE(function_definitions) {
    BOOST_TEST(program("def f():\n    return\n") == "def f ()\n  return\n");
    BOOST_TEST(program("def f(x, y=1, *args, scale=2.0, mode):\n    return x, y\n") ==
               "def f (x y=1 *args scale=2.0 mode)\n  return (tuple x y)\n");
    BOOST_TEST(program("def f(x: torch.Tensor, n: int = 3) -> torch.Tensor:\n    pass\n") ==
               "def f (x:(. torch Tensor) n:int=3) -> (. torch Tensor)\n  pass\n");
    Module module = parse_program("def f(a, *rest, k=1):\n  pass\n");
    const Def* def = module.body[0]->as<Def>();
    BOOST_REQUIRE(def);
    BOOST_TEST((def->params.size() == 1u && def->vararg == "rest" &&
                def->kwonly_params.size() == 1u));
}

BOOST_AUTO_TEST_CASE(decorators) {
    BOOST_TEST(program("@torch.compile\n@compile(mode='max-autotune', fullgraph=True)\n"
                       "def f(x):\n    return x\n") ==
               "@(. torch compile)\n@(call compile mode=\"max-autotune\" fullgraph=True)\n"
               "def f (x)\n  return x\n");
}

BOOST_AUTO_TEST_CASE(imports) {
    BOOST_TEST(program("import torch\n") == "import torch\n");
    BOOST_TEST(program("import torch.nn as nn\n") == "import torch.nn as nn\n");
    BOOST_TEST(program("import torch.nn.functional as F, math\n") ==
               "import torch.nn.functional as F, math\n");
    BOOST_TEST(program("from x import y\n") == "from x import y\n");
    BOOST_TEST(program("from torch import (nn as n, optim,)\n") ==
               "from torch import nn as n, optim\n");
}

BOOST_AUTO_TEST_CASE(assert_return_pass_expressions_and_nothing) {
    BOOST_TEST(program("assert x > 0\nassert ok, 'why'\n") ==
               "assert (> x 0)\nassert ok \"why\"\n");
    BOOST_TEST(program("return\nreturn a, b\npass\nf(x)\n") ==
               "return\nreturn (tuple a b)\npass\nexpr (call f x)\n");
    BOOST_TEST(program("") == "");
    BOOST_TEST(program("\n\n# only a comment\n   \n") == "");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(positions)

BOOST_AUTO_TEST_CASE(nodes_carry_line_and_column) {
    Module module = parse_program("import torch\n\ndef f(x, y=2):\n    return x @ y\n");
    const Stmt& def_stmt = *module.body[1];
    BOOST_TEST(def_stmt.pos.line == 3);
    const Def& def = *def_stmt.as<Def>();
    BOOST_TEST(def.params[1].pos.column == 10);
    const Stmt& ret = *def.body[0];
    BOOST_TEST(ret.pos.line == 4);
    BOOST_TEST(ret.pos.column == 5);
    const Expr& matmul = *ret.as<Return>()->value;
    BOOST_TEST(matmul.pos.column == 14);  // binary operators point at the operator
    BOOST_TEST(matmul.as<BinOp>()->left->pos.column == 12);
    ExprPtr call = parse_expression("  torch.randn(3, dim=1)");
    BOOST_TEST(call->pos.column == 3);  // a call is at its start, a keyword at its name
    BOOST_TEST(call->as<Call>()->keywords[0].pos.column == 18);
    BOOST_TEST(parse_expression("(a + b).sum()")->pos.column == 1);
    Module decorated = parse_program("@torch.compile\ndef f():\n  pass\n");
    BOOST_TEST(decorated.body[0]->pos.line == 2);  // a def is at its 'def', after decorators
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(errors)

BOOST_AUTO_TEST_CASE(message_reads_like_python) {
    Failure f = failure("x = 1\n\ny = (x +\n", "demo.ks");
    BOOST_TEST(f.what ==
               "  File \"demo.ks\", line 3, column 9\n"
               "    y = (x +\n"
               "            ^\n"
               "SyntaxError: unexpected end of input: '(' opened at line 3 is never closed");
}

BOOST_AUTO_TEST_CASE(caret_follows_the_stripped_indentation) {
    Failure f = failure("def f():\n    return 1 2\n", "demo.ks");
    BOOST_TEST(f.what ==
               "  File \"demo.ks\", line 2, column 14\n"
               "    return 1 2\n"
               "             ^\n"
               "SyntaxError: expected end of line after the statement, found number 2");
}

BOOST_AUTO_TEST_CASE(indentation_errors_are_indentation_error_a_kind_of_syntax_error) {
    const char* sources[] = {
        "x = 1\n    y = 2\n",                // unexpected indent
        "if x:\n    y = 1\n  z = 2\n",       // unindent matches no outer level
        "if x:\ny = 1\n",                    // no indented block
        "def f():\n    if x:\n    y = 1\n",  // no indented block, inside a block
    };
    for (const char* source : sources) {
        BOOST_TEST_CONTEXT(source) {
            try {
                parse_program(source, "demo.ks");
                BOOST_FAIL("no error");
            } catch (const IndentationError& e) {  // caught as what it is
                BOOST_TEST(e.kind() == "IndentationError");
                BOOST_TEST(std::string(e.what()).find("\nIndentationError: ") != std::string::npos,
                           e.what());
            }
            BOOST_CHECK_THROW(parse_program(source, "demo.ks"),
                              SyntaxError);  // and as a SyntaxError
        }
    }
    BOOST_TEST(failure("if x:\n").kind == "SyntaxError");  // more input may come: the REPL waits
    BOOST_TEST(failure("x = = 1\n").kind == "SyntaxError");
}

BOOST_AUTO_TEST_CASE(errors_say_whether_more_input_could_fix_them) {
    BOOST_TEST((failure("f(1,\n").eof == EndOfInput::open_bracket));
    BOOST_TEST((failure("s = '''abc\n").eof == EndOfInput::open_bracket));
    BOOST_TEST((failure("x = 1 + \\").eof == EndOfInput::open_bracket));
    BOOST_TEST((failure("if x:\n").eof == EndOfInput::open_block));
    BOOST_TEST((failure("@torch.compile\n").eof == EndOfInput::open_block));
    BOOST_TEST((failure("x = = 1\n").eof == EndOfInput::no));
    BOOST_TEST((failure("x = 'abc\n").eof == EndOfInput::no));
}

BOOST_AUTO_TEST_CASE(deep_nesting_is_an_error_not_a_crash) {
    BOOST_TEST(failure("x = " + repeat("(", 5000) + "1").message == "too many nested parentheses");
    BOOST_TEST(failure(repeat("-", 100000) + "x").message.find("too deeply nested") == 0u);
    BOOST_TEST(failure(repeat("not ", 100000) + "x").message.find("too deeply nested") == 0u);
    BOOST_TEST(failure("x = a" + repeat(".b", 100000)).message.find("too deeply nested") == 0u);
    BOOST_TEST(failure("x = 2" + repeat("**2", 100000)).message.find("too deeply nested") == 0u);
}

BOOST_AUTO_TEST_CASE(operator_chains_are_not_nesting) {
    // a + b + c ... parses in a loop: no length limit (test_script_robust.cpp runs one).
    BOOST_CHECK_NO_THROW(parse_program("x = 1" + repeat(" + 1", 100000)));
    BOOST_CHECK_NO_THROW(parse_program("x = 1" + repeat(" * 2 // 3 % 4 @ 5 / 6 - 7", 20000)));
    BOOST_CHECK_NO_THROW(parse_program(repeat("[", 99) + repeat("1+", 150) + "1" + repeat("]", 99)));
}

BOOST_AUTO_TEST_CASE(reasonable_nesting_parses) {
    BOOST_TEST(expr(repeat("(", 90) + "x" + repeat(")", 90)) == "x");
    BOOST_TEST(expr(repeat("[", 60) + repeat("1+", 100) + "1" + repeat("]", 60)).size() > 0u);
    std::string nested;
    for (int level = 0; level < 90; ++level) nested += repeat(" ", level) + "if x:\n";
    nested += repeat(" ", 90) + "pass\n";
    BOOST_TEST(parse_program(nested).body.size() == 1u);
}

BOOST_AUTO_TEST_CASE(parse_expression_takes_one_expression_only) {
    BOOST_TEST(expr("  f(x)\n") == "(call f x)");
    BOOST_TEST(expr("a, b") == "(tuple a b)");
    BOOST_CHECK_THROW(parse_expression("x = 1"), SyntaxError);
    BOOST_CHECK_THROW(parse_expression("f(x)\ng(y)"), SyntaxError);
    BOOST_CHECK_THROW(parse_expression(""), kiln::Error);  // SyntaxError is a kiln::Error
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(tutorials)

BOOST_AUTO_TEST_CASE(seed_snippets_parse)
{
    const char* source = R"(import torch
def foo(x, y):
    a = torch.sin(x)
    b = torch.cos(y)
    return a + b
opt_foo1 = torch.compile(foo)
print(opt_foo1(torch.randn(10, 10), torch.randn(10, 10)))

@torch.compile
def opt_foo2(x, y):
    a = torch.sin(x)
    b = torch.cos(y)
    return a + b

def bar(a, b):
    x = a / (torch.abs(a) + 1)
    if b.sum() < 0:
        b = b * -1
    return x * b

explain_output = torch._dynamo.explain(bar)(torch.randn(10), torch.randn(10))
print(explain_output)

def function(inputs):
    x = inputs["x"]
    y = inputs["y"]
    x = x.cos().cos()
    if x.mean() > 0.5:
        x = x / 1.1
    return x * y

shape_10_inputs = torch.randn(10, requires_grad=True), torch.randn(10, requires_grad=True)
for i in range(100):
    output = modified_sigmoid(*shape_10_inputs)

class_like = {"x": torch.randn(5), "y": 3.0}
z = x[:, 0] + x[1:3, ::2]
)";
    const char* expected = R"(import torch
def foo (x y)
  assign a = (call (. torch sin) x)
  assign b = (call (. torch cos) y)
  return (+ a b)
assign opt_foo1 = (call (. torch compile) foo)
expr (call print (call opt_foo1 (call (. torch randn) 10 10) (call (. torch randn) 10 10)))
@(. torch compile)
def opt_foo2 (x y)
  assign a = (call (. torch sin) x)
  assign b = (call (. torch cos) y)
  return (+ a b)
def bar (a b)
  assign x = (/ a (+ (call (. torch abs) a) 1))
  if (< (call (. b sum)) 0)
    assign b = (* b (neg 1))
  return (* x b)
assign explain_output = (call (call (. (. torch _dynamo) explain) bar) (call (. torch randn) 10) (call (. torch randn) 10))
expr (call print explain_output)
def function (inputs)
  assign x = (index inputs "x")
  assign y = (index inputs "y")
  assign x = (call (. (call (. x cos)) cos))
  if (> (call (. x mean)) 0.5)
    assign x = (/ x 1.1)
  return (* x y)
assign shape_10_inputs = (tuple (call (. torch randn) 10 requires_grad=True) (call (. torch randn) 10 requires_grad=True))
for i in (call range 100)
  assign output = (call modified_sigmoid *shape_10_inputs)
assign class_like = (dict ("x" (call (. torch randn) 5)) ("y" 3.0))
assign z = (+ (index x (tuple (slice _ _ _) 0)) (index x (tuple (slice 1 3 _) (slice _ _ 2))))
)";
    BOOST_TEST(program(source) == expected);
}

BOOST_AUTO_TEST_CASE(training_loop_snippet_parses) {
    Module module = parse_program(R"(import torch.nn.functional as F
def model(x, w, b):
    """A one-layer model: a docstring is an expression statement."""
    return F.relu(x @ w + b)
w = torch.randn(3, 4, requires_grad=True)
for step in range(10):
    loss = (model(torch.randn(8, 3), w, 0) ** 2).mean()
    loss.backward()
    if step % 5 == 0 and loss.item() > 1e-3:
        print("step", step, "loss", loss.item())
)");
    BOOST_TEST(module.body.size() == 4u);
    BOOST_TEST(module.body[3]->as<For>()->body.size() == 3u);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(repl)

BOOST_AUTO_TEST_CASE(open_brackets_strings_and_continuations_wait) {
    BOOST_TEST(!is_complete_input("y = (x +\n"));
    BOOST_TEST(!is_complete_input("f(1,\n  2,\n"));
    BOOST_TEST(!is_complete_input("d = {'a': [1,\n\n"));  // an empty line does not close '['
    BOOST_TEST(is_complete_input("f(1,\n  2)\n"));
    BOOST_TEST(!is_complete_input("s = \"\"\"doc\n"));
    BOOST_TEST(is_complete_input("s = \"\"\"doc\n\"\"\"\n"));
    BOOST_TEST(!is_complete_input("x = 1 + \\\n"));
    BOOST_TEST(!is_complete_input("s = 'abc\\\n"));
}

BOOST_AUTO_TEST_CASE(blocks_wait_for_an_empty_line) {
    BOOST_TEST(!is_complete_input("def f(x):\n"));
    BOOST_TEST(!is_complete_input("def f(x):\n    return x\n"));
    BOOST_TEST(is_complete_input("def f(x):\n    return x\n\n"));
    BOOST_TEST(!is_complete_input("if x:\n    y = 1\n"));
    BOOST_TEST(!is_complete_input("if x:\n    y = 1\nelse:\n"));
    BOOST_TEST(!is_complete_input("if x:\n    y = 1\nelse:\n    y = 2\n"));
    BOOST_TEST(is_complete_input("if x:\n    y = 1\nelse:\n    y = 2\n\n"));
    BOOST_TEST(!is_complete_input("for i in range(3): print(i)\n"));
    BOOST_TEST(is_complete_input("for i in range(3): print(i)\n\n"));
    BOOST_TEST(!is_complete_input("while True:\n    if x:\n        break\n"));
    BOOST_TEST(!is_complete_input("@torch.compile\n"));
    BOOST_TEST(!is_complete_input("@torch.compile\ndef f(x):\n"));
    BOOST_TEST(!is_complete_input("def f():\n    pass\n   \n    x = 1\n"));  // not a real end
}

BOOST_AUTO_TEST_CASE(statements_and_real_errors_are_complete) {
    BOOST_TEST(is_complete_input("x = 1\n"));
    BOOST_TEST(is_complete_input(""));
    BOOST_TEST(is_complete_input("# just a comment\n"));
    // A real error is complete too, so that the REPL reports it at once.
    BOOST_TEST(is_complete_input("x = = 1\n"));
    BOOST_TEST(is_complete_input("1 +\n"));
    BOOST_TEST(is_complete_input("x = 'abc\n"));
    BOOST_TEST(is_complete_input("f(1))\n"));
    BOOST_TEST(is_complete_input("if x:\n\n"));  // the empty line ends the block: report it
    BOOST_TEST(is_complete_input("if x:\ny = 1\n"));
    BOOST_TEST(is_complete_input("if x:\n\ty = 1\n"));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(malformed)

// Each tests/cli/malformed/*.ks starts with "# error-line: N" and "# error: TEXT": parsing it
// must throw a SyntaxError at line N whose message contains TEXT.
BOOST_AUTO_TEST_CASE(every_file_fails_on_its_line) {
    fs::path folder = kSourceDir / "tests" / "cli" / "malformed";
    BOOST_REQUIRE(fs::is_directory(folder));
    int files = 0;
    for (const fs::directory_entry& entry : fs::directory_iterator(folder)) {
        if (entry.path().extension() != ".ks") continue;
        files++;
        std::string name = entry.path().filename().string();
        std::stringstream text;
        text << std::ifstream(entry.path(), std::ios::binary).rdbuf();
        std::string source = text.str();
        BOOST_TEST_CONTEXT(name) {
            std::string line = header(source, "# error-line: ");
            std::string message = header(source, "# error: ");
            BOOST_REQUIRE((!line.empty() && !message.empty()));
            Failure f = failure(source, name);
            BOOST_TEST(f.pos.line == std::stoi(line));
            BOOST_TEST(f.what.find("line " + line + ",") != std::string::npos);
            BOOST_TEST(f.message.find(message) != std::string::npos, f.message);
            (void)is_complete_input(source);  // must not crash either
        }
    }
    BOOST_TEST(files >= 50);
}

BOOST_AUTO_TEST_SUITE_END()

// The syntax the seeds needed (classes, try, with, lambda, comprehensions, f-strings, `;`,
// global/nonlocal/del, *args/**kwargs): each node as the printer shows it, and each
// malformed variant's message and position.
BOOST_AUTO_TEST_SUITE(seed_syntax)

BOOST_AUTO_TEST_CASE(class_with_base_attributes_decorated_methods) {
    BOOST_TEST(program("class A(B):\n    x = 1\n    @staticmethod\n    def f(a, b=2):\n        return a\n") ==
               "class A (B)\n  assign x = 1\n  @staticmethod\n  def f (a b=2)\n    return a\n");
}

BOOST_AUTO_TEST_CASE(try_with_every_clause_and_raise_forms) {
    BOOST_TEST(program("try:\n    f()\nexcept (E, F) as e:\n    pass\nexcept G:\n    raise\nexcept:\n    raise X('m') from e\n"
                       "else:\n    y = 1\nfinally:\n    z = 2\n") ==
               "try\n  expr (call f)\nexcept (tuple E F) as e\n  pass\nexcept G\n  raise\nexcept\n  raise (call X \"m\") from e\n"
               "else\n  assign y = 1\nfinally\n  assign z = 2\n");
}

BOOST_AUTO_TEST_CASE(with_lambda_comprehensions_and_generator_arguments) {
    BOOST_TEST(program("with a as b, c:\n    pass\n") == "with a as (tuple b c)\n  pass\n");
    BOOST_TEST(program("f = lambda: 0\ng = lambda x, y=1: x + y\n") ==
               "assign f = (lambda () 0)\nassign g = (lambda (x y=1) (+ x y))\n");
    BOOST_TEST(program("xs = [x * y for x in a if x for y in b]\nd = {k: v for k, v in items}\ns = sum(x for x in a)\n") ==
               "assign xs = (listcomp (* x y) (for x a (if x)) (for y b))\nassign d = (dictcomp k v (for (tuple k v) items))\n"
               "assign s = (call sum (genexp x (for x a)))\n");
}

BOOST_AUTO_TEST_CASE(fstrings_semicolons_scopes_del_and_star_arguments) {
    BOOST_TEST(program("s = f\"{x:.3f} and {y!r} {{lit}} {d['k']}\"\n") ==
               "assign s = (fstring {x:.3f} \" and \" {y!r} \" {lit} \" {(index d \"k\")})\n");
    BOOST_TEST(program("a = 1; b = 2\n") == "assign a = 1\nassign b = 2\n");
    BOOST_TEST(program("def f():\n    global g\n    nonlocal h\n    del a, b[0], c.d\n") ==
               "def f ()\n  global g\n  nonlocal h\n  del a (index b 0) (. c d)\n");
    BOOST_TEST(program("def f(a, *args, **kwargs):\n    return g(*args, **kwargs)\n") ==
               "def f (a *args **kwargs)\n  return (call g *args **kwargs)\n");
}

BOOST_AUTO_TEST_CASE(malformed_new_syntax_says_what_and_where) {
    struct Case {
        const char* source;
        const char* message;
        int line, column;
    };
    const Case cases[] = {
        {"class A(B, C):\n    pass\n", "kiln script has single inheritance only: one base class", 1, 12},
        {"class :\n    pass\n", "expected a class name after 'class', found ':'", 1, 7},
        {"try:\n    pass\n", "unexpected end of input: expected 'except' or 'finally' after the 'try' block", 2, 9},
        {"try:\n    pass\nelse:\n    pass\n", "'else' after 'try' needs an 'except' clause", 3, 1},
        {"with :\n    pass\n", "expected an expression, found ':'", 1, 6},
        {"lambda x: (yield)\n", "'yield' is not supported in kiln script", 1, 12},
        {"f = lambda x:\n", "expected an expression, found end of line", 1, 14},
        {"[x for in y]\n", "expected a loop variable after 'for', found 'in'", 1, 8},
        {"f\"{x\"\n", "f-string: expecting '}'", 1, 1},
        {"f\"{}\"\n", "f-string: empty expression not allowed", 1, 1},
        {"a = 1;; b = 2\n", "expected a statement before ';'", 1, 7},
        {"del 1\n", "cannot delete a literal", 1, 5},
        {"global 1\n", "expected a name after 'global', found number 1", 1, 8},
        {"def f(**k, a):\n    pass\n", "no parameter may follow the '**' parameter", 1, 12},
        {"except E:\n    pass\n", "'except' without a matching 'try' (check its indentation)", 1, 1},
        {"f(**)\n", "expected an expression, found ')'", 1, 5},
        {"x = {k: for k in y}\n", "expected an expression, found 'for'", 1, 9},
    };
    for (const Case& c : cases) {
        BOOST_TEST_CONTEXT(c.source) {
            Failure f = failure(c.source);
            BOOST_TEST(f.message == c.message);
            BOOST_TEST(f.pos.line == c.line);
            BOOST_TEST(f.pos.column == c.column);
        }
    }
}

BOOST_AUTO_TEST_SUITE_END()
