// Token shards: tokenized documents in memory-mappable files with a manifest
// (docs/token-shards.md), written with the text writers' commit order, and
// their export to Megatron-LM's indexed dataset (.bin + .idx).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace luminamoon {

// Note [token shard layout]: one file per shard, little-endian,
//   0 magic "LMTOKSH\0" | 8 version u32 (1) | 12 token_bytes u32 (2 or 4) |
//   16 documents u64 | 24 tokens u64 | 32 tokens_offset u64 (64) |
//   40 doc_offsets_offset u64 | 48 payload crc32 u32 (IEEE, every byte after
//   the header) | 52 reserved (0) | 60 header crc32 u32 (over bytes 0..59),
// then the tokens (token_bytes each), zero padding to a multiple of 8, then
// documents + 1 u64 offsets (in tokens: document d is tokens
// [off[d], off[d+1])). A shard ends at a document boundary; the manifest
// lists the committed shards in order with their sizes and checksums.
inline constexpr char kTokenShardMagic[8] = {'L', 'M', 'T', 'O', 'K', 'S', 'H', '\0'};
inline constexpr uint32_t kTokenShardVersion = 1;
inline constexpr size_t kTokenShardHeaderBytes = 64;

struct TokenShardInfo {
  std::string file;  // name inside the shard directory
  uint64_t documents = 0;
  uint64_t tokens = 0;
  uint64_t bytes = 0;          // file size
  uint32_t payload_crc32 = 0;  // as in the header
};

// Reads and checks one shard's header (magic, version, header CRC, sizes
// against the file size); DataError(kInput) naming the file otherwise.
TokenShardInfo read_token_shard_header(const std::string& path, uint32_t* token_bytes = nullptr);

struct TokenShardOptions {
  uint32_t token_bytes = 2;                 // 2 (uint16, vocab <= 65536) or 4 (uint32)
  uint64_t shard_max_tokens = 64ull << 20;  // a shard closes at the first document boundary past this
  std::string metadata_json = "{}";         // copied into the manifest (tokenizer, eos id, ...)
};

// Appends tokenized documents to the current shard (tokens straight into its
// temporary file, the document offsets in memory) and publishes each shard:
// header, fsync, rename, directory fsync, then manifest.json rewritten
// atomically. The caller checkpoints (StateTracker) after write_shard().
class TokenShardWriter {
 public:
  TokenShardWriter(std::string dir, TokenShardOptions options);
  ~TokenShardWriter();
  TokenShardWriter(const TokenShardWriter&) = delete;
  TokenShardWriter& operator=(const TokenShardWriter&) = delete;

  // Keeps shards 0..committed-1 (their headers re-read and checked), removes
  // later shards and temporary files left by a run that stopped before its
  // checkpoint covered them, and rewrites the manifest to match.
  void discard_uncommitted(uint64_t committed_shards);

  // Documents one after another: doc_lengths[i] tokens each, summing to
  // tokens.size(). DataError(kUsage) for an id that does not fit token_bytes
  // or lengths that do not add up (nothing is written then).
  void add_documents(std::span<const uint32_t> tokens, std::span<const uint64_t> doc_lengths);
  bool shard_full() const { return pending_tokens_ >= options_.shard_max_tokens; }
  bool shard_empty() const { return doc_offsets_.size() <= 1; }
  // Publishes the current shard (see the class comment); returns its entry.
  TokenShardInfo write_shard();

  const std::vector<TokenShardInfo>& committed() const { return committed_; }
  const std::string& dir() const { return dir_; }

 private:
  void open_pending();
  void write_manifest() const;

  struct Pending;
  std::string dir_;
  TokenShardOptions options_;
  std::vector<TokenShardInfo> committed_;
  std::unique_ptr<Pending> pending_;
  std::vector<uint64_t> doc_offsets_{0};
  uint64_t pending_tokens_ = 0;
  uint32_t payload_crc_ = 0;
};

std::string token_shard_file_name(uint64_t index);  // shard-00000042.tok

// Writes prefix.bin (every shard's tokens, in order) and prefix.idx in
// Megatron-LM's MMIDIDX version 1 format, one sequence per document:
// uint16 tokens (dtype code 8) for 2-byte shards, int32 (code 4) for 4-byte
// ones. Each file is written under a temporary name, fsynced and renamed
// (.bin first, .idx last). Returns the number of documents.
uint64_t export_megatron(const std::vector<std::string>& shard_paths, const std::string& prefix);

}  // namespace luminamoon
