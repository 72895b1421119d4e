// Saved batches (saved_batches.h): a header, one length-prefixed record per
// batch, an end marker with the batch count.
#include "data/pipeline/saved_batches.h"

#include <cstring>
#include <functional>
#include <string_view>
#include <vector>

#include "luminamoon/data_error.h"

namespace luminamoon::pipeline_internal {
namespace {

// Note [saved batch buffer]
//   header: "LMSAVEDB", u32 version, u32 byte-order mark, u32 shard, u32 0
//   records: u64 length, then the batch's fields in DocBatch's order
//   end: u64 kEndMarker, u64 number of batches
// Native byte order (the mark tells another order apart): the buffer lives
// only while its run does, on the nodes of one cluster (as a Ray object). The
// end marker tells a complete buffer from a truncated one; the shard, a
// buffer of another shard.
constexpr char kMagic[8] = {'L', 'M', 'S', 'A', 'V', 'E', 'D', 'B'};
constexpr uint32_t kVersion = 1;
constexpr uint32_t kByteOrderMark = 0x01020304;
constexpr size_t kHeaderSize = 24;
constexpr uint64_t kEndMarker = ~uint64_t{0};

template <class T>
void put(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}
void put_string(std::string& out, std::string_view s) {
  put<uint64_t>(out, s.size());
  out.append(s);
}
void put_column(std::string& out, const StringColumn& c) {
  put<uint64_t>(out, c.size());
  out.append(reinterpret_cast<const char*>(c.offsets.data()), c.offsets.size() * sizeof(int64_t));
  out.append(c.bytes);
}
void put_strings(std::string& out, const std::vector<std::string>& v) {
  put<uint64_t>(out, v.size());
  for (const auto& s : v) put_string(out, s);
}

void encode(const DocBatch& b, std::string& out) {
  put<uint32_t>(out, b.shard_id);
  put_string(out, b.shard_path);
  put_column(out, b.text);
  put_column(out, b.ids);
  put_column(out, b.metadata);
  put<uint64_t>(out, b.lines.size());
  out.append(reinterpret_cast<const char*>(b.lines.data()), b.lines.size() * sizeof(uint64_t));
  uint8_t end[StreamCoordinate::kEncodedSize];
  b.end.encode(end);
  out.append(reinterpret_cast<const char*>(end), sizeof end);
  put<uint64_t>(out, b.bytes_in);
  put<uint64_t>(out, b.records_in);
  put<uint64_t>(out, b.malformed.size());
  for (const auto& m : b.malformed) {
    put<uint32_t>(out, m.shard_id);
    put<uint64_t>(out, m.line);
    put_string(out, m.message);
    put<uint8_t>(out, m.shard_damaged ? 1 : 0);
  }
  put_strings(out, b.drop_reason);
  put_strings(out, b.drop_detail);
  put_strings(out, b.drop_stage);
  put_strings(out, b.metrics_json);
  put<uint64_t>(out, b.counters.size());
  for (const auto& [name, value] : b.counters) {
    put_string(out, name);
    put<int64_t>(out, value);
  }
  put<uint64_t>(out, b.state_positions.size());
  for (const auto& [name, value] : b.state_positions) {
    put_string(out, name);
    put<uint64_t>(out, value);
  }
}

// Reads a record's fields back; any overrun or inconsistency is reported
// through `fail` (which throws), never read past the record.
class Decoder {
 public:
  Decoder(std::string_view bytes, const std::function<void(const std::string&)>& fail)
      : p_(bytes.data()), end_(bytes.data() + bytes.size()), fail_(fail) {}

  template <class T>
  T get() {
    T v;
    std::memcpy(&v, take(sizeof v), sizeof v);
    return v;
  }
  uint64_t count(size_t min_bytes_each) {
    const uint64_t n = get<uint64_t>();
    if (min_bytes_each && n > left() / min_bytes_each) fail_("a count larger than its record");
    return n;
  }
  std::string string() {
    const uint64_t n = count(1);
    return std::string(take(n), n);
  }
  void column(StringColumn& c) {
    const uint64_t n = count(sizeof(int64_t));
    c.offsets.resize(n + 1);
    std::memcpy(c.offsets.data(), take((n + 1) * sizeof(int64_t)), (n + 1) * sizeof(int64_t));
    if (c.offsets[0] != 0) fail_("a column's first offset is not 0");
    for (uint64_t i = 0; i < n; ++i) {
      if (c.offsets[i + 1] < c.offsets[i]) fail_("a column's offsets decrease");
    }
    const auto bytes = static_cast<uint64_t>(c.offsets[n]);
    c.bytes.assign(take(bytes), bytes);
  }
  std::vector<std::string> strings() {
    std::vector<std::string> v(count(sizeof(uint64_t)));
    for (auto& s : v) s = string();
    return v;
  }
  const char* take(uint64_t n) {
    if (n > left()) fail_("a record shorter than its fields");
    const char* at = p_;
    p_ += n;
    return at;
  }
  uint64_t left() const { return static_cast<uint64_t>(end_ - p_); }

 private:
  const char* p_;
  const char* end_;
  const std::function<void(const std::string&)>& fail_;
};

void decode(std::string_view record, DocBatch& b, const std::function<void(const std::string&)>& fail) {
  Decoder d(record, fail);
  b.shard_id = d.get<uint32_t>();
  b.shard_path = d.string();
  d.column(b.text);
  d.column(b.ids);
  d.column(b.metadata);
  b.lines.resize(d.count(sizeof(uint64_t)));
  std::memcpy(b.lines.data(), d.take(b.lines.size() * sizeof(uint64_t)), b.lines.size() * sizeof(uint64_t));
  b.end = StreamCoordinate::decode(reinterpret_cast<const uint8_t*>(d.take(StreamCoordinate::kEncodedSize)));
  b.bytes_in = d.get<uint64_t>();
  b.records_in = d.get<uint64_t>();
  b.malformed.resize(d.count(1));
  for (auto& m : b.malformed) {
    m.shard_id = d.get<uint32_t>();
    m.line = d.get<uint64_t>();
    m.message = d.string();
    m.shard_damaged = d.get<uint8_t>() != 0;
  }
  b.drop_reason = d.strings();
  b.drop_detail = d.strings();
  b.drop_stage = d.strings();
  b.metrics_json = d.strings();
  b.counters.resize(d.count(1));
  for (auto& [name, value] : b.counters) {
    name = d.string();
    value = d.get<int64_t>();
  }
  b.state_positions.resize(d.count(1));
  for (auto& [name, value] : b.state_positions) {
    name = d.string();
    value = d.get<uint64_t>();
  }
  if (d.left() != 0) fail("a record longer than its fields");
  const size_t n = b.text.size();
  if (b.ids.size() != n || b.metadata.size() != n || b.lines.size() != n || b.drop_reason.size() != n ||
      b.drop_detail.size() != n || b.drop_stage.size() != n || b.metrics_json.size() != n) {
    fail("a batch whose columns differ in length");
  }
}

}  // namespace

SavedBatchWriter::SavedBatchWriter(uint32_t shard) {
  bytes_.assign(kMagic, sizeof kMagic);
  put<uint32_t>(bytes_, kVersion);
  put<uint32_t>(bytes_, kByteOrderMark);
  put<uint32_t>(bytes_, shard);
  put<uint32_t>(bytes_, 0);
}

void SavedBatchWriter::add(const DocBatch& batch) {
  const size_t at = bytes_.size();
  put<uint64_t>(bytes_, 0);  // the record's length, known once encoded
  encode(batch, bytes_);
  const uint64_t length = bytes_.size() - at - sizeof(uint64_t);
  std::memcpy(bytes_.data() + at, &length, sizeof length);
  ++batches_;
}

std::string SavedBatchWriter::finish() {
  put<uint64_t>(bytes_, kEndMarker);
  put<uint64_t>(bytes_, batches_);
  return std::move(bytes_);
}

SavedBatchSource::SavedBatchSource(std::string_view bytes, uint32_t shard) : bytes_(bytes), shard_(shard) {
  if (bytes_.size() < kHeaderSize || std::memcmp(bytes_.data(), kMagic, sizeof kMagic) != 0) {
    corrupt("not a saved batch buffer");
  }
  uint32_t fields[4];
  std::memcpy(fields, bytes_.data() + sizeof kMagic, sizeof fields);
  if (fields[1] != kByteOrderMark) corrupt("written on a machine of another byte order");
  if (fields[0] != kVersion) corrupt("format version " + std::to_string(fields[0]) + ", expected " + std::to_string(kVersion));
  if (fields[2] != shard_) corrupt("holds shard " + std::to_string(fields[2]) + ", expected " + std::to_string(shard_));
  offset_ = kHeaderSize;
}

void SavedBatchSource::corrupt(const std::string& what) const {
  throw DataError(DataErrorKind::kStateCorrupt, "saved batches of shard " + std::to_string(shard_) + ": " + what);
}

uint64_t SavedBatchSource::read_u64() {
  if (bytes_.size() - offset_ < sizeof(uint64_t)) corrupt("ends inside a record (truncated?)");
  uint64_t v;
  std::memcpy(&v, bytes_.data() + offset_, sizeof v);
  offset_ += sizeof v;
  return v;
}

bool SavedBatchSource::next(DocBatch& batch) {
  if (done_) return false;
  const uint64_t length = read_u64();
  if (length == kEndMarker) {
    const uint64_t count = read_u64();
    if (count != batches_) corrupt("ends after " + std::to_string(batches_) + " of " + std::to_string(count) + " batches");
    if (offset_ != bytes_.size()) corrupt("bytes after the end marker");
    done_ = true;
    return false;
  }
  if (length > bytes_.size() - offset_) corrupt("a record longer than the buffer (truncated?)");
  const std::function<void(const std::string&)> fail = [this](const std::string& what) { corrupt(what); };
  decode(bytes_.substr(offset_, length), batch, fail);
  offset_ += length;
  if (batch.shard_id != shard_) corrupt("a batch of shard " + std::to_string(batch.shard_id));
  ++batches_;
  return true;
}

}  // namespace luminamoon::pipeline_internal
