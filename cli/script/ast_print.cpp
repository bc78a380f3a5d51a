// Printing the kiln script AST (format described in ast_print.h).
#include "cli/script/ast_print.h"

#include <charconv>
#include <cstdio>

namespace kiln::script {

namespace {

std::string text(const ExprPtr& expr) { return expr ? dump(*expr) : "_"; }

std::string quoted(const std::string& value) {
    std::string out = "\"";
    for (char c : value) {
        switch (c) {
            case '\n': out += "\\n"; break;
            case '\t': out += "\\t"; break;
            case '\r': out += "\\r"; break;
            case '\\': out += "\\\\"; break;
            case '"': out += "\\\""; break;
            default:
                if (c >= 0 && c < ' ') {
                    char hex[8];
                    std::snprintf(hex, sizeof hex, "\\x%02x", unsigned(c));
                    out += hex;
                } else {
                    out += c;
                }
        }
    }
    return out + "\"";
}

// The shortest text that reads back as the same double, marked as a float: 3.0, not 3.
std::string float_text(double value) {
    char buffer[64];
    auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
    std::string out(buffer, result.ptr);
    if (out.find_first_not_of("-0123456789") == std::string::npos) out += ".0";
    return out;
}

// "not in" and "is not" print as not-in and is-not, so every operator is one word.
std::string operator_word(CompareOperator op) {
    std::string word(spelling(op));
    for (char& c : word)
        if (c == ' ') c = '-';
    return word;
}

std::string joined(std::string_view head, const std::vector<ExprPtr>& elements) {
    std::string out = "(" + std::string(head);
    for (const ExprPtr& element : elements) out += " " + text(element);
    return out + ")";
}

// ---- one overload per expression node

std::string node_text(const Number& n) {
    return n.is_float ? float_text(n.float_value) : std::to_string(n.int_value);
}
std::string node_text(const String& n) { return quoted(n.value); }
std::string node_text(const Name& n) { return n.id; }
std::string node_text(const NoneLit&) { return "None"; }
std::string node_text(const Bool& n) { return n.value ? "True" : "False"; }
std::string node_text(const List& n) { return joined("list", n.elements); }
std::string node_text(const Tuple& n) { return joined("tuple", n.elements); }
std::string node_text(const Dict& n) {
    std::string out = "(dict";
    for (const DictItem& item : n.items)
        out += " (" + text(item.key) + " " + text(item.value) + ")";
    return out + ")";
}
std::string node_text(const Attribute& n) { return "(. " + text(n.object) + " " + n.name + ")"; }
std::string node_text(const Call& n) {
    std::string out = "(call " + text(n.func);
    for (const Argument& arg : n.args) out += (arg.unpack ? " *" : " ") + text(arg.value);
    for (const Keyword& keyword : n.keywords)
        out += keyword.name.empty() ? " **" + text(keyword.value) : " " + keyword.name + "=" + text(keyword.value);
    return out + ")";
}
std::string node_text(const Slice& n) {
    return "(slice " + text(n.lower) + " " + text(n.upper) + " " + text(n.step) + ")";
}
std::string node_text(const Subscript& n) {
    return "(index " + text(n.object) + " " + text(n.index) + ")";
}
// (+ (+ a b) c): built along the left spine in a loop, so a chain of any length prints.
std::string node_text(const BinOp& n) {
    std::vector<const BinOp*> spine{&n};
    while (const BinOp* inner = spine.back()->left->as<BinOp>()) spine.push_back(inner);
    std::string out;
    for (const BinOp* op : spine) out += "(" + std::string(spelling(op->op)) + " ";
    out += text(spine.back()->left);
    for (auto it = spine.rbegin(); it != spine.rend(); ++it) out += " " + text((*it)->right) + ")";
    return out;
}
std::string node_text(const UnaryOp& n) {
    const char* name = n.op == UnaryOperator::neg    ? "neg"
                       : n.op == UnaryOperator::plus ? "pos"
                                                     : "not";
    return std::string("(") + name + " " + text(n.operand) + ")";
}
std::string node_text(const Compare& n) {
    if (n.ops.size() == 1)
        return "(" + operator_word(n.ops[0]) + " " + text(n.left) + " " +
               text(n.comparators[0]) + ")";
    std::string out = "(chain " + text(n.left);
    for (size_t i = 0; i < n.ops.size(); ++i)
        out += " " + operator_word(n.ops[i]) + " " + text(n.comparators[i]);
    return out + ")";
}
std::string node_text(const BoolOp& n) { return joined(spelling(n.op), n.values); }
std::string node_text(const IfExp& n) {
    return "(if " + text(n.test) + " " + text(n.if_true) + " " + text(n.if_false) + ")";
}
std::string node_text(const FString& n) {
    std::string out = "(fstring";
    for (const FStringPart& p : n.parts) {
        if (!p.literal.empty()) out += " " + quoted(p.literal);
        if (!p.value) continue;
        out += " {" + text(p.value);
        if (p.conversion) out += std::string("!") + p.conversion;
        if (!p.spec.empty()) out += ":" + p.spec;
        out += "}";
    }
    return out + ")";
}
std::string def_params_text(const Def& n);
std::string node_text(const Lambda& n) {
    const Def& def = *n.def->as<Def>();
    return "(lambda (" + def_params_text(def) + ") " + text(def.body[0]->as<Return>()->value) + ")";
}
std::string node_text(const Comprehension& n) {
    const char* kind = n.kind == ComprehensionKind::list ? "listcomp" : n.kind == ComprehensionKind::dict ? "dictcomp" : "genexp";
    std::string out = std::string("(") + kind + " " + text(n.element);
    if (n.value) out += " " + text(n.value);
    for (const ComprehensionFor& f : n.fors) {
        out += " (for " + text(f.target) + " " + text(f.iter);
        for (const ExprPtr& cond : f.ifs) out += " (if " + text(cond) + ")";
        out += ")";
    }
    return out + ")";
}
std::string param_text(const Param& param) {
    std::string out = param.name;
    if (param.annotation) out += ":" + text(param.annotation);
    if (param.default_value) out += "=" + text(param.default_value);
    return out;
}
std::string def_params_text(const Def& n) {
    std::string params;
    for (const Param& param : n.params) params += " " + param_text(param);
    if (!n.vararg.empty()) params += " *" + n.vararg;
    for (const Param& param : n.kwonly_params) params += " " + param_text(param);
    if (!n.kwarg.empty()) params += " **" + n.kwarg;
    if (!params.empty()) params.erase(0, 1);  // the leading space
    return params;
}

// ---- statements, one overload per node

class StmtPrinter {
   public:
    std::string out;

    void body(int depth, const Body& stmts) {
        for (const StmtPtr& stmt : stmts) print(depth, *stmt);
    }
    void print(int depth, const Stmt& stmt) {
        std::visit([&](const auto& node) { print(depth, node); }, stmt.node);
    }

   private:
    void line(int depth, const std::string& content) {
        out += std::string(size_t(2 * depth), ' ') + content + "\n";
    }

    void print(int depth, const ExprStmt& n) { line(depth, "expr " + text(n.value)); }
    void print(int depth, const Assign& n) {
        std::string content = "assign";
        for (const ExprPtr& target : n.targets) content += " " + text(target) + " =";
        line(depth, content + " " + text(n.value));
    }
    void print(int depth, const AugAssign& n) {
        line(depth, "augassign " + text(n.target) + " " + std::string(spelling(n.op)) + "= " +
                        text(n.value));
    }
    void print(int depth, const If& n) {
        for (size_t i = 0; i < n.branches.size(); ++i) {
            line(depth, (i == 0 ? "if " : "elif ") + text(n.branches[i].test));
            body(depth + 1, n.branches[i].body);
        }
        if (n.orelse.empty()) return;
        line(depth, "else");
        body(depth + 1, n.orelse);
    }
    void print(int depth, const For& n) {
        line(depth, "for " + text(n.target) + " in " + text(n.iter));
        body(depth + 1, n.body);
    }
    void print(int depth, const While& n) {
        line(depth, "while " + text(n.test));
        body(depth + 1, n.body);
    }
    void print(int depth, const Break&) { line(depth, "break"); }
    void print(int depth, const Continue&) { line(depth, "continue"); }
    void print(int depth, const Pass&) { line(depth, "pass"); }
    void print(int depth, const Return& n) {
        line(depth, n.value ? "return " + text(n.value) : "return");
    }
    void print(int depth, const Def& n) {
        for (const ExprPtr& decorator : n.decorators) line(depth, "@" + text(decorator));
        std::string returns = n.returns ? " -> " + text(n.returns) : "";
        line(depth, "def " + n.name + " (" + def_params_text(n) + ")" + returns);
        body(depth + 1, n.body);
    }
    void print(int depth, const Import& n) { line(depth, "import " + names_text(n.names)); }
    void print(int depth, const ImportFrom& n) {
        line(depth, "from " + n.module + " import " + names_text(n.names));
    }
    void print(int depth, const Assert& n) {
        line(depth, "assert " + text(n.test) + (n.message ? " " + text(n.message) : ""));
    }

    void print(int depth, const ClassDef& n) {
        for (const ExprPtr& decorator : n.decorators) line(depth, "@" + text(decorator));
        line(depth, "class " + n.name + (n.bases.empty() ? "" : " (" + text(n.bases[0]) + ")"));
        body(depth + 1, n.body);
    }
    void print(int depth, const Try& n) {
        line(depth, "try");
        body(depth + 1, n.body);
        for (const ExceptHandler& h : n.handlers) {
            line(depth, "except" + (h.type ? " " + text(h.type) : "") + (h.name.empty() ? "" : " as " + h.name));
            body(depth + 1, h.body);
        }
        if (!n.orelse.empty()) line(depth, "else"), body(depth + 1, n.orelse);
        if (!n.finalbody.empty()) line(depth, "finally"), body(depth + 1, n.finalbody);
    }
    void print(int depth, const Raise& n) {
        line(depth, "raise" + (n.exc ? " " + text(n.exc) : "") + (n.cause ? " from " + text(n.cause) : ""));
    }
    void print(int depth, const With& n) {
        std::string items;
        for (const WithItem& item : n.items) items += " " + text(item.context) + (item.target ? " as " + text(item.target) : "");
        line(depth, "with" + items);
        body(depth + 1, n.body);
    }
    void print(int depth, const Global& n) { line(depth, "global " + joined_names(n.names)); }
    void print(int depth, const Nonlocal& n) { line(depth, "nonlocal " + joined_names(n.names)); }
    void print(int depth, const Delete& n) {
        std::string out = "del";
        for (const ExprPtr& t : n.targets) out += " " + text(t);
        line(depth, out);
    }
    static std::string joined_names(const std::vector<std::string>& names) {
        std::string out;
        for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
        return out;
    }
    static std::string names_text(const std::vector<ImportName>& names) {
        std::string out;
        for (const ImportName& name : names) {
            if (!out.empty()) out += ", ";
            out += name.name + (name.alias.empty() ? "" : " as " + name.alias);
        }
        return out;
    }
};

}  // namespace

std::string dump(const Expr& expr) {
    return std::visit([](const auto& node) { return node_text(node); }, expr.node);
}

std::string dump(const Stmt& stmt) {
    StmtPrinter printer;
    printer.print(0, stmt);
    return printer.out;
}

std::string dump(const Module& module) {
    StmtPrinter printer;
    printer.body(0, module.body);
    return printer.out;
}

}  // namespace kiln::script
