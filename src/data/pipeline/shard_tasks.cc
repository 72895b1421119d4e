// ShardTasks: one shard of a run at a time, through the FusedPipeline's own
// stages and stage runner, so that a distributed run computes what the local
// one does (Note [shard tasks]).
#include "luminamoon/shard_tasks.h"

#include <atomic>
#include <filesystem>
#include <span>
#include <unordered_map>

#include "data/pipeline/kept_docs.h"
#include "data/pipeline/run_state.h"
#include "data/pipeline/saved_batches.h"
#include "data/pipeline/stage_runner.h"
#include "luminamoon/data_error.h"
#include "luminamoon/writer.h"

#if defined(LUMINA_HAVE_DEDUP)
#include "luminamoon/stream_deduplicator.h"
#endif
#if defined(LUMINA_HAVE_MINHASH)
#include "luminamoon/minhash_lsh.h"
#endif

namespace luminamoon {

// Note [shard tasks]
// The local run decides exact and near duplicates in one pass in stream
// order. A shard alone cannot: whether a document is a duplicate depends on
// every earlier shard. So a distributed run works on each shard twice: the
// map runs cleaner and quality filter (per document, independent of the
// others), hands out the refs, exact keys and MinHash signatures of the
// survivors and saves the batches as those stages left them (saved_batches.h);
// the executor decides the duplicates globally; the finish continues from
// the saved batches, applies those decisions in place of the dedup stages,
// then PII and writer. Without saved batches the finish reads the shard again
// and repeats cleaner and quality (deterministic, so the same survivors):
// twice the reading and cleaning, for a run with no dedup stage (no map).
// Batches never span shards, so a shard read alone is cut into the same
// batches as in the full stream, and refs carry the shard's global index.

using namespace pipeline_internal;
namespace fs = std::filesystem;

namespace {

// The dedup stages' place in a finish: drops decided elsewhere, by ref.
class PlannedDropStage final : public PipelineStage {
 public:
  PlannedDropStage(const char* name, const char* reason, const std::vector<std::string>& shard_names,
                   std::unordered_map<int64_t, int64_t> matched)
      : name_(name), reason_(reason), shard_names_(shard_names), matched_(std::move(matched)) {}
  const char* name() const override { return name_; }
  StageMode mode() const override { return StageMode::kParallel; }
  void process(DocBatch& batch) override {
    KeptDocs kept = gather_kept(batch);
    size_t hits = 0;
    for (size_t j = 0; j < kept.size(); ++j) {
      auto it = matched_.find(kept.refs[j]);
      if (it == matched_.end()) continue;
      batch.drop(kept.index[j], name_, reason_, ref_name(shard_names_, it->second));
      ++hits;
    }
    applied_ += hits;
  }
  size_t planned() const { return matched_.size(); }
  size_t applied() const { return applied_.load(); }

 private:
  const char* name_;
  const char* reason_;
  const std::vector<std::string>& shard_names_;
  std::unordered_map<int64_t, int64_t> matched_;
  std::atomic<size_t> applied_{0};
};

// A stage owned elsewhere (ShardTasks::back_stages), in a finish's list.
class BorrowedStage final : public PipelineStage {
 public:
  explicit BorrowedStage(PipelineStage& stage) : stage_(stage) {}
  const char* name() const override { return stage_.name(); }
  StageMode mode() const override { return stage_.mode(); }
  void process(DocBatch& batch) override { stage_.process(batch); }

 private:
  PipelineStage& stage_;
};

std::vector<ShardStat> stat_all(const std::vector<std::string>& inputs) {
  std::vector<ShardStat> stats;
  for (const auto& path : inputs) stats.push_back(stat_shard(path));
  return stats;
}

// The config of the stages before (clean, quality) or after (pii) the dedup stages.
PipelineConfig front_stages(PipelineConfig c) {
  c.dedup = c.minhash = c.pii = false;
  return c;
}
PipelineConfig back_stage_config(PipelineConfig c) {
  c.clean = c.quality = c.dedup = c.minhash = false;
  return c;
}

}  // namespace

ShardTasks::ShardTasks(PipelineConfig config, std::vector<std::string> inputs)
    : config_(FusedPipeline(std::move(config)).config()), inputs_(std::move(inputs)) {}

void ShardTasks::preflight(const std::string& output_dir) const {
  std::vector<ShardInfo> shards = describe_all(inputs_);
  stat_all(inputs_);
  check_inputs_outside_output(shards, output_dir);
}

std::string ShardTasks::manifest() const { return manifest_json(stat_all(inputs_), config_.fingerprint()); }

void ShardTasks::check_manifest(std::string_view json) const {
  luminamoon::check_manifest(json, stat_all(inputs_), config_.fingerprint());
}

namespace {

void check_shard(const std::vector<std::string>& inputs, uint32_t shard) {
  if (shard >= inputs.size()) {
    throw DataError(DataErrorKind::kUsage, "shard " + std::to_string(shard) + " out of range (" +
                                               std::to_string(inputs.size()) + " inputs)");
  }
}

// Runs `stages` over shard `shard` alone; the sink sees its batches in order.
void run_one_shard(const PipelineConfig& config, const std::vector<std::string>& inputs, uint32_t shard,
                   std::vector<std::unique_ptr<PipelineStage>>& stages,
                   const std::function<void(BatchPtr)>& sink) {
  check_shard(inputs, shard);
  std::vector<ShardInfo> shards = describe_all(inputs);
  std::vector<ShardStat> stats = stat_all(inputs);
  StreamCoordinate start;
  start.shard_id = shard;
  PipelineProgress progress;
  std::atomic<bool> cancelled{false};
  StreamSource source(shards, config.reader, start, progress, stats, shard + 1);
  run_stages(config, source, stages, cancelled, sink);
}

StageContext shard_context(const PipelineConfig& config, const std::vector<std::string>& inputs) {
  StageContext context;  // no state_dir: nothing durable, a failed task is simply rerun
  context.num_threads = config.num_threads;
  for (const auto& path : inputs) context.shard_names.push_back(fs::path(path).filename().string());
  return context;
}

}  // namespace

ShardSurvivors ShardTasks::map_shard(uint32_t shard, bool save_batches) const {
  check_shard(inputs_, shard);
  const StageContext context = shard_context(config_, inputs_);
  PipelineConfig front = front_stages(config_);
  // the finish exports the metrics: measured here only when it continues from here
  if (!save_batches) front.writer.write_metrics = false;
  auto stages = make_stages(front, context, nullptr);
  std::unique_ptr<SavedBatchWriter> saved;
  if (save_batches) saved = std::make_unique<SavedBatchWriter>(shard);
  ShardSurvivors out;
#if defined(LUMINA_HAVE_DEDUP)
  const bool exact = config_.dedup;
  const DedupKey key = config_.dedup_normalized ? DedupKey::kNormalizedText : DedupKey::kText;
#else
  const bool exact = false;
#endif
#if defined(LUMINA_HAVE_MINHASH)
  const bool near = config_.minhash;
  std::unique_ptr<MinHasher> hasher;
  if (near) hasher = std::make_unique<MinHasher>(minhash_params(config_));
  const size_t width = near ? static_cast<size_t>(config_.minhash_num_perm) : 0;
  const int bands = config_.minhash_bands, rows = config_.minhash_rows;
  if (near) {  // bands x rows checked with the local stage's own validation and message
    MinHashLSHOptions check;
    check.params = minhash_params(config_);
    check.bands = bands;
    check.rows = rows;
    check.threshold = config_.minhash_threshold;
    MinHashLSH validated(std::move(check));
  }
#endif
  run_one_shard(config_, inputs_, shard, stages, [&](BatchPtr batch) {
    fail_if_strict(config_, *batch);
    if (saved) saved->add(*batch);
    KeptDocs kept = gather_kept(*batch);
    const size_t base = out.refs.size();
    out.refs.insert(out.refs.end(), kept.refs.begin(), kept.refs.end());
#if defined(LUMINA_HAVE_DEDUP)
    if (exact) {
      for (size_t j = 0; j < kept.size(); ++j) out.exact_keys.push_back(StreamDeduplicator::key_of(kept.view[j], key));
    }
#endif
#if defined(LUMINA_HAVE_MINHASH)
    if (near) {
      out.signatures.resize((base + kept.size()) * width);
      std::span<uint64_t> sigs(out.signatures.data() + base * width, kept.size() * width);
      hasher->signatures(kept.view, sigs, config_.num_threads);
      for (size_t j = 0; j < kept.size(); ++j) {
        for (int b = 0; b < bands; ++b) out.band_keys.push_back(minhash_band_key(sigs.subspan(j * width, width), b, rows));
      }
    }
#endif
    (void)base;
    (void)exact;
  });
  if (saved) out.saved_batches = saved->finish();
  return out;
}

std::string ShardTasks::finish_shard(uint32_t shard, const std::string& output_dir, const PlannedDrops& drops,
                                     std::optional<std::string_view> saved_batches) const {
  if (drops.near.size() != drops.refs.size() || drops.matched.size() != drops.refs.size()) {
    throw DataError(DataErrorKind::kUsage, "finish_shard: refs, near and matched must have one entry per drop");
  }
  check_shard(inputs_, shard);
  const StageContext context = shard_context(config_, inputs_);
  std::vector<std::string> missing;
  // cleaner and quality here only when the map's batches are not there to continue from
  std::vector<std::unique_ptr<PipelineStage>> stages;
  if (!saved_batches) stages = make_stages(front_stages(config_), context, &missing);
  std::unordered_map<int64_t, int64_t> exact_drops, near_drops;
  for (size_t i = 0; i < drops.refs.size(); ++i) {
    (drops.near[i] ? near_drops : exact_drops)[drops.refs[i]] = drops.matched[i];
  }
  std::vector<PlannedDropStage*> planned;
  auto plan = [&](bool enabled, const char* name, const char* reason, std::unordered_map<int64_t, int64_t>& m) {
    if (!enabled && !m.empty()) {
      throw DataError(DataErrorKind::kUsage, std::string("finish_shard: drops planned for the disabled stage ") + name);
    }
    if (!enabled) return;
    auto stage = std::make_unique<PlannedDropStage>(name, reason, context.shard_names, std::move(m));
    planned.push_back(stage.get());
    stages.push_back(std::move(stage));
  };
  plan(config_.dedup, kExactDedupStage, kExactDuplicateReason, exact_drops);
  plan(config_.minhash, kNearDedupStage, kNearDuplicateReason, near_drops);
  for (const auto& stage : back_stages()) stages.push_back(std::make_unique<BorrowedStage>(*stage));

  CorpusWriter writer(output_dir, config_.reader.text_field, config_.writer);
  RunTotals totals;
  bool pending = false;
  auto write_part = [&] {
    totals.bytes_out += writer.write_part();
    totals.parts += 1;
    pending = false;
  };
  auto sink = [&](BatchPtr batch) {
    fail_if_strict(config_, *batch);
    writer.add(*batch);
    totals.add_batch(*batch);
    pending = true;
    if (writer.part_full()) write_part();
  };
  if (!saved_batches) {
    run_one_shard(config_, inputs_, shard, stages, sink);
  } else {
    SavedBatchSource source(*saved_batches, shard);
    std::atomic<bool> cancelled{false};
    run_stages(config_, source, stages, cancelled, sink);
  }
  if (pending) write_part();
  for (const PlannedDropStage* stage : planned) {
    if (stage->applied() != stage->planned()) {
      throw DataError(DataErrorKind::kInputChanged,
                      "shard " + inputs_[shard] + ": " + std::to_string(stage->planned() - stage->applied()) +
                          " planned " + stage->name() +
                          " drops met no document (the shard changed since the map stage read it)");
    }
  }
  return totals.to_json();
}

const std::vector<std::unique_ptr<PipelineStage>>& ShardTasks::back_stages() const {
  std::call_once(back_once_, [this] {
    back_stages_ = make_stages(back_stage_config(config_), shard_context(config_, inputs_), nullptr);
  });
  return back_stages_;
}

std::string ShardTasks::summary(const std::vector<std::string>& shard_totals,
                                const std::vector<uint8_t>& session, bool resumed, double seconds) const {
  if (shard_totals.size() != inputs_.size() || session.size() != inputs_.size()) {
    throw DataError(DataErrorKind::kUsage, "summary: one totals record and session flag per shard");
  }
  RunTotals all, this_run;
  for (size_t i = 0; i < shard_totals.size(); ++i) {
    RunTotals t = RunTotals::from_json(shard_totals[i]);
    all.merge(t);
    if (session[i]) this_run.merge(t);
  }
  std::vector<std::string> missing, names;
  for (const auto& stage : make_stages(config_, shard_context(config_, inputs_), &missing)) {
    names.emplace_back(stage->name());
  }
  return summary_json(config_, all, this_run, inputs_.size(), true, names, missing, resumed, seconds);
}

}  // namespace luminamoon
