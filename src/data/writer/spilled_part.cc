// SpilledPart (Note [streamed parts] in spilled_part.h): row groups spilled as
// raw columns (offsets then bytes) and read back with pread.
#include "data/writer/spilled_part.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "data/state/durable_io.h"
#include "luminamoon/data_error.h"

namespace luminamoon {
namespace {

// One spilled row group: u64 rows, u64 text bytes, u64 field bytes, a byte
// (1: the group has a text column), then the text offsets (rows + 1 int64,
// one when there is no text), the text, the field offsets, the fields.
// Native byte order: the file lives only as long as its part is open.
std::string_view offsets_bytes(const StringColumn& c) {
  return {reinterpret_cast<const char*>(c.offsets.data()), c.offsets.size() * sizeof(int64_t)};
}

// Room for a whole row group and the row that closes it, reserved once
// (Note [no transient copies of a row group]).
void reserve_group(std::string& bytes) {
  if (bytes.capacity() < kRowGroupMaxBytes + kRowSlackBytes) bytes.reserve(kRowGroupMaxBytes + kRowSlackBytes);
}

void read_exact(int fd, void* dst, size_t n, uint64_t offset, const std::string& path) {
  durable::pread_exact(fd, dst, n, offset, path, "read spill", DataErrorKind::kOutput);
}

void read_column(int fd, StringColumn& c, uint64_t rows, uint64_t bytes, uint64_t& offset, const std::string& path) {
  c.offsets.resize(rows + 1);
  read_exact(fd, c.offsets.data(), (rows + 1) * sizeof(int64_t), offset, path);
  offset += (rows + 1) * sizeof(int64_t);
  reserve_group(c.bytes);  // a larger group later must not double the capacity (two copies alive)
  c.bytes.resize(bytes);
  read_exact(fd, c.bytes.data(), bytes, offset, path);
  offset += bytes;
}

}  // namespace

SpilledPart::SpilledPart(std::string spill_path, std::string text_field, uint64_t group_rows,
                         TableSerializer& serializer)
    : spill_path_(std::move(spill_path)), serializer_(serializer), group_rows_(group_rows ? group_rows : 1) {
  buffer_.text_field = std::move(text_field);
}

SpilledPart::~SpilledPart() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(spill_path_.c_str());
  }
}

void SpilledPart::push(std::string_view text, std::string_view fields, bool with_text) {
  if (with_text) {
    reserve_group(buffer_.text.bytes);
    buffer_.text.push(text);
  }
  reserve_group(buffer_.fields.bytes);
  buffer_.fields.push(fields);
  ++rows_;
  text_bytes_ += text.size();
  if (buffer_.rows() >= group_rows_ || buffer_.text_bytes() + buffer_.fields.bytes.size() >= kRowGroupMaxBytes)
    spill();
}

void SpilledPart::spill() {
  if (fd_ < 0) {
    fd_ = ::open(spill_path_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) throw DataError(DataErrorKind::kOutput, "[open spill] " + spill_path_ + ": " + std::strerror(errno));
  }
  // Straight from the buffer, one write per column (Note [no transient copies of a row group]).
  char head[3 * sizeof(uint64_t) + 1];
  const uint64_t header[3] = {buffer_.rows(), buffer_.text.bytes.size(), buffer_.fields.bytes.size()};
  std::memcpy(head, header, sizeof header);
  head[sizeof header] = buffer_.text.size() == buffer_.rows() ? 1 : 0;  // has a text column
  const std::string_view pieces[] = {{head, sizeof head}, offsets_bytes(buffer_.text), buffer_.text.bytes,
                                     offsets_bytes(buffer_.fields), buffer_.fields.bytes};
  if (::lseek(fd_, static_cast<off_t>(spill_end_), SEEK_SET) < 0)
    throw DataError(DataErrorKind::kOutput, "[seek spill] " + spill_path_ + ": " + std::strerror(errno));
  uint64_t size = 0;
  for (std::string_view piece : pieces) {
    durable::write_all(fd_, piece, spill_path_);
    size += piece.size();
  }
  spilled_.emplace_back(spill_end_, size);
  spill_end_ += size;
  buffer_.clear();
}

size_t SpilledPart::chunks() const {
  return spilled_.size() + (!reading_back_ && buffer_.rows() > 0 ? 1 : 0);
}

const PartTable& SpilledPart::read(size_t k, PartTable& scratch, bool fields_only) const {
  if (k >= spilled_.size()) return buffer_;  // the row group still in memory
  // Every group spilled: read back into the buffer (Note [row groups read back into the buffer]).
  PartTable& into = reading_back_ ? buffer_ : scratch;
  into.text_field = buffer_.text_field;
  uint64_t offset = spilled_[k].first;
  uint64_t header[3];
  read_exact(fd_, header, sizeof header, offset, spill_path_);
  offset += sizeof header;
  char has_text = 0;
  read_exact(fd_, &has_text, 1, offset, spill_path_);
  offset += 1;
  const uint64_t text_rows = has_text ? header[0] : 0;
  if (fields_only) {
    into.text.clear();
    offset += (text_rows + 1) * sizeof(int64_t) + header[1];
  } else {
    read_column(fd_, into.text, text_rows, header[1], offset, spill_path_);
  }
  read_column(fd_, into.fields, header[0], header[2], offset, spill_path_);
  return into;
}

uint64_t SpilledPart::publish(const std::string& final_path) {
  durable::PendingFile file(final_path);
  if (!spilled_.empty()) {  // Note [row groups read back into the buffer]
    if (buffer_.rows() > 0) spill();
    reading_back_ = true;
  }
  try {
    serializer_.write_chunks(*this, file.fd(), file.temp_path());
  } catch (...) {
    reading_back_ = false;  // the part stays whole: every group is in the spill file
    buffer_.clear();
    throw;
  }
  reading_back_ = false;
  const off_t bytes = ::lseek(file.fd(), 0, SEEK_END);
  if (bytes < 0) throw DataError(DataErrorKind::kOutput, "[seek] " + file.temp_path() + ": " + std::strerror(errno));
  file.finish();
  clear();
  return static_cast<uint64_t>(bytes);
}

void SpilledPart::clear() {
  buffer_.clear();
  spilled_.clear();
  spill_end_ = 0;
  rows_ = 0;
  text_bytes_ = 0;
  if (fd_ >= 0 && ::ftruncate(fd_, 0) != 0) {
    throw DataError(DataErrorKind::kOutput, "[truncate spill] " + spill_path_ + ": " + std::strerror(errno));
  }
}

}  // namespace luminamoon
