// DocBatch: one batch of documents from one shard as it moves through the
// FusedPipeline (reader fields, then what each stage decided).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "luminamoon/stream_coordinate.h"
#include "luminamoon/text_batch.h"

namespace luminamoon {

// A record the reader could not turn into a document (never fatal).
struct MalformedRecord {
  uint32_t shard_id = 0;
  uint64_t line = 0;  // 1-based line (line formats) or row (Parquet)
  std::string message;
  // The shard could not be decoded past this point (a damaged gzip/zstd
  // stream, an unreadable Parquet file or row group): what followed is lost.
  bool shard_damaged = false;
};

// Flat strings with int64 offsets (Arrow large_string layout).
struct StringColumn {
  std::string bytes;
  std::vector<int64_t> offsets{0};

  size_t size() const { return offsets.size() - 1; }
  void push(std::string_view s) {
    bytes.append(s);
    offsets.push_back(static_cast<int64_t>(bytes.size()));
  }
  std::string_view operator[](size_t i) const {
    return {bytes.data() + offsets[i], static_cast<size_t>(offsets[i + 1] - offsets[i])};
  }
  TextBatchView view() const {
    return {reinterpret_cast<const uint8_t*>(bytes.data()), offsets.data(), size()};
  }
  void clear() {
    bytes.clear();
    offsets.assign(1, 0);
  }
};

struct DocBatch {
  uint64_t sequence = 0;  // batch number in stream order
  uint32_t shard_id = 0;
  std::string shard_path;
  StringColumn text;
  StringColumn ids;       // the id field as text, or "SHARD:LINE" when absent
  StringColumn metadata;  // every other input field as one JSON object ("" if none)
  std::vector<uint64_t> lines;  // source line (1-based) or Parquet row of each doc
  StreamCoordinate end;         // resume point after this batch
  uint64_t bytes_in = 0;        // input bytes consumed (decompressed)
  uint64_t records_in = 0;      // records consumed, malformed ones included
  std::vector<MalformedRecord> malformed;

  // Filled by the stages: "" keeps the document, otherwise the drop reason
  // (the first failing check) and an optional detail (e.g. the matched id).
  std::vector<std::string> drop_reason;
  std::vector<std::string> drop_detail;
  std::vector<std::string> drop_stage;
  // Per-document metrics as one JSON object each ("" when not measured).
  std::vector<std::string> metrics_json;
  // Counters the stages add to the summary (e.g. "pii.email" -> 3).
  std::vector<std::pair<std::string, int64_t>> counters;
  // Durable stage state as of the end of this batch (WAL byte positions),
  // recorded by ordered stages, written by the commit that covers the batch.
  std::vector<std::pair<std::string, uint64_t>> state_positions;

  size_t size() const { return text.size(); }
  bool kept(size_t i) const { return drop_reason[i].empty(); }
  void drop(size_t i, std::string_view stage, std::string_view reason,
            std::string_view detail = {}) {
    drop_stage[i] = stage;
    drop_reason[i] = reason;
    drop_detail[i] = detail;
  }
  // Called once the reader has filled the batch.
  void reset_decisions() {
    drop_reason.assign(size(), std::string());
    drop_detail.assign(size(), std::string());
    drop_stage.assign(size(), std::string());
    metrics_json.assign(size(), std::string());
    counters.clear();
    state_positions.clear();
  }
};

}  // namespace luminamoon
