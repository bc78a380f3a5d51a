// The AST of kiln script: what the parser builds and the interpreter walks. Nodes are
// immutable; each is a std::variant of plain structs, so a walker is one std::visit (or
// `if (auto* call = expr.as<Call>())`) and the compiler lists any node kind it forgot.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "cli/script/source.h"

namespace kiln::script {

struct Expr;
struct Stmt;
// Shared, not unique: a function value made by `def` keeps its body alive after the Module
// that defined it is gone (the REPL parses each input into a Module of its own).
using ExprPtr = std::shared_ptr<const Expr>;
using StmtPtr = std::shared_ptr<const Stmt>;
using Body = std::vector<StmtPtr>;

// ---- operators, each listed once with its spelling in source

// clang-format off
#define KILN_SCRIPT_BINARY_OPS(X)                                                          \
    X(add, "+") X(sub, "-") X(mul, "*") X(div, "/") X(floordiv, "//") X(mod, "%") X(pow, "**") \
    X(matmul, "@")
#define KILN_SCRIPT_UNARY_OPS(X) X(neg, "-") X(plus, "+") X(not_, "not")
#define KILN_SCRIPT_COMPARE_OPS(X)                                                         \
    X(eq, "==") X(ne, "!=") X(lt, "<") X(le, "<=") X(gt, ">") X(ge, ">=") X(in, "in")       \
    X(not_in, "not in") X(is, "is") X(is_not, "is not")
#define KILN_SCRIPT_BOOL_OPS(X) X(and_, "and") X(or_, "or")
// clang-format on

#define KILN_SCRIPT_ENUM(name, spelling) name,
enum class BinaryOperator { KILN_SCRIPT_BINARY_OPS(KILN_SCRIPT_ENUM) };
enum class UnaryOperator { KILN_SCRIPT_UNARY_OPS(KILN_SCRIPT_ENUM) };
enum class CompareOperator { KILN_SCRIPT_COMPARE_OPS(KILN_SCRIPT_ENUM) };
enum class BoolOperator { KILN_SCRIPT_BOOL_OPS(KILN_SCRIPT_ENUM) };
#undef KILN_SCRIPT_ENUM

std::string_view spelling(BinaryOperator op);  // "+", "**", ...
std::string_view spelling(UnaryOperator op);
std::string_view spelling(CompareOperator op);
std::string_view spelling(BoolOperator op);

// ---- expressions

struct Number {
    bool is_float = false;  // written with a '.' or an exponent: 1. and 1e-3 are floats
    int64_t int_value = 0;
    double float_value = 0;
};
struct String {
    std::string value;  // escapes decoded; adjacent literals "a" "b" already joined
};
struct Name {
    std::string id;
};
struct NoneLit {};
struct Bool {
    bool value = false;
};
struct List {
    std::vector<ExprPtr> elements;
};
struct Tuple {
    std::vector<ExprPtr> elements;
};
struct DictItem {
    ExprPtr key;  // any expression; usually a String
    ExprPtr value;
};
struct Dict {
    std::vector<DictItem> items;  // in source order
};
struct Attribute {
    ExprPtr object;
    std::string name;
};
struct Argument {
    ExprPtr value;
    bool unpack = false;  // f(*xs): the elements of xs become positional arguments
};
struct Keyword {
    std::string name;  // empty for f(**d): the items of d become keyword arguments
    ExprPtr value;
    Pos pos;
};
struct Call {
    ExprPtr func;
    std::vector<Argument> args;     // positional, in order
    std::vector<Keyword> keywords;  // name=value, in order, names distinct
};
// a:b:c, only ever the index of a Subscript or an element of such an index tuple.
struct Slice {
    ExprPtr lower, upper, step;  // null when omitted
};
struct Subscript {
    ExprPtr object;
    ExprPtr index;  // an expression, a Slice, or a Tuple of those: x[:, 0]
};
struct BinOp {
    BinaryOperator op;
    ExprPtr left, right;
};
struct UnaryOp {
    UnaryOperator op;
    ExprPtr operand;
};
// a < b <= c: left a, ops {lt, le}, comparators {b, c}; means a < b and b <= c, b evaluated once.
struct Compare {
    ExprPtr left;
    std::vector<CompareOperator> ops;
    std::vector<ExprPtr> comparators;  // one per op
};
// a and b and c: one node with three values, evaluated left to right until one decides.
struct BoolOp {
    BoolOperator op;
    std::vector<ExprPtr> values;  // at least two
};
// if_true if test else if_false
struct IfExp {
    ExprPtr test, if_true, if_false;
};
// f"x = {x:.3f}": literal pieces and formatted expressions, in order.
struct FStringPart {
    std::string literal;  // the text before `value` (or the whole piece when value is null)
    ExprPtr value;        // null for a trailing literal
    char conversion = 0;  // 'r' for {x!r}, 's' for {x!s}, 0 for none
    std::string spec;     // the format spec after ':', e.g. ".3f"
};
struct FString {
    std::vector<FStringPart> parts;
};
// lambda x, y=1: x + y. `def` holds a Def named "<lambda>" whose body returns the expression,
// so a lambda is a function like any other.
struct Lambda {
    StmtPtr def;
};
// [x for x in xs if c], {k: v for ...}, (x for ...): one node; `for` clauses nest left to right.
struct ComprehensionFor {
    ExprPtr target;
    ExprPtr iter;
    std::vector<ExprPtr> ifs;
};
enum class ComprehensionKind { list, dict, generator };
struct Comprehension {
    ComprehensionKind kind = ComprehensionKind::list;
    ExprPtr element;  // the key for a dict
    ExprPtr value;    // the value for a dict; null otherwise
    std::vector<ComprehensionFor> fors;
};

struct Expr {
    using Node = std::variant<Number, String, Name, NoneLit, Bool, List, Tuple, Dict, Attribute,
                              Call, Slice, Subscript, BinOp, UnaryOp, Compare, BoolOp, IfExp, FString,
                              Lambda, Comprehension>;
    // Where the node's first token is; for BinOp, Compare and BoolOp, the (first) operator
    // instead, which is what a runtime error such as a shape mismatch in `a @ b` should
    // point at.
    Pos pos;
    Node node;

    // A chain a + b + c + ... is a tree as deep as the chain is long: its left operands are
    // freed in a loop, not by recursion, so no chain length overflows the C++ stack.
    ~Expr();

    template <class T>
    const T* as() const { return std::get_if<T>(&node); }
    template <class T>
    bool is() const { return std::holds_alternative<T>(node); }
};

// ---- statements

struct ExprStmt {
    ExprPtr value;
};
// a = b = value: targets {a, b}. A target is a Name, Attribute, Subscript, or a Tuple or List
// of targets (a, b = pair).
struct Assign {
    std::vector<ExprPtr> targets;
    ExprPtr value;
};
struct AugAssign {  // target op= value; target is a Name, Attribute or Subscript
    ExprPtr target;
    BinaryOperator op;
    ExprPtr value;
};
struct IfBranch {
    ExprPtr test;
    Body body;
};
struct If {
    std::vector<IfBranch> branches;  // the if, then each elif, in order
    Body orelse;                     // empty when there is no else
};
struct For {
    ExprPtr target;  // like an Assign target: i, or (i, x)
    ExprPtr iter;
    Body body;
};
struct While {
    ExprPtr test;
    Body body;
};
struct Break {};
struct Continue {};
struct Pass {};
struct Return {
    ExprPtr value;  // null for a bare return
};
struct Param {
    std::string name;
    ExprPtr default_value;  // null when none
    ExprPtr annotation;     // x: T; parsed, meant to be ignored
    Pos pos;
};
struct Def {
    std::string name;
    std::vector<ExprPtr> decorators;  // @torch.compile, @compile(mode="x"); outermost first
    std::vector<Param> params;
    std::string vararg;               // the name in *args; empty when none
    std::vector<Param> kwonly_params;  // after *args: passed by keyword only
    std::string kwarg;                // the name in **kwargs; empty when none
    ExprPtr returns;                  // -> T; null when none
    Body body;
};
struct ImportName {
    std::string name;   // dotted: torch.nn.functional
    std::string alias;  // as F; empty when none
    Pos pos;
};
struct Import {  // import torch, torch.nn as nn
    std::vector<ImportName> names;
};
struct ImportFrom {  // from torch import nn, optim as o
    std::string module;
    std::vector<ImportName> names;
};
struct Assert {
    ExprPtr test;
    ExprPtr message;  // null when none
};

// class Name(Base): body. The body runs once, like a function's, and what it binds
// becomes the class's attributes.
struct ClassDef {
    std::string name;
    std::vector<ExprPtr> decorators;
    std::vector<ExprPtr> bases;  // at most one in kiln script (single inheritance)
    Body body;
};
struct ExceptHandler {
    ExprPtr type;      // null for a bare `except:`; may be a Tuple of types
    std::string name;  // `except E as name`; empty when none
    Body body;
    Pos pos;
};
struct Try {
    Body body;
    std::vector<ExceptHandler> handlers;
    Body orelse;     // runs when the body raised nothing
    Body finalbody;  // runs however the statement ends
};
struct Raise {
    ExprPtr exc;    // null for a bare `raise` (re-raises the exception being handled)
    ExprPtr cause;  // raise X from Y; null when none
};
struct WithItem {
    ExprPtr context;
    ExprPtr target;  // `as target`; null when none
};
struct With {
    std::vector<WithItem> items;
    Body body;
};
struct Global {
    std::vector<std::string> names;
};
struct Nonlocal {
    std::vector<std::string> names;
};
struct Delete {
    std::vector<ExprPtr> targets;  // Names, Subscripts, Attributes
};

struct Stmt {
    using Node = std::variant<ExprStmt, Assign, AugAssign, If, For, While, Break, Continue, Pass,
                              Return, Def, Import, ImportFrom, Assert, ClassDef, Try, Raise, With,
                              Global, Nonlocal, Delete>;
    Pos pos;  // the first token; for a Def, the 'def' keyword (its decorators come before)
    Node node;

    template <class T>
    const T* as() const { return std::get_if<T>(&node); }
    template <class T>
    bool is() const { return std::holds_alternative<T>(node); }
};

// One parsed input: a file or one REPL entry. The source is kept for error messages
// (format_location in source.h).
struct Module {
    std::string filename;
    std::string source;
    Body body;
};

template <class T>
ExprPtr make_expr(Pos pos, T node) {
    return std::make_shared<const Expr>(Expr{pos, std::move(node)});
}
template <class T>
StmtPtr make_stmt(Pos pos, T node) {
    return std::make_shared<const Stmt>(Stmt{pos, std::move(node)});
}

}  // namespace kiln::script
