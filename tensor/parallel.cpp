// A fixed pool of worker threads fed one parallel_for at a time.
#include "tensor/parallel.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

#include "tensor/blas_library.h"

namespace kiln {
namespace {

int default_threads() {
    if (const char* env = std::getenv("KILN_NUM_THREADS")) {
        int n = std::atoi(env);
        if (n > 0) return n;
    }
    return std::max(1u, std::thread::hardware_concurrency());
}

class Pool {
   public:
    explicit Pool(int workers) {
        for (int i = 0; i < workers; ++i) threads_.emplace_back([this, i] { loop(i + 1); });
    }
    ~Pool() {
        {
            std::lock_guard lock(mu_);
            stop_ = true;
        }
        cv_.notify_all();
        for (auto& t : threads_) t.join();
    }
    int size() const { return int(threads_.size()) + 1; }

    // Runs task(k) for k in [0, tasks) on the workers and the caller.
    void run(int tasks, const std::function<void(int)>& task) {
        std::lock_guard serial(run_mu_);  // one parallel region at a time
        {
            std::lock_guard lock(mu_);
            task_ = &task;
            tasks_ = tasks;
            next_.store(0);
            pending_ = tasks;
            ++generation_;
        }
        cv_.notify_all();
        drain();
        std::unique_lock lock(mu_);
        done_cv_.wait(lock, [&] { return pending_ == 0; });
        task_ = nullptr;
    }

   private:
    void drain() {
        for (int k; (k = next_.fetch_add(1)) < tasks_;) {
            (*task_)(k);
            std::lock_guard lock(mu_);
            if (--pending_ == 0) done_cv_.notify_all();
        }
    }
    void loop(int) {
        uint64_t seen = 0;
        for (;;) {
            {
                std::unique_lock lock(mu_);
                cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
                if (stop_) return;
                seen = generation_;
            }
            drain();
        }
    }
    std::vector<std::thread> threads_;
    std::mutex mu_, run_mu_;
    std::condition_variable cv_, done_cv_;
    const std::function<void(int)>* task_ = nullptr;
    int tasks_ = 0, pending_ = 0;
    std::atomic<int> next_{0};
    uint64_t generation_ = 0;
    bool stop_ = false;
};

constexpr int64_t kRangesPerThread = 4;
constexpr int64_t kRangeAlign = 16;      // elements: an AVX-512 batch of floats
constexpr int64_t kAlignedRange = 1024;  // ranges this long are aligned (rows of a row kernel,
                                         // fewer, are not: balance matters more there)

std::atomic<int> g_threads{0};
thread_local bool t_in_parallel = false;

Pool& pool() {
    static Pool* p = new Pool(std::max(0, default_threads() - 1));  // outlives static dtors
    return *p;
}

}  // namespace

int num_threads() {
    int n = g_threads.load();
    return n > 0 ? std::min(n, pool().size()) : pool().size();
}
void set_num_threads(int n) { g_threads.store(n); }
bool in_parallel_for() { return t_in_parallel; }

bool set_blas_threads(int n) {
    // Null for a BLAS that is not OpenBLAS (tensor/blas_library.h).
    static const auto set_threads = blas().set_num_threads;
    static std::atomic<int> blas_threads{
        -1};  // what it was last set to: setting is not free in OpenBLAS
    if (!set_threads) return false;
    if (blas_threads.exchange(n) != n) set_threads(n);
    return true;
}

void sync_blas_threads() { set_blas_threads(num_threads()); }

void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& body) {
    if (n <= 0) return;
    int threads = num_threads();
    if (t_in_parallel || threads <= 1 || n < 2 * grain) {
        body(0, n);
        return;
    }
    // Several ranges per thread, each taken by whichever thread is free: a worker that wakes
    // late (a loaded machine, a descheduled vCPU) leaves its ranges to the others instead of
    // making them wait for it. Long ranges start at multiples of kRangeAlign, so a vector loop
    // covers the same elements for every split, and only the loop's last range has a scalar
    // tail, where 1 thread has it (a tail element can differ from a lane by an ulp: sin, exp).
    int64_t ranges = std::min<int64_t>(int64_t(threads) * kRangesPerThread, n / grain);
    int64_t chunk = (n + ranges - 1) / ranges;
    if (chunk >= kAlignedRange) chunk = (chunk + kRangeAlign - 1) / kRangeAlign * kRangeAlign;
    int tasks = int((n + chunk - 1) / chunk);
    pool().run(tasks, [&](int k) {
        t_in_parallel = true;
        int64_t b = k * chunk, e = std::min(n, b + chunk);
        if (b < e) body(b, e);
        t_in_parallel = false;
    });
}

}  // namespace kiln
