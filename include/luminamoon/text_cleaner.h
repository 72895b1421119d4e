// TextCleaner: the byte-level cleaning stage of the data engine (spec section 2).
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "luminamoon/text_batch.h"

namespace luminamoon {

// What to do with a document that is not valid UTF-8.
enum class InvalidUtf8Policy : uint8_t {
  kReplace,  // U+FFFD per maximal subpart of an ill-formed subsequence (Unicode 15, section 3.9)
  kDrop,     // the document is dropped, reason "invalid_utf8"
  kError,    // InvalidUtf8Error is thrown; nothing is returned
};

// "replace" | "drop" | "error"; anything else throws std::invalid_argument.
InvalidUtf8Policy parse_invalid_utf8_policy(std::string_view name);
const char* invalid_utf8_policy_name(InvalidUtf8Policy policy);

// Thrown under InvalidUtf8Policy::kError; names the document and byte.
class InvalidUtf8Error : public std::domain_error {
 public:
  InvalidUtf8Error(size_t document, size_t byte_offset);
  size_t document() const { return document_; }
  size_t byte_offset() const { return byte_offset_; }

 private:
  size_t document_;
  size_t byte_offset_;
};

// Outcome of one document; the stage's drop reasons are the names below.
enum class CleanStatus : uint8_t { kKept = 0, kEmpty = 1, kInvalidUtf8 = 2 };
const char* clean_status_reason(CleanStatus status);  // nullptr, "empty", "invalid_utf8"

struct CleanResult {
  TextBatch texts;                  // same length as the input; dropped documents are ""
  std::vector<CleanStatus> status;  // one per document
};

// True when bytes are well-formed UTF-8 (simdjson's SIMD validator).
bool is_valid_utf8(std::string_view bytes);
// Byte offset of the first ill-formed subsequence, or bytes.size() when valid.
size_t first_invalid_utf8(std::string_view bytes);
// Appends bytes to out with every maximal subpart of an ill-formed
// subsequence replaced by U+FFFD (EF BF BD).
void replace_invalid_utf8(std::string_view bytes, std::string& out);

// The cleaning steps, in the spec's order:
//  1. invalid UTF-8 per policy; 2. "\r\n" and lone "\r" -> "\n";
//  3. U+0000..U+001F except \t and \n, and U+007F, removed;
//  4. trailing spaces/tabs of every line removed; leading and trailing
//     whitespace (space, \t, \n) of the document removed;
//  5. runs of more than two "\n" collapse to exactly two.
// Idempotent: clean(clean(x)) == clean(x).
class TextCleaner {
 public:
  explicit TextCleaner(InvalidUtf8Policy policy = InvalidUtf8Policy::kReplace) : policy_(policy) {}

  InvalidUtf8Policy policy() const { return policy_; }

  // Cleans one document, replacing `out`. Under kError throws InvalidUtf8Error
  // with document index `doc_index`.
  CleanStatus clean_document(std::string_view in, std::string& out, size_t doc_index = 0) const;

  // Cleans a batch in parallel over documents (oneTBB). Linear in the input.
  CleanResult clean(const TextBatchView& batch) const;

 private:
  InvalidUtf8Policy policy_;
};

}  // namespace luminamoon
