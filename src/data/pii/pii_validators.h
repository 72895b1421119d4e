// The PII validators of the spec's table and their context checks (internal).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace luminamoon::pii {

// A validator's decision. kClaim: not PII, but an identifier, version or
// mistyped number whose span no other rule may mask in part (no cross-type
// masks: the digit groups of an invalid IBAN are no card, the parts of a
// version string no phone).
enum class Verdict : uint8_t { kReject, kAccept, kClaim };

// Each takes the whole document and a candidate [b, e); some adjust the
// span (trimming to the valid part) and return false to reject it.
bool validate_email(std::string_view doc, size_t& b, size_t& e);
Verdict validate_ipv4(std::string_view doc, size_t b, size_t e, bool keep_private);
bool validate_ipv6(std::string_view doc, size_t b, size_t e, bool keep_private);
bool validate_phone(std::string_view doc, size_t b, size_t e, bool nanp);
bool validate_card(std::string_view doc, size_t& b, size_t e);  // may move b to a later group
bool validate_ssn(std::string_view doc, size_t b, size_t e);
Verdict validate_iban(std::string_view doc, size_t b, size_t e);
bool validate_token(std::string_view doc, size_t b, size_t e);  // word-boundary check for secrets

bool is_isbn(std::string_view digits_and_hyphens);
bool in_isbn_or_doi_context(std::string_view doc, size_t b, size_t e);

}  // namespace luminamoon::pii
