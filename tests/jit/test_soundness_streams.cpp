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
KILN_STREAMS_CHECKS(KILN_STREAMS_CASE)
#undef KILN_STREAMS_CASE

BOOST_AUTO_TEST_SUITE_END()
