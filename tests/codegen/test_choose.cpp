// The inductor keeps, per graph, the faster of its generated kernels and eager (the
// interpreter), measured on the first calls (codegen/choose.h). Timings are injected with
// set_choice_timer_for_testing, so no test depends on how fast this machine is.
#include <boost/test/unit_test.hpp>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <sstream>

#include "jit/log.h"
#include "kiln.h"
#include "tests/scoped_env.h"

using namespace kiln;
using namespace kiln::codegen;

namespace {

using kiln_test::ScopedEnv;

// Every call after the first one alternates paths while measuring: 1 warm-up + 3 + 3.
constexpr int kMeasuringCalls = 7;

// Fakes the clock: every timed call of the kernels takes `generated_ms`, of eager `eager_ms`.
struct FakeTimes {
    FakeTimes(double generated_ms, double eager_ms) {
        set_choice_timer_for_testing(
            [=](int, bool generated, double) { return generated ? generated_ms : eager_ms; });
    }
    ~FakeTimes() { set_choice_timer_for_testing({}); }
};

Tensor pointwise(Tensor x, Tensor y) { return exp(x) * 0.5 + sin(y); }

std::string explained(const auto& f) {
    std::ostringstream os;
    os << jit::explain_compiled(f);
    return os.str();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(backend_choice)

BOOST_AUTO_TEST_CASE(eager_is_kept_when_the_kernels_are_slower) {
    FakeTimes times(/*generated_ms=*/5.0, /*eager_ms=*/1.0);
    auto f = compile(pointwise);
    Tensor x = randn({1000}), y = randn({1000});
    Tensor want = pointwise(x, y);
    InductorStats before = inductor_stats();
    for (int i = 0; i < kMeasuringCalls; ++i)
        BOOST_TEST(allclose(f(x, y), want, 1e-5, 1e-6), "call " << i + 1);
    InductorStats measured = inductor_stats();
    BOOST_TEST(measured.calls_compiled - before.calls_compiled == 4);  // warm-up + 3 timed
    BOOST_TEST(measured.calls_interpreted - before.calls_interpreted == 3);
    CompiledGraphInfo info = last_compiled();
    BOOST_REQUIRE(info.choices.size() == 1u);
    BOOST_TEST(int(info.choices[0].choice) == int(Choice::eager));
    BOOST_TEST(info.choices[0].generated_ms == 5.0);
    BOOST_TEST(info.choices[0].eager_ms == 1.0);
    for (int i = 0; i < 3; ++i) BOOST_TEST(allclose(f(x, y), want, 1e-5, 1e-6));
    BOOST_TEST(inductor_stats().calls_compiled == measured.calls_compiled);
    BOOST_TEST(inductor_stats().calls_interpreted - measured.calls_interpreted == 3);
}

BOOST_AUTO_TEST_CASE(the_kernels_are_kept_when_they_win_or_eager_wins_by_less_than_the_margin) {
    for (double eager_ms : {5.0, 0.95}) {  // eager 5x slower; eager 5% faster (margin: 10%)
        FakeTimes times(1.0, eager_ms);
        auto f = compile(pointwise);
        Tensor x = randn({64}), y = randn({64});
        for (int i = 0; i < kMeasuringCalls; ++i) (void)f(x, y);
        BOOST_REQUIRE(last_compiled().choices.size() == 1u);
        BOOST_TEST(int(last_compiled().choices[0].choice) == int(Choice::generated), eager_ms);
        InductorStats before = inductor_stats();
        BOOST_TEST(allclose(f(x, y), pointwise(x, y), 1e-5, 1e-6));
        BOOST_TEST(inductor_stats().calls_compiled - before.calls_compiled == 1);
        BOOST_TEST(inductor_stats().calls_interpreted == before.calls_interpreted);
    }
}

// With the real clock the choice is whatever this machine says; only that one is made.
BOOST_AUTO_TEST_CASE(the_real_clock_makes_a_choice_and_results_stay_eagers) {
    auto f = compile(pointwise);
    Tensor x = randn({4096}), y = randn({4096});
    for (int i = 0; i < kMeasuringCalls + 2; ++i)
        BOOST_TEST(allclose(f(x, y), pointwise(x, y), 1e-5, 1e-6));
    BOOST_REQUIRE(last_compiled().choices.size() == 1u);
    BOOST_TEST(int(last_compiled().choices[0].choice) != int(Choice::measuring));
    BOOST_TEST(last_compiled().choices[0].generated_ms > 0);
}

// Each call runs the graph once, through one path: the random stream after every call is
// eager's, and so is every value drawn, while measuring and after.
BOOST_AUTO_TEST_CASE(random_ops_draw_once_per_call) {
    FakeTimes times(5.0, 1.0);
    auto fn = [](Tensor x) { return nn::F::dropout(exp(x) * 0.5, 0.3, true) + 1.0; };
    auto f = compile(fn);
    Tensor x = randn({256});
    manual_seed(11);
    std::vector<Tensor> got;
    for (int i = 0; i < kMeasuringCalls + 3; ++i) got.push_back(f(x));
    Tensor next_got = randn({4});
    manual_seed(11);
    for (int i = 0; i < kMeasuringCalls + 3; ++i)
        BOOST_TEST(allclose(got[size_t(i)], fn(x), 1e-5, 1e-6), "call " << i + 1);
    BOOST_TEST(allclose(next_got, randn({4}), 0.0, 0.0));
    BOOST_TEST(int(last_compiled().choices.at(0).choice) == int(Choice::eager));
}

// A functionalized write to an argument is written back once per call, whichever path ran.
BOOST_AUTO_TEST_CASE(in_place_writes_to_inputs_happen_once_per_call) {
    FakeTimes times(5.0, 1.0);
    auto fn = [](Tensor x) {
        x.add_(ones_like(x));
        return x * 2.0;
    };
    auto f = compile(fn);
    Tensor x = zeros({100}), x_eager = zeros({100});
    for (int i = 0; i < kMeasuringCalls + 3; ++i) {
        Tensor got = f(x), want = fn(x_eager);
        BOOST_TEST(allclose(got, want, 0.0, 0.0), "call " << i + 1);
        BOOST_TEST(allclose(x, full({100}, double(i + 1)), 0.0, 0.0), "call " << i + 1);
    }
    BOOST_TEST(int(last_compiled().choices.at(0).choice) == int(Choice::eager));
}

// AOT compiles the forward and backward halves as two graphs: each chooses for itself.
BOOST_AUTO_TEST_CASE(forward_and_backward_halves_choose_separately) {
    int forward_id = -1;  // eager wins the forward half, the kernels win the backward half
    set_choice_timer_for_testing([&](int id, bool generated, double) {
        return (id == forward_id) == generated ? 5.0 : 1.0;
    });
    struct Restore {
        ~Restore() { set_choice_timer_for_testing({}); }
    } restore;
    manual_seed(3);
    Tensor w = (randn({16, 8}) * 0.3).requires_grad_(), b = zeros({8}, {.requires_grad = true});
    auto loss_fn = [&](Tensor x) {
        return (tanh(matmul(x, w) + b) * sigmoid(x.sum({1}, true))).sum();
    };
    auto f = compile(loss_fn);
    Tensor x = randn({32, 16});
    for (int i = 0; i < kMeasuringCalls + 2; ++i) {
        w.zero_grad(), b.zero_grad();
        Tensor loss = f(x);
        if (i == 0) {  // the backward half is numbered right after the forward, compiled with it
            CompiledGraphInfo last = last_compiled();
            forward_id = last.graph.find("tangent") != std::string::npos ? last.id - 1 : last.id;
        }
        loss.backward();
        Tensor gw = w.grad().clone(), gb = b.grad().clone();
        w.zero_grad(), b.zero_grad();
        Tensor want = loss_fn(x);
        want.backward();
        BOOST_TEST(allclose(loss, want, 1e-4, 1e-5), "call " << i + 1);
        BOOST_TEST(allclose(gw, w.grad(), 1e-4, 1e-5), "call " << i + 1);
        BOOST_TEST(allclose(gb, b.grad(), 1e-4, 1e-5), "call " << i + 1);
    }
    CompiledGraphInfo backward = last_compiled();
    BOOST_TEST(backward.id != forward_id);
    BOOST_REQUIRE(backward.choices.size() == 1u);
    BOOST_TEST(int(backward.choices[0].choice) == int(Choice::generated));
    std::string text = explained(f);
    BOOST_TEST(text.find("inductor graph " + std::to_string(forward_id) +
                         ": generated kernels 5.00 ms vs eager 1.00 ms "
                         "(best of 3) -> eager") != std::string::npos,
               text);
    BOOST_TEST(text.find("inductor graph " + std::to_string(backward.id) +
                         ": generated kernels 1.00 ms vs eager 5.00 ms "
                         "(best of 3) -> generated kernels") != std::string::npos,
               text);
}

// A new entry (sizes became symbols) is a new graph: it measures anew; and a symbolic graph
// chooses per size class, since which path wins depends on the size.
BOOST_AUTO_TEST_CASE(dynamic_shapes_measure_each_entry_and_size_class) {
    FakeTimes times(5.0, 1.0);
    auto fn = [](Tensor x) { return tanh(x) * 3.0 - x; };
    auto f = compile(fn);
    Tensor small = randn({8});
    for (int i = 0; i < kMeasuringCalls; ++i) (void)f(small);
    BOOST_TEST(int(last_compiled().choices.at(0).choice) == int(Choice::eager));
    Tensor ten = randn({10});
    BOOST_TEST(allclose(f(ten), fn(ten), 1e-5, 1e-6));  // records the symbolic entry
    CompiledGraphInfo symbolic = last_compiled();
    BOOST_TEST(symbolic.graph.find("s0") != std::string::npos);
    BOOST_REQUIRE(symbolic.choices.size() == 1u);
    BOOST_TEST(int(symbolic.choices[0].choice) == int(Choice::measuring));
    BOOST_TEST(symbolic.choices[0].size_class == 4);  // 10 elements: up to 2^4
    for (int i = 1; i < kMeasuringCalls; ++i) BOOST_TEST(allclose(f(ten), fn(ten), 1e-5, 1e-6));
    BOOST_TEST(int(last_compiled().choices.at(0).choice) == int(Choice::eager));
    Tensor big = randn({1000});
    BOOST_TEST(allclose(f(big), fn(big), 1e-5, 1e-6));
    CompiledGraphInfo now = last_compiled();
    BOOST_TEST(now.id == symbolic.id);  // the same kernels, a new size class
    BOOST_REQUIRE(now.choices.size() == 2u);
    BOOST_TEST(now.choices[1].size_class == 10);
    BOOST_TEST(int(now.choices[1].choice) == int(Choice::measuring));
    std::string text = explained(f);
    BOOST_TEST(
        text.find("(inputs of up to 2^10 elements) (3 timed calls each)") != std::string::npos,
        text);
}

BOOST_AUTO_TEST_CASE(explain_shows_measuring_then_the_choice) {
    FakeTimes times(2.0, 1.0);
    auto f = compile(pointwise);
    Tensor x = randn({32}), y = randn({32});
    (void)f(x, y);
    std::string text = explained(f);
    BOOST_TEST(
        text.find("Backend choice (generated kernels or eager, measured on the first calls):") !=
            std::string::npos,
        text);
    BOOST_TEST(text.find("measuring generated kernels against eager (3 timed calls each)") !=
                   std::string::npos,
               text);
    for (int i = 1; i < kMeasuringCalls; ++i) (void)f(x, y);
    text = explained(f);
    BOOST_TEST(text.find("Graph 1: inductor graph " + std::to_string(last_compiled().id) +
                         ": generated kernels 2.00 ms vs eager 1.00 ms (best of 3) -> eager") !=
                   std::string::npos,
               text);
    BOOST_TEST(text.find("measuring") == std::string::npos, text);
}

BOOST_AUTO_TEST_CASE(KILN_LOGS_choice_prints_the_measurement_and_the_choice) {
    FakeTimes times(0.5, 2.0);
    std::ostringstream captured;
    {
        ScopedEnv logs("KILN_LOGS", "choice");
        log_reload();
        std::streambuf* old = std::cerr.rdbuf(captured.rdbuf());
        auto f = compile(pointwise);
        Tensor x = randn({32}), y = randn({32});
        for (int i = 0; i < kMeasuringCalls; ++i) (void)f(x, y);
        std::cerr.rdbuf(old);
    }
    log_reload();
    std::string id = std::to_string(last_compiled().id);
    std::string text = captured.str();
    BOOST_TEST(text.find("[kiln:choice] inductor graph " + id +
                         ": measuring generated kernels against eager") != std::string::npos,
               text);
    BOOST_TEST(text.find("[kiln:choice] inductor graph " + id +
                         ": generated kernels 500.0 us vs eager 2.00 ms (best of 3) -> generated "
                         "kernels") != std::string::npos,
               text);
}

BOOST_AUTO_TEST_CASE(the_choice_is_turned_off_by_the_option_or_KILN_CHOOSE) {
    FakeTimes times(5.0, 1.0);
    Tensor x = randn({32}), y = randn({32});
    auto check_always_generated = [&](auto& f, const char* how) {
        InductorStats before = inductor_stats();
        for (int i = 0; i < kMeasuringCalls + 2; ++i)
            BOOST_TEST(allclose(f(x, y), pointwise(x, y), 1e-5, 1e-6));
        BOOST_TEST(inductor_stats().calls_compiled - before.calls_compiled == kMeasuringCalls + 2,
                   how);
        BOOST_TEST(inductor_stats().calls_interpreted == before.calls_interpreted, how);
        BOOST_TEST(last_compiled().choices.empty(), how);
        BOOST_TEST(explained(f).find("Backend choice") == std::string::npos, how);
    };
    auto by_option = compile(pointwise, {.choose_faster = false});
    check_always_generated(by_option, "choose_faster = false");
    {
        ScopedEnv off("KILN_CHOOSE", "0");
        auto by_env = compile(pointwise);
        check_always_generated(by_env, "KILN_CHOOSE=0");
    }
    {
        ScopedEnv samples("KILN_CHOOSE_SAMPLES", "1");
        auto one = compile(pointwise);
        for (int i = 0; i < 3; ++i) (void)one(x, y);  // warm-up, kernels, eager
        BOOST_TEST(int(last_compiled().choices.at(0).choice) == int(Choice::eager));
        BOOST_TEST(last_compiled().choices[0].samples == 1);
    }
    ScopedEnv bad("KILN_CHOOSE", "maybe");
    auto f = compile(pointwise);
    BOOST_CHECK_EXCEPTION(f(x, y), Error, [](const Error& e) {
        return std::string(e.what()).find("KILN_CHOOSE='maybe'") != std::string::npos;
    });
}

BOOST_AUTO_TEST_SUITE_END()
