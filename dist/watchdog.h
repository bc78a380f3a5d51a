// Internal to dist/: a thread that watches collectives the host does not wait for
// (Work::wait_on_stream, DDP on GPUs), so a rank that dies still makes the others fail within
// the timeout instead of hanging in the next host synchronisation (PyTorch's NCCL watchdog).
// Each entry's done() is polled every period until it says true; one still pending at its
// deadline has expired() called, on the watchdog's thread, and is dropped.
#pragma once
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace kiln::dist::detail {

class Watchdog {
   public:
    using Clock = std::chrono::steady_clock;
    // `thread_init` runs first on the watchdog's thread (NCCL: makes the CUDA context current).
    explicit Watchdog(std::chrono::milliseconds period, std::function<void()> thread_init = {});
    ~Watchdog();  // stops the thread and joins it; expired() is not called for what is left
    Watchdog(const Watchdog&) = delete;
    Watchdog& operator=(const Watchdog&) = delete;

    void watch(std::function<bool()> done, Clock::time_point deadline,
               std::function<void()> expired);
    size_t watching() const;  // entries not yet seen done or expired

   private:
    struct Entry {
        std::function<bool()> done;
        Clock::time_point deadline;
        std::function<void()> expired;
    };
    void run(std::function<void()> thread_init);

    std::chrono::milliseconds period_;
    mutable std::mutex mu_;
    std::condition_variable wake_;
    std::vector<Entry> entries_;
    bool stop_ = false;
    std::thread thread_;
};

}  // namespace kiln::dist::detail
