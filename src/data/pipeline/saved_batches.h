// Saved batches: one shard's batches as the stages before deduplication left
// them (cleaned text, drop decisions, metrics), in one buffer, so that the finish
// of a distributed run continues from its map instead of reading, cleaning and
// filtering the shard a second time (Note [shard tasks] in shard_tasks.cc).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "data/pipeline/stage_runner.h"
#include "luminamoon/doc_batch.h"

namespace luminamoon::pipeline_internal {

// Encodes batches into one buffer (Note [saved batch buffer]); a distributed
// executor keeps it as the map task's result (a Ray object), so that a reader
// never meets a half-written one: the buffer exists only once finish() ran.
class SavedBatchWriter {
 public:
  explicit SavedBatchWriter(uint32_t shard);
  void add(const DocBatch& batch);
  // The end marker appended; the complete bytes, moved out.
  std::string finish();

 private:
  std::string bytes_;
  uint64_t batches_ = 0;
};

// Yields the batches of a buffer SavedBatchWriter wrote, one at a time, with
// their decisions; `bytes` must outlive the source. A buffer of another
// shard, another byte order or format version, or a damaged or truncated one
// is DataError(kStateCorrupt).
class SavedBatchSource final : public BatchSource {
 public:
  SavedBatchSource(std::string_view bytes, uint32_t shard);
  bool next(DocBatch& batch) override;

 private:
  [[noreturn]] void corrupt(const std::string& what) const;
  uint64_t read_u64();

  std::string_view bytes_;
  uint32_t shard_;
  uint64_t offset_ = 0;
  uint64_t batches_ = 0;
  bool done_ = false;
};

}  // namespace luminamoon::pipeline_internal
