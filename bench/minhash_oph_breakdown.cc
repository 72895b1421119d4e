// Where oph signature time goes on real text, in process CPU time: the whole
// signature, the normalization, normalization + XXH3-64 of every shingle, and
// the binning alone. Input: NUL-separated documents (the first 8,000 of
// bench/real_text_corpus.py's corpus). Built by hand against a build tree:
//   c++ -O3 -std=c++20 -Iinclude -Isrc bench/minhash_oph_breakdown.cc -o /tmp/oph_breakdown \
//     BUILD/src/data/libluminamoon_data.a -lxxhash -ltbb -lz -lhwy -lpthread
//   /tmp/oph_breakdown docs.nul [REPS [signatures]]
// With "signatures", only the signature phase: one warm-up call, then REPS
// calls, one MB per CPU-second figure a line (bench/minhash_build_ab.py runs
// several builds' drivers this way, interleaved; REPS 0 under callgrind
// counts the instructions of one call:
//   valgrind --tool=callgrind --collect-atstart=no \
//     --toggle-collect='luminamoon::MinHasher::signatures*' /tmp/oph_breakdown docs.nul 0 signatures).
#include <cstdlib>
#include <ctime>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>
#define XXH_INLINE_ALL
#include <xxhash.h>
#include "luminamoon/minhash_lsh.h"
#include "data/minhash/oph_kernel.h"
#include "data/dedup/text_normalize.h"
using namespace luminamoon;
int main(int argc, char** argv) {
  if (argc < 2) return 2;
  std::ifstream f(argv[1], std::ios::binary);
  std::stringstream ss; ss << f.rdbuf(); std::string all = ss.str();
  TextBatch b; size_t total = 0, start = 0;
  for (size_t i = 0; i < all.size(); ++i) if (all[i] == 0) { b.push_back(std::string_view(all).substr(start, i - start)); total += i - start; start = i + 1; }
  auto now = [] { timespec ts; clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts); return ts.tv_sec + ts.tv_nsec * 1e-9; };
  MinHasher h; std::vector<uint64_t> out(b.size() * 64);
  const int reps = argc > 2 ? std::atoi(argv[2]) : 3;
  if (argc > 3 && std::string(argv[3]) == "signatures") {
    h.signatures(b.view(), out, 1);
    for (int rep = 0; rep < reps; ++rep) { auto t0 = now(); h.signatures(b.view(), out, 1); std::printf("%.1f\n", total / (now() - t0) / 1e6); }
    uint64_t sum = 0; for (uint64_t v : out) sum = sum * 1000003 + v;  // the same for every build: bit-identical signatures
    std::fprintf(stderr, "signature checksum %016llx\n", (unsigned long long)sum);
    return 0;
  }
  for (int rep = 0; rep < reps; ++rep) { auto t0 = now(); h.signatures(b.view(), out, 1); std::printf("signatures: %.1f MB/cpu-s\n", total / (now() - t0) / 1e6); }
  NormalizedWords norm; size_t words = 0, nbytes = 0;
  auto t0 = now();
  for (int rep = 0; rep < 3; ++rep) for (size_t i = 0; i < b.size(); ++i) { norm.assign(b[i]); words += norm.words(); nbytes += norm.text().size(); }
  double s = (now() - t0) / 3;
  std::printf("normalize: %.1f MB/cpu-s, %.2f ns/word, %zu words, %.1f bytes/word\n", total / s / 1e6, s / (words / 3) * 1e9, words / 3, double(nbytes) / words);
  t0 = now(); uint64_t acc = 0; size_t shingles = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    norm.assign(b[i]);
    const char* t = norm.text().data(); const uint32_t* st = norm.word_starts(); size_t nw = norm.words();
    for (size_t k = 0; k + 5 <= nw; ++k) { acc += XXH3_64bits_withSeed(t + st[k], st[k + 5] - 1 - st[k], 0); ++shingles; }
  }
  s = now() - t0;
  std::printf("normalize+xxh3: %.1f MB/cpu-s, %zu shingles (%llu)\n", total / s / 1e6, shingles, (unsigned long long)acc);
  std::vector<uint64_t> xs(shingles + 8); for (auto& x : xs) x = acc = acc * 6364136223846793005ull + 1;
  std::vector<uint64_t> sig(64);
  t0 = now();
  for (size_t i = 0, pos = 0; i < b.size(); ++i) { size_t n = shingles / b.size(); oph_signature_simd(xs.data() + pos, n ? n : 1, 1, 2, 6, sig.data()); pos += n; }
  s = now() - t0;
  std::printf("oph binning alone: %.1f MB/cpu-s equivalent\n", total / s / 1e6);
}
