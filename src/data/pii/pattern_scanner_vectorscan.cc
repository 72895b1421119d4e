// PatternScanner on Vectorscan: one block-mode scan of all patterns, leftmost
// starts where a pattern needs them, a scratch space per thread.
#include <hs.h>
#include <tbb/enumerable_thread_specific.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>

#include "data/pii/pattern_scanner.h"
#include "data/pii/vectorscan_database_cache.h"

namespace luminamoon::pii {
namespace {

struct ScratchDeleter {
  void operator()(hs_scratch_t* s) const { hs_free_scratch(s); }
};
using ScratchPtr = std::unique_ptr<hs_scratch_t, ScratchDeleter>;

struct Relay {
  OnCandidate on_candidate;
  void* ctx;
};

int relay(unsigned int id, unsigned long long from, unsigned long long to, unsigned int, void* r) {
  auto* rel = static_cast<Relay*>(r);
  rel->on_candidate(id, static_cast<size_t>(from), static_cast<size_t>(to), rel->ctx);
  return 0;  // continue scanning
}

// Note [pattern subsets]: a pattern with a required byte (the '@' of an
// e-mail address, the '+' of an E.164 number, the ':' of an IPv6 address)
// cannot match a text without that byte, and such patterns are a large
// share of the scan time even where they never match (the scan of this
// pattern set takes about twice as long with the e-mail and E.164 patterns
// as without them). So there is one database per subset of the required
// bytes, holding the patterns whose byte is in the subset plus those without
// one; each text is scanned with the database of the required bytes it
// holds. The matches are those of the full set (the left-out patterns have
// none), reported with the same pattern ids. The databases are compiled on
// first use, or read from the cache of earlier runs (Note [database cache]).
class VectorscanScanner final : public PatternScanner {
 public:
  explicit VectorscanScanner(const std::vector<ScanPattern>& patterns) : patterns_(patterns) {
    for (const ScanPattern& p : patterns_)
      if (p.required_byte && required_.find(p.required_byte) == std::string::npos) required_ += p.required_byte;
    if (required_.size() > kMaxRequired) throw std::logic_error("PIIMasker: too many required bytes");
    // The full set first: it reports compile errors at construction.
    database(static_cast<unsigned>((1u << required_.size()) - 1));
  }
  ~VectorscanScanner() override {
    for (auto& db : dbs_)
      if (hs_database_t* d = db.load()) hs_free_database(d);
  }

  void scan(std::string_view text, OnCandidate on_candidate, void* ctx) const override {
    unsigned subset = 0;
    for (size_t b = 0; b < required_.size(); ++b)
      if (std::memchr(text.data(), required_[b], text.size())) subset |= 1u << b;
    hs_database_t* db = database(subset);
    if (!db) return;  // every pattern needs a byte this text lacks
    Relay rel{on_candidate, ctx};
    const hs_error_t rc =
        hs_scan(db, text.data(), static_cast<unsigned>(text.size()), 0, thread_scratch(subset, db), relay, &rel);
    if (rc != HS_SUCCESS) throw std::runtime_error("PIIMasker: hs_scan failed with code " + std::to_string(rc));
  }
  const char* engine() const override { return "vectorscan"; }

 private:
  static constexpr size_t kMaxRequired = 4;

  // The database of a subset of the required bytes (null when it holds no
  // pattern), compiled on first use.
  hs_database_t* database(unsigned subset) const {
    if (hs_database_t* db = dbs_[subset].load(std::memory_order_acquire)) return db;
    if (empty_[subset].load(std::memory_order_acquire)) return nullptr;
    std::lock_guard<std::mutex> lock(compile_mutex_);
    if (hs_database_t* db = dbs_[subset].load(std::memory_order_relaxed)) return db;
    if (empty_[subset].load(std::memory_order_relaxed)) return nullptr;
    std::vector<const char*> exprs;
    std::vector<unsigned> flags, ids;
    for (size_t i = 0; i < patterns_.size(); ++i) {
      const char r = patterns_[i].required_byte;
      if (r && !(subset >> required_.find(r) & 1u)) continue;
      exprs.push_back(patterns_[i].regex);
      // Leftmost-start tracking is costly (20x the scan for the e-mail
      // pattern), so only the patterns that need a start ask for it.
      flags.push_back(patterns_[i].needs_start ? HS_FLAG_SOM_LEFTMOST : 0u);
      ids.push_back(static_cast<unsigned>(i));
    }
    if (exprs.empty()) {
      empty_[subset].store(true, std::memory_order_release);
      return nullptr;
    }
    const uint64_t key = database_key(exprs, flags, ids);
    if (hs_database_t* cached = load_cached_database(key)) {
      dbs_[subset].store(cached, std::memory_order_release);
      return cached;
    }
    hs_database_t* db = nullptr;
    hs_compile_error_t* err = nullptr;
    if (hs_compile_multi(exprs.data(), flags.data(), ids.data(), static_cast<unsigned>(exprs.size()), HS_MODE_BLOCK,
                         nullptr, &db, &err) != HS_SUCCESS) {
      std::string msg = "PIIMasker: Vectorscan compile failed";
      if (err) {
        msg += std::string(" (pattern ") + std::to_string(ids[static_cast<size_t>(err->expression)]) + "): " + err->message;
        hs_free_compile_error(err);
      }
      throw std::runtime_error(msg);
    }
    store_cached_database(key, db);
    dbs_[subset].store(db, std::memory_order_release);
    return db;
  }

  // This thread's scratch space, grown for `db` the first time this thread
  // scans with it (a scratch space serves every database it was allocated
  // for).
  hs_scratch_t* thread_scratch(unsigned subset, hs_database_t* db) const {
    ThreadScratch& t = scratch_.local();
    if (!(t.ready >> subset & 1u)) {
      hs_scratch_t* s = t.scratch.release();
      if (hs_alloc_scratch(db, &s) != HS_SUCCESS) {
        t.scratch.reset(s);
        throw std::runtime_error("PIIMasker: hs_alloc_scratch failed");
      }
      t.scratch.reset(s);
      t.ready |= 1u << subset;
    }
    return t.scratch.get();
  }

  struct ThreadScratch {
    ScratchPtr scratch;
    unsigned ready = 0;  // bit per subset: scratch allocated for its database
  };

  std::vector<ScanPattern> patterns_;
  std::string required_;  // the distinct required bytes; bit b of a subset is required_[b]
  mutable std::mutex compile_mutex_;
  mutable std::atomic<hs_database_t*> dbs_[1u << kMaxRequired] = {};
  mutable std::atomic<bool> empty_[1u << kMaxRequired] = {};
  mutable tbb::enumerable_thread_specific<ThreadScratch> scratch_;
};

}  // namespace

std::unique_ptr<PatternScanner> PatternScanner::create(const std::vector<ScanPattern>& patterns) {
  return std::make_unique<VectorscanScanner>(patterns);
}

}  // namespace luminamoon::pii
