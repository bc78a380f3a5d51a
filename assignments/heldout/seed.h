// The held-out tests' seed (instructor mode, `kiln grade N --held-out`): the grader sets
// KILN_HELDOUT_SEED (a new one per run unless the instructor sets it), so the networks,
// shapes and values are drawn at grading time and are in no file a student has.
#pragma once
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>

namespace heldout {

inline uint64_t seed() {
    const char* s = std::getenv("KILN_HELDOUT_SEED");
    return s ? std::stoull(s) : 20261126;  // the binary run by hand: a fixed seed
}

// A generator for one test case: the run's seed mixed with the case's own number.
inline std::mt19937_64 rng(uint64_t test) { return std::mt19937_64(seed() * 1000003 + test); }

}  // namespace heldout
