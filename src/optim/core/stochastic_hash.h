// The counter-based hash keying stochastic rounding on (seed, t, i) only.
#pragma once

#include <cstdint>

#include "optim/core/host_device.h"

namespace luminav::core {

// spec/luminav-update.md, "Stochastic rounding": a SplitMix64 finaliser over
// a linear combination of the three counters; returns the high 32 bits.
LUMINAV_HD uint32_t rounding_bits(uint64_t seed, uint64_t step, uint64_t index) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + step * 0xBF58476D1CE4E5B9ull +
               index * 0x94D049BB133111EBull;
  z ^= z >> 30;
  z *= 0xBF58476D1CE4E5B9ull;
  z ^= z >> 27;
  z *= 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<uint32_t>(z >> 32);
}

}  // namespace luminav::core
