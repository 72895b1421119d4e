// The integer part of the quality metrics (internal): counts of one valid
// UTF-8 document, computed by a Highway kernel with runtime dispatch.
// quality_metrics.cc turns them into the metrics (all floating point stays
// there, compiled once for the baseline target, so that the metrics are the
// same bits on every machine).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <vector>

namespace luminamoon::detail {

// Open-addressing counts of 64-bit hashes (already uniform, so a hash is its
// own slot), reused across documents: each entry keeps the index of the
// key's first occurrence, so that a key's earlier occurrence can be marked
// as repeated when the key comes again (no second pass over the table).
struct HashCountTable {
  struct Entry {
    uint64_t key;  // 0: empty (a key of 0 is stored as 1)
    uint32_t count;
    uint32_t first;  // index of the first add() of this key
  };
  std::vector<Entry> entries;
  size_t mask = 0;
};

// A count per Unicode code point, all zero between documents. calloc hands a
// block of this size out as fresh zero pages, so only the pages of the code
// points a thread meets are ever touched: a zero-filled vector wrote all
// 4.4 MB of every thread's table (its resident memory, and on a VM whose
// fresh pages are slow to touch, ~8 ms of system time per thread).
class CodePointCounts {
 public:
  CodePointCounts() : counts_(static_cast<uint32_t*>(std::calloc(kSize, sizeof(uint32_t)))) {
    if (!counts_) throw std::bad_alloc();
  }
  ~CodePointCounts() { std::free(counts_); }
  CodePointCounts(const CodePointCounts&) = delete;
  CodePointCounts& operator=(const CodePointCounts&) = delete;
  uint32_t& operator[](uint32_t cp) { return counts_[cp]; }

 private:
  static constexpr size_t kSize = 0x110000;
  uint32_t* counts_;
};

// Buffers of one thread, reused across documents (no allocation per document
// once they have grown).
struct QualityScratch {
  CodePointCounts cp_counts;
  std::vector<uint32_t> touched;  // non-ASCII code points in first-occurrence order
  // Bit masks, one uint64_t per 64 bytes (plus a zero block past the end).
  std::vector<uint64_t> white, cont, lead, alpha, punct, newline, dot;
  std::vector<uint32_t> starts, ends;  // word byte ranges
  std::vector<uint32_t> long_words;  // words of over 8 bytes
  std::vector<uint64_t> word_hash, gram_hash, char_prefix;
  std::vector<uint32_t> cand;
  std::vector<uint8_t> repeated, buckets;
  std::vector<std::pair<uint32_t, uint32_t>> segments, line_segments;
  std::vector<uint64_t> line_hash, para_hash;
  HashCountTable table;
};

// What the metrics are made of. Code point counts for the entropy are in
// `entropy_counts`: the counts of the ASCII code points present, in code
// point order, then those of the non-ASCII ones in first-occurrence order.
struct QualityCounts {
  std::vector<uint64_t>* entropy_counts = nullptr;  // filled by the kernel
  uint64_t code_points = 0;
  uint64_t hashes = 0, dot_triples = 0, ellipsis_chars = 0;  // '#', "..." (non-overlapping), U+2026
  uint64_t words = 0, word_chars = 0, alpha_words = 0, stop_words = 0;
  uint64_t lines = 0, bullet_lines = 0, ellipsis_lines = 0;
  uint64_t line_segments = 0, dup_lines = 0, dup_line_chars = 0;
  uint64_t para_segments = 0, dup_paras = 0, dup_para_chars = 0;
  // For n = 2..10: the code points of the covered words, when the n-gram
  // metric is defined for this document (a repeated n-gram exists).
  uint64_t gram_covered[11] = {};
  bool gram_defined[11] = {};
};

// The points between the kernel's phases, in the order of the checks that
// their counts decide (Note [verdict only] in quality_metrics.cc): the word
// and line counts (entropy .. stop words), the duplicate lines and
// paragraphs, then each n-gram size, 2 to 10.
enum class QualityPhase : uint8_t { kWordsAndLines, kDuplicates, kNgram };

// Asked at each of those points whether the document's verdict is already
// known; when it is, the kernel returns and the later counts stay zero.
class QualityStop {
 public:
  virtual bool decided(const QualityCounts& counts, QualityPhase phase, size_t gram) = 0;

 protected:
  ~QualityStop() = default;
};

// Counts of valid UTF-8 bytes [s, s + n), n < 2^32; every count unless
// `stop` ends the count early.
void count_quality(const uint8_t* s, size_t n, QualityScratch& scratch, QualityCounts& out,
                   QualityStop* stop = nullptr);

}  // namespace luminamoon::detail
