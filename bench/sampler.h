// A small sampling profiler for benches: with KILN_BENCH_SAMPLE=1, SIGPROF every 200 us of
// CPU time records the stack (return addresses); at exit the hottest frames are printed to
// stderr with their addresses relative to the executable, for `addr2line -f -C -e BINARY`.
// Dev tool for finding host overhead where no system profiler is installed. (On the CPU it
// aborted GPT's step until oneDNN calls blocked signals: docs/robustness.md, "Signal handlers
// and oneDNN's GEMM kernels".)
#pragma once
#include <execinfo.h>
#include <signal.h>
#include <sys/time.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <vector>

#include <dlfcn.h>
#include <link.h>

namespace bench_sampler {

constexpr int kDepth = 24;
constexpr int kMax = 200000;
struct Sample {
    int n;
    void* pc[kDepth];
};
inline Sample* samples = nullptr;
inline std::atomic<int> count{0};

inline void on_prof(int) {
    int i = count.fetch_add(1);
    if (i >= kMax) return;
    samples[i].n = backtrace(samples[i].pc, kDepth);
}

inline uintptr_t exe_base() {
    uintptr_t base = 0;
    dl_iterate_phdr(
        [](dl_phdr_info* info, size_t, void* data) {
            if (info->dlpi_name == nullptr || info->dlpi_name[0] == 0) {  // the executable itself
                *static_cast<uintptr_t*>(data) = info->dlpi_addr;
                return 1;
            }
            return 0;
        },
        &base);
    return base;
}

inline void report() {
    int n = std::min(count.load(), kMax);
    std::map<void*, int> self, total;
    for (int i = 0; i < n; ++i) {
        if (samples[i].n > 2) ++self[samples[i].pc[2]];  // [0] handler, [1] signal trampoline
        std::vector<void*> seen;
        for (int k = 2; k < samples[i].n; ++k)
            if (std::find(seen.begin(), seen.end(), samples[i].pc[k]) == seen.end()) seen.push_back(samples[i].pc[k]), ++total[samples[i].pc[k]];
    }
    uintptr_t base = exe_base();
    auto print = [&](const char* title, std::map<void*, int>& m) {
        std::vector<std::pair<int, void*>> v;
        for (auto& [pc, c] : m) v.push_back({c, pc});
        std::sort(v.rbegin(), v.rend());
        std::fprintf(stderr, "sampler: %s (%d samples)\n", title, n);
        for (size_t i = 0; i < v.size() && i < 40; ++i) {
            Dl_info info{};
            dladdr(v[i].second, &info);
            bool in_exe = info.dli_fname && info.dli_fbase && reinterpret_cast<uintptr_t>(info.dli_fbase) == base;
            std::fprintf(stderr, "sampler: %6.2f%% 0x%lx %s %s\n", 100.0 * v[i].first / n,
                         in_exe ? static_cast<unsigned long>(reinterpret_cast<uintptr_t>(v[i].second) - base - 1)
                                : static_cast<unsigned long>(reinterpret_cast<uintptr_t>(v[i].second)),
                         in_exe ? "exe" : (info.dli_fname ? info.dli_fname : "?"), info.dli_sname ? info.dli_sname : "");
        }
    };
    print("self", self);
    print("inclusive", total);
}

// Starts sampling if KILN_BENCH_SAMPLE is set; call stop() around what should not count.
inline void start() {
    if (!std::getenv("KILN_BENCH_SAMPLE")) return;
    samples = static_cast<Sample*>(std::calloc(kMax, sizeof(Sample)));
    void* warm[2];
    backtrace(warm, 2);  // loads libgcc before the first signal
    struct sigaction sa{};
    sa.sa_handler = on_prof;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGPROF, &sa, nullptr);
    itimerval t{{0, 200}, {0, 200}};
    setitimer(ITIMER_PROF, &t, nullptr);
}
inline void stop() {
    if (!samples) return;
    itimerval t{};
    setitimer(ITIMER_PROF, &t, nullptr);
    report();
}

}  // namespace bench_sampler
