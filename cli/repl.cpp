// The REPL loop, its :commands (one table) and readline's tab completion.
#include "cli/repl.h"

#include <readline/history.h>
#include <readline/readline.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>

#include "cli/interp/builtins.h"
#include "cli/interp/compiled.h"
#include "cli/interp/limits.h"
#include "cli/report/report.h"
#include "jit/backends.h"
#include "jit/log.h"
// The compile log (jit/trace_log.h, docs/trace.md) that :report renders; a build without it
// says so at :report.
#if __has_include("jit/trace_log.h")
#include "jit/trace_log.h"
#define KILN_REPL_HAS_TRACE_LOG 1
#endif

namespace kiln::cli {
namespace {

using interp::Interp;
using interp::Value;

// What a :command takes after its name.
enum class CommandArg {
    none,           // :reset
    optional,       // :backend [NAME]
    compiled_name,  // :graph f: a compiled function's name
    text,           // :time expr, :explain f(args)
};

struct Command {
    const char* usage;
    const char* help;
    void (*run)(Interp& in, const std::string& arg);
    CommandArg arg = CommandArg::none;
};

// "compiled functions: opt_bar, opt_foo" (the globals a :graph can show), or how to make one.
std::string compiled_functions(Interp& in) {
    std::string names;
    for (const std::string& n : in.global_names())
        if (Value* v = in.lookup(n); v && v->is<std::shared_ptr<interp::CompiledObj>>())
            names += (names.empty() ? "" : ", ") + n;
    if (names.empty())
        return "no compiled functions yet: make one with opt = torch.compile(f) and call it";
    return "compiled functions: " + names;
}

// The compiled function a :command names: `opt_foo`, or a plain function compiled earlier.
interp::CompiledObj* compiled_named(Interp& in, const std::string& name) {
    Value* v = in.lookup(name);
    if (!v) in.raise("NameError", "name '" + name + "' is not defined; " + compiled_functions(in));
    if (auto c = v->as<std::shared_ptr<interp::CompiledObj>>()) return c->get();
    in.raise("TypeError", name + " is a " + interp::type_name(*v) + ", not a compiled function: use " + name + " = compile(" + name + ")");
}

bool is_identifier(const std::string& s) {
    if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
    for (char c : s)
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
    return true;
}

void cmd_help(Interp& in, const std::string&);
void cmd_graph(Interp& in, const std::string& arg) { in.out << interp::graphs_text(*compiled_named(in, arg)); }
void cmd_guards(Interp& in, const std::string& arg) { in.out << interp::guards_text(*compiled_named(in, arg)); }
void cmd_code(Interp& in, const std::string& arg) { in.out << interp::code_text(*compiled_named(in, arg)); }
void cmd_explain(Interp& in, const std::string& arg) {
    // f(args) -> explain(f)(args)
    size_t paren = arg.find('(');
    if (paren == std::string::npos) in.raise("SyntaxError", ":explain expects a call, as in :explain f(x, y)");
    Value v = in.eval_source("explain(" + arg.substr(0, paren) + ")" + arg.substr(paren), "<stdin>");
    in.out << interp::str(v) << "\n";
}
void cmd_time(Interp& in, const std::string& arg) {
    auto start = std::chrono::steady_clock::now();
    Value v = in.eval_source(arg, "<stdin>");
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (!v.is_none()) in.out << interp::repr(v) << "\n";
    in.out << "time: " << ms << " ms\n";
}
void cmd_backend(Interp& in, const std::string& arg) {
    if (arg.empty()) {
        in.out << "backend: " << in.default_backend << "\n";
        return;
    }
    if (!jit::has_backend(arg)) in.raise("ValueError", "unknown backend '" + arg + "'");
    in.default_backend = arg;
    in.out << "compile() now uses backend " << arg << "\n";
}
void cmd_reset(Interp& in, const std::string&) {
    in.reset();
    jit::reset();
    in.out << "variables and compiled caches cleared\n";
}

// :report [OUT]: the HTML report (cli/report/report.h) of this session's compile log, which
// start_session_trace() opened; by default beside the log, in its folder's report/.
void cmd_report(Interp& in, const std::string& arg) {
#ifdef KILN_REPL_HAS_TRACE_LOG
    std::string log = jit::trace_path();
    if (log.empty())
        in.raise(
            "RuntimeError",
            ":report: no compile log is being written (KILN_TRACE was set to an unusable folder?)");
    std::string dir = std::filesystem::path(log).parent_path().string();
    std::string out = arg.empty() ? report::default_report_dir(dir) : arg;
    auto files = report::write_report(dir, out);
    in.out << "report of this session's compiled functions: " << files.size() << " files; open "
           << out << "/index.html\n";
#else
    (void)arg;
    in.raise(
        "RuntimeError",
        ":report: this build has no compile log (jit/trace_log.h), so there is nothing to report");
#endif
}

using enum CommandArg;
const std::map<std::string, Command> kCommands = {
    {":help", {":help", "this list, then the builtins", cmd_help}},
    {":graph",
     {":graph f", "the graphs of compiled f, one line per node", cmd_graph, compiled_name}},
    {":guards", {":guards f", "the guards of each entry of compiled f", cmd_guards, compiled_name}},
    {":code", {":code f", "what the backend generated for compiled f", cmd_code, compiled_name}},
    {":explain",
     {":explain f(args)", "graph count, graph breaks with reasons, guards", cmd_explain, text}},
    {":time", {":time expr", "evaluate expr and report the wall time", cmd_time, text}},
    {":backend",
     {":backend NAME", "the backend compile() uses by default (eager, aot_eager, inductor)",
      cmd_backend, optional}},
    {":reset", {":reset", "forget every variable and compiled cache", cmd_reset}},
    {":report",
     {":report [DIR]", "write the HTML compile report of this session (default: beside its log)",
      cmd_report, optional}},
    {":quit", {":quit", "leave (so does Ctrl-D)", nullptr}},
};

// A command used without the argument it needs (or with one it does not take): what it
// does, and for the :graph family the compiled functions it can show. Nothing runs.
bool explain_usage(Interp& in, const Command& c, const std::string& arg) {
    bool bad = c.arg == none            ? !arg.empty()
               : c.arg == compiled_name ? !is_identifier(arg)
               : c.arg == text          ? arg.empty()
                                        : false;
    if (!bad) return false;
    in.out << "usage: " << c.usage << "    " << c.help << "\n";
    if (c.arg == compiled_name) in.out << compiled_functions(in) << "\n";
    return true;
}

void cmd_help(Interp& in, const std::string&) {
    for (const auto& [name, c] : kCommands) in.out << "  " << c.usage << std::string(20 - std::string(c.usage).size(), ' ') << c.help << "\n";
    in.out << "builtins (also as torch.NAME):\n ";
    for (const std::string& n : interp::builtin_names()) in.out << " " << n;
    in.out << "\n";
}

// ---- tab completion
Interp* g_completion_interp = nullptr;

// `torch.nn.fun` -> torch.nn.functional: the part before the last dot is looked up name by
// name (globals, then attributes; nothing is called), and its attribute names that start
// with the part after it are the candidates.
std::vector<std::string> complete_dotted(const std::string& text) {
    size_t dot = text.rfind('.');
    std::string head = text.substr(0, dot), tail = text.substr(dot + 1);
    std::vector<std::string> out;
    try {
        size_t start = 0, next_dot = head.find('.');
        Value* root = g_completion_interp->lookup(head.substr(0, next_dot));
        if (!root) return out;
        Value v = *root;
        while (next_dot != std::string::npos) {
            start = next_dot + 1;
            next_dot = head.find('.', start);
            v = g_completion_interp->get_attr(v, head.substr(start, next_dot == std::string::npos ? std::string::npos : next_dot - start));
        }
        for (const std::string& name : interp::attribute_names(v))
            if (name.rfind(tail, 0) == 0 && (tail.rfind("_", 0) == 0 || name.rfind("_", 0) != 0)) out.push_back(head + "." + name);
    } catch (const std::exception&) {  // not a name chain that resolves: no candidates
    }
    return out;
}

char* complete_name(const char* text, int state) {
    static std::vector<std::string> matches;
    static size_t next = 0;
    if (state == 0 && std::string(text).find('.') != std::string::npos && text[0] != ':') {
        matches = complete_dotted(text), next = 0;
    } else if (state == 0) {
        matches.clear(), next = 0;
        std::vector<std::string> all = interp::builtin_names();
        for (const std::string& n : g_completion_interp->global_names()) all.push_back(n);
        for (const auto& [c, _] : kCommands) all.push_back(c);
        for (const char* k : {"def", "return", "if", "elif", "else", "for", "while", "import", "True", "False", "None"}) all.push_back(k);
        for (const std::string& n : all)
            if (n.rfind(text, 0) == 0) matches.push_back(n);
    }
    return next < matches.size() ? strdup(matches[next++].c_str()) : nullptr;
}
char** complete(const char* text, int, int) {
    rl_attempted_completion_over = 1;  // no filename completion
    return rl_completion_matches(text, complete_name);
}

// Ctrl-C at the prompt. The SIGINT handler (limits.cpp) only sets a flag, and it is
// installed without SA_RESTART, so readline's read() returns EINTR: this getc then empties
// the line and ends it, and readline returns an empty line with the flag still set.
int getc_or_interrupt(FILE* stream) {
    while (true) {
        if (interp::g_interrupted.load()) {
            rl_replace_line("", 0);
            return '\n';
        }
        unsigned char c;
        ssize_t n = read(fileno(stream), &c, 1);
        if (n == 1) return c;
        if (n == 0 || errno != EINTR) return EOF;
    }
}

// ~/.kiln_history (or $KILN_HISTORY): the last kHistoryLines lines, kept across sessions.
// No HOME, or a file that cannot be written, means no saved history, never an error.
constexpr int kHistoryLines = 1000;
std::string history_path() {
    if (const char* path = std::getenv("KILN_HISTORY"); path && *path) return path;
    const char* home = std::getenv("HOME");
    return home && *home ? std::string(home) + "/.kiln_history" : "";
}
void load_history() {
    stifle_history(kHistoryLines);
    std::string path = history_path();
    if (!path.empty()) read_history(path.c_str());
}
void save_history_line() {
    std::string path = history_path();
    if (path.empty()) return;
    if (append_history(1, path.c_str()) != 0) write_history(path.c_str());  // no file yet: write it whole
    history_truncate_file(path.c_str(), kHistoryLines);
}

bool read_line(std::istream& input, bool interactive, const char* prompt, std::string& line) {
    if (!interactive) return bool(std::getline(input, line));
    char* raw = readline(prompt);
    if (!raw) return false;
    line = raw;
    if (!line.empty()) add_history(raw), save_history_line();
    std::free(raw);
    return true;
}

// Whether Ctrl-C was pressed while the line was read: then, as in Python, the input typed
// so far is dropped and "KeyboardInterrupt" printed.
bool interrupted_at_prompt(Interp& in, std::string& buffer) {
    if (!interp::g_interrupted.exchange(false)) return false;
    buffer.clear();
    in.out << std::flush;
    std::cerr << "KeyboardInterrupt" << std::endl;
    return true;
}

}  // namespace

bool run_command(Interp& in, const std::string& line) {
    size_t space = line.find(' ');
    std::string name = line.substr(0, space);
    std::string arg = space == std::string::npos ? "" : line.substr(space + 1);
    arg.erase(0, arg.find_first_not_of(' '));
    while (!arg.empty() && (arg.back() == ' ' || arg.back() == '\r')) arg.pop_back();
    if (name == ":quit" || name == ":q") return false;
    auto it = kCommands.find(name);
    if (it == kCommands.end()) {
        in.out << "unknown command " << name << " (try :help)\n";
        return true;
    }
    if (explain_usage(in, it->second, arg)) return true;
    it->second.run(in, arg);
    return true;
}

void start_session_trace(const std::string& default_dir) {
#ifdef KILN_REPL_HAS_TRACE_LOG
    const char* env = std::getenv("KILN_TRACE");
    std::string dir = env && *env ? env : default_dir;
    try {
        jit::trace_to(dir);
    } catch (const kiln::Error& e) {  // no log, no :report; the session still runs
        std::cerr << "kiln: no compile log for :report: " << e.what() << std::endl;
    }
#else
    (void)default_dir;
#endif
}

int run_repl(Interp& in, std::istream& input, bool interactive) {
    interp::install_interrupt_handler();
    if (interactive) {
        g_completion_interp = &in;
        rl_attempted_completion_function = complete;
        rl_catch_signals = 0;  // our handler sees SIGINT, not readline's
        rl_getc_function = getc_or_interrupt;
        load_history();
        in.out << "kiln " << KILN_VERSION << " (kiln script: Python-flavoured; :help for commands, Ctrl-D to leave)\n";
    }
    std::string buffer, line;
    while (read_line(input, interactive, buffer.empty() ? ">>> " : "... ", line)) {
        if (interrupted_at_prompt(in, buffer) && interactive) continue;  // the line is empty
        if (buffer.empty() && line.find_first_not_of(" \t\r") == std::string::npos) continue;
        try {
            if (buffer.empty() && line.rfind(":", 0) == 0) {
                if (!run_command(in, line)) return 0;
                continue;
            }
            buffer += line + "\n";
            if (!script::is_complete_input(buffer)) continue;
            std::string source = std::move(buffer);
            buffer.clear();
            in.run_source(source, "<stdin>", true);
        } catch (const kiln::Error& e) {  // a script error, KeyboardInterrupt included
            buffer.clear();
            in.out << std::flush;
            std::cerr << e.what() << std::endl;
        } catch (const std::exception& e) {  // from outside the interpreter (a :command): the session goes on
            buffer.clear();
            in.out << std::flush;
            std::cerr << "Error: " << e.what() << std::endl;
        }
        interp::g_interrupted.store(false);  // a Ctrl-C that came after the statement ended
    }
    // End of input inside a block: run what was typed, as Python does at Ctrl-D.
    if (!buffer.empty()) {
        try {
            in.run_source(buffer, "<stdin>", true);
        } catch (const kiln::Error& e) {
            std::cerr << e.what() << std::endl;
        }
    }
    return 0;
}

}  // namespace kiln::cli
