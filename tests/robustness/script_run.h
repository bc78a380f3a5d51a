// Shared by tests/robustness/test_script_*.cpp: run kiln script source through the
// interpreter API and get what it printed plus the exception that stopped it.
#pragma once
#include <cstdlib>
#include <sstream>
#include <string>

#include "cli/interp/interp.h"
#include "cli/script/source.h"
#include "tests/scoped_env.h"

namespace script_run {

// What a script prints, then "Kind: message" of the exception that stopped it (no traceback).
inline std::string run(const std::string& source) {
    std::ostringstream out;
    kiln::interp::Interp in(out);
    in.default_backend = "eager";
    try {
        in.run_source(source, "robust.ks");
    } catch (const kiln::interp::ScriptError& e) {
        out << e.kind() << ": " << e.message() << "\n";
    } catch (const kiln::script::SyntaxError& e) {
        out << "SyntaxError: " << e.message() << "\n";
    }
    return out.str();
}

using kiln_test::ScopedEnv;  // sets an environment variable for the life of a test case

// A recursion depth every build must run. Python's limit is 1000 script frames; kiln stops
// earlier when the C++ stack is nearly full (limits.h), which a Debug build with ASan's
// large frames reaches first: there the guarantee is a RecursionError, not a crash.
#if defined(__SANITIZE_ADDRESS__)
constexpr int kLegalDepth = 150;
#else
constexpr int kLegalDepth = 900;
#endif

inline const std::string kMin = "m = -9223372036854775807 - 1\n";  // INT64_MIN, as no literal can spell it

}  // namespace script_run
