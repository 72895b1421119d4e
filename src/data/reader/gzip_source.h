// gzip shards: isa-l's inflate where the build found it, zlib's otherwise.
#pragma once

#include <memory>
#include <string>

#include "data/reader/byte_source.h"

namespace luminamoon {

// Note [gzip decoders]: on the real-text corpus zlib's inflate was 40% of the
// CPU time of reading gz JSONL (and the reader is the pipeline's serial
// filter); isa-l's igzip decodes the same bytes about 5x faster. Both accept
// what `gzip` and `cat a.gz b.gz` write (one or more gzip members) and treat
// damage alike: the bytes decoded before it are handed out, then
// DataError(kInput) names the shard. A stream without the gzip magic (a
// zlib-wrapped .gz) is left to zlib, which detects either header.
std::unique_ptr<ByteSource> open_gzip(const std::string& path);

// Each decoder on its own, for the tests that hold one to the other.
std::unique_ptr<ByteSource> open_gzip_with_zlib(const std::string& path);
std::unique_ptr<ByteSource> open_gzip_with_isal(const std::string& path);  // nullptr: built without isa-l

// "isa-l" or "zlib": the decoder open_gzip uses for gzip members.
const char* gzip_decoder_name();

}  // namespace luminamoon
