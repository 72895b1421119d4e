// PipelineStage: the interface every FusedPipeline stage implements, so that
// the pipeline schedules stages without knowing what they compute.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "luminamoon/doc_batch.h"

namespace luminamoon {

enum class StageMode {
  kParallel,  // stateless per batch: several batches may be in it at once
  kOrdered,   // sees the batches one at a time, in stream order (dedup, LSH)
};

class PipelineStage {
 public:
  virtual ~PipelineStage() = default;
  virtual const char* name() const = 0;
  virtual StageMode mode() const = 0;
  // Decides/rewrites the kept documents of the batch (batch.drop, batch.text).
  // An ordered stage with durable state records, in batch.state_positions,
  // where its log stands after this batch.
  virtual void process(DocBatch& batch) = 0;
  // Makes what process() logged durable (fsync); called by each commit
  // before the checkpoint slot is written.
  virtual void sync() {}
  // Paths of durable state files (for the missing-WAL check).
  virtual std::vector<std::string> state_files() const { return {}; }
};

// Where stages keep durable state and where a resumed run restarts them.
struct StageContext {
  std::string state_dir;
  bool resuming = false;
  std::map<std::string, uint64_t> resume_positions;  // stage state name -> log bytes
  int num_threads = 0;
  std::vector<std::string> shard_names;  // file names, to name matched documents
};

}  // namespace luminamoon
