// Fuzz target: the MinHash LSH index loader (.lsh) through MinHashLSH. Any
// file opens or throws DataError(kStateCorrupt), or kUsage for a
// valid header written with other options; after an open, a document
// committed to the index is found by a reopened index as a near duplicate.
#include <cstring>

#include "fuzz/fuzz_support.h"
#include "luminamoon/data_error.h"
#include "luminamoon/minhash_lsh.h"
#include "luminamoon/text_batch.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace luminamoon;
  lumina_fuzz::Input in(data, size);
  MinHashLSHOptions options;
  options.num_threads = 1;
  // bit 0: the pipeline's defaults (64 permutations, 8 x 8), else 16 and 4 x 4.
  options.params.num_perm = (in.settings & 1) ? 64 : 16;
  options.bands = (in.settings & 1) ? 8 : 4;
  options.rows = (in.settings & 1) ? 8 : 4;
  options.index.sync = WalSync::kNone;
  if ((in.settings & 2) && in.rest.size() >= 8) {
    uint64_t position = 0;
    std::memcpy(&position, in.rest.data(), 8);
    options.index.resume_position = position % (in.rest.size() + 64);
    in.rest.remove_prefix(8);
  }
  options.index.path = lumina_fuzz::write_scratch("index.lsh", in.rest);
  TextBatch batch;
  batch.push_back("the quick brown fox jumps over the lazy dog near the river bank today");
  const int64_t ref = 1 << 20;
  try {
    {  // the index is locked while a MinHashLSH has it open
      MinHashLSH lsh(options);
      uint8_t keep = 0;
      int64_t matched = kNoMatch;
      lsh.add(batch.view(), {&ref, 1}, {&keep, 1}, {&matched, 1});
      lsh.commit();
      options.index.resume_position = lsh.committed_position();
    }
    MinHashLSH reopened(options);
    uint8_t keep2 = 1;
    int64_t matched2 = kNoMatch;
    const int64_t ref2 = ref + 1;
    reopened.add(batch.view(), {&ref2, 1}, {&keep2, 1}, {&matched2, 1});
    LUMINA_FUZZ_CHECK(keep2 == 0, "a committed document is not in the reopened index");
  } catch (const DataError& e) {
    // kUsage: a valid header of other options (e.g. the settings byte chose
    // other MinHash parameters than the log was written with).
    LUMINA_FUZZ_CHECK(e.kind() == DataErrorKind::kStateCorrupt || e.kind() == DataErrorKind::kUsage,
                      e.what());
  }
  return 0;
}
