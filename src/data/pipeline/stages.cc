// The FusedPipeline's stage adapters: each wraps one stage class of the data
// engine behind PipelineStage; a stage this build lacks is reported missing.
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <string>

#include "data/pipeline/kept_docs.h"
#include "data/pipeline/stage_runner.h"
#include "data/state/durable_io.h"
#include "data/writer/json_text.h"
#include "luminamoon/data_error.h"
#include "luminamoon/fused_pipeline.h"

#if defined(LUMINA_HAVE_TEXT_CLEANER)
#include "luminamoon/text_cleaner.h"
#endif
#if defined(LUMINA_HAVE_QUALITY_FILTER)
#include "luminamoon/quality_filter.h"
#endif
#if defined(LUMINA_HAVE_DEDUP)
#include "data/dedup/key_runs.h"
#include "luminamoon/stream_deduplicator.h"
#endif
#if defined(LUMINA_HAVE_MINHASH)
#include "luminamoon/minhash_lsh.h"
#endif
#if defined(LUMINA_HAVE_PII_MASKER)
#include "luminamoon/pii_masker.h"
#endif

namespace luminamoon {
namespace {

[[maybe_unused]] std::string ref_name(const StageContext& context, int64_t ref) {
  return luminamoon::ref_name(context.shard_names, ref);
}

[[maybe_unused]] WalOptions wal_options(const StageContext& context, const char* state_name,
                                        const char* file_name) {
  WalOptions wal;
  if (context.state_dir.empty()) return wal;  // streaming: in memory only
  wal.path = context.state_dir + "/" + file_name;
  // Blocks are written per batch without fsync; the commit fsyncs the file
  // once and the checkpoint records the position of the committed batch.
  wal.sync = WalSync::kNone;
  if (context.resuming) {
    auto it = context.resume_positions.find(state_name);
    uint64_t position = it == context.resume_positions.end() ? 0 : it->second;
    if (!durable::exists(wal.path)) {
      throw DataError(DataErrorKind::kStateCorrupt,
                      std::string("the checkpoint needs ") + wal.path +
                          " but it is missing: refusing to resume without the " + state_name +
                          " state (remove the output directory to start over)");
    }
    wal.resume_position = position;
  }
  return wal;
}

#if defined(LUMINA_HAVE_TEXT_CLEANER)
class CleanStage final : public PipelineStage {
 public:
  explicit CleanStage(InvalidUtf8Policy policy) : cleaner_(policy) {}
  const char* name() const override { return "clean"; }
  StageMode mode() const override { return StageMode::kParallel; }
  void process(DocBatch& batch) override {
    KeptDocs kept = gather_kept(batch);
    CleanResult result;
    try {
      result = cleaner_.clean(kept.view);
    } catch (const InvalidUtf8Error& e) {
      uint32_t i = kept.index[e.document()];
      throw DataError(DataErrorKind::kInput,
                      "invalid UTF-8 in document " + std::string(batch.ids[i]) + " of " +
                          batch.shard_path + " at byte " + std::to_string(e.byte_offset()) +
                          " (invalid_utf8 = \"error\")");
    }
    for (size_t j = 0; j < kept.size(); ++j) {
      if (result.status[j] != CleanStatus::kKept) {
        batch.drop(kept.index[j], "clean", clean_status_reason(result.status[j]));
      }
    }
    replace_kept_texts(batch, kept, result.texts);
  }

 private:
  TextCleaner cleaner_;
};
#endif

#if defined(LUMINA_HAVE_QUALITY_FILTER)
// A JSON number that always reads back as a float (so metric columns get one
// type), or null for NaN and infinities, which JSON cannot hold.
void append_double(std::string& out, double v) {
  if (!std::isfinite(v)) {
    out += "null";
    return;
  }
  char number[40];
  int n = std::snprintf(number, sizeof number, "%.17g", v);
  out.append(number, static_cast<size_t>(n));
  if (std::string_view(number, n).find_first_of(".e") == std::string_view::npos) out += ".0";
}

class QualityStage final : public PipelineStage {
 public:
  QualityStage(QualityThresholds thresholds, bool want_metrics)
      : filter_(std::move(thresholds)), want_metrics_(want_metrics) {}
  const char* name() const override { return "quality"; }
  StageMode mode() const override { return StageMode::kParallel; }
  void process(DocBatch& batch) override {
    KeptDocs kept = gather_kept(batch);
    QualityResult result = filter_.evaluate(kept.view, want_metrics_);
    const auto& checks = quality_checks();
    for (size_t j = 0; j < kept.size(); ++j) {
      uint32_t i = kept.index[j];
      if (want_metrics_) {
        std::string& json = batch.metrics_json[i];
        for (size_t m = 0; m < kQualityMetricCount; ++m) {
          json.push_back(m == 0 ? '{' : ',');
          json_text::append_string(json, quality_metric_name(static_cast<QualityMetric>(m)));
          json.push_back(':');
          append_double(json, result.metric(static_cast<QualityMetric>(m), j));
        }
        json.push_back('}');
      }
      if (!result.keep[j]) {
        const int16_t failed = result.failed_check[j];
        if (failed < 0 || static_cast<size_t>(failed) >= checks.size())  // a verdict never computed: a bug, never a crash
          throw std::logic_error("quality stage: document " + std::to_string(i) + " dropped without a failing check");
        batch.drop(i, "quality", checks[static_cast<size_t>(failed)].name);
      }
    }
  }

 private:
  QualityFilter filter_;
  bool want_metrics_;
};
#endif

#if defined(LUMINA_HAVE_DEDUP)
// Exact and near dedup alike: decisions in stream order, drops naming the
// matched document, one log block appended per batch (Note [commit order]).
template <class Engine>
class OrderedDedupStage final : public PipelineStage {
 public:
  OrderedDedupStage(const StageContext& context, const char* name, const char* reason,
                    std::string path, Engine engine)
      : context_(context), name_(name), reason_(reason), path_(std::move(path)),
        engine_(std::move(engine)) {}
  const char* name() const override { return name_; }
  StageMode mode() const override { return StageMode::kOrdered; }
  void process(DocBatch& batch) override {
    KeptDocs kept = gather_kept(batch);
    std::vector<uint8_t> keep(kept.size());
    std::vector<int64_t> matched(kept.size());
    engine_.add(kept.view, kept.refs, keep, matched);
    for (size_t j = 0; j < kept.size(); ++j) {
      if (!keep[j]) {
        batch.drop(kept.index[j], name_, reason_,
                   matched[j] == kNoMatch ? std::string() : ref_name(context_, matched[j]));
      }
    }
    engine_.commit();
    batch.state_positions.emplace_back(name_, engine_.committed_position());
  }
  void sync() override {
    if (!path_.empty()) durable::fsync_path(path_);
  }
  std::vector<std::string> state_files() const override { return {path_}; }

 private:
  const StageContext& context_;
  const char* name_;
  const char* reason_;
  std::string path_;
  Engine engine_;
};

std::unique_ptr<PipelineStage> make_exact_dedup(const StageContext& context, bool normalized) {
  StreamDeduplicatorOptions options;
  options.key = normalized ? DedupKey::kNormalizedText : DedupKey::kText;
  options.wal = wal_options(context, "dedup", "dedup.wal");
  options.memory_keys = exact_dedup_memory_keys();  // Note [exact-dedup keys on disk]
  options.spill_dir = context.state_dir;
  options.num_threads = context.num_threads;
  std::string path = options.wal.path;
  return std::make_unique<OrderedDedupStage<StreamDeduplicator>>(
      context, kExactDedupStage, kExactDuplicateReason, path, StreamDeduplicator(std::move(options)));
}
#endif

#if defined(LUMINA_HAVE_MINHASH)
}  // namespace

MinHashParams minhash_params(const PipelineConfig& config) {
  MinHashParams params;
  params.num_perm = config.minhash_num_perm;
  params.ngram = config.minhash_ngram;
  params.seed = config.minhash_seed;
  params.scheme = parse_minhash_scheme(config.minhash_scheme);
  return params;
}

namespace {
std::unique_ptr<PipelineStage> make_near_dedup(const StageContext& context,
                                               const PipelineConfig& config) {
  MinHashLSHOptions options;
  options.params = minhash_params(config);
  options.bands = config.minhash_bands;
  options.rows = config.minhash_rows;
  options.threshold = config.minhash_threshold;
  options.index = wal_options(context, "minhash", "minhash.lsh");
  options.num_threads = context.num_threads;
  std::string path = options.index.path;
  return std::make_unique<OrderedDedupStage<MinHashLSH>>(context, kNearDedupStage, kNearDuplicateReason, path,
                                                         MinHashLSH(std::move(options)));
}
#endif

#if defined(LUMINA_HAVE_PII_MASKER)
class PiiStage final : public PipelineStage {
 public:
  explicit PiiStage(PiiOptions options) : masker_(options) {}
  const char* name() const override { return "pii"; }
  StageMode mode() const override { return StageMode::kParallel; }
  void process(DocBatch& batch) override {
    KeptDocs kept = gather_kept(batch);
    PiiResult result;
    try {
      result = masker_.mask(kept.view);
    } catch (const std::invalid_argument& e) {
      throw DataError(DataErrorKind::kInput,
                      std::string("PII masking needs valid UTF-8 (enable the cleaner): ") + e.what());
    }
    replace_kept_texts(batch, kept, result.texts);
    for (size_t t = 0; t < kPiiTypeCount; ++t) {
      if (result.counts[t] != 0) {
        batch.counters.emplace_back(std::string("pii.") + pii_type_name(static_cast<PiiType>(t)),
                                    result.counts[t]);
      }
    }
  }

 private:
  PiiMasker masker_;
};
#endif

}  // namespace

std::vector<std::string> FusedPipeline::available_stages() {
  std::vector<std::string> names;
#if defined(LUMINA_HAVE_TEXT_CLEANER)
  names.push_back("clean");
#endif
#if defined(LUMINA_HAVE_QUALITY_FILTER)
  names.push_back("quality");
#endif
#if defined(LUMINA_HAVE_DEDUP)
  names.push_back("dedup");
#endif
#if defined(LUMINA_HAVE_MINHASH)
  names.push_back("minhash");
#endif
#if defined(LUMINA_HAVE_PII_MASKER)
  names.push_back("pii");
#endif
  return names;
}

std::vector<std::unique_ptr<PipelineStage>> make_stages(const PipelineConfig& config,
                                                        const StageContext& context,
                                                        std::vector<std::string>* missing) {
  std::vector<std::unique_ptr<PipelineStage>> stages;
  auto lack = [&](const char* name) {
    if (missing) missing->push_back(name);
  };
  if (config.clean) {
#if defined(LUMINA_HAVE_TEXT_CLEANER)
    InvalidUtf8Policy policy;
    try {
      policy = parse_invalid_utf8_policy(config.invalid_utf8);
    } catch (const std::invalid_argument& e) {
      throw DataError(DataErrorKind::kUsage, e.what());
    }
    stages.push_back(std::make_unique<CleanStage>(policy));
#else
    lack("clean");
#endif
  }
  if (config.quality) {
#if defined(LUMINA_HAVE_QUALITY_FILTER)
    QualityThresholds thresholds;
    try {
      for (const auto& [name, bound] : config.quality_thresholds) thresholds.set(name, bound);
      thresholds.validate();
    } catch (const std::invalid_argument& e) {
      throw DataError(DataErrorKind::kUsage, e.what());
    }
    stages.push_back(std::make_unique<QualityStage>(std::move(thresholds),
                                                    config.writer.write_metrics));
#else
    lack("quality");
#endif
  }
  if (config.dedup) {
#if defined(LUMINA_HAVE_DEDUP)
    stages.push_back(make_exact_dedup(context, config.dedup_normalized));
#else
    lack("dedup");
#endif
  }
  if (config.minhash) {
#if defined(LUMINA_HAVE_MINHASH)
    stages.push_back(make_near_dedup(context, config));
#else
    lack("minhash");
#endif
  }
  if (config.pii) {
#if defined(LUMINA_HAVE_PII_MASKER)
    PiiOptions options;
    if (!config.pii_types.empty()) {
      options.enabled.fill(false);
      for (const auto& name : config.pii_types) {
        try {
          options.enabled[static_cast<size_t>(parse_pii_type(name))] = true;
        } catch (const std::invalid_argument& e) {
          throw DataError(DataErrorKind::kUsage, e.what());
        }
      }
    }
    options.keep_private_ip = config.pii_keep_private_ip;
    try {
      stages.push_back(std::make_unique<PiiStage>(options));
    } catch (const std::runtime_error& e) {
      lack("pii");
    }
#else
    lack("pii");
#endif
  }
  return stages;
}

}  // namespace luminamoon
