// NdjsonPart: an NDJSON part file written as its rows come (Note [NDJSON
// parts are streamed]).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "data/state/durable_io.h"
#include "data/writer/open_part.h"

namespace luminamoon {

// Note [NDJSON parts are streamed]: an NDJSON row needs no schema, so a row
// is written as it comes (the Arrow formats write a row group at a time:
// Note [Arrow parts are streamed]). Rows were once spilled to
// part-spill-*.tmp, read back and serialized at the commit, inside the
// pipeline's serial sink: every byte was written twice and read once more,
// and the whole part's serialization stalled the pipeline at each commit. Now
// each row is serialized when it arrives and appended, a MiB at a time, to
// the part's temporary file (part-N.ndjson.tmp); publish() fsyncs and renames
// it, so a part still becomes visible only complete, and a resumed run
// deletes the temporary file of a part that was not committed.
class NdjsonPart final : public OpenPart {
 public:
  // final_path: the path of the part these rows will make, asked for when
  // the part's first row (or its publish) comes.
  NdjsonPart(std::string text_field, std::function<std::string()> final_path);

  void push(std::string_view text, std::string_view fields, bool with_text = true) override;
  uint64_t rows() const override { return rows_; }
  uint64_t text_bytes() const override { return text_bytes_; }
  uint64_t publish(const std::string& final_path) override;

 private:
  void flush();

  std::string text_field_;
  std::function<std::string()> final_path_;
  std::unique_ptr<durable::PendingFile> file_;  // open while the part has rows
  std::string buffer_;
  uint64_t rows_ = 0, text_bytes_ = 0;
};

// One NDJSON row: {"<text_field>": text, then the members of `fields} (a JSON
// object, copied verbatim so that their JSON types survive), and a newline.
// An empty text_field leaves the text out.
void append_ndjson_row(std::string& out, std::string_view text_field, std::string_view text,
                       std::string_view fields);

}  // namespace luminamoon
