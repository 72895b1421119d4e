// PIIMasker: the candidate patterns (one PatternScanner scan per document),
// validation of each reported span, and non-overlapping masking.
#include "luminamoon/pii_masker.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <stdexcept>
#include <string>

#include "data/common/parallel.h"
#include "data/pii/pattern_scanner.h"
#include "data/pii/pii_validators.h"
#include "luminamoon/text_cleaner.h"

namespace luminamoon {

const char* pii_type_name(PiiType type) {
  static const char* const kNames[] = {"email", "ip_address", "phone", "credit_card", "ssn", "iban", "secret"};
  return kNames[static_cast<size_t>(type)];
}

const char* pii_placeholder(PiiType type) {
  static const char* const kPlaceholders[] = {"<EMAIL>", "<IP_ADDRESS>", "<PHONE>", "<CREDIT_CARD>",
                                              "<SSN>",   "<IBAN>",       "<SECRET>"};
  return kPlaceholders[static_cast<size_t>(type)];
}

PiiType parse_pii_type(std::string_view name) {
  std::string known;
  for (size_t i = 0; i < kPiiTypeCount; ++i) {
    if (name == pii_type_name(static_cast<PiiType>(i))) return static_cast<PiiType>(i);
    known += (i ? ", " : "") + std::string(pii_type_name(static_cast<PiiType>(i)));
  }
  throw std::invalid_argument("unknown PII type '" + std::string(name) + "'; known: " + known);
}

namespace {

// One Vectorscan pattern: a loose candidate; the validator decides.
enum class Rule : uint8_t {
  kEmail, kIpv4, kIpv6, kIpv6Mixed, kPhoneE164, kPhoneNanp, kCard, kSsn, kIban,
  kAws, kGithub, kGithubPat, kGitlab, kSlack, kPemBegin, kPemEnd,
};

struct Pattern {
  Rule rule;
  PiiType type;
  const char* regex;
};

// Note [pii patterns]: every pattern matches ASCII only, so a match never
// starts or ends inside a multi-byte UTF-8 sequence, and replacing it keeps
// the document valid UTF-8. Patterns are bounded so that leftmost-start
// matching stays cheap (Vectorscan refuses large bounded repeats with SOM, so
// the e-mail and Slack patterns are unbounded and the validators bound them
// in O(1) per reported end); word boundaries and number-run context are checked by
// the validators (Vectorscan reports the leftmost start for each end).
const Pattern kPatterns[] = {
    {Rule::kEmail, PiiType::kEmail,
     R"([A-Za-z0-9!#$%&'*+=?^_`{|}~.\-]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*\.(?:[A-Za-z]{2,}|xn--[A-Za-z0-9\-]{2,}))"},
    {Rule::kIpv4, PiiType::kIpAddress, R"((?:\d{1,3}\.){3}\d{1,3})"},
    {Rule::kIpv6, PiiType::kIpAddress, R"((?:[0-9A-Fa-f]{1,4})?(?::(?:[0-9A-Fa-f]{1,4})?){2,7})"},
    {Rule::kIpv6Mixed, PiiType::kIpAddress, R"((?:[0-9A-Fa-f]{1,4})?(?::(?:[0-9A-Fa-f]{1,4})?){1,6}:(?:\d{1,3}\.){3}\d{1,3})"},
    {Rule::kPhoneE164, PiiType::kPhone, R"(\+[1-9](?:[ .\-]?\(?\d\)?){6,14})"},
    {Rule::kPhoneNanp, PiiType::kPhone, R"((?:\+?1[ .\-]?)?(?:\(\d{3}\)|\d{3})[ .\-]?\d{3}[ .\-]?\d{4})"},
    {Rule::kCard, PiiType::kCreditCard, R"(\d(?:[ \-]?\d){12,18})"},
    {Rule::kSsn, PiiType::kSsn, R"(\d{3}[\- .]\d{2}[\- .]\d{4})"},
    {Rule::kIban, PiiType::kIban, R"([A-Z]{2}\d{2}(?:[ \-]?[A-Z0-9]){11,30})"},
    {Rule::kAws, PiiType::kSecret, R"((?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|APKA)[A-Z0-9]{16})"},
    {Rule::kGithub, PiiType::kSecret, R"(gh[pousr]_[A-Za-z0-9]{36})"},
    {Rule::kGithubPat, PiiType::kSecret, R"(github_pat_[A-Za-z0-9_]{82})"},
    {Rule::kGitlab, PiiType::kSecret, R"(glpat-[A-Za-z0-9_\-]{20})"},
    {Rule::kSlack, PiiType::kSecret, R"(xox[abposr]-[A-Za-z0-9\-]{10,})"},
    {Rule::kPemBegin, PiiType::kSecret, R"(-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY-----)"},
    {Rule::kPemEnd, PiiType::kSecret, R"(-----END [A-Z0-9 ]{0,40}PRIVATE KEY-----)"},
};
constexpr size_t kPatternCount = sizeof(kPatterns) / sizeof(kPatterns[0]);

// A byte that every match of the rule's pattern contains, or 0 (see Note
// [pattern subsets] in pattern_scanner_vectorscan.cc).
char required_byte(Rule rule) {
  switch (rule) {
    case Rule::kEmail: return '@';
    case Rule::kPhoneE164: return '+';
    case Rule::kIpv6:
    case Rule::kIpv6Mixed: return ':';
    default: return 0;
  }
}

struct ScanContext {
  std::string_view doc;
  const PiiOptions* options;
  std::vector<PiiMatch>* out;
  std::vector<std::pair<size_t, size_t>>* claimed;  // spans no other rule may mask (see pii::Verdict)
  std::vector<std::pair<size_t, size_t>>* pem_begin;  // (begin, end) of headers
  std::vector<std::pair<size_t, size_t>>* pem_end;
  const std::vector<size_t>& pattern_index;  // scanner pattern id -> kPatterns index
};

void on_candidate(unsigned id, size_t from, size_t to, void* vctx) {
  auto* ctx = static_cast<ScanContext*>(vctx);
  const Pattern& p = kPatterns[ctx->pattern_index[id]];
  size_t b = from, e = to;
  const std::string_view d = ctx->doc;
  bool ok = false;
  auto decide = [&](pii::Verdict v) {
    if (v == pii::Verdict::kClaim) ctx->claimed->emplace_back(b, e);
    return v == pii::Verdict::kAccept;
  };
  switch (p.rule) {
    case Rule::kEmail: ok = pii::validate_email(d, b, e); break;
    case Rule::kIpv4: ok = decide(pii::validate_ipv4(d, b, e, ctx->options->keep_private_ip)); break;
    case Rule::kIpv6:
    case Rule::kIpv6Mixed: ok = pii::validate_ipv6(d, b, e, ctx->options->keep_private_ip); break;
    case Rule::kPhoneE164: ok = pii::validate_phone(d, b, e, false); break;
    case Rule::kPhoneNanp: ok = pii::validate_phone(d, b, e, true); break;
    case Rule::kCard: ok = pii::validate_card(d, b, e); break;
    case Rule::kSsn: ok = pii::validate_ssn(d, b, e); break;
    case Rule::kIban: ok = decide(pii::validate_iban(d, b, e)); break;
    case Rule::kAws:
    case Rule::kGithub:
    case Rule::kGithubPat:
    case Rule::kGitlab:
    case Rule::kSlack: ok = pii::validate_token(d, b, e); break;
    case Rule::kPemBegin: ctx->pem_begin->emplace_back(b, e); return;
    case Rule::kPemEnd: ctx->pem_end->emplace_back(b, e); return;
  }
  if (ok) ctx->out->push_back({b, e, p.type});
}

}  // namespace

struct PiiMasker::Impl {
  std::unique_ptr<pii::PatternScanner> scanner;  // null when no type is enabled
  std::vector<size_t> pattern_index;
};

PiiMasker::PiiMasker(PiiOptions options) : options_(options), impl_(std::make_unique<Impl>()) {
  std::vector<pii::ScanPattern> patterns;
  for (size_t i = 0; i < kPatternCount; ++i) {
    if (!options_.enabled[static_cast<size_t>(kPatterns[i].type)]) continue;
    // The e-mail validator finds the start itself (see validate_email).
    patterns.push_back({kPatterns[i].regex, kPatterns[i].rule != Rule::kEmail, required_byte(kPatterns[i].rule)});
    impl_->pattern_index.push_back(i);
  }
  if (!patterns.empty()) impl_->scanner = pii::PatternScanner::create(patterns);
}

PiiMasker::~PiiMasker() = default;

const char* PiiMasker::engine() const { return impl_->scanner ? impl_->scanner->engine() : "none"; }

std::vector<PiiMatch> PiiMasker::find(std::string_view text) const {
  if (!impl_->scanner || text.empty()) return {};
  // The candidates go into buffers of the thread, reused across documents:
  // only the chosen matches are returned in a vector of their own (none for
  // the documents without any, most of them).
  thread_local std::vector<PiiMatch> found;
  thread_local std::vector<std::pair<size_t, size_t>> claimed, pem_begin, pem_end;
  found.clear();
  claimed.clear();
  pem_begin.clear();
  pem_end.clear();
  ScanContext ctx{text, &options_, &found, &claimed, &pem_begin, &pem_end, impl_->pattern_index};
  impl_->scanner->scan(text, on_candidate, &ctx);
  // The scanners report PEM markers in end order; RE2 does so per pattern.
  std::sort(pem_begin.begin(), pem_begin.end());
  std::sort(pem_end.begin(), pem_end.end());
  // PEM blocks: each END pairs with the closest BEGIN before it that no
  // earlier END has taken (both lists are in order; linear).
  {
    size_t bi = 0;
    int64_t taken_until = -1;
    for (const auto& [eb, ee] : pem_end) {
      int64_t best = -1;
      while (bi < pem_begin.size() && pem_begin[bi].second <= eb) best = static_cast<int64_t>(bi++);
      if (best >= 0 && static_cast<int64_t>(pem_begin[static_cast<size_t>(best)].first) > taken_until) {
        found.push_back({pem_begin[static_cast<size_t>(best)].first, ee, PiiType::kSecret});
        taken_until = static_cast<int64_t>(ee);
      }
    }
  }
  if (found.empty()) return {};
  // Leftmost first, then longest, then the table's type order; no overlaps.
  std::sort(found.begin(), found.end(), [](const PiiMatch& a, const PiiMatch& b) {
    if (a.begin != b.begin) return a.begin < b.begin;
    if (a.end != b.end) return a.end > b.end;
    return a.type < b.type;
  });
  // A claimed span (an identifier, a version, an invalid IBAN) keeps every
  // match inside or across it unmasked, unless the match holds the whole
  // span (an IPv6 address ending in an IPv4 one, a card or an e-mail around it).
  std::sort(claimed.begin(), claimed.end());
  auto crosses_claim = [&](const PiiMatch& m) {
    auto it = std::lower_bound(claimed.begin(), claimed.end(), std::make_pair(m.end, size_t(0)));
    while (it != claimed.begin()) {
      --it;
      if (it->second <= m.begin) {
        if (m.begin - it->second > 4096) break;  // claims are short: none further left reaches m
        continue;
      }
      if (!(m.begin <= it->first && it->second <= m.end)) return true;
    }
    return false;
  };
  std::vector<PiiMatch> chosen;
  size_t last_end = 0;
  for (const PiiMatch& m : found) {
    if (!chosen.empty() && m.begin < last_end) continue;
    if (!claimed.empty() && crosses_claim(m)) continue;
    chosen.push_back(m);
    last_end = m.end;
  }
  return chosen;
}

namespace {
// Appends text with every match replaced by its placeholder.
void append_masked(const PiiMasker& masker, std::string_view text, std::string& out,
                   std::array<int64_t, kPiiTypeCount>& counts) {
  size_t pos = 0;
  for (const PiiMatch& m : masker.find(text)) {
    out.append(text.data() + pos, m.begin - pos);
    out.append(pii_placeholder(m.type));
    ++counts[static_cast<size_t>(m.type)];
    pos = m.end;
  }
  out.append(text.data() + pos, text.size() - pos);
}
}  // namespace

void PiiMasker::mask_document(std::string_view text, std::string& out,
                              std::array<int64_t, kPiiTypeCount>& counts) const {
  out.clear();
  append_masked(*this, text, out, counts);
}

// Note [masking in two passes]: the matches of every document are found
// first (in parallel chunks), which gives each output's size; the output is
// then written once, straight into the batch buffer at its final offset,
// each run of documents without a match in one copy (rather than into a
// string per chunk, copied again into the batch).
PiiResult PiiMasker::mask(const TextBatchView& batch) const {
  for (size_t i = 0; i < batch.size; ++i)
    if (batch.offsets[i + 1] - batch.offsets[i] > static_cast<int64_t>(UINT32_MAX))
      throw std::length_error("PIIMasker: document " + std::to_string(i) + " is over 4 GiB");
  std::array<std::atomic<int64_t>, kPiiTypeCount> counts{};
  detail::LowestIndex first_invalid;
  PiiResult result;
  TextBatch& out = result.texts;
  out.offsets.assign(batch.size + 1, 0);
  const std::vector<size_t> bounds = detail::chunk_bounds(batch);
  const size_t chunks = bounds.size() - 1;
  std::vector<std::vector<PiiMatch>> chunk_matches(chunks);  // in document order
  std::vector<uint32_t> matches_of(batch.size, 0);
  detail::run_in_arena([&] {
    tbb::parallel_for(tbb::blocked_range<size_t>(0, chunks, 1), [&](const tbb::blocked_range<size_t>& r) {
      for (size_t c = r.begin(); c != r.end(); ++c) {
        std::array<int64_t, kPiiTypeCount> local{};
        std::vector<PiiMatch>& cm = chunk_matches[c];
        for (size_t i = bounds[c]; i < bounds[c + 1]; ++i) {
          const std::string_view in = batch[i];
          int64_t size = static_cast<int64_t>(in.size());
          if (!is_valid_utf8(in)) {
            first_invalid.offer(i);
          } else {
            const std::vector<PiiMatch> found = find(in);
            for (const PiiMatch& m : found) {
              size += static_cast<int64_t>(std::strlen(pii_placeholder(m.type))) - static_cast<int64_t>(m.end - m.begin);
              ++local[static_cast<size_t>(m.type)];
            }
            cm.insert(cm.end(), found.begin(), found.end());
            matches_of[i] = static_cast<uint32_t>(found.size());
          }
          out.offsets[i + 1] = size;  // sizes for now
        }
        for (size_t k = 0; k < kPiiTypeCount; ++k)
          if (local[k]) counts[k].fetch_add(local[k], std::memory_order_relaxed);
      }
    });
  });
  if (first_invalid.any())
    throw std::invalid_argument("mask_pii: document " + std::to_string(first_invalid.get()) +
                                " is not valid UTF-8 (clean it first)");
  for (size_t i = 0; i < batch.size; ++i) out.offsets[i + 1] += out.offsets[i];
  out.data.resize(static_cast<size_t>(out.offsets[batch.size]));
  detail::advise_huge_pages(out.data.data(), out.data.size());
  detail::run_in_arena([&] {
    tbb::parallel_for(tbb::blocked_range<size_t>(0, chunks, 1), [&](const tbb::blocked_range<size_t>& r) {
      for (size_t c = r.begin(); c != r.end(); ++c) {
        const PiiMatch* m = chunk_matches[c].data();
        size_t i = bounds[c];
        while (i < bounds[c + 1]) {
          if (matches_of[i] == 0) {  // a run of documents without a match: one copy
            size_t j = i + 1;
            while (j < bounds[c + 1] && matches_of[j] == 0) ++j;
            const size_t bytes = static_cast<size_t>(batch.offsets[j] - batch.offsets[i]);
            if (bytes) std::memcpy(out.data.data() + out.offsets[i], batch.data + batch.offsets[i], bytes);
            i = j;
            continue;
          }
          const std::string_view in = batch[i];
          uint8_t* dst = out.data.data() + out.offsets[i];
          size_t pos = 0;
          for (uint32_t k = 0; k < matches_of[i]; ++k, ++m) {
            std::memcpy(dst, in.data() + pos, m->begin - pos);
            dst += m->begin - pos;
            const char* ph = pii_placeholder(m->type);
            const size_t len = std::strlen(ph);
            std::memcpy(dst, ph, len);
            dst += len;
            pos = m->end;
          }
          std::memcpy(dst, in.data() + pos, in.size() - pos);
          ++i;
        }
      }
    });
  });
  for (size_t k = 0; k < kPiiTypeCount; ++k) result.counts[k] = counts[k].load();
  return result;
}

}  // namespace luminamoon
