// The quality metrics' counting kernel: byte classes as bit masks (Highway,
// every target, runtime dispatch), then words, lines and n-grams from the
// masks. Integers only (see quality_kernel.h). The definitions are in
// Note [quality metrics] of quality_metrics.cc.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "data/quality/quality_kernel.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <bit>
#include <cstring>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "data/common/unicode.h"
#include "data/quality/quality_kernel.h"

// Note [compress table]: Highway 1.0's Compress of 8 x 32-bit lanes (AVX2)
// builds its 1 KB index table on the stack at every call under GCC (a local,
// non-static constexpr array): that copy was 30% of the quality time on real
// text. For 8 lanes the indices come from this static table instead: row m
// lists the set bits of m in order (the rest of the row is don't-care).
#ifndef LUMINA_QUALITY_COMPRESS_TABLE
#define LUMINA_QUALITY_COMPRESS_TABLE
namespace luminamoon::detail {
struct CompressIndices8 {
  alignas(32) int32_t index[256][8] = {};
  constexpr CompressIndices8() {
    for (int m = 0; m < 256; ++m) {
      int k = 0;
      for (int bit = 0; bit < 8; ++bit)
        if (m >> bit & 1) index[m][k++] = bit;
    }
  }
};
inline constexpr CompressIndices8 kCompress8;
}  // namespace luminamoon::detail
#endif

HWY_BEFORE_NAMESPACE();
namespace luminamoon::detail {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Hash of a word: words of up to 8 bytes (most) are packed and mixed with
// their length (ShortWordHash); longer ones go through XXH3.
// `readable` is how many bytes may be read from p (at least n).
HWY_INLINE uint64_t ShortWordHash(const uint8_t* p, size_t n, size_t readable) {  // n <= 8
  uint64_t v = 0;
  if (std::endian::native == std::endian::little && HWY_LIKELY(readable >= 8)) {  // one load, the bytes past the word masked off
    std::memcpy(&v, p, 8);
    v &= ~0ull >> (64 - 8 * n);  // n >= 1
  } else {
    std::memcpy(&v, p, n);
  }
  v ^= uint64_t(n) << 59;
  v *= 0x9E3779B97F4A7C15ull;
  v ^= v >> 32;
  v *= 0xD6E8FEB86659FD93ull;
  return v ^ (v >> 29);
}

// Order-dependent combination of two uniform 64-bit hashes (n-gram chaining).
HWY_INLINE uint64_t Mix(uint64_t a, uint64_t b) {
  uint64_t x = (a ^ 0x9E3779B97F4A7C15ull) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 31)) + b;
  x *= 0x94D049BB133111EBull;
  return x ^ (x >> 29);
}

constexpr uint32_t kStopWordMagic = 0x6EC9D287u;
constexpr uint32_t StopWordSlot(uint32_t w) { return (w * kStopWordMagic) >> 29; }
struct StopWordTable {
  uint32_t slot[8] = {};
  uint8_t length[8] = {};  // a packed "the" also matches "the\0": the length tells them apart
  constexpr StopWordTable() {
    const char* const words[] = {"the", "be", "to", "of", "and", "that", "have", "with"};
    for (const char* t : words) {
      uint32_t v = 0;
      int i = 0;
      for (; t[i]; ++i) v |= uint32_t(uint8_t(t[i])) << (8 * i);
      slot[StopWordSlot(v)] = v;
      length[StopWordSlot(v)] = static_cast<uint8_t>(i);
    }
  }
  constexpr int filled() const {
    int k = 0;
    for (uint32_t v : slot) k += v != 0;
    return k;
  }
};
constexpr StopWordTable kStopWords;
static_assert(kStopWords.filled() == 8, "the stop word hash must be perfect");

// Is the word [p, p + len), ASCII punctuation already stripped from its
// ends, one of the stop words (ASCII case-insensitively)? `readable`: bytes
// that may be read from p (>= len). The word's bytes are packed
// little-endian into 32 bits (bytes past len are 0) with A-Z lower-cased
// and compared with the packed stop words, whose lengths must match too (the
// zero bytes past a shorter stop word would otherwise equal a NUL byte of
// the word: "the\0" is not "the").
HWY_INLINE bool StopWord(const uint8_t* p, size_t len, size_t readable) {
  uint32_t x = 0;
  if (HWY_LIKELY(readable >= 4)) {
    std::memcpy(&x, p, 4);
  } else {
    for (size_t i = 0; i < readable; ++i) x |= uint32_t(p[i]) << (8 * i);
  }
  x &= static_cast<uint32_t>((uint64_t{1} << (8 * std::min<size_t>(len, 4))) - 1);  // len >= 1
  // A-Z lower-cased four bytes at a time: on the low seven bits of each byte
  // (no carry between bytes), bit 7 of +0x3F is ">= 'A'" and of +0x25 is
  // ">= '['"; bytes with bit 7 set are not letters.
  const uint32_t low7 = x & 0x7F7F7F7Fu;
  const uint32_t upper = (low7 + 0x3F3F3F3Fu) & ~(low7 + 0x25252525u) & ~x & 0x80808080u;
  const uint32_t w = x | (upper >> 2);
  // One compare: a multiplicative hash that is perfect on the eight packed
  // stop words (checked at compile time) picks the only candidate.
  const uint32_t slot = StopWordSlot(w);
  return (kStopWords.slot[slot] == w) & (kStopWords.length[slot] == len);
}

// Bits [b, b + len) of a mask array, in the low bits (1 <= len <= 64; the
// array has a block past the last one read).
HWY_INLINE uint64_t BitsAt(const uint64_t* m, size_t b, size_t len) {
  const size_t blk = b >> 6, off = b & 63;
  const uint64_t v = (m[blk] >> off) | ((m[blk + 1] << (63 - off)) << 1);
  return v & (~0ull >> (64 - len));
}

// Number of set bits in [b, e) of a mask array (any length).
HWY_INLINE uint64_t CountBits(const uint64_t* m, size_t b, size_t e) {
  uint64_t c = 0;
  while (e - b > 64) {
    c += static_cast<uint64_t>(std::popcount(BitsAt(m, b, 64)));
    b += 64;
  }
  return e > b ? c + static_cast<uint64_t>(std::popcount(BitsAt(m, b, e - b))) : c;
}

// First index in [b, e) whose bit is clear, or e.
HWY_INLINE size_t FirstClear(const uint64_t* m, size_t b, size_t e) {
  while (b < e) {
    const size_t len = std::min<size_t>(64, e - b);
    const uint64_t z = ~BitsAt(m, b, len) & (~0ull >> (64 - len));
    if (z) return b + static_cast<size_t>(std::countr_zero(z));
    b += len;
  }
  return e;
}

// One past the last index in [b, e) whose bit is clear, or b.
HWY_INLINE size_t LastClearEnd(const uint64_t* m, size_t b, size_t e) {
  while (e > b) {
    const size_t len = std::min<size_t>(64, e - b);
    const uint64_t z = ~BitsAt(m, e - len, len) & (~0ull >> (64 - len));
    if (z) return e - len + static_cast<size_t>(64 - std::countl_zero(z));
    e -= len;
  }
  return b;
}

// The byte-class masks of one 64-byte block.
struct BlockMasks {
  uint64_t white, cont, lead, alpha, punct, newline, dot;
};

HWY_INLINE BlockMasks ClassifyScalar(const uint8_t* p) {
  BlockMasks m{};
  for (int j = 0; j < 64; ++j) {
    const uint8_t c = p[j];
    const uint64_t bit = 1ull << j;
    const bool letter = static_cast<uint8_t>((c | 0x20) - 'a') < 26;
    const bool digit = static_cast<uint8_t>(c - '0') < 10;
    if (c == 0x20 || static_cast<uint8_t>(c - 0x09) < 5) m.white |= bit;
    if ((c & 0xC0) == 0x80) m.cont |= bit;
    if (c >= 0xC0) m.lead |= bit;
    if (letter) m.alpha |= bit;
    if (static_cast<uint8_t>(c - 0x21) < 0x5E && !letter && !digit) m.punct |= bit;
    if (c == '\n') m.newline |= bit;
    if (c == '.') m.dot |= bit;
  }
  return m;
}

// Note [byte classes]: White_Space (ASCII part), UTF-8 continuation and lead
// bytes, ASCII letters, Python's string.punctuation, '\n' and '.', one bit
// per byte, whole vectors at a time.
HWY_INLINE BlockMasks Classify(const uint8_t* p) {
  const hn::CappedTag<uint8_t, 64> d;
  const size_t N = hn::Lanes(d);
  if (N < 8 || 64 % N != 0) return ClassifyScalar(p);
  uint8_t bits[7][8];
  const auto k20 = hn::Set(d, 0x20), k09 = hn::Set(d, 0x09), k04 = hn::Set(d, 0x04);
  const auto kC0 = hn::Set(d, 0xC0), k80 = hn::Set(d, 0x80), kA = hn::Set(d, 'a'), k25 = hn::Set(d, 25);
  const auto k0 = hn::Set(d, '0'), k9 = hn::Set(d, 9), k21 = hn::Set(d, 0x21), k5D = hn::Set(d, 0x5D);
  const auto kNl = hn::Set(d, '\n'), kDot = hn::Set(d, '.');
  // x <= k (unsigned) as Min(x, k) == x.
  auto le = [&](auto x, auto k) { return hn::Eq(hn::Min(x, k), x); };
  for (size_t c = 0; c < 64 / N; ++c) {
    const auto v = hn::LoadU(d, p + c * N);
    const auto white = hn::Or(hn::Eq(v, k20), le(hn::Sub(v, k09), k04));
    const auto cont = hn::Eq(hn::And(v, kC0), k80);
    const auto lead = hn::Eq(hn::Max(v, kC0), v);
    const auto letter = le(hn::Sub(hn::Or(v, k20), kA), k25);
    const auto digit = le(hn::Sub(v, k0), k9);
    const auto punct = hn::AndNot(hn::Or(letter, digit), le(hn::Sub(v, k21), k5D));
    const size_t at = c * N / 8;
    hn::StoreMaskBits(d, white, bits[0] + at);
    hn::StoreMaskBits(d, cont, bits[1] + at);
    hn::StoreMaskBits(d, lead, bits[2] + at);
    hn::StoreMaskBits(d, letter, bits[3] + at);
    hn::StoreMaskBits(d, punct, bits[4] + at);
    hn::StoreMaskBits(d, hn::Eq(v, kNl), bits[5] + at);
    hn::StoreMaskBits(d, hn::Eq(v, kDot), bits[6] + at);
  }
  BlockMasks m;
  std::memcpy(&m.white, bits[0], 8);
  std::memcpy(&m.cont, bits[1], 8);
  std::memcpy(&m.lead, bits[2], 8);
  std::memcpy(&m.alpha, bits[3], 8);
  std::memcpy(&m.punct, bits[4], 8);
  std::memcpy(&m.newline, bits[5], 8);
  std::memcpy(&m.dot, bits[6], 8);
  return m;
}

// Adds one occurrence of `key` at index `k`; marks `repeated` for k, and for
// the key's first occurrence, when the key was seen before. Returns the
// entry.
// (The table and the flags are passed as restrict pointers: a store to the
// byte flags may alias anything, and would make every pointer of the caller
// reload from memory.)
HWY_INLINE HashCountTable::Entry& Add(HashCountTable::Entry* HWY_RESTRICT e, size_t mask, uint64_t key, uint32_t k,
                                      uint8_t* HWY_RESTRICT repeated) {
  key = key ? key : 1;  // 0 marks an empty slot
  size_t s = static_cast<size_t>(key) & mask;
  while (e[s].key != 0 && e[s].key != key) s = (s + 1) & mask;
  HashCountTable::Entry& x = e[s];
  // Without a branch on new-or-seen (it is unpredictable on real text).
  const uint8_t seen = x.key != 0;
  const uint32_t first = seen ? x.first : k;
  x.key = key;
  x.first = first;
  ++x.count;
  repeated[k] = seen;
  repeated[first] |= seen;
  return x;
}

HWY_INLINE void Reset(HashCountTable& t, size_t expected) {
  size_t cap = 16;
  while (cap < 2 * expected) cap <<= 1;
  if (t.entries.size() < cap) t.entries.resize(cap);
  std::memset(static_cast<void*>(t.entries.data()), 0, cap * sizeof(HashCountTable::Entry));
  t.mask = cap - 1;
}

// Duplicates among segments of s: (count, code points of the duplicates).
// hashes[k] is XXH3-64 of segment k.
HWY_INLINE void CountDuplicates(const std::vector<std::pair<uint32_t, uint32_t>>& segs, const uint64_t* hashes,
                                const uint64_t* cont, QualityScratch& sc, uint64_t* dups, uint64_t* chars) {
  Reset(sc.table, segs.size());
  sc.repeated.resize(segs.size());
  uint64_t d = 0, c = 0;
  for (size_t k = 0; k < segs.size(); ++k) {
    const auto [b, e] = segs[k];
    const HashCountTable::Entry& x =
        Add(sc.table.entries.data(), sc.table.mask, hashes[k], static_cast<uint32_t>(k), sc.repeated.data());
    if (x.count > 1) {
      ++d;
      c += (e - b) - CountBits(cont, b, e);
    }
  }
  *dups = d;
  *chars = c;
}

// Is word [b, e) a stop word? A stop word is 2..4 letters with any amount of
// ASCII punctuation around it.
HWY_INLINE bool IsStopWordAt(const uint8_t* s, size_t n, size_t b, size_t e, const uint64_t* P) {
  const size_t len = e - b;
  if (len > 64) {  // rare: strip the ends a mask block at a time
    const size_t lead = FirstClear(P, b, e), end = LastClearEnd(P, lead, e);
    return end > lead && end - lead <= 4 && StopWord(s + lead, end - lead, n - lead);
  }
  const uint64_t np = ~BitsAt(P, b, len) & (~0ull >> (64 - len));
  if (np == 0) return false;
  const size_t lead = static_cast<size_t>(std::countr_zero(np));
  const size_t last = static_cast<size_t>(63 - std::countl_zero(np));
  return StopWord(s + b + lead, last + 1 - lead, n - b - lead);
}

// The stop words of a document. Note [stop words in vectors]: a word whose
// first and last bytes are not punctuation (nearly all) is its own stripped
// form, so a vector of words is tested at once: its first four bytes (one
// gather), masked to the word's length, A-Z lower-cased and compared with
// the eight packed stop words, exactly as StopWord does; the other words go
// through IsStopWordAt. Words too near either end of the text for the
// 4-byte gathers are tested one by one.
HWY_INLINE uint64_t CountStopWords(const uint8_t* s, size_t n, const uint32_t* starts, const uint32_t* ends, size_t nw,
                                   const uint64_t* P) {
  uint64_t stop = 0;
  size_t lo = 0, hi = nw;  // the gathers read [b, b + 4) and [e - 4, e)
  if (n < (size_t{1} << 31)) {
    while (lo < nw && ends[lo] < 4) ++lo;
    while (hi > lo && starts[hi - 1] + 4 > n) --hi;
  } else {
    lo = hi = nw;  // 32-bit signed gather offsets
  }
  const hn::ScalableTag<uint32_t> du;
  const hn::RebindToSigned<decltype(du)> di;
  const size_t N = hn::Lanes(du);
  size_t k = 0;
  for (; k < lo; ++k) stop += IsStopWordAt(s, n, starts[k], ends[k], P);
  const auto* base = reinterpret_cast<const int32_t*>(s);
  const auto kFF = hn::Set(du, 0xFF), k20 = hn::Set(du, 0x20), k21 = hn::Set(du, 0x21), k5D = hn::Set(du, 0x5D);
  const auto kA = hn::Set(du, 'a'), k25 = hn::Set(du, 25), k0 = hn::Set(du, '0'), k9 = hn::Set(du, 9);
  const auto k2 = hn::Set(du, 2), k3 = hn::Set(du, 3), k4 = hn::Set(du, 4), k32 = hn::Set(du, 32), kOnes = hn::Set(du, ~0u);
  auto le = [&](auto x, auto c) { return hn::Eq(hn::Min(x, c), x); };  // unsigned x <= c
  auto punct = [&](auto c) {
    const auto letter = le(hn::Sub(hn::Or(c, k20), kA), k25);
    const auto digit = le(hn::Sub(c, k0), k9);
    return hn::AndNot(hn::Or(letter, digit), le(hn::Sub(c, k21), k5D));
  };
  constexpr auto pack = [](const char* t) {
    uint32_t v = 0;
    for (int i = 0; t[i]; ++i) v |= uint32_t(uint8_t(t[i])) << (8 * i);
    return v;
  };
  for (; k + N <= hi; k += N) {
    const auto vb = hn::LoadU(du, starts + k), ve = hn::LoadU(du, ends + k);
    const auto len = hn::Sub(ve, vb);
    const auto x = hn::BitCast(du, hn::GatherOffset(di, base, hn::BitCast(di, vb)));
    const auto y = hn::BitCast(du, hn::GatherOffset(di, base, hn::BitCast(di, hn::Sub(ve, k4))));
    const auto plain = hn::Not(hn::Or(punct(hn::And(x, kFF)), punct(hn::ShiftRight<24>(y))));
    const auto keep = hn::Shr(kOnes, hn::Sub(k32, hn::ShiftLeft<3>(hn::Min(len, k4))));  // len >= 1
    const auto xw = hn::And(x, keep);
    const auto low7 = hn::And(xw, hn::Set(du, 0x7F7F7F7Fu));
    const auto upper = hn::AndNot(xw, hn::AndNot(hn::Add(low7, hn::Set(du, 0x25252525u)),
                                                 hn::And(hn::Add(low7, hn::Set(du, 0x3F3F3F3Fu)), hn::Set(du, 0x80808080u))));
    const auto w = hn::Or(xw, hn::ShiftRight<2>(upper));
    // Each stop word with its own length (as StopWord: "the\0" is not "the").
    const auto two = hn::And(hn::Eq(len, k2), hn::Or(hn::Eq(w, hn::Set(du, pack("be"))),
                                                     hn::Or(hn::Eq(w, hn::Set(du, pack("to"))),
                                                            hn::Eq(w, hn::Set(du, pack("of"))))));
    const auto three = hn::And(hn::Eq(len, k3), hn::Or(hn::Eq(w, hn::Set(du, pack("the"))),
                                                       hn::Eq(w, hn::Set(du, pack("and")))));
    const auto four = hn::And(hn::Eq(len, k4), hn::Or(hn::Eq(w, hn::Set(du, pack("that"))),
                                                      hn::Or(hn::Eq(w, hn::Set(du, pack("have"))),
                                                             hn::Eq(w, hn::Set(du, pack("with"))))));
    stop += hn::CountTrue(du, hn::And(hn::Or(two, hn::Or(three, four)), plain));
    if (!hn::AllTrue(du, plain)) {  // the few words with punctuation at an end
      uint8_t bits[8] = {};  // N <= 64 lanes
      hn::StoreMaskBits(du, hn::Not(plain), bits);
      for (size_t j = 0; j < N; j += 8)
        for (unsigned m = bits[j / 8]; m; m &= m - 1) {
          const size_t w = k + j + static_cast<size_t>(std::countr_zero(m));
          stop += IsStopWordAt(s, n, starts[w], ends[w], P);
        }
    }
  }
  for (; k < nw; ++k) stop += IsStopWordAt(s, n, starts[k], ends[k], P);
  return stop;
}

void CountQuality(const uint8_t* s, size_t n, QualityScratch& sc, QualityCounts& out, QualityStop* stop) {
  // Byte histogram (four tables, so that runs of one byte do not serialize
  // on one counter).
  uint32_t hist[4][256] = {};
  {
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
      ++hist[0][s[i]];
      ++hist[1][s[i + 1]];
      ++hist[2][s[i + 2]];
      ++hist[3][s[i + 3]];
    }
    for (; i < n; ++i) ++hist[0][s[i]];
  }
  // The entropy's counts: the present ASCII code points in order (the sum
  // of c log2 c over them is a serial chain of floating-point adds, so the
  // zeros are left out here, which changes no bit of the sum).
  std::vector<uint64_t>& ec = *out.entropy_counts;
  ec.resize(128);
  size_t present = 0;
  for (int b = 0; b < 128; ++b) {
    const uint64_t c = uint64_t(hist[0][b]) + hist[1][b] + hist[2][b] + hist[3][b];
    ec[present] = c;
    present += c != 0;
  }
  ec.resize(present);
  out.hashes = uint64_t(hist[0]['#']) + hist[1]['#'] + hist[2]['#'] + hist[3]['#'];
  const uint64_t dots = uint64_t(hist[0]['.']) + hist[1]['.'] + hist[2]['.'] + hist[3]['.'];

  // Masks of every 64-byte block covering [0, n] (the text is padded with
  // White_Space past its end, so that the last word ends inside a block),
  // plus one zero block for BitsAt.
  const size_t nb = n / 64 + 1;
  for (auto* v : {&sc.white, &sc.cont, &sc.lead, &sc.alpha, &sc.punct, &sc.newline, &sc.dot}) {
    v->resize(nb + 1);
    (*v)[nb] = 0;
  }
  uint64_t* W = sc.white.data();
  uint64_t* C = sc.cont.data();
  uint64_t* A = sc.alpha.data();
  const uint64_t* P = sc.punct.data();
  const uint64_t* NL = sc.newline.data();
  const uint64_t* D = sc.dot.data();
  const uint64_t* H = sc.lead.data();
  uint64_t continuation = 0, non_ascii = 0;
  for (size_t blk = 0; blk < nb; ++blk) {
    const uint8_t* src = s + blk * 64;
    alignas(64) uint8_t tail[64];
    const bool partial = blk * 64 + 64 > n;
    if (partial) {
      std::memset(tail, 0, sizeof tail);
      if (n > blk * 64) std::memcpy(tail, src, n - blk * 64);
      src = tail;
    }
    BlockMasks m = Classify(src);
    if (partial) {
      const size_t valid = n - blk * 64;  // < 64
      const uint64_t in = (1ull << valid) - 1;
      m.white = (m.white & in) | ~in;  // White_Space past the end
      m.cont &= in, m.lead &= in, m.alpha &= in, m.punct &= in, m.newline &= in, m.dot &= in;
    }
    continuation += static_cast<uint64_t>(std::popcount(m.cont));
    non_ascii |= m.cont | m.lead;
    sc.white[blk] = m.white, sc.cont[blk] = m.cont, sc.lead[blk] = m.lead, sc.alpha[blk] = m.alpha;
    sc.punct[blk] = m.punct, sc.newline[blk] = m.newline, sc.dot[blk] = m.dot;
  }

  out.code_points = n - continuation;

  // Non-ASCII code points, one step per lead byte: their counts (entropy),
  // the multi-byte White_Space code points (all their bytes marked white) and
  // the alphabetic ones (their lead byte marked alphabetic).
  out.ellipsis_chars = 0;
  if (non_ascii) {
    for (size_t blk = 0; blk < nb; ++blk) {
      for (uint64_t m = H[blk]; m; m &= m - 1) {
        const size_t at = blk * 64 + static_cast<size_t>(std::countr_zero(m));
        size_t j = at;
        const uint32_t cp = unicode::next_code_point(s, j);
        if (sc.cp_counts[cp]++ == 0) sc.touched.push_back(cp);
        if (unicode::is_white_space(cp)) {
          for (size_t k = at; k < j; ++k) W[k >> 6] |= 1ull << (k & 63);
        } else if (unicode::is_alphabetic(cp)) {
          A[at >> 6] |= 1ull << (at & 63);
        }
      }
    }
    out.ellipsis_chars = sc.cp_counts[0x2026];
    for (uint32_t cp : sc.touched) {
      ec.push_back(sc.cp_counts[cp]);
      sc.cp_counts[cp] = 0;
    }
    sc.touched.clear();
  }

  // Non-overlapping "..." (Python's str.count): floor(run / 3) per run of
  // dots, visiting only the runs of three or more (their first dot).
  out.dot_triples = 0;
  if (dots >= 3) {
    for (size_t blk = 0; blk < nb; ++blk) {
      const uint64_t prev = blk ? D[blk - 1] >> 63 : 0;
      const uint64_t run_start = D[blk] & ~((D[blk] << 1) | prev);
      const uint64_t d1 = (D[blk] >> 1) | (D[blk + 1] << 63), d2 = (D[blk] >> 2) | (D[blk + 1] << 62);
      for (uint64_t m = run_start & d1 & d2; m; m &= m - 1) {
        const size_t at = blk * 64 + static_cast<size_t>(std::countr_zero(m));
        size_t e = at;
        while (e < n && s[e] == '.') ++e;
        out.dot_triples += (e - at) / 3;
      }
    }
  }

  // Words: maximal runs of non-White_Space. A start is a non-White_Space
  // byte after a White_Space one; the work is per word, not per byte.
  // The bit positions are written a vector at a time (Compress of the
  // lane indices under 16 or so mask bits), a full vector each, so the
  // arrays have a vector of slack.
  const hn::ScalableTag<uint32_t> du;
  const size_t N = hn::Lanes(du);
  sc.starts.resize(n / 2 + 2 + N);
  sc.ends.resize(n / 2 + 2 + N);
  uint32_t* HWY_RESTRICT starts = sc.starts.data();
  uint32_t* HWY_RESTRICT ends = sc.ends.data();
  size_t ks = 0, ke = 0;
  {
    uint64_t prev_top = 1;  // the text starts after White_Space
    if (N >= 8 && N <= 64 && 64 % N == 0) {
      const auto iota = hn::Iota(du, 0);
      const uint64_t lane_bits = N == 64 ? ~0ull : (1ull << N) - 1;
      auto emit = [&](uint64_t bits, uint32_t at, uint32_t* dst, size_t& k) {
        const auto lanes = hn::Add(iota, hn::Set(du, at));
        if (N == 8) {  // Note [compress table]
          hn::StoreU(hn::TableLookupLanes(lanes, hn::SetTableIndices(du, detail::kCompress8.index[bits])), du, dst + k);
        } else {
          uint8_t b[8];
          std::memcpy(b, &bits, 8);
          hn::StoreU(hn::Compress(lanes, hn::LoadMaskBits(du, b)), du, dst + k);
        }
        k += static_cast<size_t>(std::popcount(bits));
      };
      for (size_t blk = 0; blk < nb; ++blk) {
        const uint64_t wm = W[blk];
        const uint64_t prev = (wm << 1) | prev_top;  // bit i: byte i - 1 is White_Space
        prev_top = wm >> 63;
        const uint64_t sm = ~wm & prev, em = wm & ~prev;
        for (size_t j = 0; j < 64; j += N) {
          const uint32_t at = static_cast<uint32_t>(blk * 64 + j);
          emit((sm >> j) & lane_bits, at, starts, ks);
          emit((em >> j) & lane_bits, at, ends, ke);
        }
      }
    } else {
      for (size_t blk = 0; blk < nb; ++blk) {
        const uint64_t wm = W[blk];
        const uint64_t prev = (wm << 1) | prev_top;
        prev_top = wm >> 63;
        const uint32_t base = static_cast<uint32_t>(blk * 64);
        for (uint64_t m = ~wm & prev; m; m &= m - 1) starts[ks++] = base + static_cast<uint32_t>(std::countr_zero(m));
        for (uint64_t m = wm & ~prev; m; m &= m - 1) ends[ke++] = base + static_cast<uint32_t>(std::countr_zero(m));
      }
    }
  }
  const size_t nw = ks;
  out.words = nw;
  sc.word_hash.resize(nw);
  sc.char_prefix.resize(nw + 1);
  uint64_t* HWY_RESTRICT whash = sc.word_hash.data();
  uint64_t* HWY_RESTRICT prefix = sc.char_prefix.data();
  prefix[0] = 0;
  // Three simple loops over the words rather than one (the XXH3 call of a
  // long word spilled the other loop's state, and fewer live values keep
  // each loop branch-free).
  uint64_t alpha_words = 0, sum_chars = 0;
  for (size_t k = 0; k < nw; ++k) {  // code points and alphabetic words
    const size_t b = starts[k], e = ends[k], len = e - b;
    uint64_t chars;
    bool alpha;
    if (HWY_LIKELY(len <= 64)) {
      chars = len - static_cast<uint64_t>(std::popcount(BitsAt(C, b, len)));
      alpha = BitsAt(A, b, len) != 0;
    } else {
      chars = len - CountBits(C, b, e);
      alpha = CountBits(A, b, e) != 0;
    }
    sum_chars += chars;
    prefix[k + 1] = sum_chars;
    alpha_words += alpha;
  }
  out.stop_words = CountStopWords(s, n, starts, ends, nw, P);
  out.alpha_words = alpha_words;
  out.word_chars = prefix[nw];

  // Lines (text.split("\n"), less the empty piece after a final "\n"): bullets and ellipses, and the non-empty ones
  // for the duplicate lines.
  auto& segs = sc.segments;
  segs.clear();
  {
    uint64_t lines = 0, bullets = 0, ellipses = 0;
    size_t lb = 0;
    auto line = [&](size_t le) {
      ++lines;
      if (le > lb) segs.emplace_back(static_cast<uint32_t>(lb), static_cast<uint32_t>(le));
      const size_t f = FirstClear(W, lb, le);  // first non-White_Space code point
      if (f < le && (s[f] == '-' || s[f] == '*' || (s[f] == 0xE2 && f + 3 <= le && s[f + 1] == 0x80 && s[f + 2] == 0xA2)))
        ++bullets;
      const size_t t = LastClearEnd(W, f, le);  // end without trailing White_Space
      if ((t - f >= 3 && s[t - 1] == '.' && s[t - 2] == '.' && s[t - 3] == '.') ||
          (t - f >= 3 && s[t - 3] == 0xE2 && s[t - 2] == 0x80 && s[t - 1] == 0xA6))
        ++ellipses;
      lb = le + 1;
    };
    for (size_t blk = 0; blk < nb; ++blk)
      for (uint64_t m = NL[blk]; m; m &= m - 1) line(blk * 64 + static_cast<size_t>(std::countr_zero(m)));
    if (n == 0 || s[n - 1] != '\n') line(n);  // a final '\n' ends the last line, it starts no empty one (spec v2)
    out.lines = lines;
    out.bullet_lines = bullets;
    out.ellipsis_lines = ellipses;
  }
  if (stop && stop->decided(out, QualityPhase::kWordsAndLines, 0)) return;
  out.line_segments = segs.size();
  sc.line_hash.resize(segs.size());
  for (size_t k = 0; k < segs.size(); ++k) sc.line_hash[k] = XXH3_64bits(s + segs[k].first, segs[k].second - segs[k].first);
  CountDuplicates(segs, sc.line_hash.data(), C, sc, &out.dup_lines, &out.dup_line_chars);

  // Paragraphs: the non-empty segments between runs of two or more "\n".
  // A paragraph of one line (most) has that line's bytes: its hash is reused.
  sc.line_segments.swap(segs);
  segs.clear();
  {
    size_t b = 0, skip_until = 0;
    for (size_t blk = 0; blk < nb; ++blk) {
      for (uint64_t m = NL[blk]; m; m &= m - 1) {
        const size_t k = blk * 64 + static_cast<size_t>(std::countr_zero(m));
        if (k < skip_until || k + 1 >= n || s[k + 1] != '\n') continue;
        if (k > b) segs.emplace_back(static_cast<uint32_t>(b), static_cast<uint32_t>(k));
        size_t r = k;
        while (r < n && s[r] == '\n') ++r;
        b = skip_until = r;
      }
    }
    if (n > b) segs.emplace_back(static_cast<uint32_t>(b), static_cast<uint32_t>(n));
  }
  out.para_segments = segs.size();
  sc.para_hash.resize(segs.size());
  for (size_t k = 0, line = 0; k < segs.size(); ++k) {
    const auto [b, e] = segs[k];
    while (line < sc.line_segments.size() && sc.line_segments[line].first < b) ++line;
    const bool same = line < sc.line_segments.size() && sc.line_segments[line] == segs[k];
    sc.para_hash[k] = same ? sc.line_hash[line] : XXH3_64bits(s + b, e - b);
  }
  CountDuplicates(segs, sc.para_hash.data(), C, sc, &out.dup_paras, &out.dup_para_chars);
  if (stop && stop->decided(out, QualityPhase::kDuplicates, 0)) return;

  // Word hashes, for the n-grams only: a document decided by a word, line or
  // duplicate check above never needs them (on the real-text corpus about
  // 40% of the bytes). The words of up to 8 bytes without a branch on the length
  // (it mispredicted at every long word), the longer ones listed and hashed
  // after them with XXH3.
  {
    sc.long_words.resize(nw);
    uint32_t* HWY_RESTRICT longs = sc.long_words.data();
    size_t nl = 0;
    for (size_t k = 0; k < nw; ++k) {
      const size_t b = starts[k], len = ends[k] - b;
      whash[k] = ShortWordHash(s + b, std::min<size_t>(len, 8), n - b);
      longs[nl] = static_cast<uint32_t>(k);
      nl += len > 8;
    }
    for (size_t j = 0; j < nl; ++j) {
      const size_t k = longs[j];
      whash[k] = XXH3_64bits(s + starts[k], ends[k] - starts[k]);
    }
  }

  // n-grams. Note [n-gram candidates]: an n-gram occurring twice has an
  // (n-1)-gram prefix occurring twice, so the n-grams are only counted at
  // positions whose (n-1)-gram repeats; the rest occur once. The candidates
  // of n + 1 are filtered from those of n, so each n costs O(candidates) and
  // only the 2-grams need a pass over every word. An n-gram's hash extends
  // its (n-1)-gram's hash by one word hash: no word is hashed twice. The top
  // n-gram (highest count, ties: first occurrence first) is tracked while
  // counting: the first key to reach the final highest count, or among those
  // reaching it, the one that occurred first.
  if (nw < 2) return;
  sc.gram_hash.resize(nw);
  uint64_t* HWY_RESTRICT gram_hash = sc.gram_hash.data();
  std::vector<uint32_t>& cand = sc.cand;
  cand.resize(nw - 1);  // every position is a candidate for 2-grams
  for (size_t gram = 2; gram <= 10 && !cand.empty(); ++gram) {
    {
      uint32_t* HWY_RESTRICT cd = cand.data();
      const size_t n0 = cand.size();
      // Note [n-gram prefilter]: most n-grams occur once. Two flags per
      // hash bucket (seen once, seen twice) in a table of about 16 buckets
      // per candidate keep, without false negatives, the candidates whose
      // bucket was hit twice: every occurrence of a repeated n-gram, plus
      // the few that share a bucket with another n-gram. Only those are
      // counted exactly below; the others occur once and are neither
      // repeated nor candidates of n + 1, so the results are unchanged.
      const bool prefilter = n0 >= 32;
      size_t buckets = 256;
      while (prefilter && buckets < 16 * n0) buckets <<= 1;
      sc.buckets.resize(buckets);
      uint8_t* HWY_RESTRICT bk = sc.buckets.data();
      if (prefilter) std::memset(bk, 0, buckets);
      const size_t bmask = buckets - 1;
      auto bucket = [&](uint64_t h) {
        return static_cast<size_t>(h ? h : 1) & bmask;  // the table's key (0 is stored as 1)
      };
      auto mark = [&](uint64_t h) {
        uint8_t& b = bk[bucket(h)];
        b = static_cast<uint8_t>(b | ((b << 1) & 2) | 1);
      };
      if (gram == 2) {  // every position: no candidate list to read, no 1-gram copy
        for (size_t p = 0; p < n0; ++p) {
          const uint64_t h = Mix(whash[p], whash[p + 1]);
          gram_hash[p] = h;
          cd[p] = static_cast<uint32_t>(p);
          mark(h);
        }
      } else {
        for (size_t k = 0; k < n0; ++k) {
          const uint32_t p = cd[k];
          const uint64_t h = Mix(gram_hash[p], whash[p + gram - 1]);
          gram_hash[p] = h;
          mark(h);
        }
      }
      if (prefilter) {
        size_t kept = 0;
        for (size_t k = 0; k < n0; ++k) {
          const uint32_t p = cd[k];
          cd[kept] = p;
          kept += bk[bucket(gram_hash[p])] >> 1;
        }
        cand.resize(kept);
        if (kept == 0) break;  // no repeated n-gram: none for larger n either
      }
    }
    const size_t nc = cand.size();
    Reset(sc.table, nc);
    sc.repeated.resize(nc);
    uint8_t* HWY_RESTRICT rep = sc.repeated.data();
    HashCountTable::Entry* HWY_RESTRICT entries = sc.table.entries.data();
    const size_t mask = sc.table.mask;
    uint32_t* HWY_RESTRICT cd = cand.data();
    uint32_t best = 0, best_first = 0;
    for (size_t k = 0; k < nc; ++k) {
      const HashCountTable::Entry& x = Add(entries, mask, gram_hash[cd[k]], static_cast<uint32_t>(k), rep);
      if (x.count > best || (x.count == best && x.first < best_first)) {
        best = x.count;
        best_first = x.first;
      }
    }
    if (best < 2) break;  // no repeated n-gram: none for larger n either
    // Covered words (each counted once): the occurrences of the top n-gram
    // (n <= 4) or of every repeated one (n >= 5), in ascending order.
    const uint64_t target = gram_hash[cand[best_first]];
    uint64_t covered = 0;
    size_t covered_until = 0;
    if (gram <= 4) {
      for (size_t k = 0; k < nc; ++k) {
        const uint32_t p = cand[k];
        if (rep[k] && gram_hash[p] == target) {
          const size_t from = std::max<size_t>(p, covered_until), to = p + gram;
          if (to > from) covered += prefix[to] - prefix[from];
          covered_until = std::max(covered_until, to);
        }
      }
    } else {
      for (size_t k = 0; k < nc; ++k) {  // without a branch: to > from whenever rep[k]
        const size_t p = cand[k], to = p + gram, from = std::max(p, covered_until);
        const uint64_t add = prefix[to] - prefix[std::min(from, to)];
        covered += rep[k] ? add : 0;
        covered_until = rep[k] ? to : covered_until;
      }
    }
    // The candidates of gram + 1: repeated here, and room for one more word.
    size_t kept = 0;
    for (size_t k = 0; k < nc; ++k) {
      const uint32_t p = cand[k];
      cand[kept] = p;
      kept += rep[k] & (p + gram + 1 <= nw);
    }
    out.gram_covered[gram] = covered;
    out.gram_defined[gram] = true;
    cand.resize(kept);
    if (stop && stop->decided(out, QualityPhase::kNgram, gram)) return;
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace luminamoon::detail
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace luminamoon::detail {
HWY_EXPORT(CountQuality);

void count_quality(const uint8_t* s, size_t n, QualityScratch& scratch, QualityCounts& out, QualityStop* stop) {
  HWY_DYNAMIC_DISPATCH(CountQuality)(s, n, scratch, out, stop);
}
}  // namespace luminamoon::detail
#endif
