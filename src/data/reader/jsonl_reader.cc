// JSONL/NDJSON shard reader: one object per line parsed with simdjson On-Demand;
// the text and id fields are picked out, every other field is kept as metadata.
#include <simdjson.h>

#include <algorithm>
#include <filesystem>

#include "data/reader/line_reader.h"
#include "data/reader/shard_readers.h"
#include "data/writer/json_text.h"
#include "luminamoon/data_error.h"

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

class JsonlReader final : public ShardReader {
 public:
  JsonlReader(const ShardInfo& shard, const ReaderOptions& options, const StreamCoordinate& start)
      : shard_(shard),
        options_(options),
        lines_(ByteSource::open(shard.path, shard.compression), start.byte_offset),
        line_no_(start.row_offset_in_page),
        global_row_(start.global_row_idx),
        shard_name_(std::filesystem::path(shard.path).filename().string()) {}

  bool next(DocBatch& batch) override {
    clear_batch(batch, shard_);
    const uint64_t start_offset = lines_.offset();
    bool consumed = false;
    while (!finished_ && batch.size() < options_.batch_docs &&
           batch.text.bytes.size() < options_.batch_bytes) {
      std::string_view line;
      try {
        if (!lines_.next(line)) {
          finished_ = true;
          break;
        }
      } catch (const DataError& e) {
        // A damaged compressed stream ends the shard; what came before stays.
        batch.malformed.push_back({shard_.shard_id, line_no_ + 1, e.what()});
        ++batch.records_in;
        finished_ = true;
        consumed = true;
        break;
      }
      consumed = true;
      ++line_no_;
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
    std::string text;
    id_.clear();
    meta_.clear();
    for (auto field_result : object) {
      od::field field;
      std::string_view key;
      if ((error = std::move(field_result).get(field)) || (error = field.unescaped_key().get(key))) {
        return reject(batch, std::string("bad JSON: ") + simdjson::error_message(error));
      }
      if (key == options_.text_field && !have_text) {
        std::string_view value;
        if ((error = field.value().get_string().get(value))) {
          return reject(batch, "field '" + options_.text_field + "' is not a string: " +
                                   simdjson::error_message(error));
        }
        text.assign(value);
        have_text = true;
        continue;
      }
      std::string key_copy(key);
      std::string_view raw;
      if (key == options_.id_field) {
        std::string_view id_string;
        if (field.value().type() == od::json_type::string &&
            !field.value().get_string().get(id_string)) {
          id_.assign(id_string);
          json_text::append_string(meta_entry(key_copy), id_string);
          continue;
        }
      }
      if ((error = raw_json_of(field.value()).get(raw))) {
        return reject(batch, std::string("bad JSON: ") + simdjson::error_message(error));
      }
      raw = json_text::trim(raw);
      if (key_copy == options_.id_field) id_.assign(raw);
      meta_entry(key_copy).append(raw);
    }
    if (!have_text) return reject(batch, "no '" + options_.text_field + "' field");
    if (id_.empty()) id_ = shard_name_ + ":" + std::to_string(line_no_);
    if (!meta_.empty()) meta_.push_back('}');
    batch.text.push(text);
    batch.ids.push(id_);
    batch.metadata.push(meta_);
    batch.lines.push_back(line_no_);
  }

  // Opens `"key":` in the metadata object and returns it for the value.
  std::string& meta_entry(const std::string& key) {
    meta_.push_back(meta_.empty() ? '{' : ',');
    json_text::append_string(meta_, key);
    meta_.push_back(':');
    return meta_;
  }

  ShardInfo shard_;
  ReaderOptions options_;
  LineReader lines_;
  uint64_t line_no_;
  uint64_t global_row_;
  std::string shard_name_;
  bool finished_ = false;
  od::parser parser_;
  std::string id_, meta_;
};

}  // namespace

std::unique_ptr<ShardReader> make_jsonl_reader(const ShardInfo& shard, const ReaderOptions& options,
                                               const StreamCoordinate& start) {
  return std::make_unique<JsonlReader>(shard, options, start);
}

}  // namespace luminamoon
