// Plain-text shard reader: the whole file as one document, or one per line, or
// one per paragraph (lines separated by blank lines).
#include <filesystem>

#include "data/reader/line_reader.h"
#include "data/reader/shard_readers.h"
#include "data/writer/json_text.h"
#include "data/reader/record_checks.h"
#include "luminamoon/data_error.h"

namespace luminamoon {
namespace {

class TxtReader final : public ShardReader {
 public:
  TxtReader(const ShardInfo& shard, const ReaderOptions& options, const StreamCoordinate& start)
      : shard_(shard),
        options_(options),
        lines_(ByteSource::open(shard.path, shard.compression), start.byte_offset,
               options.max_record_bytes),
        line_no_(start.row_offset_in_page),
        global_row_(start.global_row_idx),
        name_(valid_utf8_name(shard.path)) {
    // In file mode the one document is consumed once any line was.
    if (options_.txt_mode == TxtMode::kFile && line_no_ > 0) finished_ = true;
  }

  bool next(DocBatch& batch) override {
    clear_batch(batch, shard_);
    const uint64_t start_offset = lines_.offset();
    bool consumed = false;
    try {
      switch (options_.txt_mode) {
        case TxtMode::kFile: consumed = read_file(batch); break;
        case TxtMode::kLine: consumed = read_lines(batch, false); break;
        case TxtMode::kParagraph: consumed = read_lines(batch, true); break;
      }
    } catch (const DataError& e) {
      batch.malformed.push_back({shard_.shard_id, line_no_ + 1, e.what(), true});
      ++batch.records_in;
      finished_ = true;
      consumed = true;
    }
    batch.bytes_in = lines_.offset() - start_offset;
    batch.end = StreamCoordinate{shard_.shard_id, lines_.offset(), 0, 0,
                                 static_cast<uint32_t>(line_no_), global_row_};
    return consumed;
  }

 private:
  void emit(DocBatch& batch, std::string_view text, uint64_t line) {
    if (std::string bad = text_error(text, options_); !bad.empty()) return reject(batch, line, std::move(bad));
    batch.text.push(text);
    batch.ids.push(options_.txt_mode == TxtMode::kFile ? name_ : name_ + ":" + std::to_string(line));
    batch.metadata.push({});
    batch.lines.push_back(line);
    ++batch.records_in;
    ++global_row_;
  }

  // Note [bounded lines] applies to the whole document: once it is over the
  // limit, the rest of the file is read and discarded, not accumulated.
  bool read_file(DocBatch& batch) {
    if (finished_) return false;
    std::string text;
    std::string_view line;
    bool first = true;
    bool over = false;
    uint64_t too_long = 0;  // the document's size once it is over the limit
    for (;;) {
      LineReader::Status status = lines_.read(line);
      if (status == LineReader::Status::kEnd) break;
      ++line_no_;
      const uint64_t added = (first ? 0 : 1) + (status == LineReader::Status::kTooLong
                                                     ? lines_.too_long_bytes() : line.size());
      first = false;
      if (!over && text.size() + added > options_.max_record_bytes) {
        over = true;
        too_long = text.size();
        text.clear();
        text.shrink_to_fit();
      }
      if (over) {
        too_long += added;
        continue;
      }
      if (line_no_ > 1) text.push_back('\n');
      text.append(line);
    }
    if (line_no_ == 0) line_no_ = 1;  // an empty file is still one (empty) document
    finished_ = true;
    if (over) {
      reject(batch, 1, too_long_message(too_long, options_.max_record_bytes));
      return true;
    }
    emit(batch, text, 1);
    return true;
  }

  // A paragraph being read: its first line (0 when none is open), its text,
  // or its size so far once it is over max_record_bytes (then not kept).
  struct Paragraph {
    uint64_t line = 0;
    std::string text;
    bool over = false;
    uint64_t too_long = 0;
  };

  bool read_lines(DocBatch& batch, bool paragraphs) {
    bool consumed = false;
    Paragraph paragraph;
    while (!finished_ && batch.size() < options_.batch_docs &&
           batch.text.bytes.size() < options_.batch_bytes) {
      if (!step(batch, paragraphs, paragraph)) {
        finished_ = true;
        break;
      }
      consumed = true;
    }
    // A paragraph cut by the batch limit or the end: read on to its end so
    // that the checkpoint never splits it.
    while (paragraph.line != 0) {
      if (!step(batch, paragraphs, paragraph)) finish(batch, paragraph);
    }
    return consumed;
  }

  // Reads one line into the batch (line mode) or the paragraph; false at the end.
  bool step(DocBatch& batch, bool paragraphs, Paragraph& p) {
    std::string_view line;
    const LineReader::Status status = lines_.read(line);
    if (status == LineReader::Status::kEnd) return false;
    ++line_no_;
    const bool too_long = status == LineReader::Status::kTooLong;
    if (!too_long && !line.empty() && line.back() == '\r') line.remove_suffix(1);
    const bool blank = !too_long && json_text::trim(line).empty();
    if (!paragraphs) {
      if (too_long) reject(batch, line_no_, too_long_message(lines_.too_long_bytes(), options_.max_record_bytes));
      else if (!blank) emit(batch, line, line_no_);
      return true;
    }
    if (blank) {
      if (p.line != 0) finish(batch, p);
      return true;
    }
    const uint64_t size = too_long ? lines_.too_long_bytes() : line.size();
    const uint64_t separator = p.line != 0 ? 1 : 0;
    if (p.line == 0) p.line = line_no_;
    if (!p.over && p.text.size() + separator + size > options_.max_record_bytes) {
      p.over = true;
      p.too_long = p.text.size();
      p.text.clear();
    }
    if (p.over) {
      p.too_long += separator + size;
    } else {
      if (separator) p.text.push_back('\n');
      p.text.append(line);
    }
    return true;
  }

  void finish(DocBatch& batch, Paragraph& p) {
    if (p.over) reject(batch, p.line, too_long_message(p.too_long, options_.max_record_bytes));
    else emit(batch, p.text, p.line);
    p = Paragraph{};
  }

  void reject(DocBatch& batch, uint64_t line, std::string message) {
    batch.malformed.push_back({shard_.shard_id, line, std::move(message)});
    ++batch.records_in;
    ++global_row_;
  }

  ShardInfo shard_;
  ReaderOptions options_;
  LineReader lines_;
  uint64_t line_no_;
  uint64_t global_row_;
  std::string name_;
  bool finished_ = false;
};

}  // namespace

std::unique_ptr<ShardReader> make_txt_reader(const ShardInfo& shard, const ReaderOptions& options,
                                             const StreamCoordinate& start) {
  return std::make_unique<TxtReader>(shard, options, start);
}

}  // namespace luminamoon
