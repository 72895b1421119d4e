// RunTotals, CommitRecord and the manifest: hand-written JSON out, simdjson in.
#include "data/pipeline/run_state.h"

#include <simdjson.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "data/writer/json_text.h"
#include "luminamoon/data_error.h"

namespace luminamoon {
namespace {

void key(std::string& out, std::string_view name) {
  if (out.back() != '{') out.push_back(',');
  json_text::append_string(out, name);
  out.push_back(':');
}

simdjson::dom::element parse(simdjson::dom::parser& parser, std::string_view json,
                             const char* what) {
  simdjson::dom::element root;
  auto error = parser.parse(json.data(), json.size()).get(root);
  if (error) {
    throw DataError(DataErrorKind::kStateCorrupt,
                    std::string(what) + " is not valid JSON: " + simdjson::error_message(error));
  }
  return root;
}

uint64_t u64(simdjson::dom::element e, const char* name) {
  uint64_t v = 0;
  if (e[name].get(v)) throw DataError(DataErrorKind::kStateCorrupt, std::string("missing ") + name);
  return v;
}

// A member that must have one type; a missing or mistyped one is a corrupt
// state file (exit 4), never a simdjson exception (exit 1).
template <class T>
T member(simdjson::dom::element e, const char* name, const char* what) {
  T v{};
  if (auto error = e[name].get(v)) {
    throw DataError(DataErrorKind::kStateCorrupt, std::string(what) + ": '" + name + "' " +
                                                      (error == simdjson::NO_SUCH_FIELD ? "is missing"
                                                                                       : "has the wrong type"));
  }
  return v;
}

template <class T>
T value_of(simdjson::dom::element e, const char* what) {
  T v{};
  if (e.get(v)) throw DataError(DataErrorKind::kStateCorrupt, std::string(what) + " has the wrong type");
  return v;
}

// The examples lists of RunTotals: [{shard, line, message}, ...].
void examples_json(std::string& out, const std::vector<MalformedRecord>& records,
                   const std::vector<std::string>& shards) {
  out.push_back('[');
  for (size_t i = 0; i < records.size(); ++i) {
    if (i) out.push_back(',');
    out.push_back('{');
    key(out, "shard"); json_text::append_string(out, shards[i]);
    key(out, "line"); out += std::to_string(records[i].line);
    key(out, "message"); json_text::append_string(out, records[i].message);
    out.push_back('}');
  }
  out.push_back(']');
}

void examples_from(simdjson::dom::element root, const char* name, bool damaged,
                   std::vector<MalformedRecord>& records, std::vector<std::string>& shards) {
  simdjson::dom::array list;
  if (root[name].get(list)) return;  // older state files have no shards_damaged
  for (auto e : list) {
    std::string_view shard, message;
    uint64_t line = 0;
    if (e["shard"].get(shard)) shard = {};
    if (e["message"].get(message)) message = {};
    if (e["line"].get(line)) line = {};
    records.push_back({0, line, std::string(message), damaged});
    shards.emplace_back(shard);
  }
}

}  // namespace

void RunTotals::add_batch(const DocBatch& batch) {
  records_in += batch.records_in;
  malformed += batch.malformed.size();
  documents += batch.size();
  bytes_in += batch.bytes_in;
  for (size_t i = 0; i < batch.size(); ++i) {
    if (batch.kept(i)) ++kept;
    else ++dropped[batch.drop_stage[i]][batch.drop_reason[i]];
  }
  for (const auto& [name, count] : batch.counters) counters[name] += count;
  for (const auto& bad : batch.malformed) {
    ++dropped["reader"]["malformed"];
    if (malformed_examples.size() < kMaxExamples) {
      malformed_examples.push_back(bad);
      malformed_shards.push_back(batch.shard_path);
    }
    if (bad.shard_damaged) {
      damaged.push_back(bad);
      damaged_shards.push_back(batch.shard_path);
    }
  }
}

void RunTotals::merge(const RunTotals& o) {
  records_in += o.records_in;
  malformed += o.malformed;
  documents += o.documents;
  kept += o.kept;
  bytes_in += o.bytes_in;
  bytes_out += o.bytes_out;
  parts += o.parts;
  for (const auto& [stage, reasons] : o.dropped)
    for (const auto& [reason, n] : reasons) dropped[stage][reason] += n;
  for (const auto& [name, n] : o.counters) counters[name] += n;
  for (size_t i = 0; i < o.malformed_examples.size() && malformed_examples.size() < kMaxExamples; ++i) {
    malformed_examples.push_back(o.malformed_examples[i]);
    malformed_shards.push_back(o.malformed_shards[i]);
  }
  damaged.insert(damaged.end(), o.damaged.begin(), o.damaged.end());
  damaged_shards.insert(damaged_shards.end(), o.damaged_shards.begin(), o.damaged_shards.end());
}

std::string RunTotals::to_json() const {
  std::string out = "{";
  key(out, "records_in"); out += std::to_string(records_in);
  key(out, "documents_in"); out += std::to_string(documents);
  key(out, "records_malformed"); out += std::to_string(malformed);
  key(out, "documents_kept"); out += std::to_string(kept);
  key(out, "documents_dropped"); out += std::to_string(documents - kept);
  key(out, "bytes_in"); out += std::to_string(bytes_in);
  key(out, "bytes_out"); out += std::to_string(bytes_out);
  key(out, "parts"); out += std::to_string(parts);
  key(out, "dropped");
  out.push_back('{');
  for (const auto& [stage, reasons] : dropped) {
    key(out, stage);
    out.push_back('{');
    for (const auto& [reason, n] : reasons) {
      key(out, reason);
      out += std::to_string(n);
    }
    out.push_back('}');
  }
  out.push_back('}');
  key(out, "counters");
  out.push_back('{');
  for (const auto& [name, n] : counters) {
    key(out, name);
    out += std::to_string(n);
  }
  out.push_back('}');
  key(out, "malformed_examples");
  examples_json(out, malformed_examples, malformed_shards);
  key(out, "shards_damaged");
  examples_json(out, damaged, damaged_shards);
  out.push_back('}');
  return out;
}

RunTotals RunTotals::from_json(std::string_view json) {
  simdjson::dom::parser parser;
  auto root = parse(parser, json, "run totals");
  RunTotals t;
  t.records_in = u64(root, "records_in");
  t.documents = u64(root, "documents_in");
  t.malformed = u64(root, "records_malformed");
  t.kept = u64(root, "documents_kept");
  t.bytes_in = u64(root, "bytes_in");
  t.bytes_out = u64(root, "bytes_out");
  t.parts = u64(root, "parts");
  simdjson::dom::object dropped, counters;
  if (!root["dropped"].get(dropped)) {
    for (auto [stage, reasons] : dropped) {
      auto& into = t.dropped[std::string(stage)];
      for (auto [reason, n] : value_of<simdjson::dom::object>(reasons, "run totals: a dropped stage")) {
        into[std::string(reason)] = value_of<uint64_t>(n, "run totals: a dropped count");
      }
    }
  }
  if (!root["counters"].get(counters)) {
    for (auto [name, n] : counters) t.counters[std::string(name)] = value_of<int64_t>(n, "run totals: a counter");
  }
  examples_from(root, "malformed_examples", false, t.malformed_examples, t.malformed_shards);
  examples_from(root, "shards_damaged", true, t.damaged, t.damaged_shards);
  return t;
}

std::string CommitRecord::to_json() const {
  std::string out = "{";
  key(out, "part"); out += std::to_string(part);
  key(out, "coordinate");
  out += "{\"shard_id\":" + std::to_string(coordinate.shard_id) +
         ",\"byte_offset\":" + std::to_string(coordinate.byte_offset) +
         ",\"row_group_idx\":" + std::to_string(coordinate.row_group_idx) +
         ",\"row_offset_in_page\":" + std::to_string(coordinate.row_offset_in_page) +
         ",\"global_row_idx\":" + std::to_string(coordinate.global_row_idx) + "}";
  key(out, "positions");
  out.push_back('{');
  for (const auto& [name, position] : positions) {
    key(out, name);
    out += std::to_string(position);
  }
  out.push_back('}');
  key(out, "files");
  out.push_back('[');
  for (size_t i = 0; i < files.size(); ++i) {
    if (i) out.push_back(',');
    out.push_back('{');
    key(out, "path"); json_text::append_string(out, files[i].path);
    key(out, "size"); out += std::to_string(files[i].size);
    key(out, "crc32"); out += std::to_string(files[i].crc32);
    out.push_back('}');
  }
  out.push_back(']');
  key(out, "totals");
  out += totals.to_json();
  out.push_back('}');
  return out;
}

CommitRecord CommitRecord::from_json(std::string_view json) {
  simdjson::dom::parser parser;
  auto root = parse(parser, json, "commit record");
  CommitRecord r;
  r.part = u64(root, "part");
  simdjson::dom::object positions;
  if (!root["positions"].get(positions)) {
    for (auto [name, v] : positions) r.positions[std::string(name)] = value_of<uint64_t>(v, "commit record: a position");
  }
  simdjson::dom::array files;
  if (!root["files"].get(files)) {  // older commit records have none
    for (auto f : files) {
      r.files.push_back({std::string(member<std::string_view>(f, "path", "commit record file")),
                         member<uint64_t>(f, "size", "commit record file"),
                         static_cast<uint32_t>(member<uint64_t>(f, "crc32", "commit record file"))});
    }
  }
  auto totals = member<simdjson::dom::object>(root, "totals", "commit record");
  r.totals = RunTotals::from_json(simdjson::to_string(totals));
  return r;
}

ShardStat stat_shard(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    throw DataError(DataErrorKind::kInput, "[stat] " + path + ": " + std::strerror(errno));
  }
  ShardStat s;
  s.path = path;
  s.size = static_cast<uint64_t>(st.st_size);
  s.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  return s;
}

std::string manifest_json(const std::vector<ShardStat>& shards, const std::string& fingerprint) {
  std::string out = "{";
  key(out, "version"); out += "1";
  key(out, "config"); json_text::append_string(out, fingerprint);
  key(out, "shards");
  out.push_back('[');
  for (size_t i = 0; i < shards.size(); ++i) {
    if (i) out.push_back(',');
    out.push_back('{');
    key(out, "path"); json_text::append_string(out, shards[i].path);
    key(out, "size"); out += std::to_string(shards[i].size);
    key(out, "mtime_ns"); out += std::to_string(shards[i].mtime_ns);
    out.push_back('}');
  }
  out += "]}\n";
  return out;
}

void check_manifest(std::string_view json, const std::vector<ShardStat>& shards,
                    const std::string& fingerprint) {
  simdjson::dom::parser parser;
  auto root = parse(parser, json, "manifest.json");
  std::string_view config;
  if (root["config"].get(config) || config != fingerprint) {
    throw DataError(DataErrorKind::kInputChanged,
                    "the configuration differs from the checkpointed run's; resume needs the "
                    "same settings (or use --no-resume to start over)");
  }
  simdjson::dom::array list;
  if (root["shards"].get(list)) throw DataError(DataErrorKind::kStateCorrupt, "manifest.json has no shards");
  if (list.size() != shards.size()) {
    throw DataError(DataErrorKind::kInputChanged,
                    "the inputs differ from the checkpointed run's: " + std::to_string(list.size()) +
                        " shards then, " + std::to_string(shards.size()) + " now");
  }
  size_t i = 0;
  for (auto entry : list) {
    std::string_view path;
    uint64_t size = 0;
    int64_t mtime = 0;
    if (entry["path"].get(path)) path = {};
    if (entry["size"].get(size)) size = {};
    if (entry["mtime_ns"].get(mtime)) mtime = {};
    const ShardStat& now = shards[i++];
    if (path != json_text::valid_utf8(now.path)) {  // paths are stored as UTF-8 JSON
      throw DataError(DataErrorKind::kInputChanged,
                      "input shard " + std::to_string(i - 1) + " was " + std::string(path) +
                          ", now " + now.path + ": the inputs changed since the checkpoint");
    }
    if (size != now.size || mtime != now.mtime_ns) {
      throw DataError(DataErrorKind::kInputChanged,
                      "input shard " + now.path + " changed since the checkpoint (size " +
                          std::to_string(size) + " -> " + std::to_string(now.size) +
                          ", mtime changed: " + (mtime != now.mtime_ns ? "yes" : "no") +
                          "); resuming would mix two versions of it (use --no-resume)");
    }
  }
}

}  // namespace luminamoon
