// Parquet and Arrow IPC (file, stream) serializers: a PartTable becomes an
// Arrow table (Note [metadata columns]) written through Arrow C++.
#include <arrow/api.h>
#include <arrow/array/concatenate.h>
#include <arrow/ipc/reader.h>
#include <parquet/arrow/reader.h>
#include <arrow/io/file.h>
#include <arrow/ipc/writer.h>
#include <arrow/util/compression.h>
#include <parquet/arrow/writer.h>
#include <parquet/properties.h>
#include <simdjson.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <unordered_map>

#include "data/state/durable_io.h"
#include "luminamoon/data_error.h"
#include "luminamoon/writer.h"
#include "python/data_io/arrow_memory_pool.h"

namespace luminamoon {

// Note [metadata columns]: each row carries its non-text fields as one JSON
// object. A part's columns are the union of the fields of its rows, in the
// order first seen; a row without a field holds null there. The column type
// follows the values of that part: all integers -> int64, integers and
// floats -> float64, all booleans -> bool, all strings -> string; any other
// mix, arrays and objects -> string holding the JSON text (strings as such).
// The text column is large_string (the StringTensor's flat layout).

namespace {

enum class Kind { kNone, kInt, kDouble, kBool, kString, kJson };

Kind combine(Kind a, Kind b) {
  if (a == Kind::kNone) return b;
  if (b == Kind::kNone || a == b) return a;
  if ((a == Kind::kInt && b == Kind::kDouble) || (a == Kind::kDouble && b == Kind::kInt)) {
    return Kind::kDouble;
  }
  return Kind::kJson;
}

Kind kind_of(simdjson::dom::element e) {
  switch (e.type()) {
    case simdjson::dom::element_type::INT64: return Kind::kInt;
    case simdjson::dom::element_type::UINT64: return Kind::kDouble;  // beyond int64
    case simdjson::dom::element_type::DOUBLE: return Kind::kDouble;
    case simdjson::dom::element_type::BOOL: return Kind::kBool;
    case simdjson::dom::element_type::STRING: return Kind::kString;
    case simdjson::dom::element_type::NULL_VALUE: return Kind::kNone;
    default: return Kind::kJson;
  }
}

[[noreturn]] void arrow_fail(const arrow::Status& st, const std::string& what) {
  throw DataError(DataErrorKind::kOutput, "[" + what + "] " + st.ToString());
}

template <class T>
T check(arrow::Result<T> r, const std::string& what) {
  if (!r.ok()) arrow_fail(r.status(), what);
  return std::move(r).ValueUnsafe();
}
void check(const arrow::Status& st, const std::string& what) {
  if (!st.ok()) arrow_fail(st, what);
}

class FieldColumns {
 public:
  // The fields and kinds of `table`'s rows merged into the part's; true when
  // that added a field or changed a kind (the columns written so far no
  // longer fit: Note [a widened part is rewritten]).
  bool infer(const PartTable& table) {
    bool changed = false;
    for (size_t i = 0; i < table.rows(); ++i) {
      for_each_field(table, i, [&](std::string_view key, simdjson::dom::element value) {
        auto [it, inserted] = index_.try_emplace(std::string(key), names_.size());
        if (inserted) {
          names_.emplace_back(key);
          kinds_.push_back(Kind::kNone);
          changed = true;
        }
        const Kind merged = combine(kinds_[it->second], kind_of(value));
        changed |= merged != kinds_[it->second];
        kinds_[it->second] = merged;
      });
    }
    return changed;
  }

  // The columns of one row group, typed by the part's kinds.
  void append_to(const PartTable& table, std::vector<std::shared_ptr<arrow::Field>>& fields,
                 std::vector<std::shared_ptr<arrow::Array>>& arrays) {
    const size_t n = names_.size();
    std::vector<std::unique_ptr<arrow::ArrayBuilder>> builders;
    for (size_t c = 0; c < n; ++c) {
      switch (kinds_[c]) {
        case Kind::kInt: builders.push_back(std::make_unique<arrow::Int64Builder>(data_memory_pool())); break;
        case Kind::kDouble: builders.push_back(std::make_unique<arrow::DoubleBuilder>(data_memory_pool())); break;
        case Kind::kBool: builders.push_back(std::make_unique<arrow::BooleanBuilder>(data_memory_pool())); break;
        default: builders.push_back(std::make_unique<arrow::StringBuilder>(data_memory_pool())); break;
      }
    }
    std::vector<uint8_t> filled(n);
    for (size_t i = 0; i < table.rows(); ++i) {
      std::fill(filled.begin(), filled.end(), 0);
      for_each_field(table, i, [&](std::string_view key, simdjson::dom::element value) {
        size_t c = index_.at(std::string(key));
        if (filled[c]) return;  // a repeated key: the first one counts
        filled[c] = 1;
        auto* b = builders[c].get();
        if (value.is_null()) {
          check(b->AppendNull(), "append");
          return;
        }
        switch (kinds_[c]) {
          case Kind::kInt:
            check(static_cast<arrow::Int64Builder*>(b)->Append(value.get_int64().value_unsafe()), "append");
            break;
          case Kind::kDouble: {
            double v = value.is_int64() ? static_cast<double>(value.get_int64().value_unsafe())
                       : value.is_uint64() ? static_cast<double>(value.get_uint64().value_unsafe())
                                           : value.get_double().value_unsafe();
            check(static_cast<arrow::DoubleBuilder*>(b)->Append(v), "append");
            break;
          }
          case Kind::kBool:
            check(static_cast<arrow::BooleanBuilder*>(b)->Append(value.get_bool().value_unsafe()), "append");
            break;
          default: {
            std::string_view s;
            std::string json;
            if (value.is_string()) {
              s = value.get_string().value_unsafe();
            } else {
              json = simdjson::minify(value);
              s = json;
            }
            check(static_cast<arrow::StringBuilder*>(b)->Append(s), "append");
          }
        }
      });
      for (size_t c = 0; c < n; ++c) {
        if (!filled[c]) check(builders[c]->AppendNull(), "append");
      }
    }
    for (size_t c = 0; c < n; ++c) {
      std::shared_ptr<arrow::Array> array;
      check(builders[c]->Finish(&array), "finish column");
      fields.push_back(arrow::field(names_[c], array->type()));
      arrays.push_back(std::move(array));
    }
  }

 private:
  template <class F>
  void for_each_field(const PartTable& table, size_t row, F&& f) {
    std::string_view json = table.fields[row];
    if (json.empty()) return;
    simdjson::dom::element root;
    auto error = parser_.parse(json.data(), json.size(), /*realloc_if_needed=*/true).get(root);
    simdjson::dom::object object;
    if (!error) error = root.get_object().get(object);
    if (error) {
      throw DataError(DataErrorKind::kOutput, std::string("metadata of row ") + std::to_string(row) +
                                                  " is not a JSON object: " + simdjson::error_message(error));
    }
    for (auto [key, value] : object) f(key, value);
  }

  simdjson::dom::parser parser_;
  std::vector<std::string> names_;
  std::vector<Kind> kinds_;
  std::unordered_map<std::string, size_t> index_;
};

std::shared_ptr<arrow::Table> to_arrow(const PartTable& part, FieldColumns& columns) {
  std::vector<std::shared_ptr<arrow::Field>> fields;
  std::vector<std::shared_ptr<arrow::Array>> arrays;
  const int64_t rows = static_cast<int64_t>(part.rows());
  if (!part.text_field.empty()) {
    // Zero-copy: the table lives only while write() runs.
    auto offsets = arrow::Buffer::Wrap(part.text.offsets.data(), part.text.offsets.size());
    auto data = arrow::Buffer::Wrap(part.text.bytes.data(), part.text.bytes.size());
    auto text = std::make_shared<arrow::LargeStringArray>(rows, offsets, data);
    fields.push_back(arrow::field(part.text_field, arrow::large_utf8()));
    arrays.push_back(text);
  }
  columns.append_to(part, fields, arrays);
  if (fields.empty()) {  // Parquet needs a column even for an empty part
    arrow::StringBuilder b(data_memory_pool());
    check(b.AppendNulls(rows), "append");
    std::shared_ptr<arrow::Array> a;
    check(b.Finish(&a), "finish");
    fields.push_back(arrow::field("id", arrow::utf8()));
    arrays.push_back(a);
  }
  return arrow::Table::Make(arrow::schema(fields), arrays, rows);
}

// Note [Parquet pages]: Arrow closes a data page only between write batches
// (1,024 rows by default) once the page holds data_pagesize (1 MiB). With
// documents of a few KB, a page was one whole batch, 4-5 MB, whose encode and
// compress buffers grew by reallocation, each time into fresh memory the
// kernel had to zero. A part's write batch is therefore sized from its first row
// group to a quarter of data_pagesize, so that a page closes between 1 and
// 1.25 MiB (a batch of a whole page would close most at 2): on the real-text
// corpus (issue 15, session 10) 3-9% less CPU and 13-24 MB less peak memory
// across A/B runs. The
// text column is also written without a dictionary (documents are nearly all
// distinct: Arrow built a dictionary up to 1 MiB and then fell back to plain)
// and without statistics (the minimum and maximum of documents prune nothing);
// the metadata columns keep both.
constexpr int64_t kParquetPageBytes = 1 << 20;

arrow::ipc::IpcWriteOptions ipc_options() {
  auto options = arrow::ipc::IpcWriteOptions::Defaults();
  options.memory_pool = data_memory_pool();  // Note [Arrow memory pool]
  return options;
}

int64_t rows_per_page(const PartTable& first_group) {
  const uint64_t rows = std::max<uint64_t>(first_group.rows(), 1);
  const uint64_t row_bytes = (first_group.text_bytes() + first_group.fields.bytes.size()) / rows + 1;
  return std::clamp<int64_t>(static_cast<int64_t>(kParquetPageBytes / 4 / row_bytes), 1, 1024);
}

// Note [a widened part is rewritten]: a part's row groups are written as they
// come (Note [Arrow parts are streamed] in src/data/writer/arrow_part.h), but
// its columns are the union over the whole part (Note [metadata columns]). A
// group that brings a new field, or a value that widens a column's kind (an
// all-null column getting values, int64 -> float64, anything -> JSON text),
// makes the file written so far wrong for the part. The stream then completes
// that file, copies it to an unnamed scratch file, and writes it again into
// the part's file under the widened columns: each earlier group's text is
// read back from the copy, its metadata from the stream's log of the groups'
// JSON objects (the original values, so that a widened column holds what a
// whole-part write would). Then the new group follows. The files are those of
// a whole-part write, group for group. Kinds only widen (each of a part's
// fields at most three times), so a part is rewritten a bounded number of
// times, and in practice at most in its first groups.
class ArrowPartStream final : public PartStream {
 public:
  ArrowPartStream(OutputFormat format, const WriterOptions& options, arrow::Compression::type codec, int fd,
                  std::string path, std::string text_field)
      : format_(format), options_(options), codec_(codec), fd_(fd), path_(std::move(path)),
        text_field_(std::move(text_field)) {}
  ~ArrowPartStream() override {
    if (log_fd_ >= 0) ::close(log_fd_);
  }

  void write_group(const PartTable& group) override {
    const bool widened = columns_.infer(group);
    if (widened && !groups_.empty()) rewrite();
    write(group);
    log_fields(group);
  }

  void close() override {
    if (groups_.empty()) {  // an empty part still has its schema
      PartTable empty;
      empty.text_field = text_field_;
      write(empty);
    }
    close_writer();
  }

 private:
  // The writer's properties for a part whose first group is `first`
  // (Note [Parquet pages]).
  std::shared_ptr<parquet::WriterProperties> parquet_properties(const PartTable& first) const {
    parquet::WriterProperties::Builder builder;
    builder.compression(codec_);
    if (codec_ != arrow::Compression::UNCOMPRESSED && codec_ != arrow::Compression::SNAPPY) {
      builder.compression_level(options_.parquet_compression_level);
    }
    builder.memory_pool(data_memory_pool());  // Note [Arrow memory pool]
    builder.data_pagesize(kParquetPageBytes);
    builder.write_batch_size(rows_per_page(first));
    if (!first.text_field.empty()) {
      builder.disable_dictionary(first.text_field);
      builder.disable_statistics(first.text_field);
    }
    return builder.build();
  }

  // Opens the format's writer at the start of the part's file for tables of
  // `schema`; `first` is the part's first group.
  void open_writer(const std::shared_ptr<arrow::Schema>& schema, const PartTable& first) {
    if (!properties_ && format_ == OutputFormat::kParquet) properties_ = parquet_properties(first);
    int own = ::dup(fd_);  // Arrow closes its descriptor; the caller fsyncs and renames fd
    if (own < 0) throw DataError(DataErrorKind::kOutput, "[dup] " + path_ + ": " + std::strerror(errno));
    out_ = check(arrow::io::FileOutputStream::Open(own), "open " + path_);
    switch (format_) {
      case OutputFormat::kParquet:
        parquet_ = check(parquet::arrow::FileWriter::Open(*schema, data_memory_pool(), out_, properties_),
                         "Parquet " + path_);
        break;
      case OutputFormat::kArrowFile:
        ipc_ = check(arrow::ipc::MakeFileWriter(out_, schema, ipc_options()), "IPC " + path_);
        break;
      case OutputFormat::kArrowStream:
        ipc_ = check(arrow::ipc::MakeStreamWriter(out_, schema, ipc_options()), "IPC " + path_);
        break;
      case OutputFormat::kNdjson:
        throw DataError(DataErrorKind::kUsage, "NDJSON is not an Arrow format");
    }
  }

  // One row group (record batch) of `group`'s rows under the current columns;
  // the first opens the writer.
  void write(const PartTable& group) {
    auto table = to_arrow(group, columns_);
    if (!out_) open_writer(table->schema(), group);
    if (parquet_) {
      check(parquet_->WriteTable(*table, std::max<int64_t>(1, table->num_rows())), "write Parquet " + path_);
    } else {
      check(ipc_->WriteTable(*table), "write IPC " + path_);
    }
  }

  void close_writer() {
    if (parquet_) check(parquet_->Close(), "close Parquet " + path_);
    if (ipc_) check(ipc_->Close(), "close IPC " + path_);
    check(out_->Close(), "close " + path_);
    parquet_.reset();
    ipc_.reset();
    out_.reset();
  }

  // Each group's metadata objects, appended to an unnamed scratch file beside
  // the part: (rows + 1) offsets, then the bytes.
  void log_fields(const PartTable& group) {
    if (log_fd_ < 0) {
      std::string where;
      log_fd_ = durable::open_scratch_file(std::filesystem::path(path_).parent_path().string(), &where);
      if (log_fd_ < 0) {
        throw DataError(DataErrorKind::kOutput, "[scratch] " + where + ": " + std::strerror(errno) +
                                                    " (the metadata log of " + path_ + ")");
      }
    }
    const auto& offsets = group.fields.offsets;
    const std::string_view offset_bytes(reinterpret_cast<const char*>(offsets.data()),
                                        offsets.size() * sizeof(int64_t));
    durable::pwrite_all(log_fd_, offset_bytes, log_end_, path_ + " (metadata log)");
    durable::pwrite_all(log_fd_, group.fields.bytes, log_end_ + offset_bytes.size(), path_ + " (metadata log)");
    groups_.push_back({log_end_, group.rows(), group.fields.bytes.size()});
    log_end_ += offset_bytes.size() + group.fields.bytes.size();
  }

  void read_fields(size_t g, StringColumn& fields) const {
    const LoggedGroup& at = groups_[g];
    fields.offsets.resize(at.rows + 1);
    durable::pread_exact(log_fd_, fields.offsets.data(), (at.rows + 1) * sizeof(int64_t), at.offset,
                         path_ + " (metadata log)", "read", DataErrorKind::kOutput);
    fields.bytes.resize(at.bytes);
    durable::pread_exact(log_fd_, fields.bytes.data(), at.bytes, at.offset + (at.rows + 1) * sizeof(int64_t),
                         path_ + " (metadata log)", "read", DataErrorKind::kOutput);
  }

  // Note [a widened part is rewritten].
  void rewrite() {
    close_writer();
    // The earlier groups' text, read back from a copy of the file (a part
    // without a text column has only the metadata, which the log holds).
    std::shared_ptr<arrow::io::ReadableFile> input;
    if (!text_field_.empty()) input = copy_of_file();
    if (::ftruncate(fd_, 0) != 0 || ::lseek(fd_, 0, SEEK_SET) != 0) {
      throw DataError(DataErrorKind::kOutput, "[truncate] " + path_ + ": " + std::strerror(errno));
    }
    std::unique_ptr<parquet::arrow::FileReader> parquet_in;
    std::shared_ptr<arrow::ipc::RecordBatchFileReader> file_in;
    std::shared_ptr<arrow::ipc::RecordBatchStreamReader> stream_in;
    if (!text_field_.empty()) {
      switch (format_) {
        case OutputFormat::kParquet:
          parquet_in = check(parquet::arrow::OpenFile(input, data_memory_pool()), "reread " + path_);
          break;
        case OutputFormat::kArrowFile:
          file_in = check(arrow::ipc::RecordBatchFileReader::Open(input.get()), "reread " + path_);
          break;
        default:
          stream_in = check(arrow::ipc::RecordBatchStreamReader::Open(input.get()), "reread " + path_);
      }
    }
    PartTable group;
    group.text_field = text_field_;
    for (size_t g = 0; g < groups_.size(); ++g) {
      read_fields(g, group.fields);
      group.text.clear();
      if (!text_field_.empty()) {
        std::shared_ptr<arrow::Array> text;  // the text is the first column (to_arrow)
        if (parquet_in) {
          std::shared_ptr<arrow::Table> t;
          check(parquet_in->ReadRowGroup(static_cast<int>(g), {0}, &t), "reread " + path_);
          text = check(arrow::Concatenate(t->column(0)->chunks(), data_memory_pool()), "reread " + path_);
        } else {
          auto batch = file_in ? check(file_in->ReadRecordBatch(static_cast<int>(g)), "reread " + path_)
                               : check(stream_in->Next(), "reread " + path_);
          if (!batch) throw DataError(DataErrorKind::kOutput, "reread " + path_ + ": fewer batches than written");
          text = batch->column(0);
        }
        // Parquet gives the text back as utf8 (the file does not store the
        // Arrow schema that said large_utf8), the IPC formats as large_utf8.
        if (text->type_id() == arrow::Type::LARGE_STRING) {
          const auto& strings = static_cast<const arrow::LargeStringArray&>(*text);
          for (int64_t i = 0; i < strings.length(); ++i) group.text.push(strings.GetView(i));
        } else if (text->type_id() == arrow::Type::STRING) {
          const auto& strings = static_cast<const arrow::StringArray&>(*text);
          for (int64_t i = 0; i < strings.length(); ++i) group.text.push(strings.GetView(i));
        } else {
          throw DataError(DataErrorKind::kOutput, "reread " + path_ + ": the text column is " +
                                                      text->type()->ToString() + ", not a string");
        }
      }
      write(group);
    }
  }

  // The part's file so far, copied into an unnamed scratch file beside it
  // and opened for reading (the part's own descriptor is write-only).
  std::shared_ptr<arrow::io::ReadableFile> copy_of_file() const {
    std::string where;
    const int copy = durable::open_scratch_file(std::filesystem::path(path_).parent_path().string(), &where);
    if (copy < 0) {
      throw DataError(DataErrorKind::kOutput,
                      "[scratch] " + where + ": " + std::strerror(errno) + " (to widen the columns of " + path_ + ")");
    }
    try {
      auto from = check(arrow::io::ReadableFile::Open(path_, data_memory_pool()), "reread " + path_);
      for (uint64_t at = 0;;) {
        auto chunk = check(from->Read(1 << 20), "reread " + path_);
        if (chunk->size() == 0) break;
        durable::pwrite_all(copy, {reinterpret_cast<const char*>(chunk->data()), static_cast<size_t>(chunk->size())},
                            at, path_ + " (scratch copy)");
        at += static_cast<uint64_t>(chunk->size());
      }
    } catch (...) {
      ::close(copy);
      throw;
    }
    // Opened once filled: a ReadableFile takes its size when opened.
    return check(arrow::io::ReadableFile::Open(copy, data_memory_pool()), "scratch copy of " + path_);
  }

  struct LoggedGroup {
    uint64_t offset, rows, bytes;
  };

  OutputFormat format_;
  const WriterOptions& options_;
  arrow::Compression::type codec_;
  int fd_;
  std::string path_;
  std::string text_field_;
  FieldColumns columns_;
  std::shared_ptr<parquet::WriterProperties> properties_;  // from the part's first group
  std::shared_ptr<arrow::io::FileOutputStream> out_;
  std::unique_ptr<parquet::arrow::FileWriter> parquet_;
  std::shared_ptr<arrow::ipc::RecordBatchWriter> ipc_;
  std::vector<LoggedGroup> groups_;  // the groups written, in order
  int log_fd_ = -1;                  // Note [a widened part is rewritten]: the groups' metadata
  uint64_t log_end_ = 0;
};

class ArrowSerializer final : public TableSerializer {
 public:
  ArrowSerializer(OutputFormat format, WriterOptions options)
      : format_(format), options_(std::move(options)) {
    if (format_ == OutputFormat::kParquet) {
      auto codec = arrow::util::Codec::GetCompressionType(options_.parquet_compression);
      if (!codec.ok()) {
        throw DataError(DataErrorKind::kUsage, "unknown Parquet compression '" +
                                                   options_.parquet_compression +
                                                   "' (zstd, snappy, gzip, lz4, brotli, uncompressed)");
      }
      codec_ = *codec;
    }
  }

  std::unique_ptr<PartStream> open(int fd, const std::string& path, const std::string& text_field) override {
    return std::make_unique<ArrowPartStream>(format_, options_, codec_, fd, path, text_field);
  }

 private:
  OutputFormat format_;
  WriterOptions options_;
  arrow::Compression::type codec_ = arrow::Compression::UNCOMPRESSED;
};

}  // namespace

std::unique_ptr<TableSerializer> make_arrow_serializer(OutputFormat format, const WriterOptions& options) {
  return std::make_unique<ArrowSerializer>(format, options);
}

}  // namespace luminamoon
