// Memory budget, recursion limit and Ctrl-C for kiln script (see limits.h).
#include "cli/interp/limits.h"

#include <pthread.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <algorithm>
#include <cstring>

namespace kiln::interp {

// ---- memory

namespace {

uint64_t physical_memory_bytes() {
    static const uint64_t bytes = [] {
        long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
        return pages > 0 && page > 0 ? uint64_t(pages) * uint64_t(page) : uint64_t(8) << 30;
    }();
    return bytes;
}

// "512M", "2G", "1000000": bytes; 0 when the text is not a size.
uint64_t parse_size(const char* text) {
    char* end = nullptr;
    unsigned long long n = std::strtoull(text, &end, 10);
    if (end == text) return 0;
    switch (*end) {
        case 'k': case 'K': return uint64_t(n) << 10;
        case 'm': case 'M': return uint64_t(n) << 20;
        case 'g': case 'G': return uint64_t(n) << 30;
        case '\0': return uint64_t(n);
        default: return 0;
    }
}

std::string human_bytes(unsigned __int128 bytes) {
    if (bytes >= (unsigned __int128)(1) << 100) return "more than 2**100 bytes";
    std::string digits;
    do {
        digits.insert(digits.begin(), char('0' + int(bytes % 10)));
        bytes /= 10;
    } while (bytes);
    return digits + " bytes";
}

}  // namespace

uint64_t script_memory_limit() {
    if (const char* env = std::getenv("KILN_SCRIPT_MEMORY_LIMIT"))
        if (uint64_t n = parse_size(env)) return n;
    return physical_memory_bytes() / 4;
}

void check_memory(unsigned __int128 bytes, const char* what) {
    uint64_t limit = script_memory_limit();
    if (bytes > limit)
        throw RaisedError("MemoryError", std::string(what) + " would need " + human_bytes(bytes) + ", more than kiln script's limit of " +
                                             std::to_string(limit) + " bytes (KILN_SCRIPT_MEMORY_LIMIT)");
}

// ---- recursion

namespace {

// This thread's stack: its lowest usable address. Stacks grow down on every platform kiln
// builds for, so what is left is the distance from a local variable down to it.
uintptr_t stack_low_end(size_t& size) {
    thread_local uintptr_t low = 0;
    thread_local size_t total = 0;
    if (!low) {
        pthread_attr_t attr;
        void* addr = nullptr;
        if (pthread_getattr_np(pthread_self(), &attr) == 0) {
            pthread_attr_getstack(&attr, &addr, &total);
            pthread_attr_destroy(&attr);
        }
        low = addr ? uintptr_t(addr) : 1;
    }
    size = total;
    return low;
}

}  // namespace

bool stack_nearly_full() {
    size_t total = 0;
    uintptr_t low = stack_low_end(total);
    if (low <= 1 || total == 0) return false;
    char here;
    uintptr_t sp = uintptr_t(&here);
    // Keep a quarter of the stack (at least 256 KiB) for the error's own path and for the
    // larger frames of sanitizer builds.
    size_t margin = std::max<size_t>(total / 4, size_t(256) << 10);
    return sp < low + margin;
}

int& RecursionGuard::depth() {
    thread_local int d = 0;
    return d;
}

RecursionGuard::RecursionGuard(const char* while_doing) {
    if (++depth() > kRecursionLimit || stack_nearly_full()) {
        --depth();
        throw RaisedError("RecursionError", std::string("maximum recursion depth exceeded ") + while_doing);
    }
}

// ---- Ctrl-C

std::atomic<bool> g_interrupted{false};

namespace {
extern "C" void on_sigint(int) { g_interrupted.store(true, std::memory_order_relaxed); }
}  // namespace

void install_interrupt_handler() {
    struct sigaction sa;
    std::memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;  // no SA_RESTART: a blocking read returns EINTR, so the REPL sees Ctrl-C at once
    sigaction(SIGINT, &sa, nullptr);
}

void check_interrupt() {
    if (g_interrupted.load(std::memory_order_relaxed)) {
        g_interrupted.store(false, std::memory_order_relaxed);
        throw RaisedError("KeyboardInterrupt", "");
    }
}

}  // namespace kiln::interp
