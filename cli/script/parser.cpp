// The kiln script parser: the entry points of parser.h, the token cursor, and statements.
// Expressions are in parse_expr.cpp.
#include "cli/script/parser.h"

#include <algorithm>
#include <optional>

#include "cli/script/parser_impl.h"

namespace kiln::script {

namespace detail {

namespace {

// Generous for hand-written code; small enough that no input can overflow the C++ stack.
constexpr int kMaxDepth = 200;

std::string describe(const Token& token) {
    switch (token.kind) {
        case Tok::name: return "name '" + token.text + "'";
        case Tok::number: return "number " + token.text;
        case Tok::string: return "a string";
        case Tok::reserved: return "'" + token.text + "'";
        case Tok::newline:
        case Tok::end: return std::string(spelling(token.kind));
        case Tok::indent: return "an indented line";
        case Tok::dedent: return "the end of the block";
        default: return "'" + std::string(spelling(token.kind)) + "'";
    }
}

// What a bad assignment target is, for "cannot assign to ...".
std::string describe(const Expr& expr) {
    if (expr.is<Call>()) return "a function call";
    if (expr.is<Compare>()) return "a comparison";
    if (expr.is<Tuple>()) return "a tuple";
    if (expr.is<List>()) return "a list";
    if (expr.is<Dict>()) return "a dict";
    if (expr.is<IfExp>()) return "a conditional expression";
    if (expr.is<Number>() || expr.is<String>() || expr.is<Bool>() || expr.is<NoneLit>())
        return "a literal";
    return "an expression";
}

std::optional<BinaryOperator> augmented_operator(Tok kind) {
    switch (kind) {
        case Tok::plus_assign: return BinaryOperator::add;
        case Tok::minus_assign: return BinaryOperator::sub;
        case Tok::star_assign: return BinaryOperator::mul;
        case Tok::slash_assign: return BinaryOperator::div;
        case Tok::slash_slash_assign: return BinaryOperator::floordiv;
        case Tok::percent_assign: return BinaryOperator::mod;
        case Tok::star_star_assign: return BinaryOperator::pow;
        case Tok::at_assign: return BinaryOperator::matmul;
        default: return std::nullopt;
    }
}

}  // namespace

Parser::Parser(std::string_view source, std::string filename)
    : source_(source), filename_(std::move(filename)), tokens_(tokenize(source_, filename_)) {}

Body Parser::file() {
    Body body;
    while (!at(Tok::end)) statement(body);
    return body;
}

ExprPtr Parser::lone_expression() {
    accept(Tok::indent);  // leading spaces do no harm in a lone expression
    ExprPtr expr = expression_list();
    accept(Tok::newline);
    while (accept(Tok::dedent)) {
    }
    if (!at(Tok::end)) fail_at(peek(), "expected the end of the expression");
    return expr;
}

// ---- token cursor

const Token& Parser::peek(size_t ahead) const {
    return tokens_[std::min(next_ + ahead, tokens_.size() - 1)];  // the last token is Tok::end
}

const Token& Parser::advance() {
    const Token& token = peek();
    if (next_ < tokens_.size() - 1) next_++;
    return token;
}

bool Parser::accept(Tok kind) {
    if (!at(kind)) return false;
    advance();
    return true;
}

const Token& Parser::expect(Tok kind, std::string_view what) {
    if (!at(kind)) fail_at(peek(), "expected " + std::string(what));
    return advance();
}

void Parser::fail_at(const Token& token, const std::string& message) {
    // At the end of input the lexer closes every open block with dedents before `end`: a
    // block that ends there (`def f():` / `    if x:` as the last lines) still waits for input.
    size_t rest = size_t(&token - tokens_.data());
    bool only_dedents_left = rest < tokens_.size();
    for (size_t i = rest; only_dedents_left && i < tokens_.size(); ++i)
        only_dedents_left = tokens_[i].kind == Tok::dedent || tokens_[i].kind == Tok::end;
    if (token.kind == Tok::end || (token.kind == Tok::dedent && only_dedents_left))
        throw SyntaxError("unexpected end of input: " + message, filename_, source_, token.pos,
                          EndOfInput::open_block);
    fail(token.pos, message + ", found " + describe(token));
}

void Parser::fail(Pos pos, const std::string& message) {
    throw SyntaxError(message, filename_, source_, pos);
}

void Parser::deeper(const Token& at) {
    if (++depth_ > kMaxDepth)
        fail(at.pos, "too deeply nested: kiln script allows " + std::to_string(kMaxDepth) +
                         " levels of brackets, operators and blocks");
}

// ---- statements

void Parser::statement(Body& body) {
    const Token& token = peek();
    switch (token.kind) {
        case Tok::indent:
            throw IndentationError("unexpected indent", filename_, source_, token.pos);
        case Tok::at: body.push_back(decorated()); return;
        case Tok::kw_def: body.push_back(def_statement({})); return;
        case Tok::kw_class: body.push_back(class_statement({})); return;
        case Tok::kw_if: body.push_back(if_statement()); return;
        case Tok::kw_for: body.push_back(for_statement()); return;
        case Tok::kw_while: body.push_back(while_statement()); return;
        case Tok::kw_try: body.push_back(try_statement()); return;
        case Tok::kw_with: body.push_back(with_statement()); return;
        case Tok::kw_elif:
        case Tok::kw_else:
            fail(token.pos, "'" + std::string(spelling(token.kind)) +
                                "' without a matching 'if' (check its indentation)");
        case Tok::kw_except:
        case Tok::kw_finally:
            fail(token.pos, "'" + std::string(spelling(token.kind)) +
                                "' without a matching 'try' (check its indentation)");
        default: break;
    }
    simple_statements(body);
}

void Parser::simple_statements(Body& body) {
    body.push_back(simple_statement());
    while (accept(Tok::semicolon)) {
        if (at(Tok::newline)) break;  // a trailing ';' is allowed
        body.push_back(simple_statement());
    }
    expect(Tok::newline, "end of line after the statement");
}

StmtPtr Parser::simple_statement() {
    const Token& token = peek();
    switch (token.kind) {
        case Tok::kw_pass: advance(); return make_stmt(token.pos, Pass{});
        case Tok::kw_break: advance(); return make_stmt(token.pos, Break{});
        case Tok::kw_continue: advance(); return make_stmt(token.pos, Continue{});
        case Tok::kw_return: return return_statement();
        case Tok::kw_import: return import_statement();
        case Tok::kw_from: return from_import_statement();
        case Tok::kw_assert: return assert_statement();
        case Tok::kw_raise: return raise_statement();
        case Tok::kw_global:
        case Tok::kw_nonlocal: return names_statement();
        case Tok::kw_del: return del_statement();
        case Tok::semicolon: fail(token.pos, "expected a statement before ';'");
        default: return expression_statement();
    }
}

Body Parser::block(const Token& header) {
    if (!at(Tok::newline)) {  // if x: return 1
        Body body;
        simple_statements(body);
        return body;
    }
    advance();
    if (!at(Tok::indent)) {
        std::string message = "expected an indented block after '" +
                              std::string(spelling(header.kind)) + "' on line " +
                              std::to_string(header.pos.line);
        try {
            fail_at(peek(), message);
        } catch (const SyntaxError& e) {
            if (e.end_of_input() != EndOfInput::no) throw;  // the REPL waits for the block
            throw IndentationError(e.message(), filename_, source_, e.pos());
        }
    }
    DepthScope scope(depth_);
    deeper(advance());
    Body body;
    while (!accept(Tok::dedent)) statement(body);
    return body;
}

// The ':' after the condition of an if, elif or while, with a hint for `if x = 1:`.
void Parser::colon_after_condition(const Token& keyword) {
    std::string what = "':' after the '" + std::string(spelling(keyword.kind)) + "' condition";
    if (at(Tok::assign)) fail(peek().pos, "expected " + what + ", found '=' (use '==' to compare)");
    expect(Tok::colon, what);
}

StmtPtr Parser::if_statement() {
    const Token& keyword = advance();
    If node;
    ExprPtr test = expression();
    colon_after_condition(keyword);
    node.branches.push_back({test, block(keyword)});
    while (at(Tok::kw_elif)) {
        const Token& elif = advance();
        ExprPtr elif_test = expression();
        colon_after_condition(elif);
        node.branches.push_back({elif_test, block(elif)});
    }
    if (at(Tok::kw_else)) {
        const Token& else_token = advance();
        expect(Tok::colon, "':' after 'else'");
        node.orelse = block(else_token);
    }
    return make_stmt(keyword.pos, std::move(node));
}

StmtPtr Parser::for_statement() {
    const Token& keyword = advance();
    if (at(Tok::kw_in)) fail_at(peek(), "expected a loop variable after 'for'");
    For node;
    node.target = target_list();
    check_target(node.target, false);
    expect(Tok::kw_in, "'in' after the loop variable");
    node.iter = expression_list();
    expect(Tok::colon, "':' after the iterable of the 'for'");
    node.body = block(keyword);
    return make_stmt(keyword.pos, std::move(node));
}

StmtPtr Parser::while_statement() {
    const Token& keyword = advance();
    While node;
    node.test = expression();
    colon_after_condition(keyword);
    node.body = block(keyword);
    return make_stmt(keyword.pos, std::move(node));
}

StmtPtr Parser::decorated() {
    std::vector<ExprPtr> decorators;
    while (at(Tok::at)) {
        advance();
        if (!starts_expression(peek())) fail_at(peek(), "expected a decorator after '@'");
        decorators.push_back(expression());
        expect(Tok::newline, "end of line after the decorator");
    }
    if (at(Tok::kw_class)) return class_statement(std::move(decorators));
    if (!at(Tok::kw_def)) fail_at(peek(), "expected a 'def' or 'class' after the decorator");
    return def_statement(std::move(decorators));
}

StmtPtr Parser::class_statement(std::vector<ExprPtr> decorators) {
    const Token& keyword = advance();
    ClassDef node;
    node.decorators = std::move(decorators);
    node.name = expect(Tok::name, "a class name after 'class'").text;
    if (accept(Tok::lparen)) {
        while (!at(Tok::rparen)) {
            if (at(Tok::name) && peek(1).kind == Tok::assign)
                fail(peek().pos, "class keywords (metaclass=...) are not supported in kiln script");
            node.bases.push_back(expression());
            if (!accept(Tok::comma)) break;
        }
        expect(Tok::rparen, "',' or ')' after the base classes");
        if (node.bases.size() > 1)
            fail(node.bases[1]->pos, "kiln script has single inheritance only: one base class");
    }
    expect(Tok::colon, "':' after the class name");
    node.body = block(keyword);
    return make_stmt(keyword.pos, std::move(node));
}

StmtPtr Parser::try_statement() {
    const Token& keyword = advance();
    expect(Tok::colon, "':' after 'try'");
    Try node;
    node.body = block(keyword);
    while (at(Tok::kw_except)) {
        const Token& except = advance();
        ExceptHandler handler;
        handler.pos = except.pos;
        if (!at(Tok::colon)) {
            handler.type = expression();
            if (at(Tok::comma))
                fail(peek().pos, "multiple exception types must be parenthesized: except (A, B):");
            if (accept(Tok::kw_as)) handler.name = expect(Tok::name, "a name after 'as'").text;
        }
        expect(Tok::colon, "':' after the 'except' clause");
        handler.body = block(except);
        node.handlers.push_back(std::move(handler));
    }
    for (size_t i = 0; i + 1 < node.handlers.size(); ++i)
        if (!node.handlers[i].type) fail(node.handlers[i].pos, "default 'except:' must be last");
    if (at(Tok::kw_else)) {
        const Token& else_token = advance();
        if (node.handlers.empty()) fail(else_token.pos, "'else' after 'try' needs an 'except' clause");
        expect(Tok::colon, "':' after 'else'");
        node.orelse = block(else_token);
    }
    if (at(Tok::kw_finally)) {
        const Token& finally = advance();
        expect(Tok::colon, "':' after 'finally'");
        node.finalbody = block(finally);
    }
    if (node.handlers.empty() && node.finalbody.empty())
        fail_at(peek(), "expected 'except' or 'finally' after the 'try' block");
    return make_stmt(keyword.pos, std::move(node));
}

StmtPtr Parser::raise_statement() {
    const Token& keyword = advance();
    Raise node;
    if (starts_expression(peek())) {
        node.exc = expression();
        if (accept(Tok::kw_from)) node.cause = expression();
    }
    return make_stmt(keyword.pos, std::move(node));
}

StmtPtr Parser::with_statement() {
    const Token& keyword = advance();
    With node;
    do {
        WithItem item;
        item.context = expression();
        if (accept(Tok::kw_as)) {
            item.target = target_list();
            check_target(item.target, false);
        }
        node.items.push_back(std::move(item));
    } while (accept(Tok::comma));
    expect(Tok::colon, "':' after the 'with' item");
    node.body = block(keyword);
    return make_stmt(keyword.pos, std::move(node));
}

StmtPtr Parser::names_statement() {
    const Token& keyword = advance();
    std::vector<std::string> names;
    do {
        names.push_back(expect(Tok::name, "a name after '" + std::string(spelling(keyword.kind)) + "'").text);
    } while (accept(Tok::comma));
    if (keyword.kind == Tok::kw_global) return make_stmt(keyword.pos, Global{std::move(names)});
    return make_stmt(keyword.pos, Nonlocal{std::move(names)});
}

StmtPtr Parser::del_statement() {
    const Token& keyword = advance();
    Delete node;
    do {
        ExprPtr target = target_list();
        auto check = [&](const ExprPtr& t) {
            if (!t->is<Name>() && !t->is<Subscript>() && !t->is<Attribute>())
                fail(t->pos, "cannot delete " + describe(*t));
        };
        if (auto tuple = target->as<Tuple>()) for (const ExprPtr& t : tuple->elements) check(t), node.targets.push_back(t);
        else check(target), node.targets.push_back(target);
    } while (accept(Tok::comma) && !at(Tok::newline) && !at(Tok::semicolon));
    return make_stmt(keyword.pos, std::move(node));
}

StmtPtr Parser::def_statement(std::vector<ExprPtr> decorators) {
    const Token& keyword = advance();
    Def def;
    def.decorators = std::move(decorators);
    def.name = expect(Tok::name, "a function name after 'def'").text;
    expect(Tok::lparen, "'(' after the function name");
    parameters(def);
    if (accept(Tok::arrow)) def.returns = expression();
    expect(Tok::colon, "':' after the function's parameters");
    def.body = block(keyword);
    return make_stmt(keyword.pos, std::move(def));
}

// (x, y=1, *args, scale=2): after *args, parameters can only be passed by keyword.
void Parser::parameters(Def& def) {
    std::vector<std::string> names;
    auto add_name = [&](const std::string& name, Pos pos) {
        for (const std::string& seen : names)
            if (seen == name) fail(pos, "duplicate parameter '" + name + "'");
        names.push_back(name);
    };
    while (!at(Tok::rparen)) {
        if (!def.kwarg.empty()) fail(peek().pos, "no parameter may follow the '**' parameter");
        if (at(Tok::star_star)) {
            advance();
            const Token& name = expect(Tok::name, "a parameter name after '**'");
            add_name(name.text, name.pos);
            def.kwarg = name.text;
        } else if (at(Tok::star)) {
            const Token& star = advance();
            if (!def.vararg.empty()) fail(star.pos, "only one '*' parameter is allowed");
            const Token& name = expect(Tok::name, "a parameter name after '*'");
            add_name(name.text, name.pos);
            def.vararg = name.text;
        } else {
            Param param = parameter();
            add_name(param.name, param.pos);
            bool after_default = !def.params.empty() && def.params.back().default_value;
            if (!def.vararg.empty()) {
                def.kwonly_params.push_back(param);
            } else if (after_default && !param.default_value) {
                fail(param.pos, "parameter '" + param.name +
                                    "' without a default follows one with a default");
            } else {
                def.params.push_back(param);
            }
        }
        if (!accept(Tok::comma)) break;
    }
    expect(Tok::rparen, "',' or ')' in the parameter list");
}

Param Parser::parameter() {
    const Token& name = expect(Tok::name, "a parameter name");
    Param param{name.text, nullptr, nullptr, name.pos};
    if (accept(Tok::colon)) param.annotation = expression();
    if (accept(Tok::assign)) param.default_value = expression();
    return param;
}

StmtPtr Parser::return_statement() {
    const Token& keyword = advance();
    Return node;
    if (!at(Tok::newline)) node.value = expression_list();
    return make_stmt(keyword.pos, std::move(node));
}

StmtPtr Parser::import_statement() {
    const Token& keyword = advance();
    Import node;
    do {
        node.names.push_back(import_name(true));
    } while (accept(Tok::comma));
    return make_stmt(keyword.pos, std::move(node));
}

StmtPtr Parser::from_import_statement() {
    const Token& keyword = advance();
    ImportFrom node;
    node.module = dotted_name("a module name after 'from'");
    expect(Tok::kw_import, "'import' after the module name");
    if (at(Tok::star)) fail(peek().pos, "'from ... import *' is not supported in kiln script");
    bool parenthesized = accept(Tok::lparen);  // from x import (a, b)
    do {
        if (parenthesized && at(Tok::rparen)) break;
        node.names.push_back(import_name(false));
    } while (accept(Tok::comma));
    if (parenthesized) expect(Tok::rparen, "',' or ')' after the imported names");
    return make_stmt(keyword.pos, std::move(node));
}

ImportName Parser::import_name(bool dotted) {
    ImportName name;
    name.pos = peek().pos;
    name.name = dotted ? dotted_name("a module name after 'import'")
                       : expect(Tok::name, "a name to import").text;
    if (accept(Tok::kw_as)) name.alias = expect(Tok::name, "a name after 'as'").text;
    return name;
}

std::string Parser::dotted_name(std::string_view what) {
    std::string name = expect(Tok::name, what).text;
    while (accept(Tok::dot)) name += "." + expect(Tok::name, "a name after '.'").text;
    return name;
}

StmtPtr Parser::assert_statement() {
    const Token& keyword = advance();
    Assert node;
    node.test = expression();
    if (accept(Tok::comma)) node.message = expression();
    return make_stmt(keyword.pos, std::move(node));
}

// An expression, an assignment (a = b = value, or a, b = pair) or an augmented one (x += 1).
StmtPtr Parser::expression_statement() {
    Pos pos = peek().pos;
    ExprPtr first = expression_list();
    if (at(Tok::assign)) {
        std::vector<ExprPtr> chain{first};
        while (accept(Tok::assign)) chain.push_back(expression_list());
        Assign node;
        node.value = chain.back();
        chain.pop_back();
        for (const ExprPtr& target : chain) check_target(target, false);
        node.targets = std::move(chain);
        return make_stmt(pos, std::move(node));
    }
    if (auto op = augmented_operator(peek().kind)) {
        check_target(first, true);
        advance();
        return make_stmt(pos, AugAssign{first, *op, expression_list()});
    }
    return make_stmt(pos, ExprStmt{first});
}

void Parser::check_target(const ExprPtr& target, bool augmented) {
    if (target->is<Name>() || target->is<Attribute>() || target->is<Subscript>()) return;
    const std::vector<ExprPtr>* elements = nullptr;
    if (auto* tuple = target->as<Tuple>()) elements = &tuple->elements;
    if (auto* list = target->as<List>()) elements = &list->elements;
    if (elements && !augmented) {
        for (const ExprPtr& element : *elements) check_target(element, false);
        return;
    }
    std::string what = augmented ? " in an augmented assignment" : "";
    fail(target->pos, "cannot assign to " + describe(*target) + what);
}

}  // namespace detail

// ---- entry points

ParseResult parse_program(std::string_view source, std::string filename) {
    Module module;
    module.filename = filename;
    module.source = std::string(source);
    module.body = detail::Parser(module.source, std::move(filename)).file();
    return module;
}

ExprPtr parse_expression(std::string_view source, std::string filename) {
    return detail::Parser(source, std::move(filename)).lone_expression();
}

namespace {

// The REPL gives lines each ending in '\n'; an empty last line closes the open blocks.
bool ends_with_blank_line(std::string_view source) {
    if (!source.empty() && source.back() == '\n') source.remove_suffix(1);
    size_t newline = source.rfind('\n');
    std::string_view last = newline == std::string_view::npos ? source : source.substr(newline + 1);
    return last.find_first_not_of(" \t\r\f") == std::string_view::npos;
}

bool is_compound(const Stmt& stmt) {
    return stmt.is<If>() || stmt.is<For>() || stmt.is<While>() || stmt.is<Def>() || stmt.is<ClassDef>() ||
           stmt.is<Try>() || stmt.is<With>();
}

}  // namespace

bool is_complete_input(std::string_view source) {
    bool blank_line_given = ends_with_blank_line(source);
    try {
        Module module = parse_program(source, "<stdin>");
        // Like Python's REPL, a compound statement waits for an empty line: an elif, an else
        // or more of the body may follow.
        return module.body.empty() || !is_compound(*module.body.back()) || blank_line_given;
    } catch (const SyntaxError& error) {
        switch (error.end_of_input()) {
            case EndOfInput::no: return true;  // more lines cannot fix it: report it now
            case EndOfInput::open_block: return blank_line_given;
            case EndOfInput::open_bracket: return false;
        }
    }
    return true;
}

}  // namespace kiln::script
