// FusedPipeline: reader -> cleaner -> quality -> exact dedup -> MinHash LSH ->
// PII -> writer, overlapped on all cores with a bounded number of batches in
// flight, committed crash-safely (spec data-engine.md).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "luminamoon/doc_batch.h"
#include "luminamoon/pipeline_stage.h"
#include "luminamoon/reader.h"
#include "luminamoon/writer.h"

namespace luminamoon {

struct PipelineConfig {
  ReaderOptions reader;
  WriterOptions writer;

  bool clean = true;
  std::string invalid_utf8 = "replace";  // replace | drop | error

  bool quality = true;
  // Threshold overrides by check name; nullopt disables the check.
  std::vector<std::pair<std::string, std::optional<double>>> quality_thresholds;

  bool dedup = true;
  bool dedup_normalized = false;  // hash the normalized text instead of the text

  bool minhash = true;
  int minhash_num_perm = 64;
  int minhash_ngram = 5;
  int minhash_bands = 8;
  int minhash_rows = 8;
  double minhash_threshold = 0.8;
  uint64_t minhash_seed = 1;
  std::string minhash_scheme = "oph";  // "oph" or "kperm" (spec section 5)

  bool pii = true;
  std::vector<std::string> pii_types;  // empty: every type
  bool pii_keep_private_ip = false;

  // A rejected record (malformed, over max_record_bytes, undecodable shard)
  // fails the run with DataError(kInput) instead of being counted; nothing
  // after the last commit is committed.
  bool strict = false;

  int num_threads = 0;                // 0: every core
  size_t max_batches_in_flight = 0;   // 0: 2 x threads + 2

  // Canonical text of every setting that changes the output; a resumed run
  // must have the same one.
  std::string fingerprint() const;
};

// Live counters for progress display (updated as batches are written).
struct PipelineProgress {
  std::atomic<uint64_t> documents_in{0};
  std::atomic<uint64_t> documents_kept{0};
  std::atomic<uint64_t> bytes_in{0};           // decompressed input bytes
  std::atomic<uint64_t> input_bytes_done{0};   // on-disk bytes of finished shards (+ plain progress)
  std::atomic<uint64_t> input_bytes_total{0};  // on-disk bytes of every shard
  std::atomic<uint64_t> parts_committed{0};
  std::atomic<bool> running{false};
};

class FusedPipeline {
 public:
  explicit FusedPipeline(PipelineConfig config);
  ~FusedPipeline();

  // Processes `inputs` (resolved shard paths, in stream order) into
  // output_dir; with resume, continues from the checkpoint there (checking
  // that inputs and config are unchanged). Returns summary.json's text.
  std::string run(const std::vector<std::string>& inputs, const std::string& output_dir,
                  bool resume = true);

  // Processes `inputs` without writing anything and hands each batch, with
  // its decisions, to `sink` in stream order; `sink` returning false stops.
  void stream(const std::vector<std::string>& inputs,
              const std::function<bool(std::shared_ptr<DocBatch>)>& sink);

  // Names of the stages this build has (the others are skipped with a note
  // in the summary when enabled in the config).
  static std::vector<std::string> available_stages();

  const PipelineConfig& config() const { return config_; }
  const PipelineProgress& progress() const { return progress_; }
  void cancel() { cancelled_ = true; }

 private:
  PipelineConfig config_;
  PipelineProgress progress_;
  std::atomic<bool> cancelled_{false};
};

// The stages the config enables and this build has, in pipeline order;
// `missing` receives the names of enabled stages that are not built in.
std::vector<std::unique_ptr<PipelineStage>> make_stages(const PipelineConfig& config,
                                                        const StageContext& context,
                                                        std::vector<std::string>* missing);

}  // namespace luminamoon
