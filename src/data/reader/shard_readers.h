// The built-in shard readers' factories (reader.cc picks one per format).
#pragma once

#include <memory>

#include "luminamoon/reader.h"

namespace luminamoon {

std::unique_ptr<ShardReader> make_jsonl_reader(const ShardInfo& shard, const ReaderOptions& options,
                                               const StreamCoordinate& start);
std::unique_ptr<ShardReader> make_txt_reader(const ShardInfo& shard, const ReaderOptions& options,
                                             const StreamCoordinate& start);

inline void clear_batch(DocBatch& batch, const ShardInfo& shard) {
  batch.shard_id = shard.shard_id;
  batch.shard_path = shard.path;
  batch.text.clear();
  batch.ids.clear();
  batch.metadata.clear();
  batch.lines.clear();
  batch.malformed.clear();
  batch.bytes_in = 0;
  batch.records_in = 0;
}

}  // namespace luminamoon
