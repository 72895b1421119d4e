// ArrowPart: a part file of an Arrow format (Parquet, Arrow IPC) written a row
// group at a time as its rows come (Note [Arrow parts are streamed]).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "data/state/durable_io.h"
#include "data/writer/open_part.h"
#include "luminamoon/writer.h"

namespace luminamoon {

// Note [Arrow parts are streamed]
// A part holds up to part_max_rows documents or part_max_bytes of text (256
// MB by default). Its rows are buffered one row group at a time
// (parquet_row_group_rows rows or kRowGroupMaxBytes of text, whichever comes
// first) and each full group goes at once to the serializer's PartStream,
// which encodes and compresses it into the part's temporary file
// (part-N.parquet.tmp); publish() writes the last group and the footer, then
// fsyncs and renames, so a part still becomes visible only complete (Note
// [commit order]) and a resumed run deletes the temporary file of a part that
// was not committed. Memory: one row group and the encoder's pages, whatever
// the part and corpus sizes.
//
// Until session 14 (issue 15) full groups were spilled raw to
// part-spill-*.tmp and serialized when the part closed, because the metadata
// columns are the union over the whole part (Note [metadata columns]) and a
// late group can add a field or widen a type. Every kept byte was written and
// read once more, and the whole part's compression ran in a burst inside the
// pipeline's serial sink while the stages kept filling the batches in flight:
// the 2 GB run's peak resident set rose by ~20 MB at every part close (rows
// P4, P4g in docs/benchmarks.md). The stream now rewrites the groups already
// written when a group widens the columns (Note [a widened part is
// rewritten] in src/python/data_io/arrow_table_serializer.cc), which is rare
// and bounded by the part's groups.
//
// A write that fails (a full disk) leaves the part broken: every later push or
// publish fails with the first error, the run stops, and its resume starts
// from the last checkpoint.
//
// Note [no transient copies of a row group]: the group's columns are
// reserved once at kRowGroupMaxBytes plus kRowSlackBytes (address space only:
// pages count when touched), so the row that closes a group never doubles a
// column's capacity with both copies alive (heaptrack, issue 15, session 3).
inline constexpr uint64_t kRowGroupMaxBytes = 32u << 20;
inline constexpr uint64_t kRowSlackBytes = 4u << 20;

class ArrowPart final : public OpenPart {
 public:
  // final_path: the path of the part these rows will make, asked for when
  // the part's first row (or its publish) comes.
  ArrowPart(std::string text_field, uint64_t group_rows, TableSerializer& serializer,
            std::function<std::string()> final_path);

  void push(std::string_view text, std::string_view fields, bool with_text = true) override;
  uint64_t rows() const override { return rows_; }
  uint64_t text_bytes() const override { return text_bytes_; }
  uint64_t publish(const std::string& final_path) override;

 private:
  void open();
  void write_group();
  [[noreturn]] void fail_broken() const;

  TableSerializer& serializer_;
  uint64_t group_rows_;
  std::function<std::string()> final_path_;
  PartTable group_;                               // the row group being filled
  std::unique_ptr<durable::PendingFile> file_;    // open while the part has rows
  std::unique_ptr<PartStream> stream_;
  std::string broken_;                            // the first failed write's message
  uint64_t rows_ = 0, text_bytes_ = 0;
};

}  // namespace luminamoon
