// Writers: the kept documents (and optionally the dropped ones and the
// per-document metrics) as numbered part files, published atomically.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "luminamoon/doc_batch.h"

namespace luminamoon {

enum class OutputFormat { kParquet, kArrowFile, kArrowStream, kNdjson };
// "parquet" | "arrow" (IPC file) | "arrow_stream" | "ndjson"; DataError(kUsage) otherwise.
OutputFormat parse_output_format(const std::string& name);
const char* output_format_name(OutputFormat format);
const char* output_format_extension(OutputFormat format);  // ".parquet", ".arrow", ...

struct WriterOptions {
  OutputFormat format = OutputFormat::kParquet;
  std::string parquet_compression = "zstd";
  // Arrow's own default for zstd (pyarrow's write_table(compression="zstd")): on real
  // text 6% less CPU for the whole run than level 3, for 11% larger parts (docs/benchmarks.md, row P2f).
  int parquet_compression_level = 1;
  int64_t parquet_row_group_rows = 65536;
  uint64_t part_max_rows = 100000;      // a part closes once it holds this many documents
  uint64_t part_max_bytes = 256u << 20; // ... or this many text bytes
  bool write_dropped = false;           // dropped/part-N: the dropped documents and why
  bool write_metrics = false;           // metrics/part-N: per-document quality metrics
};

// The rows of one part file: an optional text column (named text_field) and
// per-row JSON objects whose fields become the other columns (every row's
// object may differ; Note [metadata columns] in src/python/data_io/arrow_table_serializer.cc).
struct PartTable {
  std::string text_field;  // empty: no text column
  StringColumn text;
  StringColumn fields;     // one JSON object (or "") per row
  size_t rows() const { return fields.size(); }
  uint64_t text_bytes() const { return text.bytes.size(); }
  void clear() {
    text.clear();
    fields.clear();
  }
};

// One part file of a serializer's format, written a row group (Parquet) or a
// record batch (Arrow IPC) at a time as the part's rows come (Note [Arrow
// parts are streamed] in src/data/writer/arrow_part.h).
class PartStream {
 public:
  virtual ~PartStream() = default;
  // Appends `group`'s rows. A group whose metadata fields are new to the part
  // or widen a column's type (Note [metadata columns]) makes the stream
  // rewrite what it wrote before under the widened columns.
  virtual void write_group(const PartTable& group) = 0;
  // Completes the file (an empty part still gets its schema); the caller
  // then fsyncs and renames it.
  virtual void close() = 0;
};

// Serializes parts into open file descriptors in one format.
class TableSerializer {
 public:
  virtual ~TableSerializer() = default;
  // A stream writing into `fd` (the part's temporary file, named `path` in
  // errors). Rows with no text column have an empty `text_field`.
  virtual std::unique_ptr<PartStream> open(int fd, const std::string& path, const std::string& text_field) = 0;
};

using TableSerializerFactory =
    std::function<std::unique_ptr<TableSerializer>(OutputFormat, const WriterOptions&)>;
// Installed by the Arrow I/O extension for Parquet and Arrow IPC.
void register_arrow_serializers(TableSerializerFactory factory);
bool arrow_serializers_available();
// NDJSON is built in; the others need the registered Arrow factory
// (DataError(kUnavailable) when it is missing).
std::unique_ptr<TableSerializer> make_serializer(OutputFormat format, const WriterOptions& options);

// File names: part-00000042<ext>; the zero padding makes sorted names follow
// stream order.
std::string part_file_name(uint64_t part_index, OutputFormat format);

class OpenPart;

// Collects the kept/dropped/metrics rows of the current part and writes them
// as durable part files (temporary name, fsync, rename, directory fsync):
// NDJSON rows go to the part's temporary file as they come (Note [NDJSON parts
// are streamed]), Arrow formats a row group at a time (Note [Arrow parts are
// streamed]).
class CorpusWriter {
 public:
  CorpusWriter(std::string output_dir, std::string text_field, WriterOptions options);
  ~CorpusWriter();

  // Removes part files numbered >= `committed_parts` and temporary files, left
  // by a run that stopped before its checkpoint covered them.
  void discard_uncommitted(uint64_t committed_parts);
  void set_next_part(uint64_t part_index) { next_part_ = part_index; }

  void add(const DocBatch& batch);
  bool part_full() const;
  bool part_empty() const { return rows_seen_ == 0; }
  // Writes the current part's files; returns the bytes of the kept part file.
  uint64_t write_part();
  uint64_t next_part() const { return next_part_; }
  const WriterOptions& options() const { return options_; }

 private:
  std::string output_dir_;
  WriterOptions options_;
  std::unique_ptr<TableSerializer> serializer_;
  std::unique_ptr<OpenPart> kept_, dropped_, metrics_;
  uint64_t rows_seen_ = 0;
  uint64_t next_part_ = 0;
};

}  // namespace luminamoon
