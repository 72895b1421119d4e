// The dedup normalization, 64 bytes at a time, written once against Highway
// (the scalar build has the same block step in plain C++).
#include "data/dedup/normalize_kernel.h"

#include <algorithm>
#include <bit>
#include <cstring>

// Note [normalization by compaction]
// Per 64-byte block: the byte classes (separator, lead byte of a possible
// multi-byte separator) as bit masks and the bytes lower-cased with every
// separator written as ' ' (one vector pass). A separator byte is kept only
// when a word byte precedes it, so each run of separators becomes the one
// space that joins two words; dropping a final space gives the normalized
// text of Note [dedup normalization]. The kept bytes are compacted 8 at a
// time (BMI2 pext on x86 targets that have it, a branch-free byte loop
// elsewhere), and a word's offset in the output is the count of kept bytes
// before it in its block. No per-word branch, no per-word store other than
// its start.

#ifndef LUMINA_NORMALIZE_KERNEL_TARGET_FREE
#define LUMINA_NORMALIZE_KERNEL_TARGET_FREE
namespace luminamoon {
namespace {
// ASCII separators: \t..\r, space..'/', ':'..'@', '['..'`', '{'..'~'.
inline bool ascii_separator(uint8_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x20 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) ||
         (c >= 0x5B && c <= 0x60) || (c >= 0x7B && c <= 0x7E);
}

void classify_block_scalar(const uint8_t* p, uint8_t* spaced, uint64_t* separator, uint64_t* lead) {
  uint64_t s = 0, l = 0;
  for (int i = 0; i < 64; ++i) {
    const uint8_t c = p[i];
    const bool sep = ascii_separator(c);
    spaced[i] = static_cast<uint8_t>(sep ? ' ' : c >= 'A' && c <= 'Z' ? c + 32 : c);
    s |= uint64_t{sep} << i;
    l |= uint64_t{c == 0xC2 || c == 0xE2 || c == 0xE3} << i;
  }
  *separator = s;
  *lead = l;
}

// Length of the multi-byte separator at p (n bytes left), or 0: U+00A0,
// U+2000..U+206F (E2 80 80..E2 81 AF), U+3000..U+303F (E3 80 80..E3 80 BF).
inline size_t multibyte_separator_length(const uint8_t* p, size_t n) {
  if (p[0] == 0xC2) return n >= 2 && p[1] == 0xA0 ? 2 : 0;
  if (n < 3 || (p[2] & 0xC0) != 0x80) return 0;
  if (p[0] == 0xE2) return p[1] == 0x80 || (p[1] == 0x81 && p[2] <= 0xAF) ? 3 : 0;
  return p[0] == 0xE3 && p[1] == 0x80 ? 3 : 0;
}

inline uint8_t* compact_bytes_portable(const uint8_t* spaced, uint64_t keep, uint8_t* w) {
  for (int i = 0; i < 64; ++i) {
    *w = spaced[i];
    w += (keep >> i) & 1;
  }
  return w;
}

}  // namespace
}  // namespace luminamoon
#endif

#ifdef LUMINA_NORMALIZE_WITH_HWY

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "data/dedup/normalize_kernel.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#if HWY_ARCH_X86
#include <immintrin.h>
#endif

HWY_BEFORE_NAMESPACE();
namespace luminamoon {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Highway's AVX2 and AVX-512 targets include BMI2 (pext, pdep).
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2 && !defined(HWY_DISABLE_BMI2_FMA)
#define LUMINA_NORMALIZE_PEXT 1
#endif

// lo <= v <= hi for unsigned bytes: v - lo (wrapping) <= hi - lo.
template <class D, class V>
HWY_INLINE auto InRange(D d, V v, uint8_t lo, uint8_t hi) {
  const V off = hn::Sub(v, hn::Set(d, lo));
  return hn::Eq(hn::Min(off, hn::Set(d, static_cast<uint8_t>(hi - lo))), off);
}

HWY_INLINE void ClassifyBlock(const uint8_t* HWY_RESTRICT p, uint8_t* HWY_RESTRICT spaced, uint64_t* separator,
                              uint64_t* lead) {
  const hn::CappedTag<uint8_t, 64> d;
  const size_t N = hn::Lanes(d);
  if (N < 8) {  // mask bits come in whole bytes below
    classify_block_scalar(p, spaced, separator, lead);
    return;
  }
  uint8_t sep_bits[8] = {}, lead_bits[8] = {};
  for (size_t i = 0; i < 64; i += N) {
    const auto v = hn::LoadU(d, p + i);
    const auto upper = InRange(d, v, 'A', 'Z');
    const auto sep = hn::Or(hn::Or(InRange(d, v, 0x09, 0x0D), InRange(d, v, 0x20, 0x2F)),
                            hn::Or(hn::Or(InRange(d, v, 0x3A, 0x40), InRange(d, v, 0x5B, 0x60)),
                                   InRange(d, v, 0x7B, 0x7E)));
    const auto lowered = hn::IfThenElse(upper, hn::Add(v, hn::Set(d, uint8_t{32})), v);
    hn::Store(hn::IfThenElse(sep, hn::Set(d, uint8_t{' '}), lowered), d, spaced + i);
    const auto ld = hn::Or(hn::Or(hn::Eq(v, hn::Set(d, uint8_t{0xC2})), hn::Eq(v, hn::Set(d, uint8_t{0xE2}))),
                           hn::Eq(v, hn::Set(d, uint8_t{0xE3})));
    hn::StoreMaskBits(d, sep, sep_bits + i / 8);
    hn::StoreMaskBits(d, ld, lead_bits + i / 8);
  }
  std::memcpy(separator, sep_bits, 8);  // little-endian: bit i of the u64 is byte i / 8, bit i % 8
  std::memcpy(lead, lead_bits, 8);
}

HWY_INLINE uint8_t* CompactBytes(const uint8_t* HWY_RESTRICT spaced, uint64_t keep, uint8_t* HWY_RESTRICT w) {
#ifdef LUMINA_NORMALIZE_PEXT
  for (int g = 0; g < 8; ++g) {
    const uint64_t m = (keep >> (8 * g)) & 0xFF;
    uint64_t chunk;
    std::memcpy(&chunk, spaced + 8 * g, 8);
    const uint64_t packed = _pext_u64(chunk, _pdep_u64(m, 0x0101010101010101ull) * 0xFF);
    std::memcpy(w, &packed, 8);
    w += std::popcount(m);
  }
  return w;
#else
  return compact_bytes_portable(spaced, keep, w);
#endif
}

#include "data/dedup/normalize_blocks-inl.h"

NormalizedCounts NormalizeText(const uint8_t* HWY_RESTRICT p, size_t n, uint8_t* HWY_RESTRICT out,
                               uint32_t* HWY_RESTRICT word_starts) {
  return NormalizeBlocks(
      p, n, out, word_starts,
      [](const uint8_t* src, uint8_t* spaced, uint64_t* sep, uint64_t* lead) { ClassifyBlock(src, spaced, sep, lead); },
      [](const uint8_t* spaced, uint64_t keep, uint8_t* w) { return CompactBytes(spaced, keep, w); });
}

#undef LUMINA_NORMALIZE_PEXT

}  // namespace HWY_NAMESPACE
}  // namespace luminamoon
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace luminamoon {
HWY_EXPORT(NormalizeText);
NormalizedCounts normalize_text(const uint8_t* p, size_t n, uint8_t* out, uint32_t* word_starts) {
  return HWY_DYNAMIC_DISPATCH(NormalizeText)(p, n, out, word_starts);
}
}  // namespace luminamoon
#endif

#else  // !LUMINA_NORMALIZE_WITH_HWY

namespace luminamoon {
#include "data/dedup/normalize_blocks-inl.h"

NormalizedCounts normalize_text(const uint8_t* p, size_t n, uint8_t* out, uint32_t* word_starts) {
  return NormalizeBlocks(p, n, out, word_starts, classify_block_scalar, compact_bytes_portable);
}
}  // namespace luminamoon

#endif
