// The differential testers' environment: KILN_FUZZ_PROGRAMS (how many programs) and
// KILN_FUZZ_SEED (shifts every stream, so parallel runs draw different programs).
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstdlib>

namespace kiln_test {

inline int fuzz_count(int fallback) {
    const char* env = std::getenv("KILN_FUZZ_PROGRAMS");
    return env ? std::max(1, std::atoi(env)) : fallback;
}

inline uint32_t seed_offset() {
    const char* env = std::getenv("KILN_FUZZ_SEED");
    return env ? uint32_t(std::strtoul(env, nullptr, 10)) * 1000003u : 0u;
}

}  // namespace kiln_test
