// Where MinHash signature time goes, per stage, in process CPU time (the
// machine is shared): normalization, shingle hashing, the permutation kernel.
// Built by hand against a build tree of luminamoon_data (no CMake target):
//   c++ -O3 -std=c++20 -Iinclude -Isrc bench/dedup_minhash_breakdown.cc \
//     -o /tmp/dedup_minhash_breakdown BUILD/src/data/libluminamoon_data.a -lxxhash -ltbb -lz -lhwy -lpthread
#include <ctime>
#include <cstdio>
#include <random>
#include <string>
#include <vector>
#include <xxhash.h>
#include <hwy/targets.h>
#include "luminamoon/minhash_lsh.h"
#include "data/minhash/minhash_kernel.h"
#include "data/dedup/text_normalize.h"
using namespace luminamoon;
int main() {
  std::mt19937_64 rng(1);
  std::vector<std::string> vocab;
  for (int i = 0; i < 5000; ++i) { std::string w; int n = 2 + rng() % 8; for (int j = 0; j < n; ++j) w += char('a' + rng() % 26); vocab.push_back(w); }
  TextBatch b;
  size_t total = 0;
  for (int d = 0; d < 3000; ++d) { std::string t; for (int k = 0; k < 500; ++k) { if (k) t += ' '; t += vocab[rng() % vocab.size()]; } total += t.size(); b.push_back(t); }
  MinHasher h;
  std::vector<uint64_t> out(3000 * 64);
  auto now = [] { timespec ts; clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts); return ts.tv_sec + ts.tv_nsec * 1e-9; };
  for (int rep = 0; rep < 3; ++rep) {
    auto t0 = now();
    h.signatures(b.view(), out, 1);
    double s = (now() - t0);
    std::printf("signatures: %.1f MB/cpu-s (%s)\n", total / s / 1e6, MinHasher::kernel_target().c_str());
  }
  std::string norm; std::vector<uint32_t> bounds; 
  auto t0 = now(); size_t words = 0;
  for (size_t i = 0; i < b.size(); ++i) { normalize_words(b[i], norm, bounds); words += bounds.size() / 2; }
  double s = (now() - t0);
  std::printf("normalize: %.1f MB/cpu-s, %.1f ns/word\n", total / s / 1e6, s / words * 1e9);
  t0 = now(); uint64_t acc = 0;
  std::vector<uint64_t> xs;
  for (size_t i = 0; i < b.size(); ++i) { xs = h.shingle_hashes(b[i]); acc += xs[0]; }
  s = (now() - t0);
  std::printf("normalize+shingle hashes: %.1f MB/cpu-s, %.1f ns/shingle\n", total / s / 1e6, s / words * 1e9);
  PermutationLanes lanes(h.permutations());
  std::vector<uint64_t> x(500), o(64);
  for (auto& v : x) v = reduce_mod_mersenne61(rng());
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    t0 = now();
    for (int i = 0; i < 3000; ++i) { minhash_min_simd(x.data(), x.size(), lanes, o.data()); acc += o[0]; }
    s = (now() - t0);
    std::printf("kernel %-7s: %5.1f ns/shingle (64 permutations)\n", minhash_simd_target(), s / (3000.0 * 500) * 1e9);
  }
  hwy::SetSupportedTargetsForTest(0);
  std::printf("(checksum %llu)\n", (unsigned long long)acc);
}
