// The counter-based hash keying stochastic rounding on (seed, t, i) only.
#pragma once

#include <cstdint>

#include "optim/core/host_device.h"

namespace luminav::core {

// The spec's constants (the SplitMix64 ones); the vector hash
// (simd/stochastic_hash-inl.h) uses them too.
inline constexpr uint64_t kSeedFactor = 0x9E3779B97F4A7C15ull;
inline constexpr uint64_t kStepFactor = 0xBF58476D1CE4E5B9ull;   // also the first finaliser multiplier
inline constexpr uint64_t kIndexFactor = 0x94D049BB133111EBull;  // also the second

// spec/luminav-update.md, "Stochastic rounding": a SplitMix64 finaliser over
// a linear combination of the three counters; returns the high 32 bits.
LUMINAV_HD uint32_t rounding_bits(uint64_t seed, uint64_t step, uint64_t index) {
  uint64_t z = seed * kSeedFactor + step * kStepFactor + index * kIndexFactor;
  z ^= z >> 30;
  z *= kStepFactor;
  z ^= z >> 27;
  z *= kIndexFactor;
  z ^= z >> 31;
  return static_cast<uint32_t>(z >> 32);
}

}  // namespace luminav::core
