// MinHash signatures (word n-gram shingles, 2^61-1 permutation family) and a
// streaming LSH band index that drops near duplicates of earlier kept texts.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "luminamoon/dedup_wal.h"
#include "luminamoon/stream_deduplicator.h"
#include "luminamoon/text_batch.h"

namespace luminamoon {

// The Mersenne prime of the permutation family h_k(x) = (a_k*x + b_k) mod p.
inline constexpr uint64_t kMinHashPrime = (uint64_t{1} << 61) - 1;
inline constexpr uint64_t kDefaultPermutationSeed = 1;
inline constexpr uint64_t kShingleHashSeed = 0;  // XXH3-64 seed of every shingle

// How a signature is made from the shingle hashes (spec section 5).
enum class MinHashScheme : uint8_t {
  // One-permutation hashing with optimal densification (Shrivastava 2017):
  // one hash per shingle (Note [one permutation hashing] in
  // src/data/minhash/oph_kernel.cc). num_perm must be a power of two.
  kOph,
  // num_perm permutations (a_k*x + b_k) mod (2^61 - 1): version 1's scheme.
  kKperm,
};
const char* minhash_scheme_name(MinHashScheme scheme);      // "oph", "kperm"
MinHashScheme parse_minhash_scheme(std::string_view name);  // throws DataError (usage) with the known names

// The constants of the oph scheme: y = mix64(x ^ (seed ^ kOphSeedXor)) bins
// the shingle hash x; empty bins take the first filled bin of the sequence
// mix64((seed ^ kOphDensifySeedXor) ^ (j << 32) ^ t) mod K. Fixed forever
// once released: they define the signatures an index holds.
inline constexpr uint64_t kOphSeedXor = 0;                      // seed  = params.seed
inline constexpr uint64_t kOphDensifySeedXor = 0x6F70685F64656E73;  // seed2 = params.seed ^ "oph_dens"

struct MinHashParams {
  int num_perm = 64;
  int ngram = 5;  // words per shingle
  uint64_t seed = kDefaultPermutationSeed;
  MinHashScheme scheme = MinHashScheme::kOph;
};

// a_k and b_k of every permutation: SplitMix64 seeded with `seed`, drawing
// a_k = 1 + next() % (p - 1), then b_k = next() % p, for k = 0, 1, ...
// (Note [MinHash permutations] in src/data/minhash/permutations.h).
struct MinHashPermutations {
  std::vector<uint64_t> a, b;
  static MinHashPermutations generate(int num_perm, uint64_t seed);
};

// Which signature kernel runs.
enum class MinHashKernel {
  kAuto,    // Highway, best target of this CPU (the scalar one when built without Highway)
  kScalar,  // the reference: unsigned __int128 products (kperm) or one shingle at a time (oph)
};

struct PermutationLanes;  // the vector kernel's layout (src/data/minhash)

class MinHasher {
 public:
  explicit MinHasher(MinHashParams params = {});
  const MinHashParams& params() const { return params_; }
  const MinHashPermutations& permutations() const { return perms_; }

  // Signatures of every document, row-major: out[i * num_perm + k].
  // num_threads 0: data_num_threads(). The result does not depend on it.
  void signatures(const TextBatchView& batch, std::span<uint64_t> out, int num_threads = 0,
                  MinHashKernel kernel = MinHashKernel::kAuto) const;
  void signature(std::string_view text, std::span<uint64_t> out,
                 MinHashKernel kernel = MinHashKernel::kAuto) const;
  // XXH3-64 (seed kShingleHashSeed) of every word n-gram of the normalized text,
  // in order, duplicates included (a text of fewer than n words is one shingle).
  std::vector<uint64_t> shingle_hashes(std::string_view text) const;
  // The Highway target the kAuto kernel dispatches to here, e.g. "AVX3".
  static std::string kernel_target();

 private:
  MinHashParams params_;
  MinHashPermutations perms_;
  std::shared_ptr<const PermutationLanes> lanes_;
};

// The LSH key of band `band` of a signature: XXH3-64 of its `rows` values
// (as stored, little-endian) seeded with the band number. Two documents are
// candidates when one band's keys are equal; the MinHashLSH tables and a
// distributed band shuffle (python/luminamoon/data/global_dedup.py) use this one key.
uint64_t minhash_band_key(std::span<const uint64_t> signature, int band, int rows);

// Fraction of equal positions of two signatures (estimates Jaccard similarity).
double estimated_jaccard(std::span<const uint64_t> a, std::span<const uint64_t> b);

struct MinHashLSHOptions {
  MinHashParams params;
  int bands = 8;
  int rows = 8;          // bands * rows <= num_perm
  double threshold = 0.8;  // estimated Jaccard a candidate must reach to count
  WalOptions index;        // the .lsh index log; path empty: in memory only
  int num_threads = 0;
};

// One decision of MinHashLSH::add.
struct NearDupMatch {
  int64_t matched_ref = kNoMatch;  // ref of the kept document it duplicates
  double similarity = 0.0;        // estimated Jaccard with it
};

// One caller at a time (not thread-safe; the Python wrapper holds a lock).
// Signatures inside add() run on num_threads threads.
class MinHashLSH {
 public:
  explicit MinHashLSH(MinHashLSHOptions options = {});
  ~MinHashLSH();
  MinHashLSH(MinHashLSH&&) noexcept;
  MinHashLSH& operator=(MinHashLSH&&) noexcept;

  // Streaming decision in batch order: a document is dropped (keep 0) when a
  // band key collides with a document kept before it (earlier batches or
  // earlier in this batch) whose estimated Jaccard is >= threshold; matched
  // then holds that document's ref (the most similar one; the earliest on a
  // tie), else kNoMatch. refs as in StreamDeduplicator::add. similarity (may
  // be empty) receives the estimated Jaccard with the match (0 when kept).
  void add(const TextBatchView& batch, std::span<const int64_t> refs, std::span<uint8_t> keep,
           std::span<int64_t> matched, std::span<double> similarity = {});
  // Same from precomputed signatures (row-major, n x num_perm).
  void add_signatures(std::span<const uint64_t> signatures, std::span<const int64_t> refs,
                      std::span<uint8_t> keep, std::span<int64_t> matched,
                      std::span<double> similarity = {});

  void flush();
  void commit();
  uint64_t committed_position() const;
  const WalReplayStats& replay_stats() const;

  const MinHasher& hasher() const;
  const MinHashLSHOptions& options() const;
  uint64_t kept() const;            // documents in the index
  uint64_t documents_seen() const;  // added, replayed ones excluded
  uint64_t memory_bytes() const;    // signatures + refs + band tables

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace luminamoon
