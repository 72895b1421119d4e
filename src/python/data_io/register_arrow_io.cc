// Installs the Arrow-backed Parquet reader and Parquet/IPC serializers into
// the data engine's registries (called when luminamoon._data_io is imported).
#include "luminamoon/reader.h"
#include "luminamoon/writer.h"

namespace luminamoon {

std::unique_ptr<ShardReader> make_parquet_reader(const ShardInfo& shard, const ReaderOptions& options,
                                                 const StreamCoordinate& start);
std::unique_ptr<TableSerializer> make_arrow_serializer(OutputFormat format, const WriterOptions& options);

void register_arrow_io() {
  register_parquet_reader(make_parquet_reader);
  register_arrow_serializers(make_arrow_serializer);
}

}  // namespace luminamoon
