// RunTotals, the manifest and the commit records: what a checkpointed run
// keeps beside the .meta file so that a resumed run continues its summary and
// restarts its stages exactly where the checkpoint left them.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "luminamoon/doc_batch.h"
#include "luminamoon/stream_coordinate.h"

namespace luminamoon {

struct RunTotals {
  uint64_t records_in = 0;   // records read, malformed ones included
  uint64_t malformed = 0;
  uint64_t documents = 0;    // well-formed documents
  uint64_t kept = 0;
  uint64_t bytes_in = 0;     // decompressed input bytes
  uint64_t bytes_out = 0;    // bytes of the kept part files
  uint64_t parts = 0;
  std::map<std::string, std::map<std::string, uint64_t>> dropped;  // stage -> reason -> count
  std::map<std::string, int64_t> counters;
  std::vector<MalformedRecord> malformed_examples;  // the first kMaxExamples
  std::vector<std::string> malformed_shards;        // shard path of each example
  // Shards that could not be decoded to their end (every one, in order).
  std::vector<MalformedRecord> damaged;
  std::vector<std::string> damaged_shards;

  static constexpr size_t kMaxExamples = 100;
  void add_batch(const DocBatch& batch);
  void merge(const RunTotals& other);
  std::string to_json() const;        // the members above as one JSON object
  static RunTotals from_json(std::string_view json);
};

// One commit's record: _state/commit-<part>.json, written (durably) after the
// part files and the stage logs, before the .meta slot.
struct CommitRecord {
  uint64_t part = 0;
  StreamCoordinate coordinate;
  std::map<std::string, uint64_t> positions;  // stage state -> log bytes
  RunTotals totals;                           // of this part only
  // The part files this commit made (relative to the output directory) with
  // their sizes and CRC-32 (zlib) checksums, verified when a run resumes.
  struct PartFile {
    std::string path;
    uint64_t size = 0;
    uint32_t crc32 = 0;
  };
  std::vector<PartFile> files;
  std::string to_json() const;
  static CommitRecord from_json(std::string_view json);
};

struct ShardStat {
  std::string path;
  uint64_t size = 0;
  int64_t mtime_ns = 0;
};
ShardStat stat_shard(const std::string& path);  // DataError(kInput) when missing

// _state/manifest.json: the inputs (with size and mtime) and the config
// fingerprint of the run the checkpoint belongs to.
std::string manifest_json(const std::vector<ShardStat>& shards, const std::string& fingerprint);
// Throws DataError(kInputChanged) naming the first difference.
void check_manifest(std::string_view json, const std::vector<ShardStat>& shards,
                    const std::string& fingerprint);

}  // namespace luminamoon
