// PIIMasker: one Vectorscan multi-pattern scan (RE2, one pass per pattern,
// where Vectorscan is missing), then per-type validators, then typed
// placeholders (spec section 6).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "luminamoon/text_batch.h"

namespace luminamoon {

enum class PiiType : uint8_t {
  kEmail,        // <EMAIL>        RFC 5322 practical subset; not inside a URL (except mailto:)
  kIpAddress,    // <IP_ADDRESS>   IPv4 (octets <= 255, no leading zeros) and IPv6 (inet_pton)
  kPhone,        // <PHONE>        E.164 (+ and 7..15 digits) and NANP; not in ISBN/DOI context
  kCreditCard,   // <CREDIT_CARD>  13..19 digits, one separator kind, Luhn
  kSsn,          // <SSN>          AAA-GG-SSSS, area not 000/666/9xx, group not 00, serial not 0000
  kIban,         // <IBAN>         ISO 13616: country length, mod-97 == 1
  kSecret,       // <SECRET>       AWS key ids, GitHub/GitLab/Slack tokens, PEM private key blocks
  kCount
};
inline constexpr size_t kPiiTypeCount = static_cast<size_t>(PiiType::kCount);
const char* pii_type_name(PiiType type);         // "email", "ip_address", ...
const char* pii_placeholder(PiiType type);       // "<EMAIL>", ...
// Parses a type name; throws std::invalid_argument with the known names.
PiiType parse_pii_type(std::string_view name);

struct PiiOptions {
  std::array<bool, kPiiTypeCount> enabled{true, true, true, true, true, true, true};
  // Keep private, loopback, link-local, documentation and other reserved IP
  // ranges unmasked (they identify no one).
  bool keep_private_ip = false;
};

struct PiiMatch {
  size_t begin;
  size_t end;
  PiiType type;
};

struct PiiResult {
  TextBatch texts;
  std::array<int64_t, kPiiTypeCount> counts{};  // masked spans per type, whole batch
};

// Validators of the spec's table, usable on their own (the candidate span
// plus the document for context checks).
bool luhn_valid(std::string_view digits_with_separators);
bool iban_valid(std::string_view candidate);
bool ssn_valid(std::string_view candidate);
bool ipv4_valid(std::string_view candidate);

class PiiMasker {
 public:
  // Compiles the patterns once; throws std::runtime_error when compilation fails.
  explicit PiiMasker(PiiOptions options = {});
  ~PiiMasker();
  PiiMasker(const PiiMasker&) = delete;
  PiiMasker& operator=(const PiiMasker&) = delete;

  const PiiOptions& options() const { return options_; }
  // "vectorscan" or "re2" (fixed at build time), "none" when no type is enabled.
  const char* engine() const;

  // The validated, non-overlapping matches of one document, in order.
  std::vector<PiiMatch> find(std::string_view text) const;
  // Masks one document into out (replaced), adding to counts.
  void mask_document(std::string_view text, std::string& out,
                     std::array<int64_t, kPiiTypeCount>& counts) const;
  // Parallel over documents (oneTBB). Input must be valid UTF-8 (throws
  // std::invalid_argument naming the document otherwise).
  PiiResult mask(const TextBatchView& batch) const;

 private:
  struct Impl;
  PiiOptions options_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace luminamoon
