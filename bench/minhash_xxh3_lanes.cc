// Would XXH3-64 of the shingles be faster four shingles at a time, one per
// 64-bit AVX2 lane? XXH3's 17-32 byte path (74% of the real corpus's 5-word
// shingles) is two 64x64->128-bit products folded, plus the length term and
// the avalanche; AVX2 has only 32x32->64 products (vpmuludq), so a lane's
// 128-bit product takes four of them and the carries. This driver checks the
// lane kernel bit for bit against libxxhash, then times (1) the 17-32 byte
// shingles alone, library against lanes, and (2) every shingle of every
// document, library against classify-then-hash (17-32 byte shingles in lanes,
// the rest through the library), in process CPU time. Input: NUL-separated
// documents (bench/minhash_oph_breakdown.cc's). Built by hand:
//   c++ -O3 -std=c++20 -Iinclude -Isrc bench/minhash_xxh3_lanes.cc -o /tmp/xxh3_lanes \
//     BUILD/src/data/libluminamoon_data.a -lxxhash -ltbb -lhwy -lpthread
//   /tmp/xxh3_lanes docs.nul
// Section "Issue 15 (session 5)" of docs/benchmarks.md has the result (the
// lanes lose once the shingles are classified); the library keeps XXH3_64bits.
#include <immintrin.h>

#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "data/dedup/text_normalize.h"

namespace {

double cpu_now() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

uint64_t secret64(int offset) {
  uint64_t v;
  std::memcpy(&v, reinterpret_cast<const char*>(XXH3_kSecret) + offset, 8);
  return v;
}

constexpr uint64_t kPrime64_1 = 0x9E3779B185EBCA87ull;  // XXH_PRIME64_1
constexpr uint64_t kPrimeMx1 = 0x165667919E3779F9ull;   // XXH3's avalanche multiplier

// The low and high halves of each lane's 128-bit product a*b, xor-ed together.
__attribute__((target("avx2"))) __m256i mul128_fold(__m256i a, __m256i b) {
  const __m256i low32 = _mm256_set1_epi64x(0xffffffffll);
  const __m256i ah = _mm256_srli_epi64(a, 32), bh = _mm256_srli_epi64(b, 32);
  const __m256i ll = _mm256_mul_epu32(a, b), lh = _mm256_mul_epu32(a, bh);
  const __m256i hl = _mm256_mul_epu32(ah, b), hh = _mm256_mul_epu32(ah, bh);
  const __m256i mid = _mm256_add_epi64(_mm256_add_epi64(_mm256_srli_epi64(ll, 32), _mm256_and_si256(lh, low32)),
                                       _mm256_and_si256(hl, low32));
  const __m256i lo = _mm256_blend_epi32(ll, _mm256_slli_epi64(mid, 32), 0xAA);
  const __m256i hi = _mm256_add_epi64(_mm256_add_epi64(hh, _mm256_srli_epi64(lh, 32)),
                                      _mm256_add_epi64(_mm256_srli_epi64(hl, 32), _mm256_srli_epi64(mid, 32)));
  return _mm256_xor_si256(lo, hi);
}

// The low 64 bits of each lane times the constant c.
__attribute__((target("avx2"))) __m256i mul64_by(__m256i a, uint64_t c) {
  const __m256i cl = _mm256_set1_epi64x(static_cast<int64_t>(c & 0xffffffffull));
  const __m256i ch = _mm256_set1_epi64x(static_cast<int64_t>(c >> 32));
  const __m256i cross = _mm256_add_epi64(_mm256_mul_epu32(_mm256_srli_epi64(a, 32), cl), _mm256_mul_epu32(a, ch));
  return _mm256_add_epi64(_mm256_mul_epu32(a, cl), _mm256_slli_epi64(cross, 32));
}

__attribute__((target("avx2"))) __m256i pair_of(const char* a, const char* b) {
  return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a))),
                                 _mm_loadu_si128(reinterpret_cast<const __m128i*>(b)), 1);
}

// XXH3-64 (seed 0) of four inputs of 17..32 bytes: acc = len * P1 + mix16(first 16 bytes,
// secret[0..16)) + mix16(last 16 bytes, secret[16..32)), then the avalanche.
__attribute__((target("avx2"))) void xxh3_17to32_x4(const char* const* in, const uint32_t* len, uint64_t* out) {
  const __m256i heads01 = pair_of(in[0], in[1]), heads23 = pair_of(in[2], in[3]);
  const __m256i tails01 = pair_of(in[0] + len[0] - 16, in[1] + len[1] - 16);
  const __m256i tails23 = pair_of(in[2] + len[2] - 16, in[3] + len[3] - 16);
  // Lanes in the order 0, 2, 1, 3 (unpack works within 128-bit halves); undone at the store.
  const __m256i head_lo = _mm256_unpacklo_epi64(heads01, heads23), head_hi = _mm256_unpackhi_epi64(heads01, heads23);
  const __m256i tail_lo = _mm256_unpacklo_epi64(tails01, tails23), tail_hi = _mm256_unpackhi_epi64(tails01, tails23);
  __m256i acc = _mm256_add_epi64(
      mul128_fold(_mm256_xor_si256(head_lo, _mm256_set1_epi64x(secret64(0))),
                  _mm256_xor_si256(head_hi, _mm256_set1_epi64x(secret64(8)))),
      mul128_fold(_mm256_xor_si256(tail_lo, _mm256_set1_epi64x(secret64(16))),
                  _mm256_xor_si256(tail_hi, _mm256_set1_epi64x(secret64(24)))));
  acc = _mm256_add_epi64(acc, mul64_by(_mm256_setr_epi64x(len[0], len[2], len[1], len[3]), kPrime64_1));
  acc = _mm256_xor_si256(acc, _mm256_srli_epi64(acc, 37));
  acc = mul64_by(acc, kPrimeMx1);
  acc = _mm256_xor_si256(acc, _mm256_srli_epi64(acc, 32));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), _mm256_permute4x64_epi64(acc, 0xD8));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !__builtin_cpu_supports("avx2")) return 2;
  // 1. Bit for bit against libxxhash on random bytes of every length 17..32.
  std::mt19937_64 rng(15);
  std::string noise(1 << 16, '\0');
  for (char& c : noise) c = static_cast<char>(rng());
  size_t mismatches = 0;
  for (int trial = 0; trial < 100000; ++trial) {
    const char* p[4];
    uint32_t l[4];
    uint64_t got[4];
    for (int k = 0; k < 4; ++k) {
      l[k] = 17 + static_cast<uint32_t>(rng() % 16);
      p[k] = noise.data() + rng() % (noise.size() - 32);
    }
    xxh3_17to32_x4(p, l, got);
    for (int k = 0; k < 4; ++k) mismatches += got[k] != XXH3_64bits(p[k], l[k]);
  }
  std::printf("lanes against libxxhash, 400,000 random inputs of 17..32 bytes: %zu mismatches\n", mismatches);
  if (mismatches) return 1;

  std::ifstream f(argv[1], std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string all = ss.str();
  std::vector<std::string> texts;  // normalized, with 16 bytes of slack on both sides
  std::vector<std::vector<uint32_t>> starts;
  luminamoon::NormalizedWords norm;
  for (size_t i = 0, begin = 0; i < all.size(); ++i) {
    if (all[i] != 0) continue;
    norm.assign(std::string_view(all).substr(begin, i - begin));
    begin = i + 1;
    texts.push_back(std::string(16, ' ') + std::string(norm.text()) + std::string(16, ' '));
    starts.emplace_back(norm.word_starts(), norm.word_starts() + norm.words() + 1);
  }
  const int n = 5;
  std::vector<const char*> short_ptr;
  std::vector<uint32_t> short_len;
  for (size_t d = 0; d < texts.size(); ++d)
    for (size_t k = 0; k + n < starts[d].size(); ++k) {
      const uint32_t len = starts[d][k + n] - 1 - starts[d][k];
      if (len - 17u < 16u) short_ptr.push_back(texts[d].data() + 16 + starts[d][k]), short_len.push_back(len);
    }
  const size_t m = short_len.size() & ~size_t{3};
  std::vector<uint64_t> a(m), b(m);
  std::vector<uint64_t> out(1 << 20), check(1 << 20);
  std::vector<uint32_t> lane_idx(1 << 20), rest_idx(1 << 20);
  for (int rep = 0; rep < 5; ++rep) {
    double t0 = cpu_now();
    for (size_t i = 0; i < m; ++i) a[i] = XXH3_64bits(short_ptr[i], short_len[i]);
    const double lib_short = cpu_now() - t0;
    t0 = cpu_now();
    for (size_t i = 0; i < m; i += 4) xxh3_17to32_x4(&short_ptr[i], &short_len[i], &b[i]);
    const double lanes_short = cpu_now() - t0;
    // Whole documents: the library, then classify + lanes + library for the rest.
    uint64_t sum_lib = 0, sum_lanes = 0;
    size_t shingles = 0;
    t0 = cpu_now();
    for (size_t d = 0; d < texts.size(); ++d) {
      const char* t = texts[d].data() + 16;
      const uint32_t* st = starts[d].data();
      const size_t count = starts[d].size() > n ? starts[d].size() - n : 0;
      for (size_t k = 0; k < count; ++k) out[k] = XXH3_64bits(t + st[k], st[k + n] - 1 - st[k]);
      for (size_t k = 0; k < count; ++k) sum_lib += out[k];
      shingles += count;
    }
    const double lib_all = cpu_now() - t0;
    t0 = cpu_now();
    for (size_t d = 0; d < texts.size(); ++d) {
      const char* t = texts[d].data() + 16;
      const uint32_t* st = starts[d].data();
      const size_t count = starts[d].size() > n ? starts[d].size() - n : 0;
      size_t lanes = 0, rest = 0;
      for (size_t k = 0; k < count; ++k) {  // branch-free split by length class
        const bool short_one = st[k + n] - 1 - st[k] - 17u < 16u;
        lane_idx[lanes] = static_cast<uint32_t>(k), rest_idx[rest] = static_cast<uint32_t>(k);
        lanes += short_one, rest += !short_one;
      }
      size_t q = 0;
      for (; q + 4 <= lanes; q += 4) {
        const char* p[4];
        uint32_t l[4];
        uint64_t h[4];
        for (int k = 0; k < 4; ++k) p[k] = t + st[lane_idx[q + k]], l[k] = st[lane_idx[q + k] + n] - 1 - st[lane_idx[q + k]];
        xxh3_17to32_x4(p, l, h);
        for (int k = 0; k < 4; ++k) out[lane_idx[q + k]] = h[k];
      }
      for (; q < lanes; ++q) rest_idx[rest++] = lane_idx[q];
      for (size_t r = 0; r < rest; ++r) out[rest_idx[r]] = XXH3_64bits(t + st[rest_idx[r]], st[rest_idx[r] + n] - 1 - st[rest_idx[r]]);
      for (size_t k = 0; k < count; ++k) sum_lanes += out[k];
    }
    const double lanes_all = cpu_now() - t0;
    std::printf("17-32 byte shingles (%zu): library %.2f ns, lanes %.2f ns a shingle (equal %d); "
                "every shingle (%zu): library %.2f ns, classified + lanes %.2f ns (equal %d)\n",
                m, lib_short / m * 1e9, lanes_short / m * 1e9, a == b, shingles, lib_all / shingles * 1e9,
                lanes_all / shingles * 1e9, sum_lib == sum_lanes);
  }
}
