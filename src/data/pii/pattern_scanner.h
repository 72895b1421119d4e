// PatternScanner: the multi-pattern regex engine behind PIIMasker (internal):
// Vectorscan, one scan for all patterns; RE2 where Vectorscan is missing.
#pragma once

#include <cstddef>
#include <memory>
#include <string_view>
#include <vector>

namespace luminamoon::pii {

struct ScanPattern {
  const char* regex;
  bool needs_start;  // the candidate's start offset is needed (else only its end)
  // A byte that every match contains ('@' of an e-mail address), or 0: a
  // scanner may skip the pattern on a text without that byte.
  char required_byte = 0;
};

// Called for each candidate span [from, to) of pattern `id` (an index into
// the patterns given to create()); `from` is only meaningful when the
// pattern needs_start.
using OnCandidate = void (*)(unsigned id, size_t from, size_t to, void* ctx);

class PatternScanner {
 public:
  // Compiles the patterns; throws std::runtime_error with the engine's message.
  static std::unique_ptr<PatternScanner> create(const std::vector<ScanPattern>& patterns);
  virtual ~PatternScanner() = default;
  virtual void scan(std::string_view text, OnCandidate on_candidate, void* ctx) const = 0;
  virtual const char* engine() const = 0;
};

}  // namespace luminamoon::pii
