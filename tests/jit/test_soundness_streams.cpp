// The classes an independent fuzzer found (tests/jit/soundness_streams.h), on the CPU
// under every backend; tests/cuda/test_cuda_soundness.cpp runs the same checks on the GPU.
#include <boost/test/unit_test.hpp>

#include "tests/jit/soundness_streams.h"

using namespace kiln;
namespace st = kiln_test::streams;

namespace {
const char* const kBackends[] = {"eager", "aot_eager", "inductor"};
}

BOOST_AUTO_TEST_SUITE(jit_soundness_streams)

#define KILN_STREAMS_CASE(name)                                                 \
    BOOST_AUTO_TEST_CASE(name) {                                                \
        for (const char* backend : kBackends) st::name(cpu, {.backend = backend}); \
    }
KILN_STREAMS_CASE(random_ops_before_a_new_branch_outcome_draw_once)
KILN_STREAMS_CASE(random_ops_with_grad_draw_once_on_the_recording_call)
KILN_STREAMS_CASE(unused_random_results_still_draw)
KILN_STREAMS_CASE(outputs_that_alias_arguments_stay_aliases)
KILN_STREAMS_CASE(aliased_outputs_across_breaks_captures_reruns_and_sizes)
KILN_STREAMS_CASE(int_casts_carry_no_gradient_beside_a_broadcast_where)
#undef KILN_STREAMS_CASE

BOOST_AUTO_TEST_SUITE_END()
