// KeptDocs: the still-kept documents of a batch as one contiguous
// TextBatchView (what the stage classes take), and the way back.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "luminamoon/doc_batch.h"

namespace luminamoon {

struct KeptDocs {
  std::vector<uint32_t> index;  // batch position of each kept document
  StringColumn owned;           // a compacted copy, only when some were dropped
  TextBatchView view;
  std::vector<int64_t> refs;    // (shard_id << 40) | line, the dedup/LSH ref
  size_t size() const { return index.size(); }
};

inline constexpr int kRefLineBits = 40;

// What the dedup stages call themselves and their drops (summary.json's keys).
inline constexpr const char* kExactDedupStage = "dedup";
inline constexpr const char* kExactDuplicateReason = "exact_duplicate";
inline constexpr const char* kNearDedupStage = "minhash";
inline constexpr const char* kNearDuplicateReason = "near_duplicate";

// "FILE:LINE" of a ref: how a drop names the document it matched.
inline std::string ref_name(const std::vector<std::string>& shard_names, int64_t ref) {
  uint64_t shard = static_cast<uint64_t>(ref) >> kRefLineBits;
  uint64_t line = static_cast<uint64_t>(ref) & ((uint64_t{1} << kRefLineBits) - 1);
  std::string name = shard < shard_names.size() ? shard_names[shard] : "?";
  return name + ":" + std::to_string(line);
}

inline KeptDocs gather_kept(const DocBatch& batch) {
  KeptDocs kept;
  kept.index.reserve(batch.size());
  for (uint32_t i = 0; i < batch.size(); ++i) {
    if (batch.kept(i)) kept.index.push_back(i);
  }
  if (kept.index.size() == batch.size()) {
    kept.view = batch.text.view();
  } else {
    for (uint32_t i : kept.index) kept.owned.push(batch.text[i]);
    kept.view = kept.owned.view();
  }
  kept.refs.reserve(kept.size());
  for (uint32_t i : kept.index) {
    kept.refs.push_back(static_cast<int64_t>((uint64_t{batch.shard_id} << kRefLineBits) |
                                             (batch.lines[i] & ((uint64_t{1} << kRefLineBits) - 1))));
  }
  return kept;
}

// Replaces the text of every kept document j with texts[j]; dropped documents
// keep the text they had (the dropped-documents output shows it).
template <class Texts>
void replace_kept_texts(DocBatch& batch, const KeptDocs& kept, const Texts& texts) {
  StringColumn out;
  out.bytes.reserve(batch.text.bytes.size());
  size_t j = 0;
  for (uint32_t i = 0; i < batch.size(); ++i) {
    if (j < kept.size() && kept.index[j] == i) {
      out.push(batch.kept(i) ? texts[j] : batch.text[i]);
      ++j;
    } else {
      out.push(batch.text[i]);
    }
  }
  batch.text = std::move(out);
}

}  // namespace luminamoon
