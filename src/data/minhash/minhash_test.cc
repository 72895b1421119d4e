// MinHash: the vector kernel equals the __int128 reference on every compiled
// Highway target; shingling; LSH streaming decisions and index reload.
#include "luminamoon/minhash_lsh.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <algorithm>
#include <filesystem>
#include <map>
#include <tuple>
#include <random>
#include <string>

#include "data/minhash/band_runs.h"
#include "data/minhash/kept_signatures.h"
#include "data/minhash/minhash_kernel.h"
#include "data/minhash/oph_kernel.h"
#include "data/minhash/shingle_groups.h"

#ifdef LUMINA_MINHASH_WITH_HWY
#include <hwy/targets.h>
#endif

namespace luminamoon {
namespace {

std::string random_text(std::mt19937_64& rng, int words) {
  static const char* vocab[] = {"alpha", "beta", "Gamma", "delta,", "eps", "zeta.", "eta",
                                "theta", "iota", "kappa", "LAMBDA", "mu", "nu", "xi"};
  std::string t;
  for (int i = 0; i < words; ++i) {
    if (i) t += (rng() % 7 == 0) ? "  \n" : " ";
    t += vocab[rng() % 14];
    t += std::to_string(rng() % 50);
  }
  return t;
}

TEST(MinHashKernel, VectorEqualsScalarReferenceOnEveryTarget) {
  std::mt19937_64 rng(3);
#ifdef LUMINA_MINHASH_WITH_HWY
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    std::printf("compiled and supported target: %s\n", hwy::TargetName(target));
  }
#endif
  for (int num_perm : {1, 7, 64, 100, 128}) {
    MinHashPermutations perms = MinHashPermutations::generate(num_perm, 99);
    PermutationLanes lanes(perms);
    for (size_t n : {1, 2, 5, 333}) {
      std::vector<uint64_t> raw(n);
      for (auto& x : raw) x = rng();
      raw[0] = ~uint64_t{0};  // the extremes of the unreduced range
      if (n > 1) raw[1] = kMinHashPrime;
      std::vector<uint64_t> expect(num_perm);
      minhash_min_scalar(raw.data(), n, perms, expect.data());
      std::vector<uint64_t> reduced = raw;
      for (auto& x : reduced) x = reduce_mod_mersenne61(x);
#ifdef LUMINA_MINHASH_WITH_HWY
      for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
        hwy::SetSupportedTargetsForTest(target);
#endif
        std::vector<uint64_t> got(lanes.padded);
        minhash_min_simd(reduced.data(), n, lanes, got.data());
        got.resize(num_perm);
        ASSERT_EQ(got, expect) << minhash_simd_target() << " num_perm " << num_perm;
#ifdef LUMINA_MINHASH_WITH_HWY
      }
      hwy::SetSupportedTargetsForTest(0);
#endif
    }
  }
}

// Values computed by the Python reference (tests/dedup_reference.py: the
// `xxhash` package and Python integers), so the C++ entry point is checked
// against the same independent definition as the Python one.
TEST(MinHasher, MatchesThePythonReferenceOnAKnownText) {
  const std::string text = "The quick brown fox jumps over the lazy dog, twice: the QUICK brown fox!";
  MinHasher h({.scheme = MinHashScheme::kKperm});
  std::vector<uint64_t> sig(64);
  h.signature(text, sig);
  EXPECT_EQ(sig[0], 0x45c8b70e36074bull);
  EXPECT_EQ(sig[1], 0x374987626c8efdbull);
  EXPECT_EQ(sig[2], 0xd6a44435526f17ull);
  EXPECT_EQ(sig[3], 0x18287703cb1b1bdull);
  EXPECT_EQ(sig[63], 0x2d680a32944e62dull);
  EXPECT_EQ(StreamDeduplicator::key_of(text, DedupKey::kText), 0x59c77b86a9fb01d4ull);
  EXPECT_EQ(StreamDeduplicator::key_of(text, DedupKey::kNormalizedText), 0xc342426b279fa7fbull);
}

// oph (the default): 14 shingles into 64 bins, the rest densified; values
// from tests/dedup_reference.py (oph_signature).
TEST(MinHasher, OphMatchesThePythonReferenceOnAKnownTextOnEveryTarget) {
  const std::string text = "The quick brown fox jumps over the lazy dog, twice: the QUICK brown fox!";
#ifdef LUMINA_MINHASH_WITH_HWY
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
#endif
    std::vector<uint64_t> sig(64);
    MinHasher().signature(text, sig);
    EXPECT_EQ(sig[0], 0x2c9299e0fe03f6dull);
    EXPECT_EQ(sig[1], 0x309fbe82365635eull);
    EXPECT_EQ(sig[2], 0x3f074dea38df7c1ull);
    EXPECT_EQ(sig[3], 0x3f074dea38df7c1ull);
    EXPECT_EQ(sig[63], 0x2c9299e0fe03f6dull);
#ifdef LUMINA_MINHASH_WITH_HWY
  }
  hwy::SetSupportedTargetsForTest(0);
#endif
}

// Note [shingles grouped by length]: where the target groups, the order is
// the stable partition of 0 .. count - 1 into shingles of at most 32 bytes
// and the rest, computed here one by one; every count around the vector
// widths (the masked last vector), spans from 1 to 80 bytes.
TEST(ShingleOrder, ShortShinglesFirstInOrderOnEveryTarget) {
  std::mt19937_64 rng(21);
#ifdef LUMINA_MINHASH_WITH_HWY
  std::vector<int64_t> targets = hwy::SupportedAndGeneratedTargets();
#else
  std::vector<int64_t> targets{0};
#endif
  int grouped_targets = 0;
  for (int64_t target : targets) {
#ifdef LUMINA_MINHASH_WITH_HWY
    hwy::SetSupportedTargetsForTest(target);
#endif
    bool grouped = false;
    for (size_t count : {1, 2, 7, 15, 16, 17, 31, 32, 33, 64, 100, 1000}) {
      for (size_t n : {1, 3, 5}) {
        std::vector<uint32_t> starts(count + n + kShingleOrderSlack);
        uint32_t at = 0;
        for (size_t w = 0; w < count + n; ++w, at += 1 + rng() % 16) starts[w] = at;  // words of 0..15 bytes + space
        std::vector<uint32_t> expect;
        for (int long_group = 0; long_group < 2; ++long_group) {
          for (uint32_t i = 0; i < count; ++i) {
            if ((starts[i + n] - starts[i] - 1 > 32) == (long_group == 1)) expect.push_back(i);
          }
        }
        std::vector<uint32_t> order(count + kShingleOrderSlack), scratch(count + kShingleOrderSlack);
        if (!order_shingles_for_hashing(starts.data(), count, n, order.data(), scratch.data())) continue;
        grouped = true;
        order.resize(count);
        ASSERT_EQ(order, expect) << "count " << count << " n " << n;
      }
    }
    grouped_targets += grouped;
  }
#ifdef LUMINA_MINHASH_WITH_HWY
  hwy::SetSupportedTargetsForTest(0);
  // An AVX-512 target that this build compiled and the machine runs groups;
  // the test must have seen it there (a static-target build, such as the
  // sanitizer jobs', may have compiled none).
  const bool avx512_ran = std::any_of(targets.begin(), targets.end(),
                                      [](int64_t t) { return (t & (HWY_AVX3 | HWY_AVX3_DL)) != 0; });
  if (avx512_ran) EXPECT_GT(grouped_targets, 0);
#endif
}

TEST(OphKernel, VectorEqualsScalarOnEveryTarget) {
  std::mt19937_64 rng(17);
  for (int log2k : {0, 1, 3, 6, 8, 12}) {
    for (size_t n : {1, 2, 3, 7, 64, 1000}) {
      std::vector<uint64_t> x(n);
      for (auto& v : x) v = rng();
      const size_t K = size_t{1} << log2k;
      std::vector<uint64_t> expect(K);
      oph_signature_scalar(x.data(), n, 5, 77, log2k, expect.data());
#ifdef LUMINA_MINHASH_WITH_HWY
      for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
        hwy::SetSupportedTargetsForTest(target);
#endif
        std::vector<uint64_t> got(K);
        oph_signature_simd(x.data(), n, 5, 77, log2k, got.data());
        ASSERT_EQ(got, expect) << "log2k " << log2k << " n " << n;
#ifdef LUMINA_MINHASH_WITH_HWY
      }
      hwy::SetSupportedTargetsForTest(0);
#endif
      for (uint64_t v : expect) ASSERT_NE(v, kOphEmpty);  // densified
    }
  }
}

TEST(MinHasher, ShinglesAreWordNgramsOfTheNormalizedText) {
  MinHasher h({.num_perm = 4, .ngram = 2});
  auto s = h.shingle_hashes("A b, C");
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s, MinHasher({.num_perm = 4, .ngram = 2}).shingle_hashes("a b c"));
  EXPECT_EQ(h.shingle_hashes("one").size(), 1u);
  EXPECT_EQ(h.shingle_hashes("").size(), 1u);
}

TEST(MinHasher, BatchSignaturesDoNotDependOnThreadsOrKernel) {
  std::mt19937_64 rng(5);
  TextBatch batch;
  for (int i = 0; i < 300; ++i) batch.push_back(random_text(rng, 1 + i % 80));
  for (MinHashScheme scheme : {MinHashScheme::kOph, MinHashScheme::kKperm}) {
    MinHasher h({.scheme = scheme});
    std::vector<uint64_t> a(300 * 64), b(300 * 64), c(300 * 64);
    h.signatures(batch.view(), a, 1);
    h.signatures(batch.view(), b, 2);
    h.signatures(batch.view(), c, 2, MinHashKernel::kScalar);
    EXPECT_EQ(a, b);
    EXPECT_EQ(a, c);
  }
}

TEST(MinHashLSH, DropsNearDuplicatesOfKeptDocumentsAndReloads) {
  std::mt19937_64 rng(9);
  std::string base = random_text(rng, 400);
  std::string near = base + " tail1 tail2";  // a few shingles differ
  std::string other = random_text(rng, 400);
  TextBatch batch;
  for (const auto& t : {base, other, near}) batch.push_back(t);
  auto dir = std::filesystem::temp_directory_path() / ("lm_lsh_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  MinHashLSHOptions o;
  o.index.path = (dir / "x.lsh").string();
  std::vector<uint8_t> keep(3);
  std::vector<int64_t> matched(3);
  std::vector<double> sim(3);
  {
    MinHashLSH lsh(o);
    lsh.add(batch.view(), std::vector<int64_t>{10, 11, 12}, keep, matched, sim);
    EXPECT_EQ(keep, (std::vector<uint8_t>{1, 1, 0}));
    EXPECT_EQ(matched, (std::vector<int64_t>{-1, -1, 10}));
    EXPECT_GE(sim[2], 0.8);
    lsh.commit();
  }
  MinHashLSH reloaded(o);
  EXPECT_EQ(reloaded.kept(), 2u);
  TextBatch again;
  again.push_back(near);
  keep.resize(1);
  matched.resize(1);
  reloaded.add(again.view(), {}, keep, matched);
  EXPECT_EQ(keep[0], 0);
  EXPECT_EQ(matched[0], 10);
  MinHashLSHOptions other_params = o;
  other_params.bands = 4;
  EXPECT_ANY_THROW(MinHashLSH{other_params});
  std::filesystem::remove_all(dir);
}

// Note [signatures on disk]: candidates verified against signatures read
// back from the temporary file (early ids) and from the block still in
// memory (the last ids) decide as the count of equal values says.
TEST(MinHashLSH, VerifiesCandidatesFromTheSignatureFileAndTheTail) {
  constexpr size_t kWidth = 64, kKept = 10000;
  std::mt19937_64 rng(17);
  std::vector<uint64_t> sigs(kKept * kWidth);
  for (auto& v : sigs) v = rng() >> 3;  // distinct documents: no band collides
  MinHashLSH lsh(MinHashLSHOptions{});
  std::vector<uint8_t> keep(kKept);
  std::vector<int64_t> refs(kKept), matched(kKept);
  for (size_t i = 0; i < kKept; ++i) refs[i] = static_cast<int64_t>(1000 + i);
  lsh.add_signatures(sigs, refs, keep, matched);
  ASSERT_EQ(lsh.kept(), kKept);
  {  // The store alone: one block in memory, the rest read back from the file.
    KeptSignatures store(kWidth, "");
    // Refs of both signs and over 32 bits: the two halves come back in order.
    auto ref_of = [](size_t i) { return (i % 2 ? -1 : 1) * static_cast<int64_t>((uint64_t{1} << 40) + 3 * i); };
    for (size_t i = 0; i < kKept; ++i) store.append(sigs.data() + i * kWidth, ref_of(i));
    EXPECT_TRUE(store.on_disk());
    EXPECT_LE(store.memory_bytes(), KeptSignatures::kBlockDocs * (kWidth + 2) * 4);
    std::vector<uint32_t> got(kWidth);
    for (size_t id : {size_t{0}, size_t{4095}, size_t{4096}, size_t{8191}, size_t{8192}, kKept - 1}) {
      ASSERT_EQ(store.read(id, got.data()), ref_of(id)) << id;
      for (size_t k = 0; k < kWidth; ++k) ASSERT_EQ(got[k], static_cast<uint32_t>(sigs[id * kWidth + k])) << id;
    }
  }
  for (size_t id : {size_t{0}, size_t{4095}, size_t{4096}, size_t{7000}, kKept - 1}) {
    // A kept query joins the index (band 0 shared with `id`): it comes last.
    for (size_t changed : {size_t{0}, size_t{12}, size_t{13}}) {
      // Band 0 (values 0..7) kept, so the document is a candidate; `changed`
      // of the other 56 values replaced.
      std::vector<uint64_t> q(sigs.begin() + id * kWidth, sigs.begin() + (id + 1) * kWidth);
      for (size_t k = 0; k < changed; ++k) q[8 + k] ^= 1;
      std::vector<uint8_t> k1(1);
      std::vector<int64_t> m1(1);
      std::vector<double> s1(1);
      lsh.add_signatures(q, std::vector<int64_t>{5}, k1, m1, s1);
      const double expected = static_cast<double>(kWidth - changed) / kWidth;  // 1, 0.8125, 0.797
      if (expected >= 0.8) {
        EXPECT_EQ(k1[0], 0) << id << " " << changed;
        EXPECT_EQ(m1[0], static_cast<int64_t>(1000 + id));
        EXPECT_DOUBLE_EQ(s1[0], expected);
      } else {
        EXPECT_EQ(k1[0], 1) << id << " " << changed;
      }
    }
  }
}

// Note [band runs on disk]: every id stored with a key, over runs (merged
// ones too) and pages (keys repeated across a page boundary), as a multimap
// says; absent keys none.
TEST(BandRuns, FindsEveryIdOfAKeyAcrossRunsAndPages) {
  std::mt19937_64 rng(5);
  BandRuns runs(2, "");
  std::multimap<std::pair<int, uint64_t>, uint32_t> expected;
  std::vector<uint64_t> keys;
  uint32_t id = 0;
  for (int r = 0; r < 5; ++r) {
    std::vector<std::vector<RunEntry>> per_band(2);
    for (int b = 0; b < 2; ++b) {
      for (size_t i = 0; i < 3 * RunFile::kPageEntries + 17; ++i) {
        // A few keys repeated hundreds of times (across pages), the rest unique.
        const uint64_t key = i % 3 == 0 ? 0x8000000000000000ull + (i % 7) : rng();
        per_band[static_cast<size_t>(b)].push_back({key, id});
        expected.emplace(std::make_pair(b, key), id++);
        keys.push_back(key);
      }
    }
    runs.add_run([&](int b, std::vector<RunEntry>& entries) {
      EXPECT_TRUE(entries.empty());  // one band's pairs at a time
      entries = per_band[static_cast<size_t>(b)];
    });
    runs.merge_full_tiers();
  }
  EXPECT_EQ(runs.runs(), 2u);  // the first four merged into one (Note [sorted runs on disk])
  std::vector<uint32_t> got;
  for (int b = 0; b < 2; ++b) {
    for (size_t i = 0; i < keys.size(); i += 97) {
      got.clear();
      runs.find(b, keys[i], got);
      std::vector<uint32_t> want;
      auto [lo, hi] = expected.equal_range({b, keys[i]});
      for (auto it = lo; it != hi; ++it) want.push_back(it->second);
      std::sort(got.begin(), got.end());
      std::sort(want.begin(), want.end());
      ASSERT_EQ(got, want) << b << " " << keys[i];
    }
    for (int miss = 0; miss < 200; ++miss) {
      got.clear();
      runs.find(b, rng() | 1, got);  // odd: no repeated key; a random one is absent
      EXPECT_TRUE(got.empty());
    }
  }
  // ~10 bits a key, one 512-bit block each: well under the 12+ bytes of a table slot.
  EXPECT_LE(runs.memory_bytes(), keys.size() * 2 + 4096);
}

// With a tail of 100 kept documents, candidates come from the runs and from
// the tail alike; a key shared by documents of several runs and of the tail
// picks the most similar, the earliest on a tie.
TEST(MinHashLSH, DecidesTheSameWithBandKeysInRuns) {
  constexpr size_t kWidth = 64, kKept = 1000;
  std::mt19937_64 rng(23);
  std::vector<uint64_t> sigs(kKept * kWidth);
  for (auto& v : sigs) v = rng() >> 3;
  for (size_t d = 0; d < kKept; d += 50) {  // every 50th shares band 0 with document 0
    std::copy_n(sigs.begin(), 8, sigs.begin() + d * kWidth);
  }
  std::vector<uint64_t> queries;
  for (size_t id : {size_t{0}, size_t{120}, size_t{450}, size_t{999}}) {
    std::vector<uint64_t> q(sigs.begin() + id * kWidth, sigs.begin() + (id + 1) * kWidth);
    for (size_t k = 0; k < 5; ++k) q[40 + k] ^= 1;  // similarity 59/64 to `id`
    queries.insert(queries.end(), q.begin(), q.end());
  }
  auto decide = [&](const char* tail) {
    if (tail) ::setenv("LUMINAMOON_LSH_TAIL_DOCS", tail, 1);
    else ::unsetenv("LUMINAMOON_LSH_TAIL_DOCS");
    MinHashLSH lsh(MinHashLSHOptions{});
    std::vector<uint8_t> keep(kKept);
    std::vector<int64_t> matched(kKept);
    lsh.add_signatures(sigs, {}, keep, matched);
    std::vector<uint8_t> k(4);
    std::vector<int64_t> m(4);
    std::vector<double> s(4);
    lsh.add_signatures(queries, {}, k, m, s);
    ::unsetenv("LUMINAMOON_LSH_TAIL_DOCS");
    return std::make_tuple(keep, matched, k, m, s);
  };
  const auto whole = decide(nullptr);
  const auto in_runs = decide("100");
  EXPECT_EQ(whole, in_runs);
  // Hand-derived: documents 50, 100, ... share only band 0 with 0 (sim 8/64, kept).
  EXPECT_EQ(std::count(std::get<0>(in_runs).begin(), std::get<0>(in_runs).end(), 1), static_cast<long>(kKept));
  EXPECT_EQ(std::get<3>(in_runs), (std::vector<int64_t>{0, 120, 450, 999}));
  for (double s : std::get<4>(in_runs)) EXPECT_DOUBLE_EQ(s, 59.0 / 64);
}

TEST(MinHashLSH, RejectsBadParameters) {
  MinHashLSHOptions o;
  o.bands = 9;  // 9 * 8 > 64
  EXPECT_ANY_THROW(MinHashLSH{o});
  o.bands = 8;
  o.threshold = 1.5;
  EXPECT_ANY_THROW(MinHashLSH{o});
  EXPECT_ANY_THROW(MinHasher({.num_perm = 0}));
  EXPECT_ANY_THROW(MinHasher({.num_perm = 48}));  // oph needs a power of two
  EXPECT_NO_THROW(MinHasher({.num_perm = 48, .scheme = MinHashScheme::kKperm}));
}

}  // namespace
}  // namespace luminamoon
