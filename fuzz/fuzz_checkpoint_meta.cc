// Fuzz target: the .meta loader (StateTracker::load, decode_slot). Any file
// gives a checkpoint, nullopt, or DataError(kStateCorrupt), never a crash;
// a decoded slot re-encodes to the same bytes; a loaded checkpoint is one of
// the file's valid slots with the highest sequence.
#include <cstring>

#include "fuzz/fuzz_support.h"
#include "luminamoon/data_error.h"
#include "luminamoon/state_tracker.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace luminamoon;
  std::optional<Checkpoint> slots[2];
  for (int s = 0; s < 2 && size >= (s + 1) * StateTracker::kSlotSize; ++s) {
    slots[s] = StateTracker::decode_slot(data + s * StateTracker::kSlotSize);
    if (slots[s]) {
      uint8_t again[StateTracker::kSlotSize];
      StateTracker::encode_slot(*slots[s], again);
      LUMINA_FUZZ_CHECK(std::memcmp(again, data + s * StateTracker::kSlotSize, sizeof again) == 0);
    }
  }
  const std::string path = lumina_fuzz::write_scratch("checkpoint.meta",
                                                      {reinterpret_cast<const char*>(data), size});
  StateTracker tracker(path);
  try {
    std::optional<Checkpoint> loaded = tracker.load();
    LUMINA_FUZZ_CHECK(loaded.has_value() && size == StateTracker::kFileSize);
    LUMINA_FUZZ_CHECK(slots[0] || slots[1]);
    uint64_t best = 0;
    for (const auto& s : slots) if (s) best = std::max(best, s->sequence);
    LUMINA_FUZZ_CHECK(loaded->sequence == best);
    tracker.commit(loaded->coordinate, loaded->output_position + 1);  // and one more commit works
    LUMINA_FUZZ_CHECK(StateTracker(path).load()->sequence == best + 1);
  } catch (const DataError& e) {
    LUMINA_FUZZ_CHECK(e.kind() == DataErrorKind::kStateCorrupt, e.what());
  }
  return 0;
}
