// Parquet shard reader through Arrow C++ (the pyarrow wheel's): whole row
// groups before the resume coordinate are skipped without being read or
// decoded, and so are the text column's pages before the resume row inside
// its row group where the file has an offset index (parquet_page_skip.h);
// the text and id columns are picked out, other columns become per-row JSON
// metadata.
#include <arrow/api.h>
#include <arrow/io/file.h>
#include <parquet/arrow/reader.h>
#include <parquet/exception.h>

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "data/reader/record_checks.h"
#include "data/reader/shard_readers.h"
#include "data/writer/json_text.h"
#include "luminamoon/data_error.h"
#include "luminamoon/reader.h"
#include "python/data_io/arrow_memory_pool.h"
#include "python/data_io/parquet_page_skip.h"

namespace luminamoon {
namespace {

bool is_string_type(arrow::Type::type id) {
  return id == arrow::Type::STRING || id == arrow::Type::LARGE_STRING ||
         id == arrow::Type::STRING_VIEW;
}

std::string_view string_at(const arrow::Array& array, int64_t i) {
  switch (array.type_id()) {
    case arrow::Type::STRING: return static_cast<const arrow::StringArray&>(array).GetView(i);
    case arrow::Type::LARGE_STRING: return static_cast<const arrow::LargeStringArray&>(array).GetView(i);
    case arrow::Type::STRING_VIEW: return static_cast<const arrow::StringViewArray&>(array).GetView(i);
    default: return {};
  }
}

// Appends row i of `array` as a JSON value.
void append_json_value(std::string& out, const arrow::Array& array, int64_t i) {
  if (array.IsNull(i)) {
    out += "null";
    return;
  }
  char number[40];
  switch (array.type_id()) {
    case arrow::Type::STRING:
    case arrow::Type::LARGE_STRING:
    case arrow::Type::STRING_VIEW:
      json_text::append_string(out, string_at(array, i));
      return;
    case arrow::Type::BOOL:
      out += static_cast<const arrow::BooleanArray&>(array).Value(i) ? "true" : "false";
      return;
#define LM_INT(T, A)                                                                        \
  case arrow::Type::T:                                                                      \
    out += std::to_string(static_cast<const arrow::A&>(array).Value(i));                    \
    return;
    LM_INT(INT8, Int8Array)
    LM_INT(INT16, Int16Array)
    LM_INT(INT32, Int32Array)
    LM_INT(INT64, Int64Array)
    LM_INT(UINT8, UInt8Array)
    LM_INT(UINT16, UInt16Array)
    LM_INT(UINT32, UInt32Array)
    LM_INT(UINT64, UInt64Array)
#undef LM_INT
    case arrow::Type::FLOAT:
    case arrow::Type::DOUBLE: {
      double v = array.type_id() == arrow::Type::FLOAT
                     ? static_cast<const arrow::FloatArray&>(array).Value(i)
                     : static_cast<const arrow::DoubleArray&>(array).Value(i);
      if (!std::isfinite(v)) {
        out += "null";  // JSON has no NaN/Inf
        return;
      }
      std::snprintf(number, sizeof number, "%.17g", v);
      out += number;
      return;
    }
    default: {
      auto scalar = array.GetScalar(i);
      json_text::append_string(out, scalar.ok() ? (*scalar)->ToString() : std::string());
      return;
    }
  }
}

// Arrow sizes a row group's buffers by the row count its footer claims: a
// damaged footer claiming billions of rows (a 836-byte file, found by
// fuzz_parquet_reader) made it allocate gigabytes before any check. Every
// row holds at least one value of every column, and the row groups add up
// to the file's rows; a footer that says otherwise is refused.
std::string implausible_row_counts(const parquet::FileMetaData& metadata) try {
  int64_t total = 0;
  for (int g = 0; g < metadata.num_row_groups(); ++g) {
    const auto group = metadata.RowGroup(g);
    const int64_t rows = group->num_rows();
    if (rows < 0) return "row group " + std::to_string(g) + " claims " + std::to_string(rows) + " rows";
    for (int c = 0; c < group->num_columns(); ++c) {
      const int64_t values = group->ColumnChunk(c)->num_values();
      if (rows > values) {
        return "row group " + std::to_string(g) + " claims " + std::to_string(rows) + " rows but column " +
               std::to_string(c) + " holds " + std::to_string(values) + " values";
      }
    }
    total += rows;
  }
  if (total != metadata.num_rows()) {
    return "the row groups hold " + std::to_string(total) + " rows, the file claims " +
           std::to_string(metadata.num_rows());
  }
  return {};
} catch (const std::exception& e) {  // Arrow parses a column chunk's metadata when asked for it
  return std::string("unreadable column chunk metadata: ") + e.what();
}

class ParquetShardReader final : public ShardReader {
 public:
  ParquetShardReader(const ShardInfo& shard, const ReaderOptions& options,
                     const StreamCoordinate& start)
      : shard_(shard), options_(options), row_group_(start.row_group_idx),
        row_in_group_(start.row_offset_in_page), global_row_(start.global_row_idx),
        name_(valid_utf8_name(shard.path)) {
    auto file = arrow::io::ReadableFile::Open(shard.path);
    if (!file.ok()) {
      throw DataError(DataErrorKind::kInput, "[open] " + shard.path + ": " + file.status().ToString());
    }
    auto reader = parquet::arrow::OpenFile(*file, data_read_pool());  // Note [bounded reading pool]
    if (!reader.ok()) {
      open_error_ = "not a readable Parquet file: " + reader.status().ToString();
      return;
    }
    reader_ = std::move(*reader);
    std::shared_ptr<arrow::Schema> schema;
    auto st = reader_->GetSchema(&schema);
    if (!st.ok()) {
      open_error_ = "cannot read the Parquet schema: " + st.ToString();
      return;
    }
    schema_ = schema;
    text_column_ = schema->GetFieldIndex(options.text_field);
    id_column_ = schema->GetFieldIndex(options.id_field);
    if (text_column_ < 0) {
      open_error_ = "no '" + options.text_field + "' column";
    } else if (!is_string_type(schema->field(text_column_)->type()->id())) {
      open_error_ = "column '" + options.text_field + "' is " +
                    schema->field(text_column_)->type()->ToString() + ", not a string";
    }
    auto metadata = reader_->parquet_reader()->metadata();
    if (std::string why = implausible_row_counts(*metadata); !why.empty()) {
      open_error_ = "a damaged Parquet footer: " + why;
      return;
    }
    num_row_groups_ = metadata->num_row_groups();
    // Rows of the skipped row groups, from the footer alone (nothing decoded).
    for (int g = 0; g < std::min<int>(row_group_, num_row_groups_); ++g) {
      rows_before_group_ += metadata->RowGroup(g)->num_rows();
    }
  }

  bool next(DocBatch& batch) override {
    clear_batch(batch, shard_);
    if (!open_error_.empty()) {
      if (reported_) return false;
      reported_ = true;
      batch.malformed.push_back({shard_.shard_id, 0, open_error_, true});
      batch.records_in = 1;
      row_group_ = static_cast<uint32_t>(std::max(num_row_groups_, 1));
      batch.end = coordinate();
      return true;
    }
    while (row_group_ < static_cast<uint32_t>(num_row_groups_)) {
      if (!table_ && row_in_group_ > 0) table_ = read_group_from_row();
      if (!table_) {
        table_first_row_ = 0;
        auto table = reader_->ReadRowGroup(static_cast<int>(row_group_));
        if (!table.ok()) {
          batch.malformed.push_back({shard_.shard_id, rows_before_group_ + 1,
                                     "row group " + std::to_string(row_group_) +
                                         " cannot be decoded: " + table.status().ToString(),
                                     true});
          ++batch.records_in;
          skip_group();
          batch.end = coordinate();
          return true;
        }
        auto combined = (*table)->CombineChunks();
        if (!combined.ok()) throw DataError(DataErrorKind::kInput, combined.status().ToString());
        table_ = *combined;
      }
      const int64_t rows = table_->num_rows() + table_first_row_;
      if (static_cast<int64_t>(row_in_group_) >= rows) {
        skip_group();
        continue;
      }
      fill(batch, rows);
      batch.end = coordinate();
      if (static_cast<int64_t>(row_in_group_) >= rows) skip_group();
      // Keep the coordinate at the start of the next group when this one is done.
      batch.end = coordinate();
      return true;
    }
    return false;
  }

 private:
  StreamCoordinate coordinate() const {
    return StreamCoordinate{shard_.shard_id, 0, row_group_, 0, row_in_group_, global_row_};
  }

  void skip_group() {
    // From the footer, as a resumed reader counts them: a row group that
    // cannot be decoded still holds its rows (issue 16: lines after it
    // differed between a run and its resume).
    if (row_group_ < static_cast<uint32_t>(num_row_groups_)) {
      rows_before_group_ += static_cast<uint64_t>(
          reader_->parquet_reader()->metadata()->RowGroup(static_cast<int>(row_group_))->num_rows());
    }
    table_.reset();
    table_first_row_ = 0;
    ++row_group_;
    row_in_group_ = 0;
  }

  // The resumed row group from row row_in_group_ on: the text column through
  // page skipping, the other (small) columns decoded and sliced. nullptr when
  // the file or schema does not allow it (then the whole group is decoded).
  std::shared_ptr<arrow::Table> read_group_from_row() {
    parquet::ParquetFileReader* file = reader_->parquet_reader();
    auto text_type = schema_->field(text_column_)->type();
    // One Parquet leaf per Arrow field, so that field i is leaf column i.
    if (file->metadata()->schema()->num_columns() != schema_->num_fields()) return nullptr;
    if (text_type->id() != arrow::Type::STRING && text_type->id() != arrow::Type::LARGE_STRING) return nullptr;
    const int group = static_cast<int>(row_group_);
    const int64_t from = row_in_group_;
    const int64_t rows = file->metadata()->RowGroup(group)->num_rows();
    std::shared_ptr<arrow::Array> text;
    try {
      text = read_byte_array_column_from_row(*file, group, text_column_, from, text_type);
    } catch (const std::exception&) {
      return nullptr;  // decoded the usual way, which reports a damaged page
    }
    if (!text || text->length() != rows - from) return nullptr;
    std::vector<int> others;
    for (int c = 0; c < schema_->num_fields(); ++c) {
      if (c != text_column_) others.push_back(c);
    }
    std::vector<std::shared_ptr<arrow::ChunkedArray>> columns(schema_->num_fields());
    if (!others.empty()) {
      auto small = reader_->ReadRowGroup(group, others);
      if (!small.ok()) return nullptr;
      auto combined = (*small)->CombineChunks();
      if (!combined.ok()) return nullptr;
      for (size_t k = 0; k < others.size(); ++k) {
        columns[others[k]] = std::make_shared<arrow::ChunkedArray>((*combined)->column(k)->chunk(0)->Slice(from));
      }
    }
    columns[text_column_] = std::make_shared<arrow::ChunkedArray>(text);
    table_first_row_ = from;
    return arrow::Table::Make(schema_, columns, rows - from);
  }

  void fill(DocBatch& batch, int64_t rows) {
    const auto& text = *table_->column(text_column_)->chunk(0);
    std::shared_ptr<arrow::Array> id_array =
        id_column_ >= 0 ? table_->column(id_column_)->chunk(0) : nullptr;
    std::string meta;
    while (static_cast<int64_t>(row_in_group_) < rows && batch.size() < options_.batch_docs &&
           batch.text.bytes.size() < options_.batch_bytes) {
      const int64_t in_group = row_in_group_++;
      const int64_t r = in_group - table_first_row_;  // the row in table_
      const uint64_t line = rows_before_group_ + static_cast<uint64_t>(in_group) + 1;
      ++global_row_;
      ++batch.records_in;
      if (text.IsNull(r)) {
        batch.malformed.push_back({shard_.shard_id, line, "'" + options_.text_field + "' is null"});
        continue;
      }
      std::string_view t = string_at(text, r);
      if (std::string bad = text_error(t, options_); !bad.empty()) {
        batch.malformed.push_back({shard_.shard_id, line, std::move(bad)});
        continue;
      }
      meta.clear();
      for (int c = 0; c < table_->num_columns(); ++c) {
        if (c == text_column_) continue;
        meta.push_back(meta.empty() ? '{' : ',');
        json_text::append_string(meta, schema_->field(c)->name());
        meta.push_back(':');
        append_json_value(meta, *table_->column(c)->chunk(0), r);
      }
      if (!meta.empty()) meta.push_back('}');
      std::string id;
      if (id_array && !id_array->IsNull(r)) {
        // Ids go to Python and JSON as text: a non-UTF-8 one is repaired.
        if (is_string_type(id_array->type_id())) id = json_text::valid_utf8(string_at(*id_array, r));
        else append_json_value(id, *id_array, r);
      } else {
        id = name_ + ":" + std::to_string(line);
      }
      batch.text.push(t);
      batch.ids.push(id);
      batch.metadata.push(meta);
      batch.lines.push_back(line);
      batch.bytes_in += t.size() + meta.size();
    }
  }

  ShardInfo shard_;
  ReaderOptions options_;
  std::unique_ptr<parquet::arrow::FileReader> reader_;
  std::shared_ptr<arrow::Schema> schema_;
  std::shared_ptr<arrow::Table> table_;
  std::string open_error_;
  bool reported_ = false;
  int text_column_ = -1;
  int id_column_ = -1;
  int num_row_groups_ = 0;
  uint32_t row_group_;
  uint32_t row_in_group_;
  uint64_t global_row_;
  uint64_t rows_before_group_ = 0;
  int64_t table_first_row_ = 0;  // the row of the group that table_'s first row is
  std::string name_;
};

}  // namespace

std::unique_ptr<ShardReader> make_parquet_reader(const ShardInfo& shard, const ReaderOptions& options,
                                                 const StreamCoordinate& start) {
  return std::make_unique<ParquetShardReader>(shard, options, start);
}

}  // namespace luminamoon
