// Fuzz target: the Parquet shard reader (Arrow C++ of the pyarrow wheel, not
// instrumented: the coverage feedback is our reader's) on any bytes named
// .parquet, with the resume-position property of shard_reader_property.h
// (row groups before a coordinate are skipped). Seeds are real files.
#include "fuzz/shard_reader_property.h"

namespace luminamoon {
std::unique_ptr<ShardReader> make_parquet_reader(const ShardInfo& shard, const ReaderOptions& options,
                                                 const StreamCoordinate& start);
}  // namespace luminamoon

// settings: bit 0 reject_invalid_utf8, bits 1-2 batch size, bits 5-7 max_record_bytes.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool registered = [] {
    luminamoon::register_parquet_reader(luminamoon::make_parquet_reader);
    return true;
  }();
  (void)registered;
  lumina_fuzz::Input in(data, size);
  luminamoon::ReaderOptions options;
  options.reject_invalid_utf8 = (in.settings & 1) != 0;
  options.batch_docs = size_t{1} << ((in.settings >> 1) & 3);
  const unsigned limit = in.settings >> 5;
  options.max_record_bytes = limit != 0 ? size_t{8} << (2 * limit) : size_t{1} << 20;
  const std::string path = lumina_fuzz::write_scratch("shard.parquet", in.rest);
  lumina_fuzz::check_shard_reader(luminamoon::describe_shard(path, 0), options, options.reject_invalid_utf8);
  return 0;
}
