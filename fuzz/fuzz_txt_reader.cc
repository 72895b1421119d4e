// Fuzz target: the txt reader in file, line and paragraph mode, with the
// resume-position property of shard_reader_property.h (txt text need not be
// UTF-8 unless reject_invalid_utf8 is set, which then must hold).
#include "fuzz/shard_reader_property.h"

// settings: bits 0-1 mode, bit 2 reject_invalid_utf8, bits 3-4 batch size,
// bits 5-7 max_record_bytes.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  lumina_fuzz::Input in(data, size);
  luminamoon::ReaderOptions options;
  const unsigned mode = in.settings & 3;
  options.txt_mode = mode == 1 ? luminamoon::TxtMode::kLine
                     : mode == 2 ? luminamoon::TxtMode::kParagraph
                                 : luminamoon::TxtMode::kFile;
  options.reject_invalid_utf8 = (in.settings & 4) != 0;
  options.batch_docs = size_t{1} << ((in.settings >> 3) & 3);
  const unsigned limit = in.settings >> 5;
  options.max_record_bytes = limit != 0 ? size_t{8} << (2 * limit) : size_t{1} << 20;
  const std::string path = lumina_fuzz::write_scratch(mode == 3 ? "shard.txt.gz" : "shard.txt", in.rest);
  lumina_fuzz::check_shard_reader(luminamoon::describe_shard(path, 0), options,
                                  options.reject_invalid_utf8);
  return 0;
}
