// The kiln script interpreter: walks the AST of cli/script/ast.h over the Values of
// value.h. Tensor ops go through kiln's dispatcher exactly as C++ calls do, so under
// compile() they are recorded, and a tensor used as a condition is a real graph break.
#pragma once
#include <iosfwd>
#include <string>
#include <vector>

#include "cli/interp/value.h"
#include "cli/script/parser.h"

namespace kiln::interp {

// A runtime error in a script: Python's kind ("TypeError", "NameError", "RuntimeError"
// for a kiln::Error from the library), the message, and a traceback of script lines.
class ScriptError : public kiln::Error {
   public:
    ScriptError(std::string kind, std::string message, std::string traceback);
    const std::string& kind() const { return kind_; }
    const std::string& message() const { return message_; }
    // The exception object a script raised or caught (an InstanceObj of an exception class);
    // null until one is made for it (exceptions.cpp: exception_object).
    ObjectPtr exception;

   private:
    std::string kind_, message_;
};

// Arguments of one call, as written: positional then name=value.
struct CallArgs {
    std::vector<Value> args;
    std::vector<std::pair<std::string, Value>> kwargs;
};

class Interp {
   public:
    explicit Interp(std::ostream& out);
    ~Interp();

    // Parses and runs a file or one REPL entry. With `echo`, an expression statement at the
    // top level prints its repr unless it is None (the REPL's behaviour). Throws
    // script::SyntaxError or ScriptError; the globals keep whatever ran before the error.
    void run_source(std::string_view source, const std::string& filename, bool echo = false);
    // Evaluates one expression (the REPL's `:time expr`, `:explain f(x)`).
    Value eval_source(std::string_view source, const std::string& filename);

    Value call(const Value& fn, CallArgs args);
    bool truthy(const Value& v);  // a tensor's truth is operator bool: a graph break under compile
    Value get_attr(const Value& object, const std::string& name);
    void set_attr(const Value& object, const std::string& name, const Value& value);  // object.name = value
    // The script function whose body is running; null at the top level.
    std::shared_ptr<FunctionObj> current_function() const;
    // The exceptions being handled, innermost last (bare `raise`, traceback.print_exc()).
    std::vector<ScriptError> handling;

    // Raises a ScriptError at the current line with a traceback of the calls in progress.
    [[noreturn]] void raise(const std::string& kind, const std::string& message);

    Value* lookup(const std::string& name);  // globals then builtins; null when unknown
    // `name` as code defined in `scope` sees it: that scope's chain, the globals, builtins.
    Value* lookup_in(Scope* scope, const std::string& name);
    // "t.ks:3 in f": the line being run, for messages about it.
    std::string current_site() const;
    void set_global(const std::string& name, Value v);
    std::vector<std::string> global_names() const;
    void reset();  // forgets every variable (the REPL's :reset)
    // Remembers a class or instance weakly, so teardown can empty it: reference counting
    // never frees a cycle (an instance stored in its own class, self.me = self).
    void track(const ObjectPtr& object);

    std::ostream& out;
    std::string default_backend = "inductor";  // what compile() uses without backend=
    bool async_compile = false;  // compile() default; the REPL turns it on (never wait for g++)
    // When set, each tensor that becomes a condition or a number appends its script line,
    // in order: explain uses them to name the line of each graph break (compiled.cpp).
    std::vector<std::string>* escape_sites = nullptr;
    void note_escape();  // appends the current line to escape_sites, if set

   private:
    struct Frame {
        std::shared_ptr<const CodeUnit> unit;
        std::string name;  // "<module>" for the top level
        script::Pos pos;   // the expression being evaluated: where an error points
        std::shared_ptr<Scope> scope;
        std::shared_ptr<FunctionObj> fn;  // null for the top level
    };
    enum class Flow { normal, break_, continue_, return_ };

    Flow exec_body(const script::Body& body);
    Flow exec(const script::StmtPtr& stmt);
    void exec_def(const script::StmtPtr& stmt, const script::Def& def);
    void exec_import(const script::Stmt& stmt);
    Flow exec_for(const script::For& loop);
    void exec_class(const script::ClassDef& def);
    Flow exec_try(const script::Try& t);
    Flow exec_try_body(const script::Try& t);
    Flow exec_with(const script::With& w, size_t item);
    [[noreturn]] void exec_raise(const script::Raise& r);
    void exec_delete(const script::Expr& target);
    // A C++ exception from below as the ScriptError it means, with this frame's traceback.
    ScriptError as_script_error(const std::exception& e) const;
    bool exception_matches(const ScriptError& e, const Value& type);
    Value eval_fstring(const script::FString& f);
    Value eval_comprehension(const script::Comprehension& c);
    Value make_function(const script::StmtPtr& stmt, const script::Def& def);
    void assign(const script::Expr& target, const Value& value);
    void assign_name(const std::string& name, const Value& value);  // honours global and nonlocal
    Value eval(const script::Expr& expr);
    Value eval_call(const script::Expr& expr, const script::Call& call);
    Value eval_subscript(const script::Subscript& sub);
    Value call_function(const std::shared_ptr<FunctionObj>& fn, CallArgs& args);
    void bind_params(const FunctionObj& fn, CallArgs& args, Scope& scope);
    std::string traceback() const;

    std::shared_ptr<Scope> globals_;
    // Every call scope made, weakly: closures can keep a scope alive in a cycle (a nested def
    // stored in the scope it captures), so ~Interp empties the survivors to free them.
    std::vector<std::weak_ptr<Scope>> scopes_;
    // Functions and classes/instances made, weakly, for the same reason: a function keeps its
    // latest call's arguments (for `kiln explain`), so A().f() ties f -> instance -> A -> f.
    std::vector<std::weak_ptr<FunctionObj>> functions_;
    std::vector<std::weak_ptr<Object>> objects_;
    void break_cycles();
    std::vector<Frame> frames_;
    Value return_value_;
    friend struct FrameGuard;
};

}  // namespace kiln::interp
