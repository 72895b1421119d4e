// PatternScanner on Vectorscan: one block-mode scan of all patterns, leftmost
// starts where a pattern needs them, a scratch space per thread.
#include <hs.h>
#include <tbb/enumerable_thread_specific.h>

#include <stdexcept>
#include <string>

#include "data/pii/pattern_scanner.h"

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

class VectorscanScanner final : public PatternScanner {
 public:
  explicit VectorscanScanner(const std::vector<ScanPattern>& patterns) {
    std::vector<const char*> exprs;
    std::vector<unsigned> flags, ids;
    for (size_t i = 0; i < patterns.size(); ++i) {
      exprs.push_back(patterns[i].regex);
      // Leftmost-start tracking is costly (20x the scan for the e-mail
      // pattern), so only the patterns that need a start ask for it.
      flags.push_back(patterns[i].needs_start ? HS_FLAG_SOM_LEFTMOST : 0u);
      ids.push_back(static_cast<unsigned>(i));
    }
    hs_compile_error_t* err = nullptr;
    if (hs_compile_multi(exprs.data(), flags.data(), ids.data(), static_cast<unsigned>(exprs.size()), HS_MODE_BLOCK,
                         nullptr, &db_, &err) != HS_SUCCESS) {
      std::string msg = "PIIMasker: Vectorscan compile failed";
      if (err) {
        msg += std::string(" (pattern ") + std::to_string(err->expression) + "): " + err->message;
        hs_free_compile_error(err);
      }
      throw std::runtime_error(msg);
    }
    if (hs_alloc_scratch(db_, &prototype_) != HS_SUCCESS) {
      hs_free_database(db_);
      throw std::runtime_error("PIIMasker: hs_alloc_scratch failed");
    }
  }
  ~VectorscanScanner() override {
    hs_free_scratch(prototype_);
    hs_free_database(db_);
  }

  void scan(std::string_view text, OnCandidate on_candidate, void* ctx) const override {
    Relay rel{on_candidate, ctx};
    const hs_error_t rc =
        hs_scan(db_, text.data(), static_cast<unsigned>(text.size()), 0, thread_scratch(), relay, &rel);
    if (rc != HS_SUCCESS) throw std::runtime_error("PIIMasker: hs_scan failed with code " + std::to_string(rc));
  }
  const char* engine() const override { return "vectorscan"; }

 private:
  hs_scratch_t* thread_scratch() const {
    ScratchPtr& s = scratch_.local();
    if (!s) {
      hs_scratch_t* clone = nullptr;
      if (hs_clone_scratch(prototype_, &clone) != HS_SUCCESS) throw std::runtime_error("PIIMasker: hs_clone_scratch failed");
      s.reset(clone);
    }
    return s.get();
  }

  hs_database_t* db_ = nullptr;
  hs_scratch_t* prototype_ = nullptr;
  mutable tbb::enumerable_thread_specific<ScratchPtr> scratch_;
};

}  // namespace

std::unique_ptr<PatternScanner> PatternScanner::create(const std::vector<ScanPattern>& patterns) {
  return std::make_unique<VectorscanScanner>(patterns);
}

}  // namespace luminamoon::pii
