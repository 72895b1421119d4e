// Division of 32-bit integers by a divisor fixed for many divisions, without
// a divide instruction (Note [division by an invariant divisor]).
#pragma once

#include <cstdint>

#include "optim/core/host_device.h"

namespace luminav::core {

// Note [division by an invariant divisor]: pass 2 of a TD-CLM row/factored
// tensor needs the row and column of element i (i / C and i mod C). A 32-bit
// division by a variable is a subroutine of about twenty instructions on a
// GPU, and the CUDA apply kernel made one per four elements. Granlund and
// Montgomery (PLDI 1994, "Division by invariant integers using
// multiplication", figure 4.1) replace it by a multiply-high, a subtract, an
// add and two shifts, with a multiplier formed once per divisor:
//   l = ceil(log2 d), m = floor(2^32 (2^l - d) / d) + 1,
//   t = (m n) >> 32, n / d = (t + ((n - t) >> min(l, 1))) >> max(l - 1, 0).
// Exact for every 32-bit n and 1 <= d < 2^32 (invariant_divisor_test.cc
// checks it against '/').
struct InvariantDivisor {
  uint32_t multiplier = 1;
  uint32_t shift1 = 0;
  uint32_t shift2 = 0;
};

LUMINAV_HD InvariantDivisor invariant_divisor(uint32_t d) {  // d >= 1
  uint32_t l = 0;
  while ((uint64_t{1} << l) < d) ++l;  // once per divisor: a loop is cheap enough
  InvariantDivisor v;
  // 2^l - d < 2^32, so the shifted value fits; m <= 2^32 - 1 (d > 2^(l-1)).
  v.multiplier = static_cast<uint32_t>((((uint64_t{1} << l) - d) << 32) / d + 1);
  v.shift1 = l < 1 ? l : 1;
  v.shift2 = l > 1 ? l - 1 : 0;
  return v;
}

LUMINAV_HD uint32_t divide(const InvariantDivisor& d, uint32_t n) {
#if defined(__CUDA_ARCH__)
  const uint32_t t = __umulhi(n, d.multiplier);
#else
  const uint32_t t = static_cast<uint32_t>((uint64_t{n} * d.multiplier) >> 32);
#endif
  return (t + ((n - t) >> d.shift1)) >> d.shift2;  // t <= n, and the sum <= n: no overflow
}

}  // namespace luminav::core
