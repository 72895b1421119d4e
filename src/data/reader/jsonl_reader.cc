// JSONL/NDJSON shard reader: one object per line parsed with simdjson On-Demand;
// the text and id fields are picked out, every other field is kept as metadata.
#include <simdjson.h>

#include <algorithm>
#include <filesystem>

#include "data/reader/line_reader.h"
#include "data/reader/shard_readers.h"
#include "data/writer/json_text.h"
#include "luminamoon/data_error.h"
#include "data/reader/record_checks.h"

namespace luminamoon {
namespace {

namespace od = simdjson::ondemand;

// The JSON text of any value (simdjson 3.0 has raw_json only on containers).
simdjson::simdjson_result<std::string_view> raw_json_of(od::value& value) {
  od::json_type type;
  if (auto error = value.type().get(type)) return error;
  if (type == od::json_type::object) {
    od::object o;
    if (auto error = value.get_object().get(o)) return error;
    return o.raw_json();
  }
  if (type == od::json_type::array) {
    od::array a;
    if (auto error = value.get_array().get(a)) return error;
    return a.raw_json();
  }
  return value.raw_json_token();
}

// Note [record validation]: a line becomes a document only if every later
// stage and every writer can take it as it is: the whole line is one JSON
// object (simdjson On-Demand checks only what it touches, so the metadata
// rebuilt from the other fields is parsed once more, by the same DOM parser
// and limits the Parquet/Arrow writer uses: numbers out of range, invalid
// literals such as `tru` or `01`, lone surrogate escapes and nesting deeper
// than simdjson's 1024 levels are rejected here, not at the writer); no key
// appears twice (a second "text" would otherwise reach the output unmasked);
// the line is at most max_record_bytes long. Anything else is a counted
// rejection with shard and line, and reading goes on at the next line.
class JsonlReader final : public ShardReader {
 public:
  JsonlReader(const ShardInfo& shard, const ReaderOptions& options, const StreamCoordinate& start)
      : shard_(shard),
        options_(options),
        lines_(ByteSource::open(shard.path, shard.compression), start.byte_offset,
               options.max_record_bytes),
        line_no_(start.row_offset_in_page),
        global_row_(start.global_row_idx),
        shard_name_(valid_utf8_name(shard.path)) {}

  bool next(DocBatch& batch) override {
    clear_batch(batch, shard_);
    const uint64_t start_offset = lines_.offset();
    bool consumed = false;
    while (!finished_ && batch.size() < options_.batch_docs &&
           batch.text.bytes.size() < options_.batch_bytes) {
      std::string_view line;
      LineReader::Status status;
      try {
        status = lines_.read(line);
      } catch (const DataError& e) {
        // A damaged compressed stream ends the shard; what came before stays.
        batch.malformed.push_back({shard_.shard_id, line_no_ + 1, e.what(), true});
        ++batch.records_in;
        finished_ = true;
        consumed = true;
        break;
      }
      if (status == LineReader::Status::kEnd) {
        finished_ = true;
        break;
      }
      consumed = true;
      ++line_no_;
      if (status == LineReader::Status::kTooLong) {
        ++batch.records_in;
        ++global_row_;
        reject(batch, too_long_message(lines_.too_long_bytes(), options_.max_record_bytes));
        continue;
      }
      if (json_text::trim(line).empty()) continue;  // blank lines are not records
      ++batch.records_in;
      ++global_row_;
      parse_line(line, batch);
    }
    batch.bytes_in = lines_.offset() - start_offset;
    batch.end = StreamCoordinate{shard_.shard_id, lines_.offset(), 0, 0,
                                 static_cast<uint32_t>(line_no_), global_row_};
    return consumed;
  }

 private:
  void reject(DocBatch& batch, std::string message) {
    batch.malformed.push_back({shard_.shard_id, line_no_, std::move(message)});
  }

  void parse_line(std::string_view line, DocBatch& batch) {
    od::document doc;
    auto error = parser_.iterate(line.data(), line.size(), line.size() + LineReader::kPadding)
                     .get(doc);
    od::object object;
    if (!error) error = doc.get_object().get(object);
    std::string_view whole;
    if (!error) error = object.raw_json().get(whole);  // validates the brackets, then rewind
    if (!error) error = object.reset().error();
    if (error) return reject(batch, std::string("not a JSON object: ") + simdjson::error_message(error));
    const size_t object_end = static_cast<size_t>(whole.data() - line.data()) + whole.size();
    if (!json_text::trim(line.substr(std::min(object_end, line.size()))).empty()) {
      return reject(batch, "trailing content after the JSON object");
    }

    bool have_text = false;
    std::string_view text;
    id_.clear();
    meta_.clear();
    keys_.clear();
    value_ranges_.clear();
    for (auto field_result : object) {
      od::field field;
      std::string_view key;
      if ((error = std::move(field_result).get(field)) || (error = field.unescaped_key().get(key))) {
        return reject(batch, std::string("bad JSON: ") + simdjson::error_message(error));
      }
      if (key == options_.text_field) {
        if (have_text) return reject(batch, "duplicate key '" + printable(key) + "'");
        if ((error = field.value().get_string().get(text))) {
          return reject(batch, "field '" + options_.text_field + "' is not a string: " +
                                   simdjson::error_message(error));
        }
        text_.assign(text);  // the parser's string buffer is reused by later fields
        have_text = true;
        continue;
      }
      if (std::find(keys_.begin(), keys_.end(), key) != keys_.end()) {
        return reject(batch, "duplicate key '" + printable(key) + "'");
      }
      keys_.emplace_back(key);
      const bool is_id = key == options_.id_field;
      od::value& value = field.value();
      od::json_type type;
      if ((error = value.type().get(type))) {
        return reject(batch, "field '" + printable(key) + "': " + simdjson::error_message(error));
      }
      if (is_id && type == od::json_type::string) {
        std::string_view id_string;
        if ((error = value.get_string().get(id_string))) {
          return reject(batch, "field '" + printable(key) + "': " + simdjson::error_message(error));
        }
        id_.assign(id_string);
        const size_t begin = meta_entry(keys_.back()).size();
        json_text::append_string(meta_, id_string);
        value_ranges_.emplace_back(begin, meta_.size());
        continue;
      }
      std::string_view raw;
      if ((error = raw_json_of(value).get(raw))) {
        return reject(batch, "field '" + printable(key) + "': " + simdjson::error_message(error));
      }
      raw = json_text::trim(raw);
      if (is_id) id_.assign(raw);
      const size_t begin = meta_entry(keys_.back()).size();
      meta_.append(raw);
      value_ranges_.emplace_back(begin, meta_.size());
    }
    if (!have_text) return reject(batch, "no '" + options_.text_field + "' field");
    if (!meta_.empty()) {
      meta_.push_back('}');
      if (auto bad = metadata_error(); !bad.empty()) return reject(batch, std::move(bad));
    }
    if (id_.empty()) id_ = shard_name_ + ":" + std::to_string(line_no_);
    batch.text.push(text_);
    batch.ids.push(id_);
    batch.metadata.push(meta_);
    batch.lines.push_back(line_no_);
  }

  // "" when meta_ parses as the writers will parse it (Note [record validation]).
  std::string metadata_error() {
    meta_.reserve(meta_.size() + simdjson::SIMDJSON_PADDING);
    simdjson::dom::element root;
    auto error = dom_.parse(meta_.data(), meta_.size(), /*realloc_if_needed=*/false).get(root);
    if (!error) return {};
    // Rare: name the first field whose value alone fails (else it was the depth).
    for (size_t k = 0; k < keys_.size(); ++k) {
      auto [begin, end] = value_ranges_[k];
      if (dom_.parse(meta_.data() + begin, end - begin, /*realloc_if_needed=*/true).error()) {
        return "field '" + printable(keys_[k]) + "': the value is not valid JSON or out of range (" +
               simdjson::error_message(error) + ")";
      }
    }
    return std::string("the metadata cannot be represented: ") + simdjson::error_message(error);
  }

  // Opens `"key":` in the metadata object and returns it for the value.
  std::string& meta_entry(const std::string& key) {
    meta_.push_back(meta_.empty() ? '{' : ',');
    json_text::append_string(meta_, key);
    meta_.push_back(':');
    return meta_;
  }

  // A key for a message: JSON-escaped and shortened.
  static std::string printable(std::string_view key) {
    std::string out;
    json_text::append_string(out, key.substr(0, 64));
    return out.substr(1, out.size() - 2) + (key.size() > 64 ? "..." : "");
  }

  ShardInfo shard_;
  ReaderOptions options_;
  LineReader lines_;
  uint64_t line_no_;
  uint64_t global_row_;
  std::string shard_name_;
  bool finished_ = false;
  od::parser parser_;
  simdjson::dom::parser dom_;
  std::string id_, meta_, text_;
  std::vector<std::string> keys_;  // the metadata's keys, in order
  std::vector<std::pair<size_t, size_t>> value_ranges_;  // each key's value in meta_
};

}  // namespace

std::unique_ptr<ShardReader> make_jsonl_reader(const ShardInfo& shard, const ReaderOptions& options,
                                               const StreamCoordinate& start) {
  return std::make_unique<JsonlReader>(shard, options, start);
}

}  // namespace luminamoon
