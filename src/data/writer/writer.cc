// CorpusWriter, the NDJSON serializer and the serializer registry.
#include "luminamoon/writer.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <algorithm>
#include <filesystem>
#include <mutex>

#include "data/state/durable_io.h"
#include "data/writer/json_text.h"
#include "data/writer/ndjson_part.h"
#include "data/writer/arrow_part.h"
#include "luminamoon/data_error.h"

namespace luminamoon {
namespace {

std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}
TableSerializerFactory& arrow_factory() {
  static TableSerializerFactory f;
  return f;
}

// NDJSON for make_serializer's callers; CorpusWriter streams its NDJSON parts
// itself (Note [NDJSON parts are streamed]).
class NdjsonStream final : public PartStream {
 public:
  NdjsonStream(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  void write_group(const PartTable& group) override {
    std::string out;
    out.reserve(1 << 20);
    for (size_t i = 0; i < group.rows(); ++i) {
      append_ndjson_row(out, group.text_field, group.text_field.empty() ? std::string_view() : group.text[i],
                        group.fields[i]);
      if (out.size() >= (1u << 20)) {
        durable::write_all(fd_, out, path_);
        out.clear();
      }
    }
    durable::write_all(fd_, out, path_);
  }
  void close() override {}

 private:
  int fd_;
  std::string path_;
};

class NdjsonSerializer final : public TableSerializer {
 public:
  std::unique_ptr<PartStream> open(int fd, const std::string& path, const std::string&) override {
    return std::make_unique<NdjsonStream>(fd, path);
  }
};

void append_field(std::string& object, std::string_view key) {
  object.push_back(object.empty() ? '{' : ',');
  json_text::append_string(object, key);
  object.push_back(':');
}

}  // namespace

OutputFormat parse_output_format(const std::string& name) {
  if (name == "parquet") return OutputFormat::kParquet;
  if (name == "arrow" || name == "arrow_file" || name == "ipc") return OutputFormat::kArrowFile;
  if (name == "arrow_stream") return OutputFormat::kArrowStream;
  if (name == "ndjson" || name == "jsonl") return OutputFormat::kNdjson;
  throw DataError(DataErrorKind::kUsage, "unknown output format '" + name +
                                             "' (known: parquet, arrow, arrow_stream, ndjson)");
}

const char* output_format_name(OutputFormat format) {
  switch (format) {
    case OutputFormat::kParquet: return "parquet";
    case OutputFormat::kArrowFile: return "arrow";
    case OutputFormat::kArrowStream: return "arrow_stream";
    case OutputFormat::kNdjson: return "ndjson";
  }
  return "?";
}

const char* output_format_extension(OutputFormat format) {
  switch (format) {
    case OutputFormat::kParquet: return ".parquet";
    case OutputFormat::kArrowFile: return ".arrow";
    case OutputFormat::kArrowStream: return ".arrows";
    case OutputFormat::kNdjson: return ".ndjson";
  }
  return "";
}

std::string part_file_name(uint64_t part_index, OutputFormat format) {
  char name[64];
  std::snprintf(name, sizeof name, "part-%08llu%s", static_cast<unsigned long long>(part_index),
                output_format_extension(format));
  return name;
}

void register_arrow_serializers(TableSerializerFactory factory) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  arrow_factory() = std::move(factory);
}

bool arrow_serializers_available() {
  std::lock_guard<std::mutex> lock(registry_mutex());
  return static_cast<bool>(arrow_factory());
}

std::unique_ptr<TableSerializer> make_serializer(OutputFormat format, const WriterOptions& options) {
  if (format == OutputFormat::kNdjson) return std::make_unique<NdjsonSerializer>();
  TableSerializerFactory factory;
  {
    std::lock_guard<std::mutex> lock(registry_mutex());
    factory = arrow_factory();
  }
  if (!factory) {
    throw DataError(DataErrorKind::kUnavailable,
                    std::string("output format '") + output_format_name(format) +
                        "' needs the Arrow I/O extension (luminamoon._data_io, built against "
                        "the pyarrow wheel), which is not available; use --format ndjson");
  }
  return factory(format, options);
}

CorpusWriter::CorpusWriter(std::string output_dir, std::string text_field, WriterOptions options)
    : output_dir_(std::move(output_dir)), options_(std::move(options)) {
  durable::make_dirs(output_dir_);
  if (options_.write_dropped) durable::make_dirs(output_dir_ + "/dropped");
  if (options_.write_metrics) durable::make_dirs(output_dir_ + "/metrics");
  // A part's final path, asked for when its first row comes.
  auto path_in = [this](std::string sub) {
    return [this, sub] { return output_dir_ + sub + part_file_name(next_part_, options_.format); };
  };
  if (options_.format == OutputFormat::kNdjson) {
    kept_ = std::make_unique<NdjsonPart>(std::move(text_field), path_in("/"));
    dropped_ = std::make_unique<NdjsonPart>("text", path_in("/dropped/"));
    metrics_ = std::make_unique<NdjsonPart>("", path_in("/metrics/"));
    return;
  }
  serializer_ = make_serializer(options_.format, options_);
  const uint64_t group = static_cast<uint64_t>(std::max<int64_t>(1, options_.parquet_row_group_rows));
  kept_ = std::make_unique<ArrowPart>(std::move(text_field), group, *serializer_, path_in("/"));
  dropped_ = std::make_unique<ArrowPart>("text", group, *serializer_, path_in("/dropped/"));
  metrics_ = std::make_unique<ArrowPart>("", group, *serializer_, path_in("/metrics/"));
}

CorpusWriter::~CorpusWriter() = default;

void CorpusWriter::discard_uncommitted(uint64_t committed_parts) {
  namespace fs = std::filesystem;
  for (const char* sub : {"", "/dropped", "/metrics"}) {
    fs::path dir = output_dir_ + sub;
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) continue;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      std::string name = entry.path().filename().string();
      if (name.rfind("part-", 0) != 0) continue;
      bool temp = name.size() > 4 && name.substr(name.size() - 4) == ".tmp";
      unsigned long long index = std::strtoull(name.c_str() + 5, nullptr, 10);
      if (temp || index >= committed_parts) fs::remove(entry.path(), ec);
    }
  }
  next_part_ = committed_parts;
}

void CorpusWriter::add(const DocBatch& batch) {
  std::string object;
  for (size_t i = 0; i < batch.size(); ++i) {
    ++rows_seen_;
    if (batch.kept(i)) {
      kept_->push(batch.text[i], batch.metadata[i]);
    } else if (options_.write_dropped) {
      object.clear();
      append_field(object, "id");
      json_text::append_string(object, batch.ids[i]);
      append_field(object, "reason");
      json_text::append_string(object, batch.drop_reason[i]);
      append_field(object, "stage");
      json_text::append_string(object, batch.drop_stage[i]);
      append_field(object, "detail");
      json_text::append_string(object, batch.drop_detail[i]);
      append_field(object, "shard");
      json_text::append_string(object, batch.shard_path);
      append_field(object, "line");
      object += std::to_string(batch.lines[i]);
      object.push_back('}');
      dropped_->push(batch.text[i], object);
    }
    if (options_.write_metrics && !batch.metrics_json[i].empty()) {
      object.clear();
      append_field(object, "id");
      json_text::append_string(object, batch.ids[i]);
      std::string_view metrics = batch.metrics_json[i];
      if (metrics.size() > 2) {
        object.push_back(',');
        object.append(metrics.substr(1, metrics.size() - 2));
      }
      object.push_back('}');
      metrics_->push({}, object, /*with_text=*/false);
    }
  }
  if (options_.write_dropped) {
    // Malformed records are drops too: every rejection is explained.
    for (const auto& bad : batch.malformed) {
      object.clear();
      append_field(object, "id");
      json_text::append_string(
          object, std::filesystem::path(batch.shard_path).filename().string() + ":" +
                      std::to_string(bad.line));
      append_field(object, "reason");
      object += "\"malformed\"";
      append_field(object, "stage");
      object += "\"reader\"";
      append_field(object, "detail");
      json_text::append_string(object, bad.message);
      append_field(object, "shard");
      json_text::append_string(object, batch.shard_path);
      append_field(object, "line");
      object += std::to_string(bad.line);
      object.push_back('}');
      dropped_->push({}, object);
    }
  }
}

bool CorpusWriter::part_full() const {
  return kept_->rows() >= options_.part_max_rows || kept_->text_bytes() >= options_.part_max_bytes;
}

uint64_t CorpusWriter::write_part() {
  const std::string name = part_file_name(next_part_, options_.format);
  const uint64_t bytes = kept_->publish(output_dir_ + "/" + name);
  if (options_.write_dropped) dropped_->publish(output_dir_ + "/dropped/" + name);
  if (options_.write_metrics) metrics_->publish(output_dir_ + "/metrics/" + name);
  rows_seen_ = 0;
  ++next_part_;
  return bytes;
}

}  // namespace luminamoon
