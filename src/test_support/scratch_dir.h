// A test process's own scratch directory under the system's temporary
// directory, removed when the process exits: tests that write files must not
// leave them behind (a CI machine runs the suites many times).
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>

namespace luminamoon::test_support {

class ScratchDir {
 public:
  // <tmp>/<prefix>_<pid>, created empty.
  explicit ScratchDir(const std::string& prefix)
      : path_(std::filesystem::temp_directory_path() / (prefix + "_" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ignored;  // a destructor must not throw; a leftover is not a test failure
    std::filesystem::remove_all(path_, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace luminamoon::test_support
