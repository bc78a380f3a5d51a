// Expressions of kiln script, one function per precedence level, lowest first, as in
// Python: if-else < or < and < not < comparisons < + - < * / // % @ < unary - + < ** <
// calls, attributes, subscripts. ** binds tighter than a unary minus on its left, so
// -x**2 is -(x**2), and is right-associative: 2**3**2 is 2**(3**2).
#include <charconv>

#include "cli/script/parser_impl.h"

namespace kiln::script::detail {

namespace {

std::optional<BinaryOperator> term_operator(Tok kind) {
    switch (kind) {
        case Tok::star: return BinaryOperator::mul;
        case Tok::slash: return BinaryOperator::div;
        case Tok::slash_slash: return BinaryOperator::floordiv;
        case Tok::percent: return BinaryOperator::mod;
        case Tok::at: return BinaryOperator::matmul;
        default: return std::nullopt;
    }
}

}  // namespace

bool Parser::starts_expression(const Token& token) const {
    switch (token.kind) {
        case Tok::name: case Tok::number: case Tok::string: case Tok::fstring: case Tok::reserved: case Tok::kw_lambda:
        case Tok::kw_none: case Tok::kw_true: case Tok::kw_false: case Tok::kw_not:
        case Tok::lparen: case Tok::lbracket: case Tok::lbrace: case Tok::minus: case Tok::plus:
            return true;
        default: return false;
    }
}

// a, b, c (a trailing comma is allowed) is a Tuple; a lone expression is itself.
ExprPtr Parser::expression_list() {
    Pos start = peek().pos;
    ExprPtr first = expression();
    if (!at(Tok::comma)) return first;
    Tuple tuple{{first}};
    while (accept(Tok::comma) && starts_expression(peek())) tuple.elements.push_back(expression());
    return make_expr(start, std::move(tuple));
}

ExprPtr Parser::expression() {
    DepthScope scope(depth_);
    deeper(peek());
    if (at(Tok::kw_lambda)) return lambda();
    Pos start = peek().pos;
    ExprPtr if_true = disjunction();
    if (!accept(Tok::kw_if)) return if_true;
    ExprPtr test = disjunction();
    expect(Tok::kw_else, "'else' in the conditional expression");
    ExprPtr if_false = expression();
    return make_expr(start, IfExp{test, if_true, if_false});
}

ExprPtr Parser::disjunction() {
    ExprPtr first = conjunction();
    if (!at(Tok::kw_or)) return first;
    BoolOp node{BoolOperator::or_, {first}};
    Pos pos = peek().pos;
    while (accept(Tok::kw_or)) node.values.push_back(conjunction());
    return make_expr(pos, std::move(node));
}

ExprPtr Parser::conjunction() {
    ExprPtr first = inversion();
    if (!at(Tok::kw_and)) return first;
    BoolOp node{BoolOperator::and_, {first}};
    Pos pos = peek().pos;
    while (accept(Tok::kw_and)) node.values.push_back(inversion());
    return make_expr(pos, std::move(node));
}

ExprPtr Parser::inversion() {
    if (!at(Tok::kw_not)) return comparison();
    const Token& op = advance();
    DepthScope scope(depth_);
    deeper(op);
    return make_expr(op.pos, UnaryOp{UnaryOperator::not_, inversion()});
}

ExprPtr Parser::comparison() {
    ExprPtr left = arith();
    Compare node{left, {}, {}};
    Pos pos, op_pos;
    while (auto op = compare_operator(op_pos)) {
        if (node.ops.empty()) pos = op_pos;
        node.ops.push_back(*op);
        node.comparators.push_back(arith());
    }
    return node.ops.empty() ? left : make_expr(pos, std::move(node));
}

// Consumes a comparison operator if one comes next; `not in` and `is not` are two tokens.
std::optional<CompareOperator> Parser::compare_operator(Pos& pos) {
    pos = peek().pos;
    switch (peek().kind) {
        case Tok::eq: advance(); return CompareOperator::eq;
        case Tok::ne: advance(); return CompareOperator::ne;
        case Tok::lt: advance(); return CompareOperator::lt;
        case Tok::le: advance(); return CompareOperator::le;
        case Tok::gt: advance(); return CompareOperator::gt;
        case Tok::ge: advance(); return CompareOperator::ge;
        case Tok::kw_in: advance(); return CompareOperator::in;
        case Tok::kw_is:
            advance();
            return accept(Tok::kw_not) ? CompareOperator::is_not : CompareOperator::is;
        case Tok::kw_not:
            if (peek(1).kind != Tok::kw_in) return std::nullopt;
            advance(), advance();
            return CompareOperator::not_in;
        default: return std::nullopt;
    }
}

// The loops below build left-leaning trees: a + b + c is ((a + b) + c). They parse in a
// loop, so a long chain is not nesting and needs no depth limit; the interpreter, the
// printer and the destructor walk the left spine in a loop too (eval.cpp, ast_print.cpp,
// ast.cpp).
ExprPtr Parser::arith() {
    ExprPtr left = term();
    while (at(Tok::plus) || at(Tok::minus)) {
        const Token& op = advance();
        auto kind = op.kind == Tok::plus ? BinaryOperator::add : BinaryOperator::sub;
        left = make_expr(op.pos, BinOp{kind, left, term()});
    }
    return left;
}

ExprPtr Parser::term() {
    ExprPtr left = factor();
    while (auto kind = term_operator(peek().kind)) {
        const Token& op = advance();
        left = make_expr(op.pos, BinOp{*kind, left, factor()});
    }
    return left;
}

ExprPtr Parser::factor() {
    if (!at(Tok::plus) && !at(Tok::minus)) return power();
    const Token& op = advance();
    DepthScope scope(depth_);
    deeper(op);
    auto kind = op.kind == Tok::minus ? UnaryOperator::neg : UnaryOperator::plus;
    return make_expr(op.pos, UnaryOp{kind, factor()});
}

ExprPtr Parser::power() {
    ExprPtr base = primary();
    if (!at(Tok::star_star)) return base;
    const Token& op = advance();
    DepthScope scope(depth_);
    deeper(op);
    // The exponent is a factor, not a power: 2**-1 parses, and 2**3**2 nests to the right.
    return make_expr(op.pos, BinOp{BinaryOperator::pow, base, factor()});
}

ExprPtr Parser::primary() {
    Pos start = peek().pos;
    ExprPtr expr = atom();
    DepthScope scope(depth_);
    while (at(Tok::dot) || at(Tok::lparen) || at(Tok::lbracket)) {
        const Token& open = advance();
        deeper(open);
        if (open.kind == Tok::lparen) {
            expr = make_expr(start, call(expr));
        } else if (open.kind == Tok::lbracket) {
            expr = make_expr(start, subscript(expr));
        } else {
            const Token& name = expect(Tok::name, "an attribute name after '.'");
            expr = make_expr(start, Attribute{expr, name.text});
        }
    }
    return expr;
}

ExprPtr Parser::atom() {
    const Token& token = peek();
    switch (token.kind) {
        case Tok::name: advance(); return make_expr(token.pos, Name{token.text});
        case Tok::number: advance(); return number(token);
        case Tok::kw_none: advance(); return make_expr(token.pos, NoneLit{});
        case Tok::kw_true: advance(); return make_expr(token.pos, Bool{true});
        case Tok::kw_false: advance(); return make_expr(token.pos, Bool{false});
        case Tok::lparen: return parenthesized();
        case Tok::lbracket: return list_display();
        case Tok::lbrace: return dict_display();
        case Tok::string:
        case Tok::fstring: {
            // "a" "b" is "ab", as in Python; with an f-string among them the whole is one.
            bool formatted = false;
            for (size_t i = 0; peek(i).kind == Tok::string || peek(i).kind == Tok::fstring; ++i)
                formatted = formatted || peek(i).kind == Tok::fstring;
            if (!formatted) {
                String joined;
                while (at(Tok::string)) joined.value += advance().text;
                return make_expr(token.pos, std::move(joined));
            }
            FString joined;
            while (at(Tok::string) || at(Tok::fstring)) {
                const Token& piece = advance();
                if (piece.kind == Tok::string) {
                    joined.parts.push_back({piece.text, nullptr, 0, ""});
                    continue;
                }
                ExprPtr part = fstring(piece);
                for (const FStringPart& p : part->as<FString>()->parts) joined.parts.push_back(p);
            }
            return make_expr(token.pos, std::move(joined));
        }
        case Tok::kw_lambda: return lambda();
        case Tok::reserved:
            fail(token.pos, "'" + token.text + "' is not supported in kiln script");
        case Tok::star_star:
        case Tok::star:
            fail(token.pos, "unpacking with '" + std::string(spelling(token.kind)) +
                                "' is only allowed in call arguments, as in f(*args)");
        default: fail_at(token, "expected an expression");
    }
}

ExprPtr Parser::number(const Token& token) {
    Number number;
    const char* first = token.text.data();
    const char* last = first + token.text.size();
    number.is_float = token.text.find_first_of(".eE") != std::string::npos;
    std::from_chars_result result =
        number.is_float ? std::from_chars(first, last, number.float_value)
                        : std::from_chars(first, last, number.int_value);
    if (result.ec == std::errc::result_out_of_range)
        fail(token.pos, number.is_float ? "float literal out of range"
                                        : "integer literal too large for a 64-bit integer");
    if (result.ec != std::errc() || result.ptr != last)
        fail(token.pos, "invalid number literal '" + token.text + "'");
    return make_expr(token.pos, number);
}

// () is an empty tuple, (x) is x, (x,) and (x, y) are tuples.
ExprPtr Parser::parenthesized() {
    const Token& open = advance();
    if (accept(Tok::rparen)) return make_expr(open.pos, Tuple{});
    ExprPtr first = expression();
    if (at(Tok::kw_for)) {
        ExprPtr gen = comprehension(open.pos, ComprehensionKind::generator, first, nullptr);
        expect(Tok::rparen, "')' after the generator expression");
        return gen;
    }
    if (accept(Tok::rparen)) return first;
    if (!at(Tok::comma)) fail_at(peek(), "expected ',' or ')'");
    Tuple tuple{{first}};
    while (accept(Tok::comma) && !at(Tok::rparen)) tuple.elements.push_back(expression());
    expect(Tok::rparen, "',' or ')'");
    return make_expr(open.pos, std::move(tuple));
}

ExprPtr Parser::list_display() {
    const Token& open = advance();
    List list;
    while (!at(Tok::rbracket)) {
        list.elements.push_back(expression());
        if (list.elements.size() == 1 && at(Tok::kw_for)) {
            ExprPtr comp = comprehension(open.pos, ComprehensionKind::list, list.elements[0], nullptr);
            expect(Tok::rbracket, "']' after the list comprehension");
            return comp;
        }
        if (!accept(Tok::comma)) break;
    }
    expect(Tok::rbracket, "',' or ']' in the list");
    return make_expr(open.pos, std::move(list));
}

ExprPtr Parser::dict_display() {
    const Token& open = advance();
    Dict dict;
    while (!at(Tok::rbrace)) {
        if (at(Tok::star_star)) fail(peek().pos, "'**' unpacking is not supported in kiln script");
        ExprPtr key = expression();
        if (dict.items.empty() && (at(Tok::comma) || at(Tok::rbrace) || at(Tok::kw_for)))
            fail(key->pos, "sets are not supported in kiln script; use a list");
        expect(Tok::colon, "':' after the dict key");
        dict.items.push_back({key, expression()});
        if (dict.items.size() == 1 && at(Tok::kw_for)) {
            ExprPtr comp = comprehension(open.pos, ComprehensionKind::dict, key, dict.items[0].value);
            expect(Tok::rbrace, "'}' after the dict comprehension");
            return comp;
        }
        if (!accept(Tok::comma)) break;
    }
    expect(Tok::rbrace, "',' or '}' in the dict");
    return make_expr(open.pos, std::move(dict));
}

// After the '(': positional arguments, *unpacked ones, and name=value keywords.
Call Parser::call(ExprPtr func) {
    Call node{func, {}, {}};
    while (!at(Tok::rparen)) {
        if (at(Tok::star_star)) {
            const Token& stars = advance();
            node.keywords.push_back({"", expression(), stars.pos});
        } else if (accept(Tok::star)) {
            node.args.push_back({expression(), true});
        } else if (at(Tok::name) && peek(1).kind == Tok::assign) {
            keyword_argument(node);
        } else {
            if (!node.keywords.empty())
                fail(peek().pos, "positional argument follows keyword argument");
            node.args.push_back({expression(), false});
            // f(x for x in xs): a generator as the only argument needs no parentheses of its own.
            if (at(Tok::kw_for)) {
                if (node.args.size() != 1 || !node.keywords.empty() || node.args[0].unpack)
                    fail(peek().pos, "a generator expression must be parenthesized unless it is the only argument");
                ExprPtr element = node.args[0].value;
                node.args[0].value = comprehension(element->pos, ComprehensionKind::generator, element, nullptr);
                if (!at(Tok::rparen)) fail_at(peek(), "expected ')' after the generator expression");
            }
        }
        if (!accept(Tok::comma)) break;
    }
    expect(Tok::rparen, "',' or ')' after the call arguments");
    return node;
}

void Parser::keyword_argument(Call& call) {
    const Token& name = advance();
    advance();  // the '='
    for (const Keyword& keyword : call.keywords)
        if (!keyword.name.empty() && keyword.name == name.text) fail(name.pos, "keyword argument repeated: " + name.text);
    call.keywords.push_back({name.text, expression(), name.pos});
}

// After the '[': x[i], x[a:b:c], x[:, 0].
Subscript Parser::subscript(ExprPtr object) {
    if (at(Tok::rbracket)) fail_at(peek(), "expected an index inside '[]'");
    Pos start = peek().pos;
    ExprPtr index = slice_or_index();
    if (at(Tok::comma)) {
        Tuple tuple{{index}};
        while (accept(Tok::comma) && !at(Tok::rbracket)) tuple.elements.push_back(slice_or_index());
        index = make_expr(start, std::move(tuple));
    }
    expect(Tok::rbracket, "']' after the index");
    return Subscript{object, index};
}

ExprPtr Parser::slice_or_index() {
    Pos pos = peek().pos;
    ExprPtr lower = at(Tok::colon) ? nullptr : expression();
    if (!accept(Tok::colon)) return lower;
    auto optional_part = [&]() -> ExprPtr {
        bool omitted = at(Tok::colon) || at(Tok::comma) || at(Tok::rbracket);
        return omitted ? nullptr : expression();
    };
    Slice slice;
    slice.lower = lower;
    slice.upper = optional_part();
    if (accept(Tok::colon)) slice.step = optional_part();
    return make_expr(pos, std::move(slice));
}

// The target of a for loop stops before 'in', so it is parsed above the comparisons.
ExprPtr Parser::target_list() {
    Pos start = peek().pos;
    ExprPtr first = arith();
    if (!at(Tok::comma)) return first;
    Tuple tuple{{first}};
    while (accept(Tok::comma) && !at(Tok::kw_in)) tuple.elements.push_back(arith());
    return make_expr(start, std::move(tuple));
}

ExprPtr Parser::comprehension(Pos pos, ComprehensionKind kind, ExprPtr element, ExprPtr value) {
    Comprehension node{kind, std::move(element), std::move(value), {}};
    while (at(Tok::kw_for)) {
        const Token& keyword = advance();
        if (at(Tok::kw_in)) fail_at(peek(), "expected a loop variable after 'for'");
        ComprehensionFor clause;
        clause.target = target_list();
        check_target(clause.target, false);
        expect(Tok::kw_in, "'in' after the loop variable");
        clause.iter = disjunction();
        while (accept(Tok::kw_if)) clause.ifs.push_back(disjunction());
        (void)keyword;
        node.fors.push_back(std::move(clause));
    }
    return make_expr(pos, std::move(node));
}

// lambda x, y=1, *args: expression. Its Def returns the expression, so calling a lambda is
// calling a function.
ExprPtr Parser::lambda() {
    const Token& keyword = advance();
    auto def = Def{};
    def.name = "<lambda>";
    while (!at(Tok::colon)) {
        if (at(Tok::star_star)) {
            advance();
            def.kwarg = expect(Tok::name, "a parameter name after '**'").text;
        } else if (accept(Tok::star)) {
            def.vararg = expect(Tok::name, "a parameter name after '*'").text;
        } else {
            const Token& name = expect(Tok::name, "a parameter name or ':' after 'lambda'");
            for (const Param& p : def.params)
                if (p.name == name.text) fail(name.pos, "duplicate parameter '" + name.text + "'");
            Param param{name.text, nullptr, nullptr, name.pos};
            if (accept(Tok::assign)) param.default_value = expression();
            if (!param.default_value && !def.params.empty() && def.params.back().default_value)
                fail(name.pos, "parameter '" + name.text + "' without a default follows one with a default");
            if (!def.vararg.empty()) def.kwonly_params.push_back(param);
            else def.params.push_back(param);
        }
        if (!accept(Tok::comma)) break;
    }
    expect(Tok::colon, "':' after the lambda's parameters");
    ExprPtr body = expression();
    def.body.push_back(make_stmt(body->pos, Return{body}));
    return make_expr(keyword.pos, Lambda{make_stmt(keyword.pos, std::move(def))});
}

// f"a {x!r:>8} b": the text between braces is parsed as an expression of its own; {{ and }}
// are literal braces. Positions inside the braces point at the f-string itself.
ExprPtr Parser::fstring(const Token& token) {
    const std::string& text = token.text;
    FString node;
    std::string literal;
    size_t i = 0;
    auto fail_here = [&](const std::string& message) { fail(token.pos, "f-string: " + message); };
    while (i < text.size()) {
        char c = text[i];
        if (c == '}') {
            if (i + 1 < text.size() && text[i + 1] == '}') {
                literal += '}', i += 2;
                continue;
            }
            fail_here("single '}' is not allowed");
        }
        if (c != '{') {
            literal += c, ++i;
            continue;
        }
        if (i + 1 < text.size() && text[i + 1] == '{') {
            literal += '{', i += 2;
            continue;
        }
        // Find the end of the expression: a ':' or '!' or '}' outside brackets and strings.
        size_t start = ++i;
        int depth = 0;
        char quote = 0;
        size_t expr_end = std::string::npos;
        for (; i < text.size(); ++i) {
            char d = text[i];
            if (quote) {
                if (d == quote) quote = 0;
                continue;
            }
            if (d == '\'' || d == '"') quote = d;
            else if (d == '(' || d == '[' || d == '{') depth++;
            else if (d == ')' || d == ']' || (d == '}' && depth > 0)) depth--;
            else if (depth == 0 && (d == '}' || d == ':' || (d == '!' && i + 1 < text.size() && text[i + 1] != '='))) {
                expr_end = i;
                break;
            }
        }
        if (expr_end == std::string::npos) fail_here("expecting '}'");
        std::string source = text.substr(start, expr_end - start);
        if (source.find_first_not_of(" \t\n") == std::string::npos) fail_here("empty expression not allowed");
        FStringPart part{std::move(literal), nullptr, 0, ""};
        literal.clear();
        try {
            // Padded so that positions in the expression fall on the f-string's line.
            std::string padded = std::string(size_t(token.pos.line - 1), '\n') + "(" + source + ")";
            part.value = Parser(padded, filename_).lone_expression();
        } catch (const SyntaxError& e) {
            fail_here(e.message() + " in {" + source + "}");
        }
        if (text[i] == '!') {
            if (i + 1 >= text.size() || (text[i + 1] != 'r' && text[i + 1] != 's' && text[i + 1] != 'a'))
                fail_here("invalid conversion character: expected 's', 'r' or 'a'");
            part.conversion = text[i + 1] == 'a' ? 'r' : text[i + 1];
            i += 2;
        }
        if (i < text.size() && text[i] == ':') {
            size_t spec_start = ++i;
            while (i < text.size() && text[i] != '}') {
                if (text[i] == '{') fail_here("nested replacement fields in a format spec are not supported in kiln script");
                ++i;
            }
            part.spec = text.substr(spec_start, i - spec_start);
        }
        if (i >= text.size() || text[i] != '}') fail_here("expecting '}'");
        ++i;
        node.parts.push_back(std::move(part));
    }
    if (!literal.empty() || node.parts.empty()) node.parts.push_back({std::move(literal), nullptr, 0, ""});
    return make_expr(token.pos, std::move(node));
}

}  // namespace kiln::script::detail
