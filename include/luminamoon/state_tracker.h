// StateTracker: crash-safe checkpoints in a 128-byte dual-slot .meta file
// (spec data-engine.md, "Checkpoint and resume").
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "luminamoon/stream_coordinate.h"

namespace luminamoon {

struct Checkpoint {
  uint64_t sequence = 0;        // grows by one per commit
  uint16_t flags = 0;           // kCheckpointFinished, ...
  StreamCoordinate coordinate;  // where reading resumes
  uint64_t output_position = 0; // parts committed to the output so far
};

inline constexpr uint16_t kCheckpointFinished = 1;  // the whole input was consumed

// Note [meta slot layout]: each 64-byte slot holds, little-endian,
//   0 magic u32 | 4 version u16 | 6 flags u16 | 8 sequence u64 |
//   16 coordinate (32 bytes) | 48 output position u64 | 56 reserved u32 (0) |
//   60 crc32 u32 (IEEE, over bytes 0..59).
// The spec lists the fields in this order and has the CRC cover the slot's
// first 60 bytes; the CRC therefore sits in the last 4 bytes and the 4 bytes
// between the output position and it are reserved zeros.
class StateTracker {
 public:
  static constexpr uint32_t kMagic = 0x4B434D4C;  // "LMCK"
  static constexpr uint16_t kVersion = 1;
  static constexpr size_t kSlotSize = 64;
  static constexpr size_t kFileSize = 2 * kSlotSize;

  explicit StateTracker(std::string meta_path);

  // Reads the file. Returns nullopt when it does not exist (a fresh run).
  // A torn or corrupt slot is ignored; both slots invalid, or a file of the
  // wrong size, throws DataError(kStateCorrupt): never a silent restart.
  std::optional<Checkpoint> load();

  // Writes the slot not holding the latest valid checkpoint and fsyncs it
  // (the first commit creates the file atomically). Sequence = latest + 1.
  Checkpoint commit(const StreamCoordinate& coordinate, uint64_t output_position,
                    uint16_t flags = 0);

  const std::optional<Checkpoint>& latest() const { return latest_; }
  int invalid_slots_at_load() const { return invalid_slots_at_load_; }
  const std::string& path() const { return path_; }

  static void encode_slot(const Checkpoint& checkpoint, uint8_t* out);
  // nullopt when the magic, version or CRC does not match.
  static std::optional<Checkpoint> decode_slot(const uint8_t* in);

 private:
  std::string path_;
  std::optional<Checkpoint> latest_;
  int latest_slot_ = -1;
  int invalid_slots_at_load_ = 0;
};

}  // namespace luminamoon
