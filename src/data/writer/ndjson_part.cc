// NdjsonPart (Note [NDJSON parts are streamed] in ndjson_part.h).
#include "data/writer/ndjson_part.h"

#include "data/writer/json_text.h"
#include "luminamoon/data_error.h"

namespace luminamoon {
namespace {
constexpr size_t kFlushBytes = size_t{1} << 20;
}  // namespace

void append_ndjson_row(std::string& out, std::string_view text_field, std::string_view text,
                       std::string_view fields) {
  out.push_back('{');
  bool first = true;
  if (!text_field.empty()) {
    json_text::append_string(out, text_field);
    out.push_back(':');
    json_text::append_string(out, text);
    first = false;
  }
  if (fields.size() > 2) {  // "{...}" with at least one member
    if (!first) out.push_back(',');
    out.append(fields.substr(1, fields.size() - 2));
  }
  out += "}\n";
}

NdjsonPart::NdjsonPart(std::string text_field, std::function<std::string()> final_path)
    : text_field_(std::move(text_field)), final_path_(std::move(final_path)) {
  buffer_.reserve(kFlushBytes + (64 << 10));
}

void NdjsonPart::push(std::string_view text, std::string_view fields, bool with_text) {
  if (!file_) file_ = std::make_unique<durable::PendingFile>(final_path_());
  append_ndjson_row(buffer_, with_text ? std::string_view(text_field_) : std::string_view(), text, fields);
  ++rows_;
  text_bytes_ += text.size();
  if (buffer_.size() >= kFlushBytes) flush();
}

void NdjsonPart::flush() {
  file_->append(buffer_);
  buffer_.clear();
  if (buffer_.capacity() > 4 * kFlushBytes) {  // after one huge row: give its memory back
    buffer_ = std::string();
    buffer_.reserve(kFlushBytes + (64 << 10));
  }
}

uint64_t NdjsonPart::publish(const std::string& final_path) {
  if (!file_) file_ = std::make_unique<durable::PendingFile>(final_path_());
  if (file_->final_path() != final_path) {
    throw DataError(DataErrorKind::kOutput, "internal error: NDJSON part opened as " + file_->final_path() +
                                                " but published as " + final_path);
  }
  flush();
  const uint64_t bytes = file_->bytes_written();
  file_->finish();
  file_.reset();
  rows_ = text_bytes_ = 0;
  return bytes;
}

}  // namespace luminamoon
