// The `kiln` command line: no arguments -> the REPL; `kiln run FILE`; `kiln explain FILE FN`;
// `kiln grade N` (course assignments); `kiln report DIR` (the HTML compile report of a trace).
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>

#include "cli/grade.h"
#include "cli/interp/compiled.h"
#include "cli/interp/limits.h"
#include "cli/repl.h"
#include "cli/report/report.h"
#include "jit/backends.h"

namespace {

using namespace kiln;

std::string read_file(const std::string& path) {
    std::ifstream file(path, std::ios::binary);
    std::stringstream text;
    text << file.rdbuf();
    return text.str();
}

// Runs a script; errors print like Python's and give exit status 1 (130 for Ctrl-C, as the
// shell reports a process that SIGINT ended, but the process ends by itself, cleanly).
int run_file(interp::Interp& in, const std::string& path) {
    try {
        in.run_source(read_file(path), path);
        return 0;
    } catch (const kiln::Error& e) {
        std::cout << std::flush;
        std::cerr << e.what() << std::endl;
        auto script_error = dynamic_cast<const interp::ScriptError*>(&e);
        return script_error && script_error->kind() == "KeyboardInterrupt" ? 130 : 1;
    }
}

// `kiln explain FILE FN`: run the file, then explain FN on the arguments of its last call.
int explain_function(interp::Interp& in, const std::string& path, const std::string& name) {
    if (int rc = run_file(in, path)) return rc;
    try {
        interp::Value* v = in.lookup(name);
        if (!v) in.raise("NameError", "name '" + name + "' is not defined in " + path);
        interp::Value fn = *v;
        if (auto c = fn.as<std::shared_ptr<interp::CompiledObj>>()) fn = (*c)->target;
        auto f = fn.as<std::shared_ptr<interp::FunctionObj>>();
        if (!f) in.raise("TypeError", name + " is a " + interp::type_name(fn) + ", not a function");
        if ((*f)->last_args.empty() && !(*f)->def->params.empty()) in.raise("ValueError", name + " was never called by " + path + ": nothing to explain");
        interp::Value out = interp::explain_call(in, fn, interp::CallArgs{(*f)->last_args, (*f)->last_kwargs});
        std::cout << interp::str(out) << std::endl;
        return 0;
    } catch (const kiln::Error& e) {
        std::cerr << e.what() << std::endl;
        return 1;
    }
}

// `kiln report DIR [-o OUT]`: the HTML report of the trace in DIR (cli/report/report.h).
int write_report_command(const std::string& dir, std::string out, const std::string& layout) {
    try {
        if (out.empty()) out = report::default_report_dir(dir);
        report::ReportOptions options;
        options.layout = layout == "dot"       ? report::Layout::dot
                         : layout == "builtin" ? report::Layout::builtin
                                               : report::Layout::automatic;
        auto files = report::write_report(dir, out, options);
        std::cout << "kiln report: wrote " << files.size() << " files; open " << out
                  << "/index.html\n";
        return 0;
    } catch (const kiln::Error& e) {
        std::cerr << e.what() << std::endl;
        return 1;
    }
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"kiln: a small PyTorch-like tensor framework and JIT; this runs kiln script (Python-flavoured)"};
    app.set_version_flag("--version", std::string("kiln ") + KILN_VERSION);
    std::string backend = "inductor";
    app.add_option("--backend", backend, "the backend compile() uses when a script does not name one")->capture_default_str();

    std::string file, function;
    CLI::App* run = app.add_subcommand("run", "run a kiln script");
    run->add_option("file", file, "the script")->required()->check(CLI::ExistingFile);
    run->add_option("--backend", backend, "the backend compile() uses when a script does not name one");
    CLI::App* explain = app.add_subcommand("explain", "run a script, then explain a function on its last call");
    explain->add_option("file", file, "the script")->required()->check(CLI::ExistingFile);
    explain->add_option("function", function, "the function's name")->required();
    std::string report_trace_dir, report_out, layout = "auto";
    CLI::App* report_cmd = app.add_subcommand(
        "report", "write the HTML compile report of a trace folder (KILN_TRACE=DIR)");
    report_cmd->add_option("dir", report_trace_dir, "the trace folder")->required();
    report_cmd->add_option("-o,--output", report_out, "where the report goes (default DIR/report)");
    report_cmd
        ->add_option("--layout", layout,
                     "graph drawing: auto (graphviz dot when installed), dot, builtin")
        ->check(CLI::IsMember({"auto", "dot", "builtin"}))
        ->capture_default_str();
    cli::GradeCommand grade;
    cli::add_grade_command(app, grade);
    CLI11_PARSE(app, argc, argv);
    if (*grade.command) return cli::run_grade(grade);
    if (*report_cmd) return write_report_command(report_trace_dir, report_out, layout);

    if (!jit::has_backend(backend)) {
        std::cerr << "kiln: unknown backend '" << backend << "'\n";
        return 2;
    }
    interp::Interp in(std::cout);
    in.default_backend = backend;
    interp::install_interrupt_handler();  // Ctrl-C: KeyboardInterrupt, not death by signal
    if (*run) return run_file(in, file);
    if (*explain) return explain_function(in, file, function);
    // The REPL's :code reads what backends dump; give them a place unless the user chose one.
    if (!std::getenv("KILN_DEBUG_DIR")) setenv("KILN_DEBUG_DIR", ("/tmp/kiln-repl-" + std::to_string(getpid())).c_str(), 0);
    // :report renders the session's compile log: start one unless KILN_TRACE names a folder.
    cli::start_session_trace("/tmp/kiln-repl-" + std::to_string(getpid()) + "/trace");
    in.async_compile = true;  // at the prompt, a first call never waits for the C++ compiler
    return cli::run_repl(in, std::cin, isatty(0));
}
