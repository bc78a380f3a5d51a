// dist/watchdog.h: the watching thread.
#include "dist/watchdog.h"

namespace kiln::dist::detail {

Watchdog::Watchdog(std::chrono::milliseconds period, std::function<void()> thread_init)
    : period_(period), thread_([this, init = std::move(thread_init)] { run(init); }) {}

Watchdog::~Watchdog() {
    {
        std::lock_guard lock(mu_);
        stop_ = true;
    }
    wake_.notify_all();
    thread_.join();
}

void Watchdog::watch(std::function<bool()> done, Clock::time_point deadline,
                     std::function<void()> expired) {
    std::lock_guard lock(mu_);
    entries_.push_back({std::move(done), deadline, std::move(expired)});
}

size_t Watchdog::watching() const {
    std::lock_guard lock(mu_);
    return entries_.size();
}

void Watchdog::run(std::function<void()> thread_init) {
    if (thread_init) thread_init();
    std::unique_lock lock(mu_);
    while (!stop_) {
        wake_.wait_for(lock, period_, [this] { return stop_; });
        if (stop_) break;
        std::vector<std::function<void()>> expired;
        auto now = Clock::now();
        std::erase_if(entries_, [&](Entry& e) {
            if (e.done()) return true;
            if (now < e.deadline) return false;
            expired.push_back(std::move(e.expired));
            return true;
        });
        lock.unlock();  // expired() may take long (an abort) or not return (the process exits)
        for (auto& f : expired) f();
        lock.lock();
    }
}

}  // namespace kiln::dist::detail
