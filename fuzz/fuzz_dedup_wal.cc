// Fuzz target: the exact-dedup WAL loader (.dedup) through StreamDeduplicator.
// Any file opens (replaying its valid blocks and cutting a torn tail) or
// throws DataError(kStateCorrupt), or kUsage for a
// valid header written with other options; after an open, a new key committed to the
// log is known to a reopened deduplicator, and every replayed key stays known.
#include <cstring>

#include "fuzz/fuzz_support.h"
#include "luminamoon/data_error.h"
#include "luminamoon/stream_deduplicator.h"

// settings: bit 0 set -> resume_position = the next 8 bytes (little-endian).
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace luminamoon;
  lumina_fuzz::Input in(data, size);
  StreamDeduplicatorOptions options;
  options.num_threads = 1;
  options.wal.sync = WalSync::kNone;
  if ((in.settings & 1) && in.rest.size() >= 8) {
    uint64_t position = 0;
    std::memcpy(&position, in.rest.data(), 8);
    options.wal.resume_position = position % (in.rest.size() + 64);
    in.rest.remove_prefix(8);
  }
  options.wal.path = lumina_fuzz::write_scratch("log.dedup", in.rest);
  const uint64_t fresh = StreamDeduplicator::key_of("a document the log cannot hold yet \x01", DedupKey::kText);
  try {
    std::vector<uint64_t> replayed;
    {  // the log is locked while a deduplicator has it open
      StreamDeduplicator dedup(options);
      replayed = dedup.keys();
      LUMINA_FUZZ_CHECK(replayed.size() == dedup.distinct());
      const bool had = dedup.contains_key(fresh);
      uint8_t keep = 0;
      dedup.add_keys({&fresh, 1}, {}, {&keep, 1}, {});
      LUMINA_FUZZ_CHECK(keep == (had ? 0 : 1));
      dedup.commit();
      options.wal.resume_position = dedup.committed_position();
    }
    StreamDeduplicator reopened(options);
    LUMINA_FUZZ_CHECK(reopened.contains_key(fresh));
    for (uint64_t k : replayed) LUMINA_FUZZ_CHECK(reopened.contains_key(k));
  } catch (const DataError& e) {
    // kUsage: a valid header of other options (e.g. the settings byte chose
    // other MinHash parameters than the log was written with).
    LUMINA_FUZZ_CHECK(e.kind() == DataErrorKind::kStateCorrupt || e.kind() == DataErrorKind::kUsage,
                      e.what());
  }
  return 0;
}
