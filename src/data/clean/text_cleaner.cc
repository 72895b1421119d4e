// TextCleaner: the UTF-8 policy, then the kernel, per document and per batch.
#include "luminamoon/text_cleaner.h"

#include <exception>
#include <string>

#include "data/clean/clean_kernel.h"
#include "data/common/parallel.h"

namespace luminamoon {

InvalidUtf8Policy parse_invalid_utf8_policy(std::string_view name) {
  if (name == "replace") return InvalidUtf8Policy::kReplace;
  if (name == "drop") return InvalidUtf8Policy::kDrop;
  if (name == "error") return InvalidUtf8Policy::kError;
  throw std::invalid_argument("invalid_utf8 policy must be 'replace', 'drop' or 'error', got '" +
                              std::string(name) + "'");
}

const char* invalid_utf8_policy_name(InvalidUtf8Policy policy) {
  switch (policy) {
    case InvalidUtf8Policy::kReplace: return "replace";
    case InvalidUtf8Policy::kDrop: return "drop";
    case InvalidUtf8Policy::kError: return "error";
  }
  return "?";
}

InvalidUtf8Error::InvalidUtf8Error(size_t document, size_t byte_offset)
    : std::domain_error("invalid UTF-8 in document " + std::to_string(document) + " at byte " +
                        std::to_string(byte_offset) + " (invalid_utf8='error')"),
      document_(document),
      byte_offset_(byte_offset) {}

const char* clean_status_reason(CleanStatus status) {
  switch (status) {
    case CleanStatus::kKept: return nullptr;
    case CleanStatus::kEmpty: return "empty";
    case CleanStatus::kInvalidUtf8: return "invalid_utf8";
  }
  return nullptr;
}

namespace {

// Appends the cleaned document to out; on drop appends nothing.
CleanStatus clean_append(InvalidUtf8Policy policy, std::string_view in, std::string& out, size_t doc,
                         std::string& scratch) {
  const auto* s = reinterpret_cast<const uint8_t*>(in.data());
  size_t n = in.size();
  if (!is_valid_utf8(in)) {
    if (policy == InvalidUtf8Policy::kDrop) return CleanStatus::kInvalidUtf8;
    if (policy == InvalidUtf8Policy::kError) throw InvalidUtf8Error(doc, first_invalid_utf8(in));
    scratch.clear();
    replace_invalid_utf8(in, scratch);
    s = reinterpret_cast<const uint8_t*>(scratch.data());
    n = scratch.size();
  }
  return detail::clean_valid_utf8(s, n, out) ? CleanStatus::kKept : CleanStatus::kEmpty;
}

}  // namespace

CleanStatus TextCleaner::clean_document(std::string_view in, std::string& out, size_t doc_index) const {
  out.clear();
  std::string scratch;
  return clean_append(policy_, in, out, doc_index, scratch);
}

CleanResult TextCleaner::clean(const TextBatchView& batch) const {
  CleanResult result;
  result.status.assign(batch.size, CleanStatus::kKept);
  // Under kError the lowest failing document is reported, whatever the
  // scheduling: every chunk still runs, and the first error is kept by index.
  detail::LowestIndex first_bad;
  const InvalidUtf8Policy policy = policy_;
  result.texts = detail::transform_documents(batch, [&](size_t i, std::string_view in, std::string& out) {
    thread_local std::string scratch;
    try {
      result.status[i] = clean_append(policy, in, out, i, scratch);
    } catch (const InvalidUtf8Error&) {
      first_bad.offer(i);
    }
  });
  if (first_bad.any()) {
    const size_t doc = first_bad.get();
    throw InvalidUtf8Error(doc, first_invalid_utf8(batch[doc]));
  }
  return result;
}

}  // namespace luminamoon
