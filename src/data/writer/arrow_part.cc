// ArrowPart (Note [Arrow parts are streamed] in arrow_part.h).
#include "data/writer/arrow_part.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <exception>

#include "luminamoon/data_error.h"

namespace luminamoon {
namespace {

// Room for a whole row group and the row that closes it, reserved once
// (Note [no transient copies of a row group]).
void reserve_group(std::string& bytes) {
  if (bytes.capacity() < kRowGroupMaxBytes + kRowSlackBytes) bytes.reserve(kRowGroupMaxBytes + kRowSlackBytes);
}

}  // namespace

ArrowPart::ArrowPart(std::string text_field, uint64_t group_rows, TableSerializer& serializer,
                     std::function<std::string()> final_path)
    : serializer_(serializer), group_rows_(group_rows ? group_rows : 1), final_path_(std::move(final_path)) {
  group_.text_field = std::move(text_field);
}

void ArrowPart::fail_broken() const {
  throw DataError(DataErrorKind::kOutput, "the part being written failed earlier and cannot continue: " + broken_);
}

void ArrowPart::open() {
  // Both or neither: a stream that failed to open leaves no file for a later push to use.
  auto file = std::make_unique<durable::PendingFile>(final_path_());
  stream_ = serializer_.open(file->fd(), file->temp_path(), group_.text_field);
  file_ = std::move(file);
}

void ArrowPart::push(std::string_view text, std::string_view fields, bool with_text) {
  if (!broken_.empty()) fail_broken();
  if (!file_) open();
  if (with_text) {
    reserve_group(group_.text.bytes);
    group_.text.push(text);
  }
  reserve_group(group_.fields.bytes);
  group_.fields.push(fields);
  ++rows_;
  text_bytes_ += text.size();
  if (group_.rows() >= group_rows_ || group_.text_bytes() + group_.fields.bytes.size() >= kRowGroupMaxBytes) {
    write_group();
  }
}

void ArrowPart::write_group() {
  try {
    stream_->write_group(group_);
    const off_t end = ::lseek(file_->fd(), 0, SEEK_CUR);
    if (end > 0) file_->written_up_to(static_cast<uint64_t>(end));  // Note [written pages dropped]
  } catch (const std::exception& e) {
    broken_ = e.what();
    throw;
  }
  group_.clear();
}

uint64_t ArrowPart::publish(const std::string& final_path) {
  if (!broken_.empty()) fail_broken();
  if (!file_) open();
  if (file_->final_path() != final_path) {
    throw DataError(DataErrorKind::kOutput, "internal error: part opened as " + file_->final_path() +
                                                " but published as " + final_path);
  }
  if (group_.rows() > 0) write_group();
  off_t bytes = -1;
  try {
    stream_->close();
    bytes = ::lseek(file_->fd(), 0, SEEK_END);
    if (bytes < 0) {
      throw DataError(DataErrorKind::kOutput, "[seek] " + file_->temp_path() + ": " + std::strerror(errno));
    }
    file_->finish();
  } catch (const std::exception& e) {
    broken_ = e.what();
    throw;
  }
  stream_.reset();
  file_.reset();
  rows_ = text_bytes_ = 0;
  return static_cast<uint64_t>(bytes);
}

}  // namespace luminamoon
