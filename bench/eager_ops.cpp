// Eager kernel throughput: ns per element of a few float32 ops at 1e6 and 1e7 elements, on one
// thread and on all, next to a memcpy of as many floats (the memory-bound floor). Prints one
// JSON object on stdout. Each number is the median of kReps timed runs after a warm-up run
// (which also leaves the output's block in the buffer pool, so no run pays for fresh pages).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "tensor/ops.h"
#include "tensor/parallel.h"

namespace {

constexpr int kReps = 7;

// Median wall time of `body`, in ns.
double median_ns(const std::function<void()>& body) {
    body();  // warm-up
    std::vector<double> ns;
    for (int r = 0; r < kReps; ++r) {
        auto t0 = std::chrono::steady_clock::now();
        body();
        ns.push_back(std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(ns.begin(), ns.end());
    return ns[kReps / 2];
}

struct Op {
    const char* name;
    std::function<kiln::Tensor(const kiln::Tensor&, const kiln::Tensor&)> run;
};

}  // namespace

int main() {
    using kiln::Tensor;
    const std::vector<Op> ops = {
        {"add", [](const Tensor& x, const Tensor& y) { return x + y; }},
        {"mul", [](const Tensor& x, const Tensor& y) { return x * y; }},
        {"exp", [](const Tensor& x, const Tensor&) { return kiln::exp(x); }},
        {"sin_plus_cos", [](const Tensor& x, const Tensor& y) { return kiln::sin(x) + kiln::cos(y); }},
        {"relu", [](const Tensor& x, const Tensor&) { return kiln::relu(x); }},
        {"sum", [](const Tensor& x, const Tensor&) { return x.sum(); }},
    };
    const int all_threads = kiln::num_threads();
    std::string json = "{\"bench\": \"eager_ops\", \"dtype\": \"float32\", \"unit\": \"ns_per_elem\", \"stat\": \"median\", \"reps\": " +
                       std::to_string(kReps) + ", \"hardware_threads\": " + std::to_string(all_threads) + ", \"results\": [";
    bool first = true;
    char buf[256];
    for (int64_t n : {int64_t(1000000), int64_t(10000000)}) {
        kiln::manual_seed(0);
        Tensor x = kiln::randn({n}), y = kiln::randn({n});
        std::vector<float> src(size_t(n), 1.0f), dst(size_t(n), 0.0f);  // touched once, then reused
        double memcpy_ns = median_ns([&] { std::memcpy(dst.data(), src.data(), size_t(n) * sizeof(float)); }) / double(n);
        std::vector<int> thread_counts = {1};
        if (all_threads > 1) thread_counts.push_back(all_threads);
        for (int threads : thread_counts) {
            kiln::set_num_threads(threads);
            std::snprintf(buf, sizeof buf, "%s\n  {\"n\": %lld, \"threads\": %d, \"memcpy\": %.4f, \"ops\": {", first ? "" : ",",
                          (long long)n, threads, memcpy_ns);
            json += buf;
            first = false;
            for (size_t i = 0; i < ops.size(); ++i) {
                double ns = median_ns([&] { Tensor out = ops[i].run(x, y); }) / double(n);
                std::snprintf(buf, sizeof buf, "%s\"%s\": {\"ns_per_elem\": %.4f, \"vs_memcpy\": %.2f}", i ? ", " : "", ops[i].name, ns, ns / memcpy_ns);
                json += buf;
            }
            json += "}}";
        }
    }
    kiln::set_num_threads(0);
    json += "\n], \"note\": \"memcpy is single-threaded: ns per float copied; vs_memcpy = op ns / memcpy ns\"}";
    std::puts(json.c_str());
    return 0;
}
