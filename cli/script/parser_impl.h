// The parser's internals, shared by parser.cpp (statements) and parse_expr.cpp (expressions).
// Not part of the API: include parser.h instead.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cli/script/ast.h"
#include "cli/script/lexer.h"

namespace kiln::script::detail {

class Parser {
   public:
    Parser(std::string_view source, std::string filename);

    Body file();              // statements up to the end of input
    ExprPtr lone_expression();  // one expression list and nothing else

   private:
    std::string_view source_;
    std::string filename_;
    std::vector<Token> tokens_;
    size_t next_ = 0;  // index of the next token in tokens_
    int depth_ = 0;    // current nesting, see deeper()

    // ---- token cursor (parser.cpp)
    const Token& peek(size_t ahead = 0) const;
    bool at(Tok kind) const { return peek().kind == kind; }
    const Token& advance();
    bool accept(Tok kind);
    // Consumes a token of `kind`, or fails with "expected <what>, found <the token>".
    const Token& expect(Tok kind, std::string_view what);
    // Fails at `token` with "<message>, found <token>"; at the end of input the message says
    // so, for the REPL's sake.
    [[noreturn]] void fail_at(const Token& token, const std::string& message);
    [[noreturn]] void fail(Pos pos, const std::string& message);
    // Counts one more level of nesting (brackets, unary operators, operator chains, blocks).
    // Why: a tree nested without limit would overflow the C++ stack while it is parsed,
    // printed, interpreted or freed; a generous limit turns that into a SyntaxError.
    void deeper(const Token& at);
    struct DepthScope {  // restores the depth when a nested construct is done
        int& depth;
        int saved;
        explicit DepthScope(int& d) : depth(d), saved(d) {}
        ~DepthScope() { depth = saved; }
    };

    // ---- statements (parser.cpp)
    void statement(Body& body);  // appends one line's statements: `a = 1; b = 2` is two
    void simple_statements(Body& body);  // simple statements separated by ';', then end of line
    StmtPtr simple_statement();
    Body block(const Token& header);  // after the ':' of a compound statement
    void colon_after_condition(const Token& keyword);
    StmtPtr if_statement();
    StmtPtr for_statement();
    StmtPtr while_statement();
    StmtPtr def_statement(std::vector<ExprPtr> decorators);
    StmtPtr decorated();
    StmtPtr class_statement(std::vector<ExprPtr> decorators);
    StmtPtr try_statement();
    StmtPtr raise_statement();
    StmtPtr with_statement();
    StmtPtr names_statement();  // global a, b / nonlocal a, b
    StmtPtr del_statement();
    void parameters(Def& def);
    Param parameter();
    StmtPtr return_statement();
    StmtPtr import_statement();
    StmtPtr from_import_statement();
    ImportName import_name(bool dotted);
    std::string dotted_name(std::string_view what);
    StmtPtr assert_statement();
    StmtPtr expression_statement();
    void check_target(const ExprPtr& target, bool augmented);

    // ---- expressions, lowest precedence first (parse_expr.cpp)
    ExprPtr expression_list();  // a, b -> Tuple
    ExprPtr expression();       // x if c else y
    ExprPtr disjunction();      // or
    ExprPtr conjunction();      // and
    ExprPtr inversion();        // not
    ExprPtr comparison();       // < <= == != > >= in, not in, is, is not (chained)
    std::optional<CompareOperator> compare_operator(Pos& pos);
    ExprPtr arith();            // + -
    ExprPtr term();             // * / // % @
    ExprPtr factor();           // unary - +
    ExprPtr power();            // ** (right-associative)
    ExprPtr primary();          // calls, attributes, subscripts
    ExprPtr atom();
    ExprPtr number(const Token& token);
    ExprPtr parenthesized();
    ExprPtr list_display();
    ExprPtr dict_display();
    Call call(ExprPtr func);  // after the '('
    void keyword_argument(Call& call);
    Subscript subscript(ExprPtr object);  // after the '['
    ExprPtr slice_or_index();
    ExprPtr target_list();  // the i, x of `for i, x in ...`
    bool starts_expression(const Token& token) const;
    ExprPtr lambda();
    ExprPtr fstring(const Token& token);
    // After the element (and value, for a dict) of a comprehension: its `for` clauses.
    ExprPtr comprehension(Pos pos, ComprehensionKind kind, ExprPtr element, ExprPtr value);
};

}  // namespace kiln::script::detail
