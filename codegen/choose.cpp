// choose_faster(): per graph (and size class), time the generated kernels against the
// interpreter on alternate calls, then keep the faster one.
#include "codegen/choose.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "tensor/error.h"

namespace kiln::codegen {
namespace {

struct TimerHook {
    std::mutex mu;
    ChoiceTimer timer;
};
// Leaked: compiled graphs may run during static destruction.
TimerHook& timer_hook() {
    static TimerHook* h = new TimerHook;
    return *h;
}

double fastest(const std::vector<double>& ms) { return *std::min_element(ms.begin(), ms.end()); }

// One size class's measurement. `chosen` is read without a lock on every call once set.
struct Slot {
    std::atomic<int> chosen{int(Choice::measuring)};
    std::mutex mu;
    int turns = 0;  // calls that took a turn: 0 is the untimed warm-up
    std::vector<double> generated_ms, eager_ms;
};

// Sizes up to 2^63 elements: 64 classes (bit_width of the element count), plus the empty.
constexpr size_t kSizeClasses = 65;

struct Chooser {
    int graph_id = 0;
    jit::CompiledFn generated, eager;
    ChoiceOptions options;
    bool symbolic = false;
    OnChoiceReport on_report;
    std::unique_ptr<Slot[]> slots;

    int size_class(std::span<const Tensor> inputs) const {
        if (!symbolic) return 0;
        uint64_t elems = 0;
        for (const Tensor& t : inputs)
            if (t.defined()) elems += uint64_t(t.numel());
        return int(std::bit_width(elems));
    }

    ChoiceReport report(const Slot& s, int cls, Choice c) const {
        ChoiceReport r;
        r.choice = c;
        r.samples = options.samples;
        r.size_class = symbolic ? cls : -1;
        if (c != Choice::measuring)
            r.generated_ms = fastest(s.generated_ms), r.eager_ms = fastest(s.eager_ms);
        return r;
    }

    std::vector<Tensor> run(std::span<const Tensor> inputs) {
        int cls = size_class(inputs);
        Slot& s = slots[size_t(cls)];
        int chosen = s.chosen.load(std::memory_order_acquire);
        if (chosen == int(Choice::generated)) return generated(inputs);
        if (chosen == int(Choice::eager)) return eager(inputs);
        int turn;
        {
            std::lock_guard lock(s.mu);
            turn = s.turns++;
        }
        if (turn == 0) {  // the warm-up: the kernels, untimed
            if (on_report) on_report(report(s, cls, Choice::measuring));
            return generated(inputs);
        }
        // Calls beyond the samples (other threads while the last ones run) take the kernels.
        if (turn > 2 * options.samples) return generated(inputs);
        bool use_generated = turn % 2 == 1;
        auto t0 = std::chrono::steady_clock::now();
        std::vector<Tensor> out = use_generated ? generated(inputs) : eager(inputs);
        double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                        .count();
        {
            std::lock_guard lock(timer_hook().mu);
            if (timer_hook().timer) ms = timer_hook().timer(graph_id, use_generated, ms);
        }
        std::optional<ChoiceReport> decided;
        {
            std::lock_guard lock(s.mu);
            (use_generated ? s.generated_ms : s.eager_ms).push_back(ms);
            int n = options.samples;
            if (int(s.generated_ms.size()) == n && int(s.eager_ms.size()) == n) {
                bool eager_wins =
                    fastest(s.eager_ms) * (1 + options.margin) < fastest(s.generated_ms);
                Choice c = eager_wins ? Choice::eager : Choice::generated;
                decided = report(s, cls, c);
                s.chosen.store(int(c), std::memory_order_release);
            }
        }
        if (decided && on_report) on_report(*decided);
        return out;
    }
};

// "0.95 ms" from a millisecond up, "41.3 us" below it.
std::string time_text(double ms) {
    char buf[32];
    if (ms >= 1)
        std::snprintf(buf, sizeof buf, "%.2f ms", ms);
    else
        std::snprintf(buf, sizeof buf, "%.1f us", ms * 1e3);
    return buf;
}

}  // namespace

ChoiceOptions choice_options_from_env() {
    ChoiceOptions o;
    if (const char* env = std::getenv("KILN_CHOOSE")) {
        std::string v = env;
        KILN_CHECK(v.empty() || v == "0" || v == "1" || v == "on" || v == "off", "KILN_CHOOSE='", v,
                   "' is not 0, 1, off or on (whether the inductor keeps the faster of its kernels "
                   "and eager per graph)");
        o.enabled = !(v == "0" || v == "off");
    }
    if (const char* env = std::getenv("KILN_CHOOSE_SAMPLES")) {
        char* end = nullptr;
        long n = std::strtol(env, &end, 10);
        KILN_CHECK(end != env && *end == '\0' && n >= 1 && n <= 100, "KILN_CHOOSE_SAMPLES='", env,
                   "' is not a number of timed calls from 1 to 100");
        o.samples = int(n);
    }
    return o;
}

std::string ChoiceReport::str() const {
    char buf[256];
    std::string where;
    if (size_class >= 0) {
        std::snprintf(buf, sizeof buf, " (inputs of up to 2^%d elements)", size_class);
        where = buf;
    }
    if (choice == Choice::measuring) {
        std::snprintf(buf, sizeof buf,
                      "measuring generated kernels against eager%s (%d timed calls each)",
                      where.c_str(), samples);
        return buf;
    }
    std::snprintf(buf, sizeof buf, "%s (best of %d) -> %s", where.c_str(), samples,
                  choice == Choice::eager ? "eager" : "generated kernels");
    return "generated kernels " + time_text(generated_ms) + " vs eager " + time_text(eager_ms) +
           buf;
}

jit::CompiledFn choose_faster(int graph_id, jit::CompiledFn generated, jit::CompiledFn eager,
                              ChoiceOptions options, bool symbolic, OnChoiceReport on_report) {
    auto c = std::make_shared<Chooser>();
    c->graph_id = graph_id;
    c->generated = std::move(generated);
    c->eager = std::move(eager);
    c->options = options;
    c->symbolic = symbolic;
    c->on_report = std::move(on_report);
    c->slots = std::make_unique<Slot[]>(symbolic ? kSizeClasses : 1);
    return [c](std::span<const Tensor> inputs) { return c->run(inputs); };
}

void set_choice_timer_for_testing(ChoiceTimer timer) {
    std::lock_guard lock(timer_hook().mu);
    timer_hook().timer = std::move(timer);
}

}  // namespace kiln::codegen
