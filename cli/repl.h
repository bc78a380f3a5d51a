// The kiln REPL: reads kiln script a line at a time (readline with history and tab
// completion on a terminal; plain lines from a pipe, so tests can drive it), runs each
// complete input, and offers :commands to look inside compiled functions.
#pragma once
#include <iosfwd>
#include <string>

#include "cli/interp/interp.h"

namespace kiln::cli {

// Runs until end of input or :quit; errors print and the session goes on. Returns the exit code.
int run_repl(interp::Interp& in, std::istream& input, bool interactive);

// Starts the compile log that :report renders: in KILN_TRACE when set, else in default_dir.
// A build without the log (jit/trace_log.h) starts nothing.
void start_session_trace(const std::string& default_dir);

// Runs one :command line (":graph f"); false when it was ":quit".
bool run_command(interp::Interp& in, const std::string& line);

}  // namespace kiln::cli
