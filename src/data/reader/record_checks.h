// What every shard reader checks before a record becomes a document: its
// size (ReaderOptions::max_record_bytes), valid UTF-8 where the cleaner will
// not repair it, and names (file names, ids) that are valid UTF-8.
#pragma once

#include <simdjson.h>

#include <filesystem>
#include <string>
#include <string_view>

#include "data/writer/json_text.h"
#include "luminamoon/reader.h"

namespace luminamoon {

inline std::string too_long_message(uint64_t bytes, size_t max_record_bytes) {
  return "record of " + std::to_string(bytes) + " bytes exceeds max_record_bytes (" +
         std::to_string(max_record_bytes) + ")";
}

// The shard's file name for ids ("NAME:LINE"): file names need not be UTF-8.
inline std::string valid_utf8_name(const std::string& path) {
  return json_text::valid_utf8(std::filesystem::path(path).filename().string());
}

// "" when `text` may become a document, else why not.
inline std::string text_error(std::string_view text, const ReaderOptions& options) {
  if (text.size() > options.max_record_bytes) return too_long_message(text.size(), options.max_record_bytes);
  if (options.reject_invalid_utf8 && !simdjson::validate_utf8(text.data(), text.size())) {
    return "text is not valid UTF-8 (the cleaner, which would repair it, is off)";
  }
  return {};
}

}  // namespace luminamoon
