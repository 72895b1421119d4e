// StateTracker: the dual-slot .meta checkpoint (Note [meta slot layout]).
#include "luminamoon/state_tracker.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>

#include "luminamoon/data_error.h"
#include "data/state/durable_io.h"

namespace luminamoon {
namespace {

using C = StreamCoordinate;

uint32_t crc32_ieee(const uint8_t* p, size_t n) {
  return static_cast<uint32_t>(::crc32(::crc32(0L, Z_NULL, 0), p, static_cast<uInt>(n)));
}

}  // namespace

StateTracker::StateTracker(std::string meta_path) : path_(std::move(meta_path)) {}

void StateTracker::encode_slot(const Checkpoint& cp, uint8_t* out) {
  std::memset(out, 0, kSlotSize);
  C::put<uint32_t>(out + 0, kMagic);
  C::put<uint16_t>(out + 4, kVersion);
  C::put<uint16_t>(out + 6, cp.flags);
  C::put<uint64_t>(out + 8, cp.sequence);
  cp.coordinate.encode(out + 16);
  C::put<uint64_t>(out + 48, cp.output_position);
  C::put<uint32_t>(out + 60, crc32_ieee(out, 60));
}

std::optional<Checkpoint> StateTracker::decode_slot(const uint8_t* in) {
  if (C::get<uint32_t>(in + 0) != kMagic) return std::nullopt;
  if (C::get<uint16_t>(in + 4) != kVersion) return std::nullopt;
  if (C::get<uint32_t>(in + 60) != crc32_ieee(in, 60)) return std::nullopt;
  // The reserved word is written as zero; a slot with anything else there was
  // not written by this version, and accepting it would let two different
  // files decode to the same checkpoint.
  if (C::get<uint32_t>(in + 56) != 0) return std::nullopt;
  Checkpoint cp;
  cp.flags = C::get<uint16_t>(in + 6);
  cp.sequence = C::get<uint64_t>(in + 8);
  cp.coordinate = StreamCoordinate::decode(in + 16);
  cp.output_position = C::get<uint64_t>(in + 48);
  return cp;
}

std::optional<Checkpoint> StateTracker::load() {
  latest_.reset();
  latest_slot_ = -1;
  invalid_slots_at_load_ = 0;
  if (!durable::exists(path_)) return std::nullopt;
  std::string bytes = durable::read_file(path_);
  if (bytes.size() != kFileSize) {
    throw DataError(DataErrorKind::kStateCorrupt,
                    "checkpoint " + path_ + " has " + std::to_string(bytes.size()) +
                        " bytes, expected 128: refusing to guess where the run stopped");
  }
  for (int slot = 0; slot < 2; ++slot) {
    auto cp = decode_slot(reinterpret_cast<const uint8_t*>(bytes.data()) + slot * kSlotSize);
    if (!cp) {
      ++invalid_slots_at_load_;
      continue;
    }
    if (!latest_ || cp->sequence > latest_->sequence) {
      latest_ = cp;
      latest_slot_ = slot;
    }
  }
  if (!latest_) {
    throw DataError(DataErrorKind::kStateCorrupt,
                    "checkpoint " + path_ +
                        ": both slots are corrupt (bad magic, version, reserved word or CRC32); "
                        "refusing to restart silently. Remove the output directory "
                        "to start over.");
  }
  return latest_;
}

Checkpoint StateTracker::commit(const StreamCoordinate& coordinate, uint64_t output_position,
                                uint16_t flags) {
  Checkpoint cp;
  cp.sequence = latest_ ? latest_->sequence + 1 : 1;
  cp.flags = flags;
  cp.coordinate = coordinate;
  cp.output_position = output_position;
  uint8_t slot_bytes[kSlotSize];
  encode_slot(cp, slot_bytes);

  if (latest_slot_ < 0) {
    // First commit: the whole file appears atomically with slot A valid, so a
    // crash never leaves a .meta without a valid slot.
    std::string file(kFileSize, '\0');
    std::memcpy(file.data(), slot_bytes, kSlotSize);
    durable::write_file(path_, file);
    latest_ = cp;
    latest_slot_ = 0;
    return cp;
  }
  const int slot = 1 - latest_slot_;
  int fd = ::open(path_.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) {
    throw DataError(DataErrorKind::kOutput, "[open] " + path_ + ": " + std::strerror(errno));
  }
  ssize_t n = ::pwrite(fd, slot_bytes, kSlotSize, static_cast<off_t>(slot * kSlotSize));
  int saved = errno;
  if (n != static_cast<ssize_t>(kSlotSize) || ::fsync(fd) != 0) {
    if (n == static_cast<ssize_t>(kSlotSize)) saved = errno;
    ::close(fd);
    throw DataError(DataErrorKind::kOutput, "[write slot] " + path_ + ": " + std::strerror(saved));
  }
  ::close(fd);
  latest_ = cp;
  latest_slot_ = slot;
  return cp;
}

}  // namespace luminamoon
