// The property every line-format shard reader must have (Note [reader
// fuzzing]): reading never throws on any bytes, every document is valid
// UTF-8 with metadata the writers accept, and a reader reopened at any
// batch's end coordinate yields exactly the documents that followed it.
#pragma once

#include <simdjson.h>

#include <string>
#include <vector>

#include "fuzz/fuzz_support.h"
#include "luminamoon/reader.h"

namespace lumina_fuzz {

struct Doc {
  std::string text, id, meta;
  uint64_t line;
  bool operator==(const Doc&) const = default;
};

struct ReadResult {
  std::vector<Doc> docs;
  std::vector<luminamoon::StreamCoordinate> ends;  // after each batch
  std::vector<size_t> docs_before_end;             // docs read before each end
  uint64_t records = 0, malformed = 0;
};

inline ReadResult read_shard(const luminamoon::ShardInfo& shard, const luminamoon::ReaderOptions& options,
                             luminamoon::StreamCoordinate start, bool check_utf8) {
  auto reader = luminamoon::open_shard(shard, options, start);
  ReadResult r;
  luminamoon::DocBatch batch;
  simdjson::dom::parser dom;
  size_t guard = 0;
  while (reader->next(batch)) {
    LUMINA_FUZZ_CHECK(++guard < 1000000, "reader does not terminate");
    for (size_t i = 0; i < batch.size(); ++i) {
      Doc d{std::string(batch.text[i]), std::string(batch.ids[i]), std::string(batch.metadata[i]),
            batch.lines[i]};
      LUMINA_FUZZ_CHECK(d.text.size() <= options.max_record_bytes);
      LUMINA_FUZZ_CHECK(simdjson::validate_utf8(d.id.data(), d.id.size()), d.id);
      if (check_utf8) LUMINA_FUZZ_CHECK(simdjson::validate_utf8(d.text.data(), d.text.size()));
      if (!d.meta.empty()) {
        simdjson::dom::element root;
        LUMINA_FUZZ_CHECK(!dom.parse(d.meta).get(root) && root.is_object(), d.meta);
      }
      r.docs.push_back(std::move(d));
    }
    r.records += batch.records_in;
    r.malformed += batch.malformed.size();
    r.ends.push_back(batch.end);
    r.docs_before_end.push_back(r.docs.size());
  }
  return r;
}

// Reads the shard whole, then resumes from up to `resumes` batch ends.
inline void check_shard_reader(const luminamoon::ShardInfo& shard, const luminamoon::ReaderOptions& options,
                               bool check_utf8, size_t resumes = 3) {
  ReadResult all = read_shard(shard, options, {}, check_utf8);
  LUMINA_FUZZ_CHECK(all.docs.size() + all.malformed <= all.records);
  const size_t n = all.ends.size();
  for (size_t k = 0; k < n && k < resumes; ++k) {
    const size_t at = (k * 7919 + 1) % n;  // spread over the batches
    luminamoon::StreamCoordinate start = all.ends[at];
    ReadResult rest = read_shard(shard, options, start, check_utf8);
    const size_t before = all.docs_before_end[at];
    LUMINA_FUZZ_CHECK(rest.docs.size() == all.docs.size() - before, "resume count");
    for (size_t i = 0; i < rest.docs.size(); ++i) {
      const Doc& a = all.docs[before + i];
      const Doc& b = rest.docs[i];
      LUMINA_FUZZ_CHECK(b == a, "resume document " + std::to_string(i) + " after batch " + std::to_string(at) +
                                    ": line " + std::to_string(b.line) + " id " + b.id + " meta " + b.meta +
                                    " instead of line " + std::to_string(a.line) + " id " + a.id + " meta " + a.meta);
    }
  }
}

}  // namespace lumina_fuzz
