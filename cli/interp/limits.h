// The limits that keep a hostile script from taking the process down with it: a memory
// budget checked before big allocations, a recursion limit backed by a check of the real
// C++ stack, and Ctrl-C as an exception. Each turns into a Python-style error instead.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "tensor/error.h"

namespace kiln::interp {

// An error raised where no Interp is at hand (repr of a deep list, teardown helpers): the
// interpreter re-raises it as a ScriptError of `kind` with the traceback it knows.
class RaisedError : public kiln::Error {
   public:
    RaisedError(std::string kind, std::string message) : kiln::Error(kind + ": " + message), kind(std::move(kind)), message(std::move(message)) {}
    std::string kind, message;
};

// ---- memory

// The most bytes one script value may need: KILN_SCRIPT_MEMORY_LIMIT (bytes, or with a
// K/M/G suffix), else a quarter of physical memory.
uint64_t script_memory_limit();
// Raises MemoryError when `bytes` (as computed by the caller, possibly overflowing 64 bits:
// hence __int128) passes the limit. `what` names the operation: "list repetition".
void check_memory(unsigned __int128 bytes, const char* what);

// ---- recursion

// Python's default sys.getrecursionlimit(): script calls, repr/str nesting, comparisons
// and tensor conversion of nested lists all stop there with RecursionError.
constexpr int kRecursionLimit = 1000;
// True when less than a safe margin of this thread's C++ stack is left: deep recursion
// stops with RecursionError before it could overflow, whatever the frame sizes.
bool stack_nearly_full();

// Counts one level of a recursive walk (repr, ==, tensor(), flattening) and raises
// RecursionError "maximum recursion depth exceeded <while>" past the limit.
struct RecursionGuard {
    explicit RecursionGuard(const char* while_doing);
    ~RecursionGuard() { --depth(); }
    RecursionGuard(const RecursionGuard&) = delete;
    RecursionGuard& operator=(const RecursionGuard&) = delete;
    static int& depth();
};

// ---- Ctrl-C

// Set by the SIGINT handler, cleared when the interpreter raises KeyboardInterrupt.
extern std::atomic<bool> g_interrupted;
// Installs the SIGINT handler that only sets g_interrupted (kiln run and the REPL).
void install_interrupt_handler();
// Raises KeyboardInterrupt (as a RaisedError) when Ctrl-C was pressed since the last check.
void check_interrupt();

}  // namespace kiln::interp
