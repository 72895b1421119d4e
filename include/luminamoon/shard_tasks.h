// ShardTasks: the FusedPipeline's work cut by shard for a distributed executor
// (python/luminamoon/data/ray_executor.py). A map over one shard yields what the
// global deduplication needs; a finish over one shard applies its decisions and
// writes the shard's parts; the summary merges the shards' totals as the local run does.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "luminamoon/fused_pipeline.h"

namespace luminamoon {

// The documents of one shard that pass the cleaner and the quality filter,
// in stream order, with their dedup inputs.
struct ShardSurvivors {
  // (shard << 40) | line: the ref the local dedup stages give each document;
  // its order is the global stream order (shards in input order, then lines).
  std::vector<int64_t> refs;
  std::vector<uint64_t> exact_keys;  // StreamDeduplicator key (when dedup is enabled)
  std::vector<uint64_t> signatures;  // n x num_perm MinHash values (when minhash is enabled)
  std::vector<uint64_t> band_keys;   // n x bands minhash_band_key values (likewise)
  // The shard's batches as cleaner and quality left them, encoded for
  // finish_shard (when map_shard was asked to save them).
  std::string saved_batches;
};

// Drops decided by the global resolution for one shard's documents.
struct PlannedDrops {
  std::vector<int64_t> refs;
  std::vector<uint8_t> near;      // 0: exact duplicate (stage dedup), 1: near duplicate (minhash)
  std::vector<int64_t> matched;   // ref of the document it duplicates
};

class ShardTasks {
 public:
  ShardTasks(PipelineConfig config, std::vector<std::string> inputs);

  size_t shard_count() const { return inputs_.size(); }
  const PipelineConfig& config() const { return config_; }

  // The local run's checks before anything is written: every input opens as
  // its format, none lies inside output_dir (DataError as in FusedPipeline::run).
  void preflight(const std::string& output_dir) const;
  // The inputs (size, mtime) and the config fingerprint, as the local
  // manifest.json; check_manifest throws DataError(kInputChanged) on a change.
  std::string manifest() const;
  void check_manifest(std::string_view json) const;

  // Reads shard `shard` through the cleaner and quality filter. With
  // save_batches, its batches as those stages left them are also returned
  // (ShardSurvivors::saved_batches), for finish_shard.
  ShardSurvivors map_shard(uint32_t shard, bool save_batches = false) const;
  // Continues from the batches map_shard saved (or, without saved_batches,
  // reads the shard again through cleaner and quality), drops what `drops`
  // names (every entry must meet a surviving document: else the input
  // changed, DataError(kInputChanged)), masks PII and writes the shard's parts
  // into output_dir (part-00000000.<ext>, ...). Returns its RunTotals as JSON.
  std::string finish_shard(uint32_t shard, const std::string& output_dir, const PlannedDrops& drops,
                           std::optional<std::string_view> saved_batches = std::nullopt) const;

  // summary.json's text from the shards' totals (in shard order); `session`
  // names the shards finished by this run (their documents are this_run's).
  std::string summary(const std::vector<std::string>& shard_totals, const std::vector<uint8_t>& session,
                      bool resumed, double seconds) const;

 private:
  // The stages after the dedup stages (PII), built by the first finish and
  // shared by the later ones: the PII masker compiles its Vectorscan
  // databases once per ShardTasks, not once per shard (a Ray worker keeps
  // its ShardTasks across tasks). The stages are stateless across batches.
  const std::vector<std::unique_ptr<PipelineStage>>& back_stages() const;

  PipelineConfig config_;
  std::vector<std::string> inputs_;
  mutable std::once_flag back_once_;
  mutable std::vector<std::unique_ptr<PipelineStage>> back_stages_;
};

}  // namespace luminamoon
