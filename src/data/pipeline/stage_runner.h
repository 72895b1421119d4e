// The FusedPipeline's machinery shared with ShardTasks (shard_tasks.cc): the
// stream source, the oneTBB stage runner, the input checks and summary.json.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "data/pipeline/run_state.h"
#include "luminamoon/fused_pipeline.h"

namespace luminamoon {

struct MinHashParams;
// The MinHash parameters the config names (stages.cc; built with the minhash stage).
MinHashParams minhash_params(const PipelineConfig& config);

namespace pipeline_internal {

using BatchPtr = std::shared_ptr<DocBatch>;

// Where run_stages takes its batches from: next() fills `batch` (with its
// decisions reset, or as an earlier run of stages left them) or returns false
// at the end.
class BatchSource {
 public:
  virtual ~BatchSource() = default;
  virtual bool next(DocBatch& batch) = 0;
};

// Reads the shards in order from a coordinate, one batch at a time.
class StreamSource final : public BatchSource {
 public:
  // Reads from `start` to the end of shard end_shard - 1 (default: every shard).
  StreamSource(std::vector<ShardInfo> shards, ReaderOptions options, StreamCoordinate start,
               PipelineProgress& progress, const std::vector<ShardStat>& stats,
               size_t end_shard = SIZE_MAX)
      : shards_(std::move(shards)), options_(std::move(options)), next_(start),
        shard_(start.shard_id), end_(std::min(end_shard, shards_.size())), progress_(progress),
        stats_(stats) {}

  bool next(DocBatch& batch) override {
    while (shard_ < end_) {
      const bool compressed = shards_[shard_].compression != Compression::kNone;
      if (!reader_) reader_ = open_shard(shards_[shard_], options_, next_);
      if (reader_->next(batch)) {
        next_ = batch.end;
        if (!compressed) progress_.input_bytes_done += batch.bytes_in;
        batch.reset_decisions();
        return true;
      }
      if (compressed) progress_.input_bytes_done += stats_[shard_].size;
      reader_.reset();
      ++shard_;
      StreamCoordinate fresh;
      fresh.shard_id = static_cast<uint32_t>(shard_);
      fresh.global_row_idx = next_.global_row_idx;
      next_ = fresh;
    }
    return false;
  }

 private:
  std::vector<ShardInfo> shards_;
  ReaderOptions options_;
  StreamCoordinate next_;
  size_t shard_;
  size_t end_;
  std::unique_ptr<ShardReader> reader_;
  PipelineProgress& progress_;
  const std::vector<ShardStat>& stats_;
};

int thread_count(const PipelineConfig& config);

// Runs `stages` between the source and the sink on a oneTBB pipeline; the
// sink sees the batches one at a time, in stream order.
void run_stages(const PipelineConfig& config, BatchSource& source,
                std::vector<std::unique_ptr<PipelineStage>>& stages, std::atomic<bool>& cancelled,
                const std::function<void(BatchPtr)>& sink);

// Every input described; shard ids are the positions in `inputs`.
std::vector<ShardInfo> describe_all(const std::vector<std::string>& inputs);
// DataError(kUsage) when an input lies inside the output directory.
void check_inputs_outside_output(const std::vector<ShardInfo>& shards, const std::string& output_dir);
// Note [strict]: a rejected record in --strict mode throws DataError(kInput).
void fail_if_strict(const PipelineConfig& config, const DocBatch& batch);

// summary.json's text: the totals, then the run's own figures.
std::string summary_json(const PipelineConfig& config, const RunTotals& all, const RunTotals& session,
                         size_t inputs, bool complete, const std::vector<std::string>& stage_names,
                         const std::vector<std::string>& missing, bool resumed, double seconds);

}  // namespace pipeline_internal
}  // namespace luminamoon
