// MinHashLSH: band keys of each signature looked up in per-band tables of the
// documents kept so far; candidates verified by estimated Jaccard.
#include "luminamoon/minhash_lsh.h"

#include <xxhash.h>

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>

#include "data/dedup/append_log.h"
#include "data/dedup/hash_key_set.h"
#include "data/minhash/band_runs.h"
#include "data/minhash/kept_signatures.h"
#include "luminamoon/data_error.h"

namespace luminamoon {
namespace {

static_assert(std::endian::native == std::endian::little,
              "band keys hash the signature's bytes as stored; a big-endian port must swap");

constexpr uint32_t kEndOfChain = UINT32_MAX;
constexpr size_t kMaxPermutations = 4096;  // MinHasher's limit

uint64_t scheme_code(MinHashScheme s) { return s == MinHashScheme::kKperm ? 0 : 1; }

// An index of the other scheme: named, rather than the log's generic
// "written with other options" (the header is read again only on that error).
void refuse_other_scheme(const std::string& path, MinHashScheme wanted) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return;
  uint8_t header[24];
  const bool read = std::fread(header, 1, sizeof header, f) == sizeof header;
  std::fclose(f);
  if (!read || std::memcmp(header, "LMMHLSH1", 8) != 0) return;  // not an index: the log says so
  const uint64_t code = load_le64(header + 16) >> 32;
  if (code != scheme_code(wanted)) {
    const char* found = code == 0 ? "kperm" : code == 1 ? "oph" : "unknown";
    throw DataError(DataErrorKind::kUsage, "[LSH index] " + path + " holds MinHash signatures of scheme " + found +
                                               "; this run uses " + minhash_scheme_name(wanted) +
                                               ". Signatures of one scheme cannot be compared with the other's: use "
                                               "scheme " + found + " or a new index path");
  }
}

// Where the signatures' temporary file goes: beside the index, or TMPDIR.
std::string index_dir(const std::string& index_path) {
  if (index_path.empty()) return {};
  const size_t slash = index_path.rfind('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : index_path.substr(0, slash);
}

// .lsh record: the kept document's ref, then its signature.
AppendLogFormat index_format(const MinHashLSHOptions& o) {
  AppendLogFormat f;
  f.magic = {'L', 'M', 'M', 'H', 'L', 'S', 'H', '1'};
  f.record_size = 8 + 8 * static_cast<uint32_t>(o.params.num_perm);
  // The scheme rides in the high half of the num_perm field: 0 is kperm, so
  // the indexes written before oph existed read as the kperm ones they are.
  f.params = {static_cast<uint64_t>(o.params.num_perm) | scheme_code(o.params.scheme) << 32,
              static_cast<uint64_t>(o.params.ngram), o.params.seed, static_cast<uint64_t>(o.bands),
              static_cast<uint64_t>(o.rows)};
  f.what = "LSH index";
  return f;
}

void validate(const MinHashLSHOptions& o) {
  if (o.bands < 1 || o.rows < 1 ||
      static_cast<int64_t>(o.bands) * o.rows > o.params.num_perm) {
    throw DataError(DataErrorKind::kUsage,
                    "MinHashLSH: need bands >= 1, rows >= 1 and bands * rows <= num_perm (got " +
                        std::to_string(o.bands) + " x " + std::to_string(o.rows) + " for " +
                        std::to_string(o.params.num_perm) + " permutations)");
  }
  if (!(o.threshold >= 0.0 && o.threshold <= 1.0)) {
    throw DataError(DataErrorKind::kUsage, "MinHashLSH: threshold must be in [0, 1]");
  }
}

}  // namespace

uint64_t minhash_band_key(std::span<const uint64_t> signature, int band, int rows) {
  const size_t r = static_cast<size_t>(rows);
  return XXH3_64bits_withSeed(signature.data() + static_cast<size_t>(band) * r, r * sizeof(uint64_t),
                              static_cast<uint64_t>(band));
}

struct MinHashLSH::Impl {
  MinHashLSHOptions options;
  MinHasher hasher;
  size_t width;  // num_perm
  // The tail's band tables (Note [band runs on disk]): band key -> first kept
  // document (id) of the tail with it; the older documents' keys are in runs.
  std::vector<BasicHashKeySet<uint32_t>> bands;
  // next_capacity * bands: the chain of tail documents sharing a key, by id -
  // tail_begin. Grown with realloc (no copy, no second array at the peak).
  ReallocArray<uint32_t> next;
  size_t kept = 0, next_capacity = 0;
  size_t tail_begin = 0;            // the first id of the tail
  size_t tail_docs;                 // the tail's size when it becomes a run
  BandRuns runs;
  mutable std::vector<uint32_t> run_ids;  // scratch of best_match
  // The low 32 bits of each kept signature value, all that verification
  // compares (Note [verification on 32 bits]); on disk (Note [signatures on disk]).
  KeptSignatures signatures;
  std::optional<AppendLog> log;
  WalReplayStats no_log_stats;
  uint64_t seen = 0;

  explicit Impl(MinHashLSHOptions o)
      : options((validate(o), std::move(o))),
        hasher(options.params),
        width(static_cast<size_t>(options.params.num_perm)),
        tail_docs(lsh_tail_documents()),
        runs(options.bands, index_dir(options.index.path)),
        signatures(width, index_dir(options.index.path)) {
    reset_tail_tables();
    if (!options.index.path.empty()) {
      refuse_other_scheme(options.index.path, options.params.scheme);
      log.emplace(options.index, index_format(options), [this](const uint8_t* r, size_t count) {
        std::vector<uint64_t> sig(width);
        for (size_t i = 0; i < count; ++i, r += 8 + 8 * width) {
          for (size_t k = 0; k < width; ++k) sig[k] = load_le64(r + 8 + 8 * k);
          insert(sig.data(), static_cast<int64_t>(load_le64(r)));
        }
      });
    }
  }

  uint64_t band_key(const uint64_t* sig, int band) const {
    return minhash_band_key({sig, width}, band, options.rows);
  }

  void reset_tail_tables() {
    bands.clear();
    bands.reserve(options.bands);
    for (int b = 0; b < options.bands; ++b) bands.emplace_back(/*with_refs=*/true);
  }

  size_t chain_slot(size_t id, int band) const {
    return (id - tail_begin) * static_cast<size_t>(options.bands) + static_cast<size_t>(band);
  }

  void insert(const uint64_t* sig, int64_t ref) {
    const size_t id = kept;
    if (id >= kEndOfChain) {
      throw DataError(DataErrorKind::kUsage, "MinHashLSH: more than 2^32-1 kept documents");
    }
    if (id - tail_begin == next_capacity) {
      next_capacity = std::max<size_t>(1024, next_capacity + next_capacity / 2);
      next.resize_zeroed(next_capacity * static_cast<size_t>(options.bands));
    }
    signatures.append(sig, ref);
    ++kept;
    for (int b = 0; b < options.bands; ++b) {
      int64_t head;
      const uint64_t key = band_key(sig, b);
      const size_t slot = chain_slot(id, b);
      next[slot] = kEndOfChain;
      if (!bands[b].insert(key, static_cast<int64_t>(id), &head)) {
        // Link after the head: the table never needs updating.
        const size_t head_slot = chain_slot(static_cast<size_t>(head), b);
        next[slot] = next[head_slot];
        next[head_slot] = static_cast<uint32_t>(id);
      }
    }
    if (kept - tail_begin >= tail_docs) flush_tail();
  }

  // The tail's keys become one run on disk (Note [band runs on disk]).
  void flush_tail() {
    runs.add_run([&](int band, std::vector<RunEntry>& entries) {
      entries.reserve(kept - tail_begin);
      bands[static_cast<size_t>(band)].for_each([&](uint64_t key, int64_t head) {  // each key's chain: every tail document with it
        for (uint32_t c = static_cast<uint32_t>(head); c != kEndOfChain; c = next[chain_slot(c, band)]) {
          entries.push_back({key, c});
        }
      });
    });
    reset_tail_tables();
    tail_begin = kept;
    runs.merge_full_tiers();
  }

  // The most similar kept document at or above the threshold (earliest on a tie).
  // Note [verification on 32 bits]
  // Candidates are verified on the low 32 bits of each signature value: two
  // different minima (uniform below 2^61) agree there with probability 2^-32,
  // so over 64 positions a comparison gains a spurious match with probability
  // ~1.5e-8, far below the estimate's own standard error (~0.05), and the
  // index keeps 4 instead of 8 bytes per value. Band keys are computed from the
  // full values at insertion, and the .lsh log stores the full values.
  NearDupMatch best_match(const uint64_t* sig, uint32_t* best_id) const {
    NearDupMatch best;
    uint32_t low[kMaxPermutations], other[kMaxPermutations];
    for (size_t k = 0; k < width; ++k) low[k] = static_cast<uint32_t>(sig[k]);
    uint32_t best_doc = kEndOfChain;
    int64_t best_ref = 0;
    double best_similarity = -1.0;
    auto verify = [&](uint32_t c) {
      const int64_t ref = signatures.read(c, other);
      size_t equal = 0;
      for (size_t k = 0; k < width; ++k) equal += low[k] == other[k];
      const double sim = static_cast<double>(equal) / static_cast<double>(width);
      if (sim >= options.threshold && (sim > best_similarity || (sim == best_similarity && c < best_doc))) {
        best_similarity = sim;
        best_doc = c;
        best_ref = ref;
      }
    };
    for (int b = 0; b < options.bands; ++b) {
      const uint64_t key = band_key(sig, b);
      run_ids.clear();
      runs.find(b, key, run_ids);
      for (uint32_t c : run_ids) verify(c);
      int64_t head;
      if (!bands[b].find(key, &head)) continue;
      for (uint32_t c = static_cast<uint32_t>(head); c != kEndOfChain; c = next[chain_slot(c, b)]) verify(c);
    }
    if (best_doc != kEndOfChain) {
      best.matched_ref = best_ref;
      best.similarity = best_similarity;
    }
    *best_id = best_doc;
    return best;
  }
};

MinHashLSH::MinHashLSH(MinHashLSHOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}
MinHashLSH::~MinHashLSH() = default;
MinHashLSH::MinHashLSH(MinHashLSH&&) noexcept = default;
MinHashLSH& MinHashLSH::operator=(MinHashLSH&&) noexcept = default;

void MinHashLSH::add(const TextBatchView& batch, std::span<const int64_t> refs,
                     std::span<uint8_t> keep, std::span<int64_t> matched,
                     std::span<double> similarity) {
  std::vector<uint64_t> sigs(batch.size * impl_->width);
  impl_->hasher.signatures(batch, sigs, impl_->options.num_threads);
  add_signatures(sigs, refs, keep, matched, similarity);
}

void MinHashLSH::add_signatures(std::span<const uint64_t> signatures,
                                std::span<const int64_t> refs, std::span<uint8_t> keep,
                                std::span<int64_t> matched, std::span<double> similarity) {
  Impl& s = *impl_;
  if (signatures.size() % s.width != 0) {
    throw DataError(DataErrorKind::kUsage, "MinHashLSH: signatures must be n x num_perm");
  }
  const size_t n = signatures.size() / s.width;
  if (keep.size() != n || (!refs.empty() && refs.size() != n) ||
      (!matched.empty() && matched.size() != n) ||
      (!similarity.empty() && similarity.size() != n)) {
    throw DataError(DataErrorKind::kUsage,
                    "MinHashLSH.add: keep/refs/matched must have one entry per document");
  }
  for (int64_t r : refs) {
    if (r < 0) throw DataError(DataErrorKind::kUsage, "MinHashLSH.add: refs must be >= 0");
  }
  std::vector<uint8_t> record(8 + 8 * s.width);
  for (size_t i = 0; i < n; ++i) {
    const uint64_t* sig = signatures.data() + i * s.width;
    const int64_t ref = refs.empty() ? static_cast<int64_t>(s.seen + i) : refs[i];
    uint32_t best_id;
    NearDupMatch m = s.best_match(sig, &best_id);
    const bool fresh = best_id == kEndOfChain;
    keep[i] = fresh ? 1 : 0;
    if (!matched.empty()) matched[i] = m.matched_ref;
    if (!similarity.empty()) similarity[i] = m.similarity;
    if (fresh) {
      s.insert(sig, ref);
      if (s.log) {
        store_le64(record.data(), static_cast<uint64_t>(ref));
        for (size_t k = 0; k < s.width; ++k) store_le64(record.data() + 8 + 8 * k, sig[k]);
        s.log->append(record.data(), 1);
      }
    }
  }
  s.seen += n;
}

void MinHashLSH::flush() {
  if (impl_->log) impl_->log->flush();
}
void MinHashLSH::commit() {
  if (impl_->log) impl_->log->commit();
}
uint64_t MinHashLSH::committed_position() const {
  return impl_->log ? impl_->log->committed_position() : 0;
}
const WalReplayStats& MinHashLSH::replay_stats() const {
  return impl_->log ? impl_->log->replay_stats() : impl_->no_log_stats;
}
const MinHasher& MinHashLSH::hasher() const { return impl_->hasher; }
const MinHashLSHOptions& MinHashLSH::options() const { return impl_->options; }
uint64_t MinHashLSH::kept() const { return impl_->kept; }
uint64_t MinHashLSH::documents_seen() const { return impl_->seen; }
uint64_t MinHashLSH::memory_bytes() const {
  const auto& s = *impl_;
  uint64_t bytes = s.signatures.memory_bytes() + s.next_capacity * 4 * s.options.bands +
                   s.runs.memory_bytes();
  for (const auto& b : impl_->bands) bytes += b.memory_bytes();
  return bytes;
}

}  // namespace luminamoon
