// Whether XXH3-64's length branches cost on real text: every 5-word shingle
// of the corpus hashed in document order, then grouped by length (<= 32
// bytes first), process CPU time per shingle (Note [shingles grouped by
// length], src/data/minhash/shingle_groups.cc). Input: NUL-separated
// documents, as for bench/minhash_oph_breakdown.cc. The normalized texts sit
// in one array here (read from memory, not from L1 as in the signature path),
// so the figures bound the effect rather than measure the path. Built by hand:
//   c++ -O3 -std=c++20 -Iinclude -Isrc bench/minhash_hash_order.cc -o /tmp/hash_order \
//     BUILD/src/data/libluminamoon_data.a -lxxhash -ltbb -lz -lhwy -lpthread
//   /tmp/hash_order docs.nul
#include <ctime>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>
#include <algorithm>
#define XXH_INLINE_ALL
#include <xxhash.h>
#include "data/dedup/text_normalize.h"
using namespace luminamoon;
int main(int argc, char** argv) {
  std::ifstream f(argv[1], std::ios::binary); std::stringstream ss; ss << f.rdbuf(); std::string all = ss.str();
  std::string norm_all; std::vector<std::pair<uint32_t,uint32_t>> sh; NormalizedWords nw; size_t start = 0;
  for (size_t i = 0; i < all.size(); ++i) if (all[i] == 0) {
    nw.assign(std::string_view(all).substr(start, i - start)); start = i + 1;
    size_t base = norm_all.size(); norm_all += nw.text();
    const uint32_t* st = nw.word_starts();
    for (size_t k = 0; k + 5 <= nw.words(); ++k) sh.push_back({uint32_t(base + st[k]), st[k + 5] - 1 - st[k]});
  }
  auto sorted = sh; std::stable_partition(sorted.begin(), sorted.end(), [](auto p) { return p.second <= 32; });
  auto now = [] { timespec ts; clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts); return ts.tv_sec + ts.tv_nsec * 1e-9; };
  std::vector<uint64_t> out(sh.size());
  for (int rep = 0; rep < 6; ++rep) for (auto* v : {&sh, &sorted}) {
    auto t0 = now();
    for (size_t i = 0; i < v->size(); ++i) out[i] = XXH3_64bits_withSeed(norm_all.data() + (*v)[i].first, (*v)[i].second, 0);
    std::printf("%s %.2f ns/shingle\n", v == &sh ? "document order" : "grouped       ", (now() - t0) / v->size() * 1e9);
  }
}
