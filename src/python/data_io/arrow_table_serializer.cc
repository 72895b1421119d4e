// Parquet and Arrow IPC (file, stream) serializers: a PartTable becomes an
// Arrow table (Note [metadata columns]) written through Arrow C++.
#include <arrow/api.h>
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
#include <unordered_map>

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
  // Pass 1: the fields and their kinds, over every chunk of a part in turn.
  void infer(const PartTable& table) {
    for (size_t i = 0; i < table.rows(); ++i) {
      for_each_field(table, i, [&](std::string_view key, simdjson::dom::element value) {
        auto [it, inserted] = index_.try_emplace(std::string(key), names_.size());
        if (inserted) {
          names_.emplace_back(key);
          kinds_.push_back(Kind::kNone);
        }
        kinds_[it->second] = combine(kinds_[it->second], kind_of(value));
      });
    }
  }

  // Pass 2: the columns of one chunk, typed by the whole part's kinds.
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
// kernel had to zero. A part's write batch is therefore sized from its first
// chunk to a quarter of data_pagesize, so that a page closes between 1 and
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

int64_t rows_per_page(const PartTable& first_chunk) {
  const uint64_t rows = std::max<uint64_t>(first_chunk.rows(), 1);
  const uint64_t row_bytes = (first_chunk.text_bytes() + first_chunk.fields.bytes.size()) / rows + 1;
  return std::clamp<int64_t>(static_cast<int64_t>(kParquetPageBytes / 4 / row_bytes), 1, 1024);
}

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

  // The writer's properties for a part whose first chunk is `first_chunk`
  // (Note [Parquet pages]).
  std::shared_ptr<parquet::WriterProperties> parquet_properties(const PartTable& first_chunk) const {
    parquet::WriterProperties::Builder builder;
    builder.compression(codec_);
    if (codec_ != arrow::Compression::UNCOMPRESSED && codec_ != arrow::Compression::SNAPPY) {
      builder.compression_level(options_.parquet_compression_level);
    }
    builder.memory_pool(data_memory_pool());  // Note [Arrow memory pool]
    builder.data_pagesize(kParquetPageBytes);
    builder.write_batch_size(rows_per_page(first_chunk));
    if (!first_chunk.text_field.empty()) {
      builder.disable_dictionary(first_chunk.text_field);
      builder.disable_statistics(first_chunk.text_field);
    }
    return builder.build();
  }

  void write(const PartTable& part, int fd, const std::string& path) override {
    int own = ::dup(fd);  // Arrow closes its descriptor; the caller fsyncs and renames fd
    if (own < 0) throw DataError(DataErrorKind::kOutput, "[dup] " + path + ": " + std::strerror(errno));
    auto stream = check(arrow::io::FileOutputStream::Open(own), "open " + path);
    FieldColumns columns;
    columns.infer(part);
    auto table = to_arrow(part, columns);
    switch (format_) {
      case OutputFormat::kParquet:
        check(parquet::arrow::WriteTable(*table, data_memory_pool(), stream,
                                         options_.parquet_row_group_rows, parquet_properties(part)),
              "write Parquet " + path);
        break;
      case OutputFormat::kArrowFile: {
        auto writer = check(arrow::ipc::MakeFileWriter(stream, table->schema(), ipc_options()), "IPC " + path);
        check(writer->WriteTable(*table), "write IPC " + path);
        check(writer->Close(), "close IPC " + path);
        break;
      }
      case OutputFormat::kArrowStream: {
        auto writer = check(arrow::ipc::MakeStreamWriter(stream, table->schema(), ipc_options()), "IPC " + path);
        check(writer->WriteTable(*table), "write IPC " + path);
        check(writer->Close(), "close IPC " + path);
        break;
      }
      case OutputFormat::kNdjson:
        throw DataError(DataErrorKind::kUsage, "NDJSON is not an Arrow format");
    }
    check(stream->Close(), "close " + path);
  }

  // Note [streamed parts] (src/data/writer/spilled_part.h): the columns from
  // a first pass over every chunk, then one row group / record batch per chunk.
  void write_chunks(const PartChunks& part, int fd, const std::string& path) override {
    FieldColumns columns;
    PartTable scratch;
    const size_t chunks = part.chunks();
    for (size_t k = 0; k < chunks; ++k) columns.infer(part.read(k, scratch, /*fields_only=*/true));
    int own = ::dup(fd);  // Arrow closes its descriptor; the caller fsyncs and renames fd
    if (own < 0) throw DataError(DataErrorKind::kOutput, "[dup] " + path + ": " + std::strerror(errno));
    auto stream = check(arrow::io::FileOutputStream::Open(own), "open " + path);
    std::unique_ptr<parquet::arrow::FileWriter> parquet_writer;
    std::shared_ptr<arrow::ipc::RecordBatchWriter> ipc_writer;
    auto write_table = [&](const arrow::Table& table, const PartTable& chunk) {
      if (!parquet_writer && !ipc_writer) {
        switch (format_) {
          case OutputFormat::kParquet:
            parquet_writer = check(parquet::arrow::FileWriter::Open(*table.schema(), data_memory_pool(),
                                                                    stream, parquet_properties(chunk)),
                                   "Parquet " + path);
            break;
          case OutputFormat::kArrowFile:
            ipc_writer = check(arrow::ipc::MakeFileWriter(stream, table.schema(), ipc_options()), "IPC " + path);
            break;
          case OutputFormat::kArrowStream:
            ipc_writer = check(arrow::ipc::MakeStreamWriter(stream, table.schema(), ipc_options()), "IPC " + path);
            break;
          case OutputFormat::kNdjson:
            throw DataError(DataErrorKind::kUsage, "NDJSON is not an Arrow format");
        }
      }
      if (parquet_writer) {
        check(parquet_writer->WriteTable(table, std::max<int64_t>(1, table.num_rows())), "write Parquet " + path);
      } else {
        check(ipc_writer->WriteTable(table), "write IPC " + path);
      }
    };
    if (chunks == 0) {  // an empty part still has its schema
      scratch.clear();
      scratch.text_field = std::string(part.text_field());
      write_table(*to_arrow(scratch, columns), scratch);
    }
    for (size_t k = 0; k < chunks; ++k) {
      const PartTable& chunk = part.read(k, scratch);
      write_table(*to_arrow(chunk, columns), chunk);
    }
    if (parquet_writer) check(parquet_writer->Close(), "close Parquet " + path);
    if (ipc_writer) check(ipc_writer->Close(), "close IPC " + path);
    check(stream->Close(), "close " + path);
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
