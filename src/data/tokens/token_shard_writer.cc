// TokenShardWriter: token shards and their manifest (Note [token shard layout]).
#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "data/state/crash_point.h"
#include "data/state/durable_io.h"
#include "data/writer/json_text.h"
#include "luminamoon/data_error.h"
#include "luminamoon/stream_coordinate.h"
#include "luminamoon/token_shards.h"

namespace luminamoon {
namespace {

static_assert(std::endian::native == std::endian::little,
              "token shards store the host's integers as little-endian bytes");

using C = StreamCoordinate;  // its put/get: little-endian field access

uint32_t crc_update(uint32_t crc, const void* p, size_t n) {
  return static_cast<uint32_t>(::crc32_z(crc, static_cast<const Bytef*>(p), n));
}

uint64_t offsets_position(uint64_t tokens, uint32_t token_bytes) {
  return (kTokenShardHeaderBytes + tokens * token_bytes + 7) / 8 * 8;
}

}  // namespace

std::string token_shard_file_name(uint64_t index) {
  char name[48];
  std::snprintf(name, sizeof name, "shard-%08llu.tok", static_cast<unsigned long long>(index));
  return name;
}

TokenShardInfo read_token_shard_header(const std::string& path, uint32_t* token_bytes_out) {
  auto bad = [&](const std::string& why) {
    return DataError(DataErrorKind::kInput, "token shard " + path + ": " + why);
  };
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw DataError(DataErrorKind::kInput, "[open] " + path + ": " + std::strerror(errno));
  uint8_t h[kTokenShardHeaderBytes];
  ssize_t n = ::pread(fd, h, sizeof h, 0);
  off_t size = ::lseek(fd, 0, SEEK_END);
  ::close(fd);
  if (n != static_cast<ssize_t>(sizeof h)) throw bad("shorter than its 64-byte header");
  if (std::memcmp(h, kTokenShardMagic, 8) != 0) throw bad("not a token shard (bad magic)");
  if (C::get<uint32_t>(h + 60) != crc_update(crc_update(0, nullptr, 0), h, 60)) {
    throw bad("header CRC32 mismatch (torn or corrupt)");
  }
  if (C::get<uint32_t>(h + 8) != kTokenShardVersion) throw bad("unsupported version");
  uint32_t token_bytes = C::get<uint32_t>(h + 12);
  if (token_bytes != 2 && token_bytes != 4) throw bad("token width must be 2 or 4 bytes");
  TokenShardInfo info;
  info.file = std::filesystem::path(path).filename().string();
  info.documents = C::get<uint64_t>(h + 16);
  info.tokens = C::get<uint64_t>(h + 24);
  info.payload_crc32 = C::get<uint32_t>(h + 48);
  info.bytes = static_cast<uint64_t>(size);
  uint64_t offsets_at = offsets_position(info.tokens, token_bytes);
  if (C::get<uint64_t>(h + 32) != kTokenShardHeaderBytes || C::get<uint64_t>(h + 40) != offsets_at ||
      offsets_at + 8 * (info.documents + 1) != info.bytes) {
    throw bad("sizes in the header do not match the file's " + std::to_string(info.bytes) + " bytes");
  }
  if (token_bytes_out != nullptr) *token_bytes_out = token_bytes;
  return info;
}

struct TokenShardWriter::Pending {
  explicit Pending(const std::string& path) : file(path) {}
  durable::PendingFile file;
};

TokenShardWriter::TokenShardWriter(std::string dir, TokenShardOptions options)
    : dir_(std::move(dir)), options_(std::move(options)) {
  if (options_.token_bytes != 2 && options_.token_bytes != 4) {
    throw DataError(DataErrorKind::kUsage, "token_bytes must be 2 or 4, not " +
                                               std::to_string(options_.token_bytes));
  }
  if (options_.shard_max_tokens == 0) {
    throw DataError(DataErrorKind::kUsage, "shard_max_tokens must be at least 1");
  }
  durable::make_dirs(dir_);
}

TokenShardWriter::~TokenShardWriter() = default;

void TokenShardWriter::discard_uncommitted(uint64_t committed_shards) {
  namespace fs = std::filesystem;
  pending_.reset();
  doc_offsets_.assign(1, 0);
  pending_tokens_ = 0;
  committed_.clear();
  for (uint64_t i = 0; i < committed_shards; ++i) {
    uint32_t token_bytes = 0;
    committed_.push_back(read_token_shard_header(dir_ + "/" + token_shard_file_name(i), &token_bytes));
    if (token_bytes != options_.token_bytes) {
      throw DataError(DataErrorKind::kInputChanged,
                      "token shard " + committed_.back().file + " holds " + std::to_string(token_bytes) +
                          "-byte tokens, this run writes " + std::to_string(options_.token_bytes));
    }
  }
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir_, ec)) {
    std::string name = entry.path().filename().string();
    if (name.rfind("shard-", 0) != 0 && name != "manifest.json.tmp") continue;
    bool temp = name.size() > 4 && name.substr(name.size() - 4) == ".tmp";
    unsigned long long index = std::strtoull(name.c_str() + 6, nullptr, 10);
    if (temp || index >= committed_shards) fs::remove(entry.path(), ec);
  }
  write_manifest();
}

void TokenShardWriter::open_pending() {
  pending_ = std::make_unique<Pending>(dir_ + "/" + token_shard_file_name(committed_.size()));
  static const char zeros[kTokenShardHeaderBytes] = {};
  pending_->file.append(std::string_view(zeros, sizeof zeros));  // the header, filled at the end
  payload_crc_ = crc_update(0, nullptr, 0);
}

void TokenShardWriter::add_documents(std::span<const uint32_t> tokens,
                                     std::span<const uint64_t> doc_lengths) {
  uint64_t sum = 0;
  for (uint64_t len : doc_lengths) sum += len;
  if (sum != tokens.size()) {
    throw DataError(DataErrorKind::kUsage, "document lengths add up to " + std::to_string(sum) +
                                               " tokens, but " + std::to_string(tokens.size()) +
                                               " were given");
  }
  const uint64_t limit = options_.token_bytes == 2 ? 0xFFFFu : 0xFFFFFFFFu;
  std::vector<uint16_t> narrow;
  if (options_.token_bytes == 2) {
    narrow.resize(tokens.size());
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (tokens[i] > limit) {
        throw DataError(DataErrorKind::kUsage, "token id " + std::to_string(tokens[i]) +
                                                   " does not fit 2-byte shards (vocabulary > 65536: "
                                                   "use token_bytes=4)");
      }
      narrow[i] = static_cast<uint16_t>(tokens[i]);
    }
  }
  if (!pending_) open_pending();
  std::string_view bytes = options_.token_bytes == 2
      ? std::string_view(reinterpret_cast<const char*>(narrow.data()), narrow.size() * 2)
      : std::string_view(reinterpret_cast<const char*>(tokens.data()), tokens.size() * 4);
  pending_->file.append(bytes);
  payload_crc_ = crc_update(payload_crc_, bytes.data(), bytes.size());
  for (uint64_t len : doc_lengths) doc_offsets_.push_back(doc_offsets_.back() + len);
  pending_tokens_ += tokens.size();
}

TokenShardInfo TokenShardWriter::write_shard() {
  if (shard_empty()) throw DataError(DataErrorKind::kUsage, "write_shard: the shard holds no document");
  const uint32_t tb = options_.token_bytes;
  const uint64_t offsets_at = offsets_position(pending_tokens_, tb);
  std::string tail(offsets_at - (kTokenShardHeaderBytes + pending_tokens_ * tb), '\0');
  tail.append(reinterpret_cast<const char*>(doc_offsets_.data()), doc_offsets_.size() * 8);
  pending_->file.append(tail);
  payload_crc_ = crc_update(payload_crc_, tail.data(), tail.size());

  uint8_t h[kTokenShardHeaderBytes] = {};
  std::memcpy(h, kTokenShardMagic, 8);
  C::put<uint32_t>(h + 8, kTokenShardVersion);
  C::put<uint32_t>(h + 12, tb);
  C::put<uint64_t>(h + 16, doc_offsets_.size() - 1);
  C::put<uint64_t>(h + 24, pending_tokens_);
  C::put<uint64_t>(h + 32, kTokenShardHeaderBytes);
  C::put<uint64_t>(h + 40, offsets_at);
  C::put<uint32_t>(h + 48, payload_crc_);
  C::put<uint32_t>(h + 60, crc_update(crc_update(0, nullptr, 0), h, 60));
  if (::pwrite(pending_->file.fd(), h, sizeof h, 0) != static_cast<ssize_t>(sizeof h)) {
    throw DataError(DataErrorKind::kOutput,
                    "[write header] " + pending_->file.temp_path() + ": " + std::strerror(errno));
  }
  TokenShardInfo info;
  info.file = token_shard_file_name(committed_.size());
  info.documents = doc_offsets_.size() - 1;
  info.tokens = pending_tokens_;
  info.bytes = pending_->file.bytes_written();
  info.payload_crc32 = payload_crc_;
  pending_->file.finish();  // fsync, rename, directory fsync
  crash_point("part_renamed");
  pending_.reset();
  committed_.push_back(info);
  doc_offsets_.assign(1, 0);
  pending_tokens_ = 0;
  write_manifest();
  return info;
}

void TokenShardWriter::write_manifest() const {
  uint64_t docs = 0, tokens = 0;
  for (const auto& s : committed_) {
    docs += s.documents;
    tokens += s.tokens;
  }
  std::string m = "{\"format\": \"luminamoon-token-shards\", \"version\": 1, \"token_bytes\": ";
  m += std::to_string(options_.token_bytes);
  m += ", \"dtype\": \"";
  m += options_.token_bytes == 2 ? "uint16" : "uint32";
  m += "\", \"metadata\": " + options_.metadata_json;
  m += ", \"documents\": " + std::to_string(docs) + ", \"tokens\": " + std::to_string(tokens);
  m += ", \"shards\": [";
  for (size_t i = 0; i < committed_.size(); ++i) {
    const auto& s = committed_[i];
    m += i ? ",\n  " : "\n  ";
    m += "{\"file\": ";
    json_text::append_string(m, s.file);
    m += ", \"documents\": " + std::to_string(s.documents) + ", \"tokens\": " + std::to_string(s.tokens) +
         ", \"bytes\": " + std::to_string(s.bytes) + ", \"payload_crc32\": " +
         std::to_string(s.payload_crc32) + "}";
  }
  m += "]}\n";
  durable::write_file(dir_ + "/manifest.json", m);
}

}  // namespace luminamoon
