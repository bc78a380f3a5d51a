// The classes an independent fuzzer found (tests/jit/soundness_streams.h) on CUDA tensors,
// under every backend and under inductor with mode="reduce-overhead" (CUDA graph replays).
#include <boost/test/unit_test.hpp>

#include "tests/cuda/needs_gpu.h"
#include "tests/jit/soundness_streams.h"

using namespace kiln;
namespace st = kiln_test::streams;
namespace utf = boost::unit_test;

namespace {
std::vector<CompileOptions> gpu_options() {
    return {{.backend = "eager"}, {.backend = "aot_eager"}, {.backend = "inductor"}, {.backend = "inductor", .mode = "reduce-overhead"}};
}
}  // namespace

BOOST_AUTO_TEST_SUITE(cuda_soundness)

#define KILN_STREAMS_CASE(name)                                                          \
    BOOST_AUTO_TEST_CASE(name, *utf::precondition(kiln_test::NeedsGpu{"cuda soundness"})) { \
        for (const CompileOptions& o : gpu_options()) st::name(kiln_test::kCuda, o);       \
    }
KILN_STREAMS_CHECKS(KILN_STREAMS_CASE)
#undef KILN_STREAMS_CASE

BOOST_AUTO_TEST_SUITE_END()
