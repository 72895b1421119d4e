// FusedPipeline: the stages on a oneTBB parallel_pipeline (reading, processing
// and writing overlap; at most max_batches_in_flight batches exist at once),
// and the commit protocol of Note [commit order].
#include "luminamoon/fused_pipeline.h"

#include <fcntl.h>
#include <sys/file.h>
#include <tbb/global_control.h>
#include <unistd.h>
#include <tbb/parallel_pipeline.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
#include <thread>

#include "data/common/parallel.h"
#include "data/pipeline/run_state.h"
#include "data/pipeline/stage_runner.h"
#include "data/state/crash_point.h"
#include "data/state/durable_io.h"
#include "data/writer/json_text.h"
#include "luminamoon/data_error.h"
#include "luminamoon/state_tracker.h"

namespace luminamoon {

// Note [commit order]: a commit covers every batch written since the last one.
//   1. the part files (kept, dropped, metrics) are written under a temporary
//      name, fsynced and renamed into place (then the directory is fsynced);
//   2. the dedup WAL and the LSH index are fsynced (their blocks were written
//      per batch; the commit record names the byte position after the last
//      covered batch, and a resumed run cuts the logs back to it);
//   3. _state/commit-<part>.json (positions and counts) is written durably;
//   4. the .meta slot (coordinate after the last covered batch, parts count).
// A crash before 4 leaves the previous slot in force: the resumed run deletes
// parts numbered >= its parts count, cuts the logs back and re-reads from its
// coordinate; batches and parts are cut at the same places as before (batches
// never span shards and close on fixed limits), so the output is identical.

namespace pipeline_internal {

namespace fs = std::filesystem;

std::string commit_record_path(const std::string& state_dir, uint64_t part) {
  char name[64];
  std::snprintf(name, sizeof name, "/commit-%08llu.json", static_cast<unsigned long long>(part));
  return state_dir + name;
}

int thread_count(const PipelineConfig& config) {
  if (config.num_threads > 0) return config.num_threads;
  return static_cast<int>(tbb::this_task_arena::max_concurrency());
}

// Note [batches in flight]: oneTBB does not destroy the items between filters
// when an exception (a full disk, --strict) cancels the pipeline, so the
// filters pass raw pointers to batches owned by `InFlight`; whatever is in
// flight when a stage throws is freed with it. The sink gets the ownership.
class InFlight {
 public:
  DocBatch* make() {
    auto batch = std::make_unique<DocBatch>();
    DocBatch* raw = batch.get();
    std::lock_guard<std::mutex> lock(mu_);
    batches_.emplace(raw, std::move(batch));
    return raw;
  }
  BatchPtr release(DocBatch* raw) {
    std::lock_guard<std::mutex> lock(mu_);
    auto node = batches_.extract(raw);
    return BatchPtr(std::move(node.mapped()));
  }

 private:
  std::mutex mu_;
  std::map<DocBatch*, std::unique_ptr<DocBatch>> batches_;
};

// Runs `stages` between the source and the sink on a oneTBB pipeline.
void run_stages(const PipelineConfig& config, BatchSource& source,
                std::vector<std::unique_ptr<PipelineStage>>& stages, std::atomic<bool>& cancelled,
                const std::function<void(BatchPtr)>& sink) {
  const int threads = thread_count(config);
  const size_t tokens = config.max_batches_in_flight > 0 ? config.max_batches_in_flight
                                                         : static_cast<size_t>(2 * threads + 2);
  uint64_t sequence = 0;
  InFlight in_flight;
  auto read = tbb::make_filter<void, DocBatch*>(
      tbb::filter_mode::serial_in_order, [&](tbb::flow_control& fc) -> DocBatch* {
        if (cancelled) {
          fc.stop();
          return nullptr;
        }
        DocBatch* batch = in_flight.make();
        if (!source.next(*batch)) {
          in_flight.release(batch);
          fc.stop();
          return nullptr;
        }
        batch->sequence = sequence++;
        return batch;
      });
  // Consecutive stages of one mode share a filter.
  tbb::filter<DocBatch*, DocBatch*> chain = tbb::make_filter<DocBatch*, DocBatch*>(
      tbb::filter_mode::parallel, [](DocBatch* b) { return b; });
  size_t i = 0;
  while (i < stages.size()) {
    size_t j = i;
    while (j < stages.size() && stages[j]->mode() == stages[i]->mode()) ++j;
    std::vector<PipelineStage*> group;
    for (size_t k = i; k < j; ++k) group.push_back(stages[k].get());
    auto mode = stages[i]->mode() == StageMode::kParallel ? tbb::filter_mode::parallel
                                                          : tbb::filter_mode::serial_in_order;
    chain = chain & tbb::make_filter<DocBatch*, DocBatch*>(mode, [group](DocBatch* b) {
              detail::StagesInCallersArena in_pipeline_arena;  // Note [stages in the pipeline's arena]
              for (auto* stage : group) stage->process(*b);
              return b;
            });
    i = j;
  }
  auto write = tbb::make_filter<DocBatch*, void>(tbb::filter_mode::serial_in_order,
                                                 [&](DocBatch* b) { sink(in_flight.release(b)); });
  tbb::task_arena arena(threads);
  arena.execute([&] { tbb::parallel_pipeline(tokens, read & chain & write); });
}

std::vector<ShardInfo> describe_all(const std::vector<std::string>& inputs) {
  std::vector<ShardInfo> shards;
  for (size_t i = 0; i < inputs.size(); ++i) {
    shards.push_back(describe_shard(inputs[i], static_cast<uint32_t>(i)));
  }
  return shards;
}

// Note [inputs outside the output]: a fresh run deletes what an earlier run
// left in the output directory, so an input inside it (the output directory
// passed as an input) would be destroyed before the run could fail on it.
void check_inputs_outside_output(const std::vector<ShardInfo>& shards, const std::string& output_dir) {
  std::error_code ec;
  const fs::path out = fs::weakly_canonical(fs::absolute(output_dir, ec), ec);
  for (const auto& shard : shards) {
    const fs::path in = fs::weakly_canonical(fs::absolute(shard.path, ec), ec);
    auto [o, i] = std::mismatch(out.begin(), out.end(), in.begin(), in.end());
    if (o == out.end()) {
      throw DataError(DataErrorKind::kUsage, "input " + shard.path + " is inside the output directory " +
                                                 output_dir + "; choose an output directory apart from the inputs");
    }
  }
}

// The size and CRC of each part file a commit made (Note [commit order]).
std::vector<CommitRecord::PartFile> part_files(const std::string& output_dir, uint64_t part,
                                               const WriterOptions& options) {
  std::vector<CommitRecord::PartFile> files;
  std::string name = part_file_name(part, options.format);
  std::vector<std::string> paths{name};
  if (options.write_dropped) paths.push_back("dropped/" + name);
  if (options.write_metrics) paths.push_back("metrics/" + name);
  for (const auto& path : paths) {
    auto digest = durable::file_digest(output_dir + "/" + path);
    if (!digest) throw DataError(DataErrorKind::kOutput, "part file " + output_dir + "/" + path + " vanished");
    files.push_back({path, digest->size, digest->crc32});
  }
  return files;
}

// A resumed run builds on the committed parts: each must still be as written.
void verify_part_files(const std::string& output_dir, const CommitRecord& record) {
  for (const auto& file : record.files) {
    const std::string path = output_dir + "/" + file.path;
    auto digest = durable::file_digest(path);
    std::string problem;
    if (!digest) problem = "is missing";
    else if (digest->size != file.size) {
      problem = "has " + std::to_string(digest->size) + " bytes, " + std::to_string(file.size) + " were committed";
    } else if (digest->crc32 != file.crc32) {
      problem = "differs from what was committed (CRC-32 mismatch)";
    }
    if (!problem.empty()) {
      throw DataError(DataErrorKind::kStateCorrupt,
                      "committed part file " + path + " " + problem +
                          "; the output is damaged: rerun with --no-resume to rebuild it");
    }
  }
}

// Note [strict]: a rejected record fails the run before its batch reaches the
// writer, so nothing after the last commit is committed.
void fail_if_strict(const PipelineConfig& config, const DocBatch& batch) {
  if (!config.strict || batch.malformed.empty()) return;
  const MalformedRecord& bad = batch.malformed.front();
  throw DataError(DataErrorKind::kInput,
                  "strict mode: record rejected at " + batch.shard_path + ":" + std::to_string(bad.line) +
                      ": " + bad.message + (bad.shard_damaged ? " (the rest of the shard is lost)" : "") +
                      "; nothing after the last commit was written");
}

std::string now_json_number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

std::string summary_json(const PipelineConfig& config, const RunTotals& all, const RunTotals& session,
                         size_t inputs, bool complete, const std::vector<std::string>& stage_names,
                         const std::vector<std::string>& missing, bool resumed, double seconds) {
  std::string summary = all.to_json();
  summary.pop_back();  // reopen the object to add the run's own figures
  summary += ",\"inputs\":" + std::to_string(inputs);
  summary += ",\"format\":\"" + std::string(output_format_name(config.writer.format)) + "\"";
  summary += ",\"complete\":" + std::string(complete ? "true" : "false");
  summary += ",\"stages\":[";
  for (size_t i = 0; i < stage_names.size(); ++i) summary += (i ? ",\"" : "\"") + stage_names[i] + "\"";
  summary += "],\"stages_missing\":[";
  for (size_t i = 0; i < missing.size(); ++i) summary += (i ? ",\"" : "\"") + missing[i] + "\"";
  summary += "],\"this_run\":{\"resumed\":" + std::string(resumed ? "true" : "false");
  summary += ",\"seconds\":" + now_json_number(seconds);
  summary += ",\"documents\":" + std::to_string(session.documents);
  summary += ",\"bytes_in\":" + std::to_string(session.bytes_in);
  summary += ",\"documents_per_second\":" + now_json_number(seconds > 0 ? session.documents / seconds : 0);
  summary += ",\"mb_per_second\":" + now_json_number(seconds > 0 ? session.bytes_in / seconds / 1e6 : 0);
  summary += ",\"threads\":" + std::to_string(thread_count(config)) + "}}";
  return summary;
}
}  // namespace pipeline_internal

using namespace pipeline_internal;

std::string PipelineConfig::fingerprint() const {
  std::string s;
  auto add = [&](const char* name, const std::string& value) {
    s += name;
    s += '=';
    s += value;
    s += ';';
  };
  add("text_field", reader.text_field);
  add("id_field", reader.id_field);
  add("txt_mode", std::to_string(static_cast<int>(reader.txt_mode)));
  add("batch_docs", std::to_string(reader.batch_docs));
  add("batch_bytes", std::to_string(reader.batch_bytes));
  add("max_record_bytes", std::to_string(reader.max_record_bytes));
  add("format", output_format_name(writer.format));
  add("compression", writer.parquet_compression + ":" + std::to_string(writer.parquet_compression_level));
  add("row_group", std::to_string(writer.parquet_row_group_rows));
  add("part_rows", std::to_string(writer.part_max_rows));
  add("part_bytes", std::to_string(writer.part_max_bytes));
  add("dropped", std::to_string(writer.write_dropped));
  add("metrics", std::to_string(writer.write_metrics));
  add("clean", clean ? invalid_utf8 : "off");
  std::string q = quality ? "on" : "off";
  for (const auto& [name, bound] : quality_thresholds) {
    q += "," + name + ":" + (bound ? now_json_number(*bound) : "none");
  }
  add("quality", q);
  add("dedup", dedup ? (dedup_normalized ? "normalized" : "text") : "off");
  add("minhash", minhash ? std::to_string(minhash_num_perm) + "/" + std::to_string(minhash_ngram) +
                               "/" + std::to_string(minhash_bands) + "x" +
                               std::to_string(minhash_rows) + "/" +
                               now_json_number(minhash_threshold) + "/" +
                               std::to_string(minhash_seed) + "/" + minhash_scheme
                         : "off");
  std::string p = pii ? "on" : "off";
  for (const auto& t : pii_types) p += "," + t;
  if (pii_keep_private_ip) p += ",keep_private_ip";
  add("pii", p);
  return s;
}

FusedPipeline::FusedPipeline(PipelineConfig config) : config_(std::move(config)) {
  // Without the cleaner nothing would repair invalid UTF-8 before the writers.
  if (!config_.clean) config_.reader.reject_invalid_utf8 = true;
}
FusedPipeline::~FusedPipeline() = default;

std::string FusedPipeline::run(const std::vector<std::string>& inputs,
                               const std::string& output_dir, bool resume) {
  const auto started = std::chrono::steady_clock::now();
  cancelled_ = false;
  std::vector<ShardInfo> shards = describe_all(inputs);
  std::vector<ShardStat> stats;
  uint64_t total_bytes = 0;
  for (const auto& shard : shards) {
    stats.push_back(stat_shard(shard.path));
    total_bytes += stats.back().size;
  }
  const std::string state_dir = output_dir + "/_state";
  const std::string meta_path = state_dir + "/checkpoint.meta";
  const std::string manifest_path = state_dir + "/manifest.json";
  const std::string fingerprint = config_.fingerprint();

  check_inputs_outside_output(shards, output_dir);

  // One run per output directory: a second one would interleave commits. The
  // lock dies with its process, so a killed run never leaves it behind.
  durable::make_dirs(output_dir);
  const std::string lock_path = output_dir + "/.luminamoon.lock";
  int lock_fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd < 0 || ::flock(lock_fd, LOCK_EX | LOCK_NB) != 0) {
    if (lock_fd >= 0) ::close(lock_fd);
    throw DataError(DataErrorKind::kOutput,
                    "another run is writing to " + output_dir + " (" + lock_path + " is locked)");
  }
  struct LockGuard {
    int fd;
    ~LockGuard() { ::close(fd); }
  } lock_guard{lock_fd};

  StateTracker tracker(meta_path);
  std::optional<Checkpoint> checkpoint;
  if (resume) checkpoint = tracker.load();  // both slots corrupt: throws, never restarts
  RunTotals previous;
  StageContext context;
  context.state_dir = state_dir;
  context.num_threads = config_.num_threads;
  for (const auto& shard : shards) context.shard_names.push_back(fs::path(shard.path).filename().string());

  if (checkpoint) {
    if (!durable::exists(manifest_path)) {
      throw DataError(DataErrorKind::kStateCorrupt, "checkpoint without " + manifest_path);
    }
    check_manifest(durable::read_file(manifest_path), stats, fingerprint);
    for (uint64_t part = 0; part < checkpoint->output_position; ++part) {
      std::string path = commit_record_path(state_dir, part);
      if (!durable::exists(path)) {
        throw DataError(DataErrorKind::kStateCorrupt, "checkpoint covers part " +
                                                          std::to_string(part) + " but " + path +
                                                          " is missing");
      }
      CommitRecord record = CommitRecord::from_json(durable::read_file(path));
      verify_part_files(output_dir, record);
      previous.merge(record.totals);
      if (part + 1 == checkpoint->output_position) context.resume_positions = record.positions;
    }
    context.resuming = true;
  } else {
    // A fresh run: whatever an earlier, uncheckpointed run left is ours to remove.
    std::error_code ec;
    fs::remove_all(state_dir, ec);
    fs::remove(output_dir + "/summary.json", ec);
    durable::make_dirs(state_dir);
    durable::write_file(manifest_path, manifest_json(stats, fingerprint));
  }

  CorpusWriter writer(output_dir, config_.reader.text_field, config_.writer);
  const uint64_t committed_parts = checkpoint ? checkpoint->output_position : 0;
  writer.discard_uncommitted(committed_parts);
  if (!checkpoint) {
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(state_dir, ec)) {
      std::string name = entry.path().filename().string();
      if (name.rfind("commit-", 0) == 0) fs::remove(entry.path(), ec);
    }
  } else {
    // Commit records past the checkpoint belong to parts that were discarded.
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(state_dir, ec)) {
      std::string name = entry.path().filename().string();
      if (name.rfind("commit-", 0) != 0) continue;
      unsigned long long part = std::strtoull(name.c_str() + 7, nullptr, 10);
      bool temp = name.size() > 4 && name.substr(name.size() - 4) == ".tmp";
      if (temp || part >= committed_parts) fs::remove(entry.path(), ec);
    }
  }

  std::vector<std::string> missing;
  auto stages = make_stages(config_, context, &missing);

  RunTotals session;
  progress_.input_bytes_total = total_bytes;
  progress_.documents_in = previous.documents;
  progress_.documents_kept = previous.kept;
  progress_.bytes_in = previous.bytes_in;
  progress_.parts_committed = committed_parts;
  StreamCoordinate start = checkpoint ? checkpoint->coordinate : StreamCoordinate{};
  uint64_t done = 0;
  for (uint32_t s = 0; s < start.shard_id && s < stats.size(); ++s) done += stats[s].size;
  if (start.shard_id < shards.size() && shards[start.shard_id].compression == Compression::kNone) {
    done += start.byte_offset;
  }
  progress_.input_bytes_done = done;
  progress_.running = true;

  const bool already_finished = checkpoint && (checkpoint->flags & kCheckpointFinished);
  if (!already_finished) {
    StreamSource source(shards, config_.reader, start, progress_, stats);
    RunTotals part_totals;
    StreamCoordinate last_end = start;
    std::map<std::string, uint64_t> positions = context.resume_positions;
    bool pending = false;

    auto commit = [&](bool finished) {
      if (pending) {
        part_totals.bytes_out = writer.write_part();
        part_totals.parts = 1;
        crash_point("part_renamed");
        for (auto& stage : stages) stage->sync();
        crash_point("state_synced");
        CommitRecord record;
        record.part = writer.next_part() - 1;
        record.coordinate = last_end;
        record.positions = positions;
        record.totals = part_totals;
        record.files = part_files(output_dir, record.part, config_.writer);
        durable::write_file(commit_record_path(state_dir, record.part), record.to_json());
      }
      tracker.commit(last_end, writer.next_part(), finished ? kCheckpointFinished : 0);
      crash_point("meta_written");
      session.merge(part_totals);
      part_totals = RunTotals{};
      pending = false;
      progress_.parts_committed = writer.next_part();
    };

    struct NotRunningOnExit {
      PipelineProgress& p;
      ~NotRunningOnExit() { p.running = false; }
    } not_running{progress_};
    run_stages(config_, source, stages, cancelled_, [&](BatchPtr batch) {
      fail_if_strict(config_, *batch);
      writer.add(*batch);
      part_totals.add_batch(*batch);
      last_end = batch->end;
      for (const auto& [name, position] : batch->state_positions) positions[name] = position;
      pending = true;
      progress_.documents_in += batch->size();
      progress_.bytes_in += batch->bytes_in;
      for (size_t i = 0; i < batch->size(); ++i) progress_.documents_kept += batch->kept(i);
      if (writer.part_full()) commit(false);
    });
    if (!cancelled_) commit(true);
  }
  progress_.running = false;

  RunTotals all = previous;
  all.merge(session);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  std::vector<std::string> stage_names;
  for (const auto& stage : stages) stage_names.emplace_back(stage->name());
  std::string summary = summary_json(config_, all, session, shards.size(), !cancelled_, stage_names,
                                     missing, checkpoint.has_value(), seconds);
  durable::write_file(output_dir + "/summary.json", summary + "\n");
  return summary;
}

void FusedPipeline::stream(const std::vector<std::string>& inputs,
                           const std::function<bool(std::shared_ptr<DocBatch>)>& sink) {
  cancelled_ = false;
  std::vector<ShardInfo> shards = describe_all(inputs);
  std::vector<ShardStat> stats;
  for (const auto& shard : shards) stats.push_back(stat_shard(shard.path));
  StageContext context;  // no state_dir: the stage logs stay in memory
  context.num_threads = config_.num_threads;
  for (const auto& shard : shards) context.shard_names.push_back(fs::path(shard.path).filename().string());
  auto stages = make_stages(config_, context, nullptr);
  StreamSource source(shards, config_.reader, StreamCoordinate{}, progress_, stats);
  progress_.running = true;
  try {
    run_stages(config_, source, stages, cancelled_, [&](BatchPtr batch) {
      fail_if_strict(config_, *batch);
      progress_.documents_in += batch->size();
      progress_.bytes_in += batch->bytes_in;
      if (!cancelled_ && !sink(std::move(batch))) cancelled_ = true;
    });
  } catch (...) {
    progress_.running = false;
    throw;
  }
  progress_.running = false;
}

}  // namespace luminamoon
