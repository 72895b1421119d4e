// Shard format detection and the reader registry (Parquet comes from the
// Arrow extension, which registers its factory when it is imported).
#include "luminamoon/reader.h"

#include <mutex>

#include "data/reader/shard_readers.h"
#include "luminamoon/data_error.h"

namespace luminamoon {
namespace {

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}
ShardReaderFactory& parquet_factory() {
  static ShardReaderFactory f;
  return f;
}

}  // namespace

ShardInfo describe_shard(const std::string& path, uint32_t shard_id) {
  ShardInfo info;
  info.path = path;
  info.shard_id = shard_id;
  std::string name = path;
  for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (ends_with(name, ".gz")) {
    info.compression = Compression::kGzip;
    name.resize(name.size() - 3);
  } else if (ends_with(name, ".zst")) {
    info.compression = Compression::kZstd;
    name.resize(name.size() - 4);
  } else if (ends_with(name, ".zstd")) {
    info.compression = Compression::kZstd;
    name.resize(name.size() - 5);
  }
  if (ends_with(name, ".jsonl") || ends_with(name, ".ndjson") || ends_with(name, ".json")) {
    info.format = ShardFormat::kJsonl;
  } else if (ends_with(name, ".txt") || ends_with(name, ".text")) {
    info.format = ShardFormat::kTxt;
  } else if (ends_with(name, ".parquet") && info.compression == Compression::kNone) {
    info.format = ShardFormat::kParquet;
  } else {
    throw DataError(DataErrorKind::kUsage,
                    "unsupported input format: " + path +
                        " (known: .jsonl, .ndjson, .json, .txt, each optionally .gz or .zst; "
                        ".parquet)");
  }
  return info;
}

void register_parquet_reader(ShardReaderFactory factory) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  parquet_factory() = std::move(factory);
}

bool parquet_reader_available() {
  std::lock_guard<std::mutex> lock(registry_mutex());
  return static_cast<bool>(parquet_factory());
}

std::unique_ptr<ShardReader> open_shard(const ShardInfo& shard, const ReaderOptions& options,
                                        const StreamCoordinate& start) {
  switch (shard.format) {
    case ShardFormat::kJsonl:
      return make_jsonl_reader(shard, options, start);
    case ShardFormat::kTxt:
      return make_txt_reader(shard, options, start);
    case ShardFormat::kParquet: {
      ShardReaderFactory factory;
      {
        std::lock_guard<std::mutex> lock(registry_mutex());
        factory = parquet_factory();
      }
      if (!factory) {
        throw DataError(DataErrorKind::kUnavailable,
                        "cannot read " + shard.path +
                            ": Parquet input needs the Arrow I/O extension "
                            "(luminamoon._data_io, built against the pyarrow wheel), "
                            "which is not available");
      }
      return factory(shard, options, start);
    }
  }
  throw DataError(DataErrorKind::kUsage, "unknown shard format for " + shard.path);
}

}  // namespace luminamoon
