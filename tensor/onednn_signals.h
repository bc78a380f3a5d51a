// oneDNN 2.6's JIT GEMM kernels (Debian's libdnnl 2.6.3) point rsp at a heap workspace while
// they run: a signal handler that runs on that thread then writes its frame into the heap,
// and the process aborts later in free() ("corrupted size vs. prev_size"). Any handler does
// it: the REPL's Ctrl-C, a SIGPROF profiler (bench/sampler.h). oneDNN fixed it in 3.x
// (uxlfoundation/oneDNN issue 4845, PR 4855). Until kiln can rely on a fixed oneDNN, each
// oneDNN call that may run those kernels blocks the asynchronous signals on its thread; a
// signal that arrives meanwhile stays pending and is handled when the call returns (or by
// another thread that is not inside oneDNN). Two pthread_sigmask calls: well under a
// microsecond against a GEMM's tens of microseconds or more.
#pragma once
#include <pthread.h>
#include <signal.h>

namespace kiln::detail {

class OneDnnSignalsBlocked {
   public:
    OneDnnSignalsBlocked() { pthread_sigmask(SIG_BLOCK, &asynchronous(), &saved_); }
    ~OneDnnSignalsBlocked() { pthread_sigmask(SIG_SETMASK, &saved_, nullptr); }
    OneDnnSignalsBlocked(const OneDnnSignalsBlocked&) = delete;
    OneDnnSignalsBlocked& operator=(const OneDnnSignalsBlocked&) = delete;

   private:
    // Every signal but the faults raised by the code itself, which must still reach their
    // handlers (or kill): built once.
    static const sigset_t& asynchronous() {
        static const sigset_t set = [] {
            sigset_t all;
            sigfillset(&all);
            for (int s : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS, SIGABRT}) sigdelset(&all, s);
            return all;
        }();
        return set;
    }
    sigset_t saved_;
};

}  // namespace kiln::detail
