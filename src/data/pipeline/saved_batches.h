// Saved batches: one shard's batches as the stages before deduplication left
// them (cleaned text, drop decisions, metrics), in a file, so that the finish
// of a distributed run continues from its map instead of reading, cleaning and
// filtering the shard a second time (Note [shard tasks] in shard_tasks.cc).
#pragma once

#include <cstdint>
#include <string>

#include "data/pipeline/stage_runner.h"
#include "data/state/durable_io.h"
#include "luminamoon/doc_batch.h"

namespace luminamoon::pipeline_internal {

// Appends batches to `path`.tmp; the file appears under `path` (fsynced) only
// at finish(), so a reader never meets a half-written one.
class SavedBatchWriter {
 public:
  SavedBatchWriter(std::string path, uint32_t shard);
  void add(const DocBatch& batch);
  void finish();

 private:
  durable::PendingFile file_;
  std::string record_;
  uint64_t batches_ = 0;
};

// Yields the batches of a file SavedBatchWriter wrote, one at a time, with
// their decisions. A file of another shard, another byte order or format
// version, or a damaged or truncated one is DataError(kStateCorrupt).
class SavedBatchSource final : public BatchSource {
 public:
  SavedBatchSource(std::string path, uint32_t shard);
  ~SavedBatchSource() override;
  SavedBatchSource(const SavedBatchSource&) = delete;
  SavedBatchSource& operator=(const SavedBatchSource&) = delete;
  bool next(DocBatch& batch) override;

 private:
  [[noreturn]] void corrupt(const std::string& what) const;

  std::string path_;
  uint32_t shard_;
  int fd_ = -1;
  uint64_t size_ = 0;
  uint64_t offset_ = 0;
  uint64_t batches_ = 0;
  bool done_ = false;
  std::string record_;
};

}  // namespace luminamoon::pipeline_internal
