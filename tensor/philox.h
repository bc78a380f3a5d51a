// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", 2011), the
// counter-based generator PyTorch's CUDA random ops use, and the draws kiln's random ops make
// from it. Element i of a random op's output is a pure function of (seed, offset + i), so
// the CPU loop, a CUDA thread and a replayed CUDA graph all draw the same numbers for a seed.
// The code below is compiled on the host as it stands, and its text (kRandomSource) is
// compiled by NVRTC into the device kernels: one definition for both devices.
#pragma once
#include <math.h>

#define KILN_HD                                     // host: plain functions; NVRTC: __device__
#define KILN_RANDOM_SOURCE(...) __VA_ARGS__ inline constexpr const char* kRandomSource = #__VA_ARGS__;

namespace kiln_random {
KILN_RANDOM_SOURCE(
    typedef unsigned int u32; typedef unsigned long long u64;
    struct Philox4 { u32 v[4]; };

    // Ten rounds of two 32x32->64 multiplies, the key bumped by Weyl constants between rounds.
    KILN_HD inline Philox4 philox_block(Philox4 c, u32 k0, u32 k1) {
        for (int round = 0; round < 10; ++round) {
            u64 p0 = u64(0xD2511F53u) * c.v[0], p1 = u64(0xCD9E8D57u) * c.v[2];
            Philox4 n = {{u32(p1 >> 32) ^ c.v[1] ^ k0, u32(p1), u32(p0 >> 32) ^ c.v[3] ^ k1, u32(p0)}};
            c = n;
            k0 += 0x9E3779B9u, k1 += 0xBB67AE85u;
        }
        return c;
    }
    // kiln's use: the seed is the key, the draw's index the low half of the counter.
    KILN_HD inline Philox4 philox(u64 key, u64 counter) {
        Philox4 c = {{u32(counter), u32(counter >> 32), 0u, 0u}};
        return philox_block(c, u32(key), u32(key >> 32));
    }

    // 53 random bits from two lanes as a double in [0, 1).
    KILN_HD inline double unit53(u32 hi, u32 lo) { return double(((u64(hi) << 32) | lo) >> 11) * (1.0 / 9007199254740992.0); }

    // Uniform on [lo, hi): the caller rounds to its dtype and keeps the result below hi.
    KILN_HD inline double draw_uniform(u64 seed, u64 index, double lo, double hi) {
        Philox4 r = philox(seed, index);
        return lo + (hi - lo) * unit53(r.v[0], r.v[1]);
    }

    // Standard normal by Box-Muller: u1 in (0, 1] keeps the log finite.
    KILN_HD inline double draw_normal(u64 seed, u64 index) {
        Philox4 r = philox(seed, index);
        double u1 = 1.0 - unit53(r.v[0], r.v[1]), u2 = unit53(r.v[2], r.v[3]);
        return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
    }

    // An integer in [lo, lo + range); range 0 means all 2^64 values.
    KILN_HD inline long long draw_int(u64 seed, u64 index, long long lo, u64 range) {
        Philox4 r = philox(seed, index);
        u64 bits = (u64(r.v[0]) << 32) | r.v[1];
        return (long long)(u64(lo) + (range ? bits % range : bits));
    }
)
}  // namespace kiln_random
