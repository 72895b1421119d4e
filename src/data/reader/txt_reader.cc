// Plain-text shard reader: the whole file as one document, or one per line, or
// one per paragraph (lines separated by blank lines).
#include <filesystem>

#include "data/reader/line_reader.h"
#include "data/reader/shard_readers.h"
#include "data/writer/json_text.h"
#include "luminamoon/data_error.h"

namespace luminamoon {
namespace {

class TxtReader final : public ShardReader {
 public:
  TxtReader(const ShardInfo& shard, const ReaderOptions& options, const StreamCoordinate& start)
      : shard_(shard),
        options_(options),
        lines_(ByteSource::open(shard.path, shard.compression), start.byte_offset),
        line_no_(start.row_offset_in_page),
        global_row_(start.global_row_idx),
        name_(std::filesystem::path(shard.path).filename().string()) {
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
      batch.malformed.push_back({shard_.shard_id, line_no_ + 1, e.what()});
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
    batch.text.push(text);
    batch.ids.push(options_.txt_mode == TxtMode::kFile ? name_ : name_ + ":" + std::to_string(line));
    batch.metadata.push({});
    batch.lines.push_back(line);
    ++batch.records_in;
    ++global_row_;
  }

  bool read_file(DocBatch& batch) {
    if (finished_) return false;
    std::string text;
    std::string_view line;
    bool first = true;
    while (lines_.next(line)) {
      if (!first) text.push_back('\n');
      text.append(line);
      first = false;
      ++line_no_;
    }
    if (line_no_ == 0) line_no_ = 1;  // an empty file is still one (empty) document
    finished_ = true;
    emit(batch, text, 1);
    return true;
  }

  bool read_lines(DocBatch& batch, bool paragraphs) {
    bool consumed = false;
    std::string paragraph;
    uint64_t paragraph_line = 0;
    std::string_view line;
    while (!finished_ && batch.size() < options_.batch_docs &&
           batch.text.bytes.size() < options_.batch_bytes) {
      if (!lines_.next(line)) {
        finished_ = true;
        break;
      }
      consumed = true;
      ++line_no_;
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      bool blank = json_text::trim(line).empty();
      if (!paragraphs) {
        if (!blank) emit(batch, line, line_no_);
        continue;
      }
      if (blank) {
        if (!paragraph.empty()) {
          emit(batch, paragraph, paragraph_line);
          paragraph.clear();
        }
        continue;
      }
      if (paragraph.empty()) paragraph_line = line_no_;
      else paragraph.push_back('\n');
      paragraph.append(line);
    }
    // A paragraph cut by the batch limit or the end: the lines read so far
    // belong to it, so it must be emitted before the coordinate moves on.
    if (paragraphs && !paragraph.empty()) {
      // Read on to the paragraph's end so the checkpoint never splits it.
      while (lines_.next(line)) {
        ++line_no_;
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        if (json_text::trim(line).empty()) break;
        paragraph.push_back('\n');
        paragraph.append(line);
      }
      emit(batch, paragraph, paragraph_line);
    }
    return consumed;
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
