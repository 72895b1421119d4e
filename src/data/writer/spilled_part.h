// SpilledPart: the rows of one output part, one row group in memory, the full
// row groups spilled to a file beside the part (Note [streamed parts]).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "data/writer/open_part.h"
#include "luminamoon/writer.h"

namespace luminamoon {

// Note [streamed parts]
// A part holds up to part_max_rows documents or part_max_bytes of text (256
// MB by default); buffering it whole made peak memory grow with the part
// size. (This is for the Arrow formats; NDJSON parts are written as their
// rows come: Note [NDJSON parts are streamed] in ndjson_part.h.) Rows are now buffered one row group at a time (parquet_row_group_rows
// rows or kRowGroupMaxBytes of text, whichever comes first); a full row group
// is appended to a spill file next to the part (part-spill-*.tmp, removed
// with the other temporary files on resume) and the buffer reused. When the
// part closes, the serializer reads the row groups back one at a time (twice
// for Arrow formats: the columns of Note [metadata columns] are the union
// over the whole part, so a first pass infers them) and writes one Parquet
// row group or Arrow record batch per chunk into the part's temporary file;
// the commit order is unchanged (fsync, rename, then the checkpoint), so a
// part becomes visible only when complete. Memory: one row group buffered
// plus one read back, whatever the part and corpus sizes.
//
// Note [no transient copies of a row group]
// Measured with heaptrack on the CLI (issue 15, session 3), the writer held
// up to four row groups at once where one or two were meant: a spill
// serialized the group into one std::string (growing by doubling, 33.5 then
// 67 MB, both alive during the copy), the buffer's own text column doubled
// to 64 MiB when the row that closed a group crossed 32 MiB, and reading the
// in-memory group back copied it. Now a spill writes the columns straight
// from the buffer (one write per column), the buffer's columns are reserved
// once at kRowGroupMaxBytes plus kRowSlackBytes (address space only: pages
// count when touched), and read() hands out the in-memory group by reference.
//
// Note [row groups read back into the buffer]
// At a part's close the serializer read each spilled row group into a
// scratch table of its own while the buffer still held the last group: two
// row groups resident (~35-40 MB above the running level at each close of
// the 2 GB run, issue 15, session 11), and the scratch's pages, new for
// every part, zeroed by the kernel each time. A part with spilled groups now
// spills its last group too when it closes, and the groups are read back
// into the buffer itself, whose pages are already resident: one row group in
// memory at any time.
inline constexpr uint64_t kRowGroupMaxBytes = 32u << 20;
inline constexpr uint64_t kRowSlackBytes = 4u << 20;

// A part of an Arrow format (Parquet, Arrow IPC), serialized by `serializer`
// when published.
class SpilledPart final : public PartChunks, public OpenPart {
 public:
  SpilledPart(std::string spill_path, std::string text_field, uint64_t group_rows, TableSerializer& serializer);
  ~SpilledPart() override;
  SpilledPart(const SpilledPart&) = delete;
  SpilledPart& operator=(const SpilledPart&) = delete;

  void push(std::string_view text, std::string_view fields, bool with_text = true) override;
  uint64_t rows() const override { return rows_; }
  uint64_t text_bytes() const override { return text_bytes_; }
  uint64_t publish(const std::string& final_path) override;

  std::string_view text_field() const override { return buffer_.text_field; }
  size_t chunks() const override;
  const PartTable& read(size_t k, PartTable& scratch, bool fields_only = false) const override;

 private:
  void spill();
  void clear();  // no rows, the spill file emptied

  std::string spill_path_;
  TableSerializer& serializer_;
  uint64_t group_rows_;
  // The row group being filled; at publish, the target the spilled groups
  // are read back into (Note [row groups read back into the buffer]).
  mutable PartTable buffer_;
  std::vector<std::pair<uint64_t, uint64_t>> spilled_;  // (offset, size) of each spilled row group
  int fd_ = -1;                                        // the spill file, opened at the first spill
  uint64_t spill_end_ = 0;
  uint64_t rows_ = 0, text_bytes_ = 0;
  bool reading_back_ = false;  // publish: every group is in the spill file, read back into buffer_
};

}  // namespace luminamoon
