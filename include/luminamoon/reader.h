// Readers: turn one input shard (jsonl/ndjson plain/.gz/.zst, txt, parquet)
// into DocBatches, resumable from a StreamCoordinate.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "luminamoon/doc_batch.h"
#include "luminamoon/stream_coordinate.h"

namespace luminamoon {

enum class TxtMode { kFile, kLine, kParagraph };
enum class ShardFormat { kJsonl, kTxt, kParquet };
enum class Compression { kNone, kGzip, kZstd };

struct ReaderOptions {
  std::string text_field = "text";
  std::string id_field = "id";
  TxtMode txt_mode = TxtMode::kFile;
  size_t batch_docs = 2048;          // a batch ends at this many documents
  // ... or once its text reaches this many bytes. 1 MiB (was 4): each batch
  // in flight holds its text several times over (raw, cleaned, masked, kept),
  // and 2 x threads + 2 of them exist at once; at 4 MiB they set the CLI's
  // peak (issue 15, session 4: 0.1 GB 276 -> 204 MB, 0.4 GB 289 -> 229 MB,
  // the same CPU seconds within the noise).
  size_t batch_bytes = 1u << 20;
  // A record (line, txt document or paragraph, Parquet text value) longer than
  // this is a counted rejection; reading goes on at the next one, and memory
  // stays bounded by about this size (Note [bounded lines] in line_reader.cc).
  size_t max_record_bytes = size_t{64} << 20;
  // Text that is not valid UTF-8 is a counted rejection (the pipeline sets it
  // when the cleaner, which would repair or drop such text, is off), so that
  // no invalid string reaches an Arrow/Parquet string column.
  bool reject_invalid_utf8 = false;
};

struct ShardInfo {
  std::string path;
  uint32_t shard_id = 0;
  ShardFormat format = ShardFormat::kJsonl;
  Compression compression = Compression::kNone;
};

// Detects the format from the extension (.jsonl/.ndjson/.json[.gz|.zst],
// .txt[.gz|.zst], .parquet); throws DataError(kUsage) for anything else.
ShardInfo describe_shard(const std::string& path, uint32_t shard_id);

class ShardReader {
 public:
  virtual ~ShardReader() = default;
  // Fills `batch` (cleared first) with the next documents of the shard; a
  // batch never spans shards. Returns false, with an empty batch, at the end.
  virtual bool next(DocBatch& batch) = 0;
};

// Opens a shard positioned at `start` (a zero coordinate of that shard, or a
// checkpoint's). Parquet needs the Arrow extension to have registered itself.
std::unique_ptr<ShardReader> open_shard(const ShardInfo& shard, const ReaderOptions& options,
                                        const StreamCoordinate& start);

using ShardReaderFactory = std::function<std::unique_ptr<ShardReader>(
    const ShardInfo&, const ReaderOptions&, const StreamCoordinate&)>;
// Installed by the Arrow I/O extension (luminamoon._data_io).
void register_parquet_reader(ShardReaderFactory factory);
bool parquet_reader_available();

}  // namespace luminamoon
