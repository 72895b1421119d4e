// Compiled Vectorscan databases kept on disk across processes, so that a run
// does not pay the pattern compilation again (Note [database cache]).
#pragma once

#include <hs.h>

#include <cstdint>
#include <string>
#include <vector>

namespace luminamoon::pii {

// Note [database cache]
// Compiling the PII pattern set costs about 0.06 s of CPU per database and a
// run of the CLI compiles up to eight (Note [pattern subsets]): 0.4-0.5 s, a
// quarter of the CPU time of the whole CLI on the 52 MB real-text corpus. A
// compiled database is a function of the patterns, their flags and ids, the
// mode, the Vectorscan version and the CPU features it was compiled for, so
// it is serialized (hs_serialize_database) into one file per database named
// by the XXH3-64 of all of these, and later runs deserialize it instead of
// compiling. The directory is LUMINAMOON_CACHE_DIR, else
// $XDG_CACHE_HOME/luminamoon, else $HOME/.cache/luminamoon; the value "off"
// turns the cache off. A file is written to a temporary name and renamed, and
// read back only when its magic, key, length and XXH3-64 of the bytes agree
// and Vectorscan accepts it; anything else (a missing, unreadable, truncated
// or corrupt file, an unwritable directory) means compiling as before, and a
// bad file is replaced. The cache only ever saves time: it never changes a
// match, and no error of its own reaches the caller.

// The key of the database of these patterns (the arrays given to
// hs_compile_multi) in HS_MODE_BLOCK on this machine.
uint64_t database_key(const std::vector<const char*>& exprs, const std::vector<unsigned>& flags,
                      const std::vector<unsigned>& ids);
// The cached database of `key`, or null (then compile and store it).
hs_database_t* load_cached_database(uint64_t key);
void store_cached_database(uint64_t key, const hs_database_t* db);

// Counters of this process (tests): databases read from the cache, written to it.
struct DatabaseCacheStats {
  uint64_t loaded = 0, stored = 0;
};
DatabaseCacheStats database_cache_stats();
// The cache directory in use, empty when the cache is off.
std::string database_cache_dir();

}  // namespace luminamoon::pii
