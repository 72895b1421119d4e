// The byte classes of the dedup normalization, 64 bytes at a time, written
// once against Highway (the scalar build has the same function in plain C++).
#include "data/dedup/normalize_kernel.h"

#include <cstring>

// ASCII separators: \t..\r, space..'/', ':'..'@', '['..'`', '{'..'~'.
#ifndef LUMINA_NORMALIZE_KERNEL_TARGET_FREE
#define LUMINA_NORMALIZE_KERNEL_TARGET_FREE
namespace luminamoon {
namespace {
inline bool ascii_separator(uint8_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x20 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) ||
         (c >= 0x5B && c <= 0x60) || (c >= 0x7B && c <= 0x7E);
}
}  // namespace
void classify_block_scalar(const uint8_t* p, uint8_t* lowered, uint64_t* separator, uint64_t* lead) {
  uint64_t s = 0, l = 0;
  for (int i = 0; i < 64; ++i) {
    const uint8_t c = p[i];
    lowered[i] = static_cast<uint8_t>(c >= 'A' && c <= 'Z' ? c + 32 : c);
    s |= uint64_t{ascii_separator(c)} << i;
    l |= uint64_t{c == 0xC2 || c == 0xE2 || c == 0xE3} << i;
  }
  *separator = s;
  *lead = l;
}
}  // namespace luminamoon
#endif

#ifdef LUMINA_NORMALIZE_WITH_HWY

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "data/dedup/normalize_kernel.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace luminamoon {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// lo <= v <= hi for unsigned bytes: v - lo (wrapping) <= hi - lo.
template <class D, class V>
HWY_INLINE auto InRange(D d, V v, uint8_t lo, uint8_t hi) {
  const V off = hn::Sub(v, hn::Set(d, lo));
  return hn::Eq(hn::Min(off, hn::Set(d, static_cast<uint8_t>(hi - lo))), off);
}

HWY_INLINE void ClassifyBlock(const uint8_t* HWY_RESTRICT p, uint8_t* HWY_RESTRICT lowered, uint64_t* separator,
                              uint64_t* lead) {
  const hn::CappedTag<uint8_t, 64> d;
  const size_t N = hn::Lanes(d);
  if (N < 8) {  // mask bits come in whole bytes below
    classify_block_scalar(p, lowered, separator, lead);
    return;
  }
  uint8_t sep_bits[8] = {}, lead_bits[8] = {};
  for (size_t i = 0; i < 64; i += N) {
    const auto v = hn::LoadU(d, p + i);
    const auto upper = InRange(d, v, 'A', 'Z');
    hn::StoreU(hn::IfThenElse(upper, hn::Add(v, hn::Set(d, uint8_t{32})), v), d, lowered + i);
    const auto sep = hn::Or(hn::Or(InRange(d, v, 0x09, 0x0D), InRange(d, v, 0x20, 0x2F)),
                            hn::Or(hn::Or(InRange(d, v, 0x3A, 0x40), InRange(d, v, 0x5B, 0x60)),
                                   InRange(d, v, 0x7B, 0x7E)));
    const auto ld = hn::Or(hn::Or(hn::Eq(v, hn::Set(d, uint8_t{0xC2})), hn::Eq(v, hn::Set(d, uint8_t{0xE2}))),
                           hn::Eq(v, hn::Set(d, uint8_t{0xE3})));
    hn::StoreMaskBits(d, sep, sep_bits + i / 8);
    hn::StoreMaskBits(d, ld, lead_bits + i / 8);
  }
  std::memcpy(separator, sep_bits, 8);  // little-endian: bit i of the u64 is byte i / 8, bit i % 8
  std::memcpy(lead, lead_bits, 8);
}

void ClassifyBlocks(const uint8_t* HWY_RESTRICT p, size_t blocks, uint8_t* HWY_RESTRICT lowered,
                    uint64_t* HWY_RESTRICT separator, uint64_t* HWY_RESTRICT lead) {
  for (size_t b = 0; b < blocks; ++b) ClassifyBlock(p + 64 * b, lowered + 64 * b, separator + b, lead + b);
}

}  // namespace HWY_NAMESPACE
}  // namespace luminamoon
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace luminamoon {
HWY_EXPORT(ClassifyBlocks);
void classify_blocks(const uint8_t* p, size_t blocks, uint8_t* lowered, uint64_t* separator, uint64_t* lead) {
  HWY_DYNAMIC_DISPATCH(ClassifyBlocks)(p, blocks, lowered, separator, lead);
}
}  // namespace luminamoon
#endif

#else  // !LUMINA_NORMALIZE_WITH_HWY

namespace luminamoon {
void classify_blocks(const uint8_t* p, size_t blocks, uint8_t* lowered, uint64_t* separator, uint64_t* lead) {
  for (size_t b = 0; b < blocks; ++b) classify_block_scalar(p + 64 * b, lowered + 64 * b, separator + b, lead + b);
}
}  // namespace luminamoon

#endif
