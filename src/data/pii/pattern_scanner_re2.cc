// PatternScanner on RE2, for platforms without Vectorscan: one pass per
// pattern (RE2 has no multi-pattern scan that reports positions), each match
// leftmost-first; a later start is tried after each match so that a candidate
// inside a longer one is still seen.
#include <re2/re2.h>

#include <stdexcept>
#include <string>

#include "data/pii/pattern_scanner.h"

namespace luminamoon::pii {
namespace {

class Re2Scanner final : public PatternScanner {
 public:
  explicit Re2Scanner(const std::vector<ScanPattern>& patterns) {
    RE2::Options opt;
    opt.set_log_errors(false);
    opt.set_max_mem(int64_t{64} << 20);
    for (const ScanPattern& p : patterns) {
      auto re = std::make_unique<RE2>(p.regex, opt);
      if (!re->ok()) throw std::runtime_error("PIIMasker: RE2 compile failed: " + re->error());
      res_.push_back(std::move(re));
    }
  }

  void scan(std::string_view text, OnCandidate on_candidate, void* ctx) const override {
    const re2::StringPiece whole(text.data(), text.size());
    for (size_t id = 0; id < res_.size(); ++id) {
      size_t pos = 0;
      re2::StringPiece m;
      while (pos < text.size() && res_[id]->Match(whole, pos, text.size(), RE2::UNANCHORED, &m, 1)) {
        const size_t from = static_cast<size_t>(m.data() - text.data());
        const size_t to = from + m.size();
        on_candidate(static_cast<unsigned>(id), from, to, ctx);
        // Bounded patterns: retry one byte later (linear: matches are short).
        // A match of 64+ bytes (the unbounded e-mail/Slack patterns): resume
        // after it, so that one long run is not rescanned from every start.
        pos = to - from >= 64 ? to : from + 1;
      }
    }
  }
  const char* engine() const override { return "re2"; }

 private:
  std::vector<std::unique_ptr<RE2>> res_;
};

}  // namespace

std::unique_ptr<PatternScanner> PatternScanner::create(const std::vector<ScanPattern>& patterns) {
  return std::make_unique<Re2Scanner>(patterns);
}

}  // namespace luminamoon::pii
