// read_byte_array_column_from_row: page skipping through the offset index.
#include "python/data_io/parquet_page_skip.h"

#include <parquet/column_reader.h>
#include <parquet/level_conversion.h>
#include <parquet/metadata.h>
#include <parquet/page_index.h>
#include <parquet/schema.h>

#include <algorithm>
#include <atomic>

#include "python/data_io/arrow_memory_pool.h"

namespace luminamoon {
namespace {

std::atomic<uint64_t> g_pages_skipped{0};

}  // namespace

uint64_t parquet_pages_skipped() { return g_pages_skipped.load(); }

std::shared_ptr<arrow::Array> read_byte_array_column_from_row(parquet::ParquetFileReader& file, int group,
                                                              int column, int64_t first_row,
                                                              const std::shared_ptr<arrow::DataType>& type) {
  const parquet::ColumnDescriptor* descr = file.metadata()->schema()->Column(column);
  if (descr->physical_type() != parquet::Type::BYTE_ARRAY || descr->max_repetition_level() != 0) {
    return nullptr;
  }
  std::shared_ptr<parquet::PageIndexReader> index = file.GetPageIndexReader();
  if (!index) return nullptr;
  std::shared_ptr<parquet::RowGroupPageIndexReader> group_index = index->RowGroup(group);
  if (!group_index) return nullptr;
  std::shared_ptr<parquet::OffsetIndex> offsets = group_index->GetOffsetIndex(column);
  if (!offsets || offsets->page_locations().empty()) return nullptr;
  const auto& pages = offsets->page_locations();
  // The last page starting at or before first_row holds it; every earlier page is skipped.
  auto holder = std::upper_bound(pages.begin(), pages.end(), first_row,
                                 [](int64_t row, const parquet::PageLocation& p) { return row < p.first_row_index; });
  const size_t skip_pages = holder == pages.begin() ? 0 : static_cast<size_t>(holder - pages.begin()) - 1;
  const int64_t kept_from = skip_pages < pages.size() ? pages[skip_pages].first_row_index : first_row;

  std::unique_ptr<parquet::PageReader> pager = file.RowGroup(group)->GetColumnPageReader(column);
  auto seen = std::make_shared<size_t>(0);
  pager->set_data_page_filter([seen, skip_pages](const parquet::DataPageStats&) {
    const bool skip = (*seen)++ < skip_pages;
    if (skip) g_pages_skipped.fetch_add(1, std::memory_order_relaxed);
    return skip;
  });
  auto reader = parquet::internal::RecordReader::Make(descr, parquet::internal::LevelInfo::ComputeLevelInfo(descr),
                                                      data_memory_pool(), /*read_dictionary=*/false,
                                                      /*read_dense_for_nullable=*/false, type);
  reader->SetPageReader(std::move(pager));
  int64_t left = first_row - kept_from;
  while (left > 0) {
    const int64_t n = reader->SkipRecords(left);
    if (n <= 0) break;
    left -= n;
  }
  const int64_t rows = file.metadata()->RowGroup(group)->num_rows();
  int64_t want = rows - first_row;
  while (want > 0) {
    const int64_t n = reader->ReadRecords(want);
    if (n <= 0) break;
    want -= n;
  }
  auto* binary = dynamic_cast<parquet::internal::BinaryRecordReader*>(reader.get());
  if (binary == nullptr) return nullptr;
  arrow::ArrayVector chunks = binary->GetBuilderChunks();
  if (chunks.empty()) return arrow::MakeEmptyArray(type).ValueOrDie();
  if (chunks.size() == 1) return chunks[0];
  return arrow::Concatenate(chunks).ValueOrDie();
}

}  // namespace luminamoon
