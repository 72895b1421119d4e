// Shared by the fuzz targets: a per-process scratch directory, files written
// from fuzz input, and a check that aborts (so libFuzzer keeps the input).
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

namespace lumina_fuzz {

inline const std::filesystem::path& scratch_dir() {
  static const std::filesystem::path dir = [] {
    auto d = std::filesystem::temp_directory_path() / ("lumina_fuzz_" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

inline std::string write_scratch(const std::string& name, std::string_view bytes) {
  std::string path = (scratch_dir() / name).string();
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), bytes.size());
  return path;
}

// A property that failed: print it and abort, so libFuzzer saves the input.
[[noreturn]] inline void fail(const char* what, const std::string& detail = {}) {
  std::fprintf(stderr, "fuzz property failed: %s %s\n", what, detail.c_str());
  std::abort();
}
#define LUMINA_FUZZ_CHECK(cond, ...) \
  do {                               \
    if (!(cond)) ::lumina_fuzz::fail(#cond, ##__VA_ARGS__); \
  } while (0)

// Splits off the first byte of the input as the target's settings.
struct Input {
  uint8_t settings = 0;
  std::string_view rest;
  Input(const uint8_t* data, size_t size)
      : settings(size ? data[0] : 0),
        rest(reinterpret_cast<const char*>(data) + (size ? 1 : 0), size ? size - 1 : 0) {}
};

}  // namespace lumina_fuzz
