// The on-disk cache of compiled Vectorscan databases (Note [database cache]
// in vectorscan_database_cache.h).
#include "data/pii/vectorscan_database_cache.h"

#include <fcntl.h>
#include <unistd.h>
#include <xxhash.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

namespace luminamoon::pii {
namespace {

constexpr char kMagic[8] = {'L', 'M', 'H', 'S', 'D', 'B', '0', '1'};
// File: magic, u64 key, u64 length, u64 XXH3-64 of the bytes, the bytes
// (hs_serialize_database's output). Native byte order: a cache is of one machine.
constexpr size_t kHeader = 8 + 3 * 8;

std::atomic<uint64_t> g_loaded{0}, g_stored{0};

std::string file_of(uint64_t key) {
  const std::string dir = database_cache_dir();
  if (dir.empty()) return {};
  char name[40];
  std::snprintf(name, sizeof name, "/hs-%016llx.db", static_cast<unsigned long long>(key));
  return dir + name;
}

}  // namespace

std::string database_cache_dir() {
  const char* own = std::getenv("LUMINAMOON_CACHE_DIR");
  if (own && *own) return std::strcmp(own, "off") == 0 ? std::string() : std::string(own);
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg && *xdg) return std::string(xdg) + "/luminamoon";
  const char* home = std::getenv("HOME");
  if (home && *home) return std::string(home) + "/.cache/luminamoon";
  return {};
}

uint64_t database_key(const std::vector<const char*>& exprs, const std::vector<unsigned>& flags,
                      const std::vector<unsigned>& ids) {
  XXH3_state_t* st = XXH3_createState();
  XXH3_64bits_reset(st);
  const char* version = hs_version();
  XXH3_64bits_update(st, version, std::strlen(version) + 1);
  hs_platform_info_t platform{};
  if (hs_populate_platform(&platform) == HS_SUCCESS) {
    XXH3_64bits_update(st, &platform.tune, sizeof platform.tune);
    XXH3_64bits_update(st, &platform.cpu_features, sizeof platform.cpu_features);
  }
  const unsigned mode = HS_MODE_BLOCK;
  XXH3_64bits_update(st, &mode, sizeof mode);
  for (size_t i = 0; i < exprs.size(); ++i) {
    XXH3_64bits_update(st, exprs[i], std::strlen(exprs[i]) + 1);
    XXH3_64bits_update(st, &flags[i], sizeof flags[i]);
    XXH3_64bits_update(st, &ids[i], sizeof ids[i]);
  }
  const uint64_t key = XXH3_64bits_digest(st);
  XXH3_freeState(st);
  return key;
}

hs_database_t* load_cached_database(uint64_t key) {
  const std::string path = file_of(key);
  if (path.empty()) return nullptr;
  std::ifstream in(path, std::ios::binary);
  if (!in) return nullptr;
  const std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (file.size() < kHeader || std::memcmp(file.data(), kMagic, 8) != 0) return nullptr;
  uint64_t header[3];
  std::memcpy(header, file.data() + 8, sizeof header);
  const char* bytes = file.data() + kHeader;
  if (header[0] != key || header[1] != file.size() - kHeader || header[2] != XXH3_64bits(bytes, header[1]))
    return nullptr;
  hs_database_t* db = nullptr;
  if (hs_deserialize_database(bytes, header[1], &db) != HS_SUCCESS) return nullptr;
  g_loaded.fetch_add(1, std::memory_order_relaxed);
  return db;
}

void store_cached_database(uint64_t key, const hs_database_t* db) {
  const std::string path = file_of(key);
  if (path.empty()) return;
  char* bytes = nullptr;
  size_t length = 0;
  if (hs_serialize_database(db, &bytes, &length) != HS_SUCCESS) return;
  std::string file(kMagic, 8);
  const uint64_t header[3] = {key, length, XXH3_64bits(bytes, length)};
  file.append(reinterpret_cast<const char*>(header), sizeof header);
  file.append(bytes, length);
  std::free(bytes);  // hs_serialize_database allocates with the misc allocator, malloc by default
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  if (ec) return;
  // A unique temporary name per process: concurrent runs each rename a whole file.
  const std::string temp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    if (!out) return;
    out.write(file.data(), static_cast<std::streamsize>(file.size()));
    out.close();
    if (!out) {
      std::filesystem::remove(temp, ec);
      return;
    }
  }
  std::filesystem::rename(temp, path, ec);
  if (ec) {
    std::filesystem::remove(temp, ec);
    return;
  }
  g_stored.fetch_add(1, std::memory_order_relaxed);
}

DatabaseCacheStats database_cache_stats() {
  return {g_loaded.load(std::memory_order_relaxed), g_stored.load(std::memory_order_relaxed)};
}

}  // namespace luminamoon::pii
