// Fuzz target: the TextCleaner (spec section 2) under the replace policy
// gives valid UTF-8 and is idempotent, clean(clean(x)) == clean(x); the drop
// policy agrees with it on valid input; the batch path equals the single one.
#include <string>

#include "fuzz/fuzz_support.h"
#include "luminamoon/text_batch.h"
#include "luminamoon/text_cleaner.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace luminamoon;
  std::string_view input(reinterpret_cast<const char*>(data), size);
  static const TextCleaner replace(InvalidUtf8Policy::kReplace);
  static const TextCleaner drop(InvalidUtf8Policy::kDrop);
  std::string once, twice;
  CleanStatus status = replace.clean_document(input, once);
  LUMINA_FUZZ_CHECK(is_valid_utf8(once));
  LUMINA_FUZZ_CHECK(status != CleanStatus::kInvalidUtf8);
  LUMINA_FUZZ_CHECK((status == CleanStatus::kEmpty) == once.empty());
  replace.clean_document(once, twice);
  LUMINA_FUZZ_CHECK(twice == once, "not idempotent");
  std::string dropped;
  CleanStatus drop_status = drop.clean_document(input, dropped);
  if (is_valid_utf8(input)) {
    LUMINA_FUZZ_CHECK(drop_status == status && dropped == once);
  } else {
    LUMINA_FUZZ_CHECK(drop_status == CleanStatus::kInvalidUtf8);
  }
  // The parallel batch path (two copies of the document) gives the same text.
  TextBatch batch;
  batch.push_back(input);
  batch.push_back(input);
  CleanResult result = replace.clean(batch.view());
  LUMINA_FUZZ_CHECK(result.texts.size() == 2 && result.texts[0] == once && result.texts[1] == once);
  return 0;
}
