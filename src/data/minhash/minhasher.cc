// MinHasher: normalized word n-gram shingles hashed with XXH3-64, then the
// signature of the scheme: oph binning (Note [one permutation hashing]) or the
// kperm permutation minima (vector kernel or the scalar reference).
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
// Inlined: the shingles are short (~30 bytes), where a call into the shared
// library and its generic entry cost as much as the hash itself.
#define XXH_INLINE_ALL
#include <xxhash.h>

#include <bit>
#include <string>

#include "data/common/parallel.h"
#include "data/dedup/shared_arena.h"
#include "data/dedup/text_normalize.h"
#include "data/minhash/minhash_kernel.h"
#include "data/minhash/oph_kernel.h"
#include "data/minhash/shingle_groups.h"
#include "luminamoon/data_error.h"
#include "luminamoon/data_threads.h"
#include "luminamoon/minhash_lsh.h"
#include "luminamoon/text_batch.h"

namespace luminamoon {
namespace {

// The index arrays of Note [shingles grouped by length] (shingle_groups.cc),
// kept by a thread from document to document.
struct ShingleOrder {
  std::vector<uint32_t, UninitializedAllocator<uint32_t>> order, scratch;
};

// Out: a std::vector of uint64_t; the signature path keeps one per thread
// with UninitializedAllocator, so that growing it between documents of
// different lengths does not zero-fill what the loops below overwrite.
// order: nullptr for the hashes in document order (shingle_hashes()), else
// the order of Note [shingles grouped by length] (signatures).
// flatten: XXH3 inlined into each of the loops below, as with one loop
// (called from three places, GCC otherwise keeps it out of line, about ten
// more instructions a shingle).
template <class Out>
[[gnu::flatten]] void shingle_hashes_into(std::string_view text, int ngram, NormalizedWords& normalized, Out& out,
                         ShingleOrder* order) {
  normalized.assign(text);
  const std::string_view norm = normalized.text();
  const size_t words = normalized.words();
  const size_t n = static_cast<size_t>(ngram);
  if (words < n) {  // the whole (possibly empty) normalized text is one shingle
    out.assign(1, XXH3_64bits_withSeed(norm.data(), norm.size(), kShingleHashSeed));
    return;
  }
  const size_t count = words - n + 1;
  out.resize(count);
  const uint32_t* starts = normalized.word_starts();
  uint64_t* hashes = out.data();
  if (order != nullptr) {
    order->order.resize(count + kShingleOrderSlack);
    order->scratch.resize(count + kShingleOrderSlack);
  }
  if (order == nullptr ||
      !order_shingles_for_hashing(starts, count, n, order->order.data(), order->scratch.data())) {
    for (size_t i = 0; i < count; ++i) {
      const uint32_t begin = starts[i], end = starts[i + n] - 1;
      hashes[i] = XXH3_64bits_withSeed(norm.data() + begin, end - begin, kShingleHashSeed);
    }
    return;
  }
  const uint32_t* index = order->order.data();
  for (size_t k = 0; k < count; ++k) {
    const uint32_t begin = starts[index[k]], end = starts[index[k] + n] - 1;
    hashes[k] = XXH3_64bits_withSeed(norm.data() + begin, end - begin, kShingleHashSeed);
  }
}

}  // namespace

const char* minhash_scheme_name(MinHashScheme scheme) { return scheme == MinHashScheme::kOph ? "oph" : "kperm"; }

MinHashScheme parse_minhash_scheme(std::string_view name) {
  if (name == "oph") return MinHashScheme::kOph;
  if (name == "kperm") return MinHashScheme::kKperm;
  throw DataError(DataErrorKind::kUsage, "MinHash: unknown scheme '" + std::string(name) + "'; known: oph, kperm");
}

MinHasher::MinHasher(MinHashParams params) : params_(params) {
  if (params_.num_perm < 1 || params_.num_perm > 4096) {
    throw DataError(DataErrorKind::kUsage, "MinHash: num_perm must be in [1, 4096], got " +
                                               std::to_string(params_.num_perm));
  }
  if (params_.scheme == MinHashScheme::kOph && (params_.num_perm & (params_.num_perm - 1)) != 0) {
    throw DataError(DataErrorKind::kUsage, "MinHash: the oph scheme needs num_perm a power of two, got " +
                                               std::to_string(params_.num_perm) + " (or use scheme kperm)");
  }
  if (params_.ngram < 1 || params_.ngram > 1024) {
    throw DataError(DataErrorKind::kUsage,
                    "MinHash: ngram must be in [1, 1024], got " + std::to_string(params_.ngram));
  }
  perms_ = MinHashPermutations::generate(params_.num_perm, params_.seed);
  lanes_ = std::make_shared<const PermutationLanes>(perms_);
}

std::vector<uint64_t> MinHasher::shingle_hashes(std::string_view text) const {
  NormalizedWords normalized;
  std::vector<uint64_t> out;
  shingle_hashes_into(text, params_.ngram, normalized, out, nullptr);
  return out;
}

void MinHasher::signature(std::string_view text, std::span<uint64_t> out,
                          MinHashKernel kernel) const {
  if (out.size() != static_cast<size_t>(params_.num_perm)) {
    throw DataError(DataErrorKind::kUsage, "MinHash: signature buffer must hold num_perm values");
  }
  thread_local NormalizedWords normalized;
  thread_local std::vector<uint64_t, UninitializedAllocator<uint64_t>> shingles;
  thread_local ShingleOrder order;
  thread_local std::vector<uint64_t> padded_out;
  shingle_hashes_into(text, params_.ngram, normalized, shingles, &order);
  if (params_.scheme == MinHashScheme::kOph) {
    const int log2k = std::countr_zero(static_cast<unsigned>(params_.num_perm));
    const uint64_t seed = params_.seed ^ kOphSeedXor, seed2 = params_.seed ^ kOphDensifySeedXor;
    (kernel == MinHashKernel::kScalar ? oph_signature_scalar : oph_signature_simd)(
        shingles.data(), shingles.size(), seed, seed2, log2k, out.data());
    return;
  }
  if (kernel == MinHashKernel::kScalar) {
    minhash_min_scalar(shingles.data(), shingles.size(), perms_, out.data());
    return;
  }
  for (uint64_t& x : shingles) x = reduce_mod_mersenne61(x);
  padded_out.resize(lanes_->padded);
  minhash_min_simd(shingles.data(), shingles.size(), *lanes_, padded_out.data());
  std::copy_n(padded_out.begin(), out.size(), out.begin());
}

void MinHasher::signatures(const TextBatchView& batch, std::span<uint64_t> out, int num_threads,
                           MinHashKernel kernel) const {
  const size_t width = static_cast<size_t>(params_.num_perm);
  if (out.size() != batch.size * width) {
    throw DataError(DataErrorKind::kUsage, "MinHash: output must hold n * num_perm values");
  }
  auto sign_range = [&](const tbb::blocked_range<size_t>& r) {
    for (size_t i = r.begin(); i < r.end(); ++i) {
      signature(batch[i], out.subspan(i * width, width), kernel);
    }
  };
  if (num_threads <= 0) num_threads = data_num_threads();
  if (num_threads == 1 || batch.size < 2) {
    sign_range(tbb::blocked_range<size_t>(0, batch.size));
    return;
  }
  shared_arena(num_threads).execute([&] {  // Note [a stage's loops run to completion]
    detail::run_to_completion([&] { tbb::parallel_for(tbb::blocked_range<size_t>(0, batch.size, 16), sign_range); });
  });
}

std::string MinHasher::kernel_target() { return minhash_simd_target(); }

double estimated_jaccard(std::span<const uint64_t> a, std::span<const uint64_t> b) {
  if (a.size() != b.size() || a.empty()) {
    throw DataError(DataErrorKind::kUsage, "estimated_jaccard: signatures of different lengths");
  }
  size_t equal = 0;
  for (size_t k = 0; k < a.size(); ++k) equal += a[k] == b[k];
  return static_cast<double>(equal) / static_cast<double>(a.size());
}

}  // namespace luminamoon
