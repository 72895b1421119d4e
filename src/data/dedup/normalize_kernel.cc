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

// The output offsets of a block's word starts (start_bits, each a kept
// byte) from the count of kept bytes before each.
inline uint32_t* write_starts_portable(uint64_t start_bits, uint64_t keep, uint32_t block_out, uint32_t* starts) {
  for (uint64_t m = start_bits; m; m &= m - 1) {
    const int i = std::countr_zero(m);
    *starts++ = block_out + static_cast<uint32_t>(std::popcount(keep & ((uint64_t{1} << i) - 1)));
  }
  return starts;
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

// Highway compiles its AVX3_DL target (AVX-512 with VBMI2: vpcompressb, one
// instruction for a block's compaction) only when asked; the dedup tests ask
// too, so that they run it (Note [normalization by compaction]).
#ifndef HWY_WANT_AVX3_DL
#define HWY_WANT_AVX3_DL
#endif
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

// Note [byte classes by nibble lookup]
// One table lookup per nibble classifies a byte: hi[c >> 4] & lo[c & 15] has
// a bit set for each class the byte is in (the pshufb technique of simdjson's
// structural classifier; the tables are ours). The separators of Note [dedup
// normalization] fall into six classes by row (high nibble) and column:
//   0x01 row 0, columns 9..D (\t..\r)     0x02 row 2, every column (space..'/')
//   0x04 row 3, columns A..F (':'..'?')    0x08 rows 5 and 7, columns B..E
//   0x10 row 5, column F ('_')             0x40 rows 4 and 6, column 0 ('@', '`')
// and 0x20 marks rows 4 and 5 (A..Z and the separators among them): OR-ing
// that bit into the byte lower-cases A..Z, and the separators it also hits
// become ' ' anyway. Bytes >= 0x80 are in no class (row 8..F is 0).
// tests: dedup_test TextNormalize.EveryByteValueAtEveryBlockOffsetEqualsTheNote.
HWY_ALIGN static constexpr uint8_t kRowClasses[16] = {0x01, 0, 0x02, 0x04, 0x60, 0x38, 0x40, 0x08,
                                                      0,    0, 0,    0,    0,    0,    0,    0};
HWY_ALIGN static constexpr uint8_t kColumnClasses[16] = {0x62, 0x22, 0x22, 0x22, 0x22, 0x22, 0x22, 0x22,
                                                         0x22, 0x23, 0x27, 0x2F, 0x2F, 0x2F, 0x2E, 0x36};
inline constexpr uint8_t kSeparatorClasses = 0x5F, kUpperRows = 0x20;

HWY_INLINE void ClassifyBlock(const uint8_t* HWY_RESTRICT p, uint8_t* HWY_RESTRICT spaced, uint64_t* separator,
                              uint64_t* lead) {
  const hn::CappedTag<uint8_t, 64> d;
  const size_t N = hn::Lanes(d);
  if (N < 16) {  // mask bits come in whole bytes and the tables fill a 16-byte block below
    classify_block_scalar(p, spaced, separator, lead);
    return;
  }
  const auto rows = hn::LoadDup128(d, kRowClasses);
  const auto columns = hn::LoadDup128(d, kColumnClasses);
  uint8_t word_bits[8] = {}, lead_bits[8] = {};
  for (size_t i = 0; i < 64; i += N) {
    const auto v = hn::LoadU(d, p + i);
    const auto classes = hn::And(hn::TableLookupBytes(rows, hn::ShiftRight<4>(v)),
                                 hn::TableLookupBytes(columns, hn::And(v, hn::Set(d, uint8_t{0x0F}))));
    const auto word = hn::Eq(hn::And(classes, hn::Set(d, kSeparatorClasses)), hn::Zero(d));
    const auto lowered = hn::Or(v, hn::And(classes, hn::Set(d, kUpperRows)));
    hn::Store(hn::IfThenElse(word, lowered, hn::Set(d, uint8_t{' '})), d, spaced + i);
    // Lead bytes of the multi-byte separators: C2, E2 and E3 (E2 | 1 == E3).
    const auto ld = hn::Or(hn::Eq(v, hn::Set(d, uint8_t{0xC2})),
                           hn::Eq(hn::Or(v, hn::Set(d, uint8_t{1})), hn::Set(d, uint8_t{0xE3})));
    hn::StoreMaskBits(d, word, word_bits + i / 8);
    hn::StoreMaskBits(d, ld, lead_bits + i / 8);
  }
  uint64_t words;
  std::memcpy(&words, word_bits, 8);  // little-endian: bit i of the u64 is byte i / 8, bit i % 8
  *separator = ~words;
  std::memcpy(lead, lead_bits, 8);
}

HWY_INLINE uint8_t* CompactBytes(const uint8_t* HWY_RESTRICT spaced, uint64_t keep, uint8_t* HWY_RESTRICT w) {
#if HWY_TARGET == HWY_AVX3_DL
  // vpcompressb into a register, then a whole-vector store: the bytes past
  // the kept ones are scratch inside the caller's kNormalizeSlack (a masked
  // compressing store to memory is several times slower on Intel cores).
  const hn::Full512<uint8_t> d;
  hn::StoreU(hn::Compress(hn::Load(d, spaced), hn::LoadMaskBits(d, reinterpret_cast<const uint8_t*>(&keep))), d, w);
  return w + std::popcount(keep);
#elif defined(LUMINA_NORMALIZE_PEXT)
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

// Note [word starts a dozen at a time]
// A word start is a kept byte, so its offset in the block's output is the
// position of its bit in pext(start_bits, keep). A 64-byte block of real
// text starts 9-10 words on average and at most 12 in 94% of blocks
// (bench/real_text_corpus.py), so 12 offsets are written whatever the count
// (the entries past it are scratch that the next block overwrites; the
// caller's array has kNormalizeStartsSlack spare entries) and only the rest
// take a loop: no branch per word, and the loop's exit is rarely reached.
HWY_INLINE uint32_t* WriteStarts(uint64_t start_bits, uint64_t keep, uint32_t block_out, uint32_t* HWY_RESTRICT starts) {
#if HWY_TARGET == HWY_AVX3_DL
  // The offsets 0..63 compressed by the output start bits are the starts'
  // offsets in order; 16 at a time widened to 32 bits (one pass in 99.9% of
  // blocks; past the count: scratch inside kNormalizeStartsSlack).
  const uint64_t out_bits = _pext_u64(start_bits, keep);
  const int count = std::popcount(out_bits);
  const hn::Full512<uint8_t> d8;
  const hn::Full128<uint8_t> d8x16;
  const hn::Full512<uint32_t> d32;
  HWY_ALIGN uint8_t offsets[64];
  hn::Store(hn::Compress(hn::Iota(d8, 0), hn::LoadMaskBits(d8, reinterpret_cast<const uint8_t*>(&out_bits))), d8,
            offsets);
  const auto base = hn::Set(d32, block_out);
  for (int k = 0; k < count; k += 16) {
    hn::StoreU(hn::Add(hn::PromoteTo(d32, hn::Load(d8x16, offsets + k)), base), d32, starts + k);
  }
  return starts + count;
#elif defined(LUMINA_NORMALIZE_PEXT)
  uint64_t m = _pext_u64(start_bits, keep);
  const int count = std::popcount(m);
  for (int k = 0; k < 12; ++k) {
    starts[k] = block_out + static_cast<uint32_t>(std::countr_zero(m));
    m &= m - 1;
  }
  for (int k = 12; k < count; ++k) {
    starts[k] = block_out + static_cast<uint32_t>(std::countr_zero(m));
    m &= m - 1;
  }
  return starts + count;
#else
  return write_starts_portable(start_bits, keep, block_out, starts);
#endif
}

#include "data/dedup/normalize_blocks-inl.h"

NormalizedCounts NormalizeText(const uint8_t* HWY_RESTRICT p, size_t n, uint8_t* HWY_RESTRICT out,
                               uint32_t* HWY_RESTRICT word_starts) {
  return NormalizeBlocks(
      p, n, out, word_starts,
      [](const uint8_t* src, uint8_t* spaced, uint64_t* sep, uint64_t* lead) { ClassifyBlock(src, spaced, sep, lead); },
      [](uint64_t start_bits, uint64_t keep, uint32_t block_out, uint32_t* starts) {
        return WriteStarts(start_bits, keep, block_out, starts);
      },
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
  return NormalizeBlocks(p, n, out, word_starts, classify_block_scalar, write_starts_portable, compact_bytes_portable);
}
}  // namespace luminamoon

#endif
