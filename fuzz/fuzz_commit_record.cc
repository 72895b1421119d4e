// Fuzz target: the commit record, run totals and manifest loaders of a
// checkpointed run. Any text parses or throws DataError (kStateCorrupt, or
// kInputChanged from the manifest check), never a simdjson exception; what
// parses survives to_json -> from_json unchanged.
#include "data/pipeline/run_state.h"
#include "fuzz/fuzz_support.h"
#include "luminamoon/data_error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace luminamoon;
  std::string_view json(reinterpret_cast<const char*>(data), size);
  try {
    CommitRecord record = CommitRecord::from_json(json);
    CommitRecord again = CommitRecord::from_json(record.to_json());
    LUMINA_FUZZ_CHECK(again.to_json() == record.to_json());
  } catch (const DataError& e) {
    LUMINA_FUZZ_CHECK(e.kind() == DataErrorKind::kStateCorrupt, e.what());
  }
  try {
    RunTotals totals = RunTotals::from_json(json);
    LUMINA_FUZZ_CHECK(RunTotals::from_json(totals.to_json()).to_json() == totals.to_json());
  } catch (const DataError& e) {
    LUMINA_FUZZ_CHECK(e.kind() == DataErrorKind::kStateCorrupt, e.what());
  }
  try {
    check_manifest(json, {ShardStat{"/in/a.jsonl", 10, 5}}, "config");
  } catch (const DataError& e) {
    LUMINA_FUZZ_CHECK(e.kind() == DataErrorKind::kStateCorrupt || e.kind() == DataErrorKind::kInputChanged,
                      e.what());
  }
  return 0;
}
