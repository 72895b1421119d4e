// DataError: the one exception type the data engine's I/O, checkpoint and
// pipeline code throws, with a kind that front ends map to exit codes.
#pragma once

#include <stdexcept>
#include <string>

namespace luminamoon {

enum class DataErrorKind {
  kUsage = 2,          // bad option, format, scheme or config value
  kInput = 3,          // an input cannot be found, opened or decoded
  kStateCorrupt = 4,   // both .meta slots invalid, WAL missing or damaged
  kInputChanged = 5,   // an input shard differs from the checkpointed run
  kOutput = 6,         // the output cannot be written (disk full, permissions)
  kUnavailable = 7,    // a feature not built in (Parquet/Arrow without Arrow C++)
};

class DataError : public std::runtime_error {
 public:
  DataError(DataErrorKind kind, const std::string& message)
      : std::runtime_error(message), kind_(kind) {}
  DataErrorKind kind() const { return kind_; }
  int exit_code() const { return static_cast<int>(kind_); }

 private:
  DataErrorKind kind_;
};

}  // namespace luminamoon
