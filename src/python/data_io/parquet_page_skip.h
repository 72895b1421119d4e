// Resume inside a Parquet row group without decoding the pages before the
// checkpoint row: the file's offset index says where each page starts, a data
// page filter skips the earlier pages unread.
#pragma once

#include <arrow/api.h>
#include <parquet/file_reader.h>

#include <cstdint>
#include <memory>

namespace luminamoon {

// Rows [first_row, end of row group) of the flat BYTE_ARRAY leaf column
// `column` of row group `group`, as an array of `type` (string or
// large_string). The data pages that end at or before first_row are skipped
// (neither read past their header nor decompressed nor decoded); inside the
// first kept page the rows before first_row are decoded and dropped. Returns
// nullptr when the column chunk has no offset index or the column is not a
// flat byte array: the caller then decodes the row group as before.
std::shared_ptr<arrow::Array> read_byte_array_column_from_row(parquet::ParquetFileReader& file, int group,
                                                              int column, int64_t first_row,
                                                              const std::shared_ptr<arrow::DataType>& type);

// Data pages skipped this way since the process started (tests, benchmarks).
uint64_t parquet_pages_skipped();

}  // namespace luminamoon
